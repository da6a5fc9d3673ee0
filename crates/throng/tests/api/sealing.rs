//! Sealing a choice as the vote page does (to the election's key from the
//! ballot's `sealTo`): what the voting tests vote with.

use serde_json::{json, Value};
use throng::services::voting::ballot::{self, Choice};

use crate::helpers::Api;

/// The district's ballot as served.
pub async fn ballot_of(api: &Api, election: i64, district: i64) -> Value {
    let r = api
        .get(&format!(
            "/api/voting/elections/{election}/districts/{district}/ballot"
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// The choice of `party_id` and `candidate_ids` as positions on the
/// ballot: (1-based list, 0-based candidates). Ids not on the ballot map
/// past its end (an opening counts them spoiled).
pub fn choice_on(ballot: &Value, party_id: i64, candidate_ids: &[i64]) -> Choice {
    let parties = ballot["parties"].as_array().expect("parties");
    let list = parties
        .iter()
        .position(|p| p["partyId"] == party_id)
        .map(|i| i + 1)
        .unwrap_or(parties.len() + 1);
    let candidates: Vec<u16> = match parties.get(list.wrapping_sub(1)) {
        Some(p) => {
            let on = p["candidates"].as_array().expect("candidates");
            candidate_ids
                .iter()
                .map(|c| {
                    on.iter()
                        .position(|x| x["candidateId"] == *c)
                        .unwrap_or(ballot::LIST_CANDIDATES_MAX - 1) as u16
                })
                .collect()
        }
        None => Vec::new(),
    };
    Choice {
        list: list as u8,
        candidates,
    }
}

/// `plain` sealed to the ballot's key, base64url.
pub fn seal_plain(ballot: &Value, plain: &[u8]) -> String {
    let seal_to = &ballot["sealTo"];
    let key = ballot::from_b64(
        seal_to["publicKey"]
            .as_str()
            .expect("the election has a key"),
    )
    .expect("base64url");
    let election = ballot["electionId"].as_i64().unwrap();
    let district = ballot["districtId"].as_i64().unwrap();
    let sealed =
        ballot::seal(&key, election, district, plain, &mut rand::rngs::OsRng).expect("a valid key");
    ballot::b64(&sealed)
}

/// A vote's body for `{partyId, candidateIds}` as the page sends it:
/// `{sealed}`. Any other body is sent as it is (bad input).
pub async fn sealed_body(api: &Api, election: i64, district: i64, body: &Value) -> Value {
    let Some(party) = body["partyId"].as_i64() else {
        return body.clone();
    };
    let ids: Vec<i64> = body["candidateIds"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_i64()).collect())
        .unwrap_or_default();
    let r = api
        .get(&format!(
            "/api/voting/elections/{election}/districts/{district}/ballot"
        ))
        .await;
    if r.status != 200 {
        // No such election or district: bytes of the right size, so the
        // answer is about the path or the headers.
        return json!({ "sealed": ballot::b64(&[0u8; ballot::SEALED_BYTES]) });
    }
    let ballot = r.json();
    let plain = choice_on(&ballot, party, &ids).encode();
    json!({ "sealed": seal_plain(&ballot, &plain) })
}
