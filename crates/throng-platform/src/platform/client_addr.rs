//! Who the client is, for the per-client rate limit and connection cap.
//!
//! The TCP peer is the client unless it is one of the configured trusted
//! proxies (`--trusted-proxies`); then `X-Forwarded-For` is read from the
//! right (over every line of it, in order), skipping trusted hops, and the
//! first untrusted address is the client. A proxy such as HAProxy's `option
//! forwardfor` appends what it saw, so what a client wrote itself stays to
//! the left of it and is never used. A client is keyed by its IPv4 address
//! or its IPv6 /64 (one subscriber usually gets a whole /64).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// A client for limits: an IPv4 address or an IPv6 /64 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientKey {
    V4(u32),
    V6Prefix64(u64),
}

impl ClientKey {
    pub fn of(ip: IpAddr) -> ClientKey {
        match ip {
            IpAddr::V4(v4) => ClientKey::V4(u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientKey::V4(u32::from(v4)),
                None => ClientKey::V6Prefix64((u128::from(v6) >> 64) as u64),
            },
        }
    }
}

/// Counts per client key (the server's connections per client, a service's
/// streams per client); an entry lives while its count is above 0, so the
/// map holds at most as many keys as there are slots taken.
#[derive(Default)]
pub struct ClientCounts(Mutex<HashMap<ClientKey, usize>>);

impl ClientCounts {
    /// A slot for `key` if it holds fewer than `max`; given back on drop.
    pub fn enter(self: &Arc<Self>, key: ClientKey, max: usize) -> Option<ClientSlot> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(key).or_insert(0);
        if *n >= max {
            if *n == 0 {
                map.remove(&key);
            }
            return None;
        }
        *n += 1;
        Some(ClientSlot(self.clone(), key))
    }

    fn leave(&self, key: ClientKey) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                map.remove(&key);
            }
        }
    }

    /// Keys holding a slot (for tests).
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One slot of a [`ClientCounts`], given back when dropped.
pub struct ClientSlot(Arc<ClientCounts>, ClientKey);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0.leave(self.1);
    }
}

/// The proxies whose `X-Forwarded-For` is believed (CIDRs).
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(Vec<IpNet>);

/// Trusted proxies at most, so a lookup stays a short scan.
pub const TRUSTED_PROXIES_MAX: usize = 64;

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>) -> anyhow::Result<TrustedProxies> {
        if nets.len() > TRUSTED_PROXIES_MAX {
            anyhow::bail!(
                "--trusted-proxies names {} networks; at most {TRUSTED_PROXIES_MAX} are accepted \
                 (merge them into wider CIDRs)",
                nets.len()
            );
        }
        Ok(TrustedProxies(nets))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// The client's address for a request that came from `peer`.
    pub fn client_ip(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.ip();
        if !self.contains(client) {
            return client;
        }
        let lines: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        // Bounded: a request head is bounded by hyper's header size limit.
        for hop in lines.iter().rev().flat_map(|l| l.rsplit(',')) {
            let Some(ip) = parse_hop(hop) else {
                // Garbage where an address should be: stop at the last
                // trusted hop rather than guess past it.
                return client;
            };
            client = ip;
            if !self.contains(ip) {
                return ip;
            }
        }
        client
    }
}

/// One `X-Forwarded-For` element: an address, maybe with a port
/// (`1.2.3.4:5`, `[::1]:5`), as some proxies write.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip);
    }
    hop.parse::<SocketAddr>().ok().map(|s| s.ip())
}

/// `--trusted-proxies` values: CIDRs or single addresses.
pub fn parse_net(s: &str) -> Result<IpNet, String> {
    let s = s.trim();
    if let Ok(net) = s.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    s.parse::<IpAddr>().map(IpNet::from).map_err(|_| {
        format!("'{s}' is not an address or a CIDR (e.g. 10.0.0.5, 10.0.0.0/8, fd00::/8)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(list: &[&str]) -> TrustedProxies {
        TrustedProxies::new(list.iter().map(|s| parse_net(s).unwrap()).collect()).unwrap()
    }

    fn headers(lines: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append("x-forwarded-for", l.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let p = proxies(&["10.0.0.0/8", "192.168.1.1"]);
        let from_proxy: SocketAddr = "10.1.2.3:4000".parse().unwrap();
        let from_client: SocketAddr = "203.0.113.9:4000".parse().unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // The client wrote "1.1.1.1"; the proxy appended what it saw.
        let h = headers(&["1.1.1.1, 198.51.100.7"]);
        assert_eq!(p.client_ip(from_proxy, &h), ip("198.51.100.7"));
        // Over two lines and a chain of trusted proxies.
        let h = headers(&["1.1.1.1", "198.51.100.7, 192.168.1.1", "10.9.9.9"]);
        assert_eq!(p.client_ip(from_proxy, &h), ip("198.51.100.7"));
        // Not from a trusted proxy: the header is ignored.
        assert_eq!(p.client_ip(from_client, &h), ip("203.0.113.9"));
        // Garbage stops at the last trusted hop; no header: the proxy.
        let h = headers(&["1.1.1.1, nonsense, 10.2.2.2"]);
        assert_eq!(p.client_ip(from_proxy, &h), ip("10.2.2.2"));
        assert_eq!(p.client_ip(from_proxy, &HeaderMap::new()), ip("10.1.2.3"));
        // Ports are accepted.
        let h = headers(&["[2001:db8::1]:443"]);
        assert_eq!(p.client_ip(from_proxy, &h), ip("2001:db8::1"));
        // No proxies configured: always the peer.
        let h = headers(&["1.1.1.1"]);
        assert_eq!(proxies(&[]).client_ip(from_proxy, &h), ip("10.1.2.3"));
    }

    #[test]
    fn ipv6_clients_are_keyed_by_their_64() {
        let k = |s: &str| ClientKey::of(s.parse().unwrap());
        assert_eq!(k("2001:db8:1:2::1"), k("2001:db8:1:2:ffff:1:2:3"));
        assert_ne!(k("2001:db8:1:2::1"), k("2001:db8:1:3::1"));
        assert_eq!(k("::ffff:192.0.2.1"), k("192.0.2.1"));
        assert_ne!(k("192.0.2.1"), k("192.0.2.2"));
    }

    #[test]
    fn client_counts_cap_each_key_and_forget_empty_ones() {
        let counts = Arc::new(ClientCounts::default());
        let (a, b) = (ClientKey::V4(1), ClientKey::V4(2));
        let first = counts.enter(a, 2).unwrap();
        let second = counts.enter(a, 2).unwrap();
        assert!(
            counts.enter(a, 2).is_none(),
            "a third slot for the same client"
        );
        assert!(counts.enter(b, 2).is_some(), "another client");
        drop(first);
        assert!(counts.enter(a, 2).is_some(), "a slot given back");
        assert!(counts.enter(b, 0).is_none());
        drop(second);
        assert!(counts.is_empty(), "every slot was dropped");
    }

    #[test]
    fn bad_networks_are_refused() {
        assert!(parse_net("10.0.0.0/33").is_err());
        assert!(parse_net("proxy.local").is_err());
        assert_eq!(parse_net("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
    }
}
