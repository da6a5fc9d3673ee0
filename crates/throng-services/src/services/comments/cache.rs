//! A bounded in-memory cache of listing pages, keyed by the full query and
//! checked against a per-course version, so a write is visible to the very
//! next read.
//!
//! The protocol: a reader takes the course's version *before* it queries,
//! and files the page under that version; a hit needs the version to be
//! unchanged. A writer bumps the version after its commit and before it
//! answers. So a page read before a commit can only be filed under the old
//! version, and every read that starts after the write's answer misses it.
//!
//! Where the version lives: in memory, in striped counters bumped by this
//! process's writes. With PostgreSQL (several nodes behind a balancer) a
//! write also names its course on the store's invalidation channel
//! (`store/invalidate.rs`: `pg_notify` in the write's transaction), and
//! every node bumps that course's counter when it hears it, so a write on
//! one node invalidates every node's pages within the channel's delay. A
//! node serves cached pages only while its channel is known to be fresh
//! within [`FRESH_BOUND`]; otherwise every read goes to the database, so
//! the bound holds when the channel is away.
//! A client that just wrote and asks with `Cache-Control: no-cache` skips
//! the cache (its next read sees its write whichever node serves it).
//!
//! Bounds: `entries_max` pages and `bytes_max` bytes of bodies; past either,
//! the oldest filed pages go first (FIFO: cheap, and hot pages are refiled on
//! their next miss).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use axum::http::HeaderValue;
use bytes::Bytes;

use super::model::ListQuery;

/// Version stripes for the in-memory (SQLite) versions: a write bumps the
/// stripe of its course, which also invalidates the other courses that share
/// the stripe (harmless, rare) and keeps memory bounded whatever the ids.
const STRIPES: usize = 65_536;

/// How stale a PostgreSQL node's cached page may be at most: a write
/// committed longer ago than this is seen by every read.
pub const FRESH_BOUND: std::time::Duration = std::time::Duration::from_secs(1);

/// A page ready to send: body, its ETag, its next cursor. The header values
/// are built once, when the page is filled, so a hit only clones them.
#[derive(Debug)]
pub struct Page {
    pub body: Bytes,
    pub etag: String,
    pub next_cursor: Option<String>,
    pub etag_header: Option<HeaderValue>,
    pub next_cursor_header: Option<HeaderValue>,
}

impl Page {
    pub fn new(body: Vec<u8>, next_cursor: Option<String>) -> Page {
        // The cursor carries a user id the body does not show, so it is
        // part of the tag.
        // xxh3 over the body and the cursor: a fingerprint, not a defence
        // (the bytes are the server's own); several times faster than SipHash
        // on pages of kilobytes, and every uncached read pays it.
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(&body);
        h.update(&[0xff]);
        h.update(next_cursor.as_deref().unwrap_or("").as_bytes());
        let etag = format!("\"c-{:016x}-{:x}\"", h.digest(), body.len());
        let etag_header = HeaderValue::from_str(&etag).ok();
        let next_cursor_header = next_cursor
            .as_deref()
            .and_then(|c| HeaderValue::from_str(c).ok());
        Page {
            body: Bytes::from(body),
            etag,
            next_cursor,
            etag_header,
            next_cursor_header,
        }
    }
}

struct Entry {
    version: i64,
    page: Arc<Page>,
}

struct Inner {
    /// Ordered, not hashed: keys hold client-chosen integers (cursor,
    /// user id, offsets), and an unkeyed hash let chosen keys collide into
    /// one bucket scanned under this lock. A B-tree has no collisions to
    /// choose: a lookup is ~log2(entries) comparisons of small structs.
    map: BTreeMap<ListQuery, Entry>,
    order: VecDeque<ListQuery>,
    bytes: usize,
}

pub struct PageCache {
    enabled: bool,
    entries_max: usize,
    bytes_max: usize,
    inner: Mutex<Inner>,
    stripes: Box<[AtomicI64]>,
}

impl PageCache {
    pub fn new(enabled: bool, entries_max: usize, bytes_max: usize) -> PageCache {
        PageCache {
            enabled: enabled && entries_max > 0 && bytes_max > 0,
            entries_max,
            bytes_max,
            inner: Mutex::new(Inner {
                map: BTreeMap::new(),
                order: VecDeque::new(),
                bytes: 0,
            }),
            stripes: (0..STRIPES).map(|_| AtomicI64::new(0)).collect(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    fn stripe(&self, course_id: i64) -> &AtomicI64 {
        &self.stripes[(course_id.rem_euclid(STRIPES as i64)) as usize]
    }

    /// The in-memory version of a course (single-process stores).
    pub fn local_version(&self, course_id: i64) -> i64 {
        self.stripe(course_id).load(Ordering::Acquire)
    }

    /// Call after a write on `course_id` committed, before answering it.
    pub fn bump(&self, course_id: i64) {
        self.stripe(course_id).fetch_add(1, Ordering::AcqRel);
    }

    /// Invalidates every page (the invalidation channel may have missed
    /// writes): every stripe moves on.
    pub fn bump_all(&self) {
        for s in self.stripes.iter() {
            s.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The page filed for `q` under `version`, if any.
    pub fn get(&self, q: &ListQuery, version: i64) -> Option<Arc<Page>> {
        if !self.enabled {
            return None;
        }
        let inner = self.inner.lock().unwrap();
        inner
            .map
            .get(q)
            .filter(|e| e.version == version)
            .map(|e| e.page.clone())
    }

    /// Files a page read under `version` (taken before the read).
    pub fn put(&self, q: &ListQuery, version: i64, page: Arc<Page>) {
        if !self.enabled || page.body.len() > self.bytes_max / 4 {
            return;
        }
        let mut inner = self.inner.lock().unwrap();
        let size = page.body.len();
        match inner.map.get_mut(q) {
            Some(e) => {
                // A newer version wins; an older one (a slow reader) must not
                // replace it.
                if version < e.version {
                    return;
                }
                let old = e.page.body.len();
                *e = Entry { version, page };
                inner.bytes = inner.bytes - old + size;
            }
            None => {
                inner.map.insert(q.clone(), Entry { version, page });
                inner.order.push_back(q.clone());
                inner.bytes += size;
            }
        }
        while inner.map.len() > self.entries_max || inner.bytes > self.bytes_max {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            if let Some(e) = inner.map.remove(&oldest) {
                inner.bytes -= e.page.body.len();
            }
        }
        debug_assert!(inner.order.len() == inner.map.len());
    }

    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::CommentType;
    use super::*;

    fn q(course_id: i64, skip: i64) -> ListQuery {
        ListQuery {
            sort: Default::default(),
            comment_type: CommentType::Course,
            course_id,
            user_id: None,
            skip,
            size: 10,
            skip_thread: 0,
            size_thread: 10,
            after: None,
        }
    }

    #[test]
    fn a_bump_hides_pages_filed_before_it() {
        let c = PageCache::new(true, 100, 1 << 20);
        let v = c.local_version(7);
        c.put(&q(7, 0), v, Arc::new(Page::new(b"[1]".to_vec(), None)));
        assert!(c.get(&q(7, 0), c.local_version(7)).is_some());
        c.bump(7);
        assert!(c.get(&q(7, 0), c.local_version(7)).is_none());
        // A slow reader filing under the old version does not resurrect it.
        c.put(&q(7, 0), v, Arc::new(Page::new(b"[0]".to_vec(), None)));
        assert!(c.get(&q(7, 0), c.local_version(7)).is_none());
    }

    #[test]
    fn bounded_by_entries_and_bytes() {
        let c = PageCache::new(true, 3, 1 << 20);
        for i in 0..10 {
            c.put(&q(1, i), 0, Arc::new(Page::new(vec![b'x'; 10], None)));
        }
        assert_eq!(c.len(), 3);
        assert!(c.get(&q(1, 9), 0).is_some() && c.get(&q(1, 0), 0).is_none());
        let c = PageCache::new(true, 100, 100);
        for i in 0..10 {
            c.put(&q(1, i), 0, Arc::new(Page::new(vec![b'x'; 20], None)));
        }
        assert!(c.len() <= 5);
    }

    #[test]
    fn off_means_off() {
        let c = PageCache::new(false, 100, 1 << 20);
        c.put(&q(1, 0), 0, Arc::new(Page::new(b"[]".to_vec(), None)));
        assert!(c.get(&q(1, 0), 0).is_none());
    }
}
