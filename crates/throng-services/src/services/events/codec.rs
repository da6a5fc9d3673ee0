//! Payload encoding: MessagePack maps with field names, compressed with LZ4
//! when that makes them smaller.
//!
//! The stored bytes are always one MessagePack value: the map itself, or
//! the map's bytes compressed as one LZ4 block inside ext type 99, whose
//! body is the uncompressed length as a MessagePack int32 followed by the
//! block. That is MessagePack-CSharp's `Lz4Block` layout, the library of
//! the write-up, so its clients read our bytes as they are. Small payloads
//! (under 64 bytes, its threshold too) and payloads LZ4 does not shrink are
//! kept whole.
//!
//! Maps with field names (rmp-serde's `to_vec_named`), not rmp-serde's
//! default arrays: a read model's partial type finds its 5 fields by name
//! and skips the rest, and fields can be added without breaking readers.
//! `throng bench events` prints both layouts' sizes.
//!
//! Decoding checks the claimed uncompressed length against a limit before
//! decompressing, so a block that claims gigabytes (an LZ4 bomb) costs
//! nothing.

use serde_json::Value;

/// MessagePack-CSharp's ext type code for one LZ4 block.
pub const EXT_LZ4_BLOCK: i8 = 99;
/// Payloads shorter than this are stored uncompressed.
pub const COMPRESS_BYTES_MIN: usize = 64;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodecError {
    #[error("the LZ4 block claims {claimed} bytes uncompressed; at most {max} are accepted")]
    TooLarge { claimed: u64, max: usize },
    #[error("malformed LZ4 block: {0}")]
    Lz4(String),
    #[error("malformed MessagePack: {0}")]
    MessagePack(String),
    #[error("{0}")]
    Shape(String),
    /// The bytes end inside a value (a prefix was decoded; more may help).
    #[error("truncated value")]
    Truncated,
}

/// `msgpack` (a map's MessagePack) as stored: LZ4-wrapped when that is
/// smaller.
pub fn compress(msgpack: Vec<u8>) -> Vec<u8> {
    if msgpack.len() < COMPRESS_BYTES_MIN || msgpack.len() > i32::MAX as usize {
        return msgpack;
    }
    let block = lz4_flex::block::compress(&msgpack);
    // ext 32 header (6) + int32 (5) + block.
    let mut out = Vec::with_capacity(block.len() + 11);
    let body = 5 + block.len() as u32;
    rmp::encode::write_ext_meta(&mut out, body, EXT_LZ4_BLOCK).expect("writing to a Vec");
    out.push(0xd2);
    out.extend_from_slice(&(msgpack.len() as i32).to_be_bytes());
    out.extend_from_slice(&block);
    if out.len() < msgpack.len() {
        out
    } else {
        msgpack
    }
}

/// Whether `stored` is an LZ4 block (ext 99), and if so its claimed
/// uncompressed length and the block.
fn lz4_parts(stored: &[u8]) -> Result<Option<(u64, &[u8])>, CodecError> {
    let first = match stored.first() {
        Some(b) => *b,
        None => return Err(CodecError::MessagePack("empty value".into())),
    };
    // ext 8/16/32 and fixext: the only headers that can start an ext value.
    if !matches!(first, 0xc7..=0xc9 | 0xd4..=0xd8) {
        return Ok(None);
    }
    let mut rd = stored;
    let meta = rmp::decode::read_ext_meta(&mut rd)
        .map_err(|e| CodecError::MessagePack(format!("ext header: {e}")))?;
    if meta.typeid != EXT_LZ4_BLOCK {
        return Err(CodecError::Shape(format!(
            "ext type {} is not accepted (only 99, an LZ4 block)",
            meta.typeid
        )));
    }
    if rd.len() != meta.size as usize {
        return Err(CodecError::MessagePack(
            "the ext value's length does not match its bytes".into(),
        ));
    }
    let claimed: i64 = rmp::decode::read_int(&mut rd)
        .map_err(|e| CodecError::Lz4(format!("uncompressed length: {e}")))?;
    if claimed < 0 {
        return Err(CodecError::Lz4("negative uncompressed length".into()));
    }
    Ok(Some((claimed as u64, rd)))
}

/// The MessagePack of `stored`, decompressed if it is an LZ4 block of at
/// most `max` bytes (checked before decompressing).
pub fn decompress(stored: &[u8], max: usize) -> Result<std::borrow::Cow<'_, [u8]>, CodecError> {
    match lz4_parts(stored)? {
        None => Ok(std::borrow::Cow::Borrowed(stored)),
        Some((claimed, _)) if claimed > max as u64 => Err(CodecError::TooLarge { claimed, max }),
        Some((claimed, block)) => {
            let out = lz4_flex::block::decompress(block, claimed as usize)
                .map_err(|e| CodecError::Lz4(e.to_string()))?;
            if out.len() as u64 != claimed {
                return Err(CodecError::Lz4(format!(
                    "decompressed to {} bytes, the block claims {claimed}",
                    out.len()
                )));
            }
            Ok(std::borrow::Cow::Owned(out))
        }
    }
}

/// One whole MessagePack value of `bytes` as JSON (nothing left over), for
/// checking what a client sent and answering JSON. Binary, ext values and
/// non-string map keys are refused: every stored payload reads as JSON.
pub fn to_json(bytes: &[u8]) -> Result<Value, CodecError> {
    let mut rd = bytes;
    let mut de = rmp_serde::Deserializer::new(&mut rd);
    let v: Value = serde::Deserialize::deserialize(&mut de)
        .map_err(|e| CodecError::MessagePack(e.to_string()))?;
    if !rd.is_empty() {
        return Err(CodecError::MessagePack(format!(
            "{} bytes after the value",
            rd.len()
        )));
    }
    Ok(v)
}

/// Checks that `bytes` is exactly one well-formed MessagePack value no
/// deeper than `depth_max` (no reserved byte 0xc1, no truncated value,
/// nothing after it), without building it.
pub fn check_wellformed(bytes: &[u8], depth_max: usize) -> Result<(), CodecError> {
    let mut rd = bytes;
    walk(&mut rd, depth_max, false)?;
    if !rd.is_empty() {
        return Err(CodecError::MessagePack(format!(
            "{} bytes after the value",
            rd.len()
        )));
    }
    Ok(())
}

/// Checks that `bytes` is exactly one MessagePack map that reads as a JSON
/// object (string keys, no binary or ext values anywhere), well-formed and
/// no deeper than `depth_max`, without building it: what a stored payload
/// must be, checked at the cost of one walk.
pub fn check_json_map(bytes: &[u8], depth_max: usize) -> Result<(), CodecError> {
    if !matches!(bytes.first(), Some(0x80..=0x8f | 0xde | 0xdf)) {
        return Err(CodecError::Shape("a map".into()));
    }
    let mut rd = bytes;
    walk(&mut rd, depth_max, true)?;
    if !rd.is_empty() {
        return Err(CodecError::MessagePack(format!(
            "{} bytes after the value",
            rd.len()
        )));
    }
    Ok(())
}

fn take<'a>(rd: &mut &'a [u8], n: usize) -> Result<&'a [u8], CodecError> {
    if rd.len() < n {
        return Err(CodecError::Truncated);
    }
    let (head, rest) = rd.split_at(n);
    *rd = rest;
    Ok(head)
}

fn be(bytes: &[u8]) -> usize {
    bytes.iter().fold(0usize, |n, b| (n << 8) | *b as usize)
}

/// Steps over one value; with `json`, refuses what JSON cannot hold.
fn walk(rd: &mut &[u8], depth: usize, json: bool) -> Result<(), CodecError> {
    use rmp::Marker as M;
    let marker = M::from_u8(take(rd, 1)?[0]);
    if json
        && matches!(
            marker,
            M::Bin8
                | M::Bin16
                | M::Bin32
                | M::FixExt1
                | M::FixExt2
                | M::FixExt4
                | M::FixExt8
                | M::FixExt16
                | M::Ext8
                | M::Ext16
                | M::Ext32
        )
    {
        return Err(CodecError::Shape(
            "binary and ext values have no JSON form; send them as strings".into(),
        ));
    }
    let is_map = matches!(marker, M::FixMap(_) | M::Map16 | M::Map32);
    let (items, skip) = match marker {
        M::Reserved => return Err(CodecError::MessagePack("reserved byte 0xc1".into())),
        M::FixPos(_) | M::FixNeg(_) | M::Null | M::True | M::False => (0, 0),
        M::U8 | M::I8 => (0, 1),
        M::U16 | M::I16 => (0, 2),
        M::U32 | M::I32 | M::F32 => (0, 4),
        M::U64 | M::I64 | M::F64 => (0, 8),
        M::FixStr(n) => (0, n as usize),
        M::Str8 | M::Bin8 => (0, be(take(rd, 1)?)),
        M::Str16 | M::Bin16 => (0, be(take(rd, 2)?)),
        M::Str32 | M::Bin32 => (0, be(take(rd, 4)?)),
        M::FixArray(n) => (n as usize, 0),
        M::Array16 => (be(take(rd, 2)?), 0),
        M::Array32 => (be(take(rd, 4)?), 0),
        M::FixMap(n) => (2 * n as usize, 0),
        M::Map16 => (2 * be(take(rd, 2)?), 0),
        M::Map32 => (2 * be(take(rd, 4)?), 0),
        M::FixExt1 => (0, 2),
        M::FixExt2 => (0, 3),
        M::FixExt4 => (0, 5),
        M::FixExt8 => (0, 9),
        M::FixExt16 => (0, 17),
        M::Ext8 => (0, be(take(rd, 1)?) + 1),
        M::Ext16 => (0, be(take(rd, 2)?) + 1),
        M::Ext32 => (0, be(take(rd, 4)?) + 1),
    };
    take(rd, skip)?;
    if items > 0 {
        if depth == 0 {
            return Err(CodecError::MessagePack("nested too deep".into()));
        }
        // Every item takes at least one byte: a count past the bytes left
        // is truncated, found before looping over it.
        if items > rd.len() {
            return Err(CodecError::Truncated);
        }
        for k in 0..items {
            if json
                && is_map
                && k % 2 == 0
                && !matches!(rd.first(), Some(0xa0..=0xbf | 0xd9..=0xdb))
            {
                return Err(CodecError::Shape("map keys are strings".into()));
            }
            walk(rd, depth - 1, json)?;
        }
    }
    Ok(())
}

/// Decodes the fields `fields` of the top-level map in `msgpack` into `T`,
/// by name, and stops reading as soon as it has them all: the rest of the
/// map (a long array after them) is never parsed. The found entries are
/// copied into a small map that `T` is decoded from; fields not found are
/// left to `T`'s defaults (or its error).
pub fn partial<T: serde::de::DeserializeOwned>(
    msgpack: &[u8],
    fields: &[&str],
) -> Result<T, CodecError> {
    let bad = |e: String| CodecError::MessagePack(e);
    let mut rd = msgpack;
    if rd.is_empty() {
        return Err(CodecError::Truncated);
    }
    let len = rmp::decode::read_map_len(&mut rd).map_err(|e| match rd.len() {
        0..=4 => CodecError::Truncated,
        _ => bad(format!("not a map: {e}")),
    })?;
    let mut picked: Vec<u8> = Vec::with_capacity(256);
    // A map32 header, its count patched at the end.
    picked.extend_from_slice(&[0xdf, 0, 0, 0, 0]);
    let mut found = 0u32;
    for _ in 0..len {
        if found as usize == fields.len() {
            break;
        }
        let entry = rd;
        walk(&mut rd, 1, false)?;
        let key_end = entry.len() - rd.len();
        // Compared as bytes: no UTF-8 check of every key on the way.
        let key = str_bytes(&entry[..key_end]);
        walk(&mut rd, 128, false)?;
        if key.is_some_and(|k| fields.iter().any(|f| f.as_bytes() == k)) {
            picked.extend_from_slice(&entry[..entry.len() - rd.len()]);
            found += 1;
        }
    }
    picked[1..5].copy_from_slice(&found.to_be_bytes());
    rmp_serde::from_slice(&picked).map_err(|e| bad(e.to_string()))
}

/// The bytes of a MessagePack string (`None` for any other value); `value`
/// is exactly one encoded value, as [`walk`] delimits it.
fn str_bytes(value: &[u8]) -> Option<&[u8]> {
    let header = match *value.first()? {
        0xa0..=0xbf => 1,
        0xd9 => 2,
        0xda => 3,
        0xdb => 5,
        _ => return None,
    };
    value.get(header..)
}

/// Decompresses an LZ4 block (claiming `claimed` bytes) only until at
/// least `want` bytes are out, or to its end: the LZ4 block format is a
/// sequence of literal runs and back-references, so a prefix of the output
/// needs only a prefix of the block. (lz4_flex decodes whole blocks only.)
pub fn lz4_prefix(block: &[u8], claimed: usize, want: usize) -> Result<Vec<u8>, CodecError> {
    let bad = |m: &str| CodecError::Lz4(m.to_string());
    let mut out: Vec<u8> = Vec::with_capacity(want.min(claimed) + 64);
    let mut i = 0usize;
    let length = |i: &mut usize, base: usize| -> Result<usize, CodecError> {
        let mut n = base;
        if base == 15 {
            loop {
                let b = *block.get(*i).ok_or_else(|| bad("truncated length"))?;
                *i += 1;
                n += b as usize;
                if b != 255 {
                    break;
                }
            }
        }
        Ok(n)
    };
    while i < block.len() {
        let token = block[i];
        i += 1;
        let literals = length(&mut i, (token >> 4) as usize)?;
        let end = i
            .checked_add(literals)
            .filter(|e| *e <= block.len())
            .ok_or_else(|| bad("literals past the block"))?;
        if out.len() + literals > claimed {
            return Err(bad("output past the claimed length"));
        }
        out.extend_from_slice(&block[i..end]);
        i = end;
        if i == block.len() || out.len() >= want {
            break;
        }
        let offset = u16::from_le_bytes([
            block[i],
            *block.get(i + 1).ok_or_else(|| bad("truncated offset"))?,
        ]) as usize;
        i += 2;
        if offset == 0 || offset > out.len() {
            return Err(bad("offset outside the output"));
        }
        let matched = length(&mut i, (token & 15) as usize)? + 4;
        if out.len() + matched > claimed {
            return Err(bad("output past the claimed length"));
        }
        let from = out.len() - offset;
        if offset >= matched {
            out.extend_from_within(from..from + matched);
        } else {
            // An overlapping match repeats the last `offset` bytes.
            for k in 0..matched {
                let b = out[from + k];
                out.push(b);
            }
        }
        if out.len() >= want {
            break;
        }
    }
    Ok(out)
}

/// [`partial`] of a stored payload: an LZ4 block (at most `max` bytes
/// claimed) is decompressed only as far as the fields need (512 bytes
/// first, then 4 times more while a value is cut off).
pub fn partial_stored<T: serde::de::DeserializeOwned>(
    stored: &[u8],
    fields: &[&str],
    max: usize,
) -> Result<T, CodecError> {
    match lz4_parts(stored)? {
        None => partial(stored, fields),
        Some((claimed, _)) if claimed > max as u64 => Err(CodecError::TooLarge { claimed, max }),
        Some((claimed, block)) => {
            let claimed = claimed as usize;
            let mut want = 512;
            loop {
                let prefix = lz4_prefix(block, claimed, want)?;
                match partial(&prefix, fields) {
                    Err(CodecError::Truncated) if prefix.len() < claimed => want *= 4,
                    other => return other,
                }
            }
        }
    }
}

/// A JSON value's MessagePack (maps keep their field names).
pub fn from_json(v: &Value) -> Vec<u8> {
    rmp_serde::to_vec_named(v).expect("a JSON value encodes as MessagePack")
}

/// A JSON value's MessagePack, streamed from its parser into the encoder
/// (serde-transcode) without building a `serde_json::Value` (its maps,
/// strings and their drop were ~40% of a 9.4 KB append's CPU). Numbers
/// encode as [`from_json`] encodes them; map entries stay in the order of
/// the text (`from_json` sorts them). The parser's errors come back as text.
pub fn transcode<'de, D: serde::Deserializer<'de>>(parser: D) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(1024);
    let mut ser = rmp_serde::Serializer::new(&mut out).with_struct_map();
    serde_transcode::transcode(parser, &mut ser).map_err(|e| e.to_string())?;
    Ok(out)
}

/// The stored bytes of `stored` decoded as JSON, within `max` bytes
/// uncompressed.
pub fn stored_to_json(stored: &[u8], max: usize) -> Result<Value, CodecError> {
    to_json(&decompress(stored, max)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// [`transcode`] of JSON text.
    fn from_json_text(json: &str) -> Result<Vec<u8>, String> {
        transcode(&mut serde_json::Deserializer::from_str(json))
    }

    #[test]
    fn json_text_transcodes_as_its_value_encodes() {
        let texts = [
            r#"{"a":1,"b":-2,"c":18446744073709551615,"d":-9223372036854775808,"e":1.5,"f":1e300}"#,
            r#"{"z":[1,[2,[3,{}]],[]],"y":{"x":null,"w":true,"v":false}}"#,
            r#"{"s":"caf\u00e9 \ud83d\ude00 \"q\" \\ \n","t":"","long":"____________________________________________________"}"#,
            r#"{ "spaced" : [ 1 , 2 ] }"#,
        ];
        for text in texts {
            let value: Value = serde_json::from_str(text).unwrap();
            let streamed = from_json_text(text).unwrap();
            assert_eq!(to_json(&streamed).unwrap(), value, "{text}");
            assert_eq!(
                streamed.len(),
                from_json(&value).len(),
                "same encoding, other key order: {text}"
            );
        }
        // A generated 9.4 KB event, field for field.
        let event =
            serde_json::to_string(&crate::services::events::generator::fee_charged(7, 3)).unwrap();
        let value: Value = serde_json::from_str(&event).unwrap();
        assert_eq!(to_json(&from_json_text(&event).unwrap()).unwrap(), value);
        assert!(from_json_text("{\"a\":").is_err(), "truncated text");
    }

    #[test]
    fn round_trips_small_and_large() {
        let small = json!({"a": 1});
        let stored = compress(from_json(&small));
        assert_eq!(stored[0], 0x81, "small maps stay whole");
        assert_eq!(stored_to_json(&stored, 1024).unwrap(), small);
        let rows: Vec<Value> = (0..50)
            .map(|i| json!({"installment": i, "principal": 1000.5, "interest": 12.25, "status": "Pending"}))
            .collect();
        let large = json!({"loanId": "L-1", "schedule": rows});
        let plain = from_json(&large);
        let stored = compress(plain.clone());
        assert!(
            stored.len() < plain.len() / 2,
            "{} vs {}",
            stored.len(),
            plain.len()
        );
        assert_eq!(stored[0], 0xc8, "ext 16");
        assert_eq!(stored_to_json(&stored, plain.len()).unwrap(), large);
        assert_eq!(
            stored_to_json(&stored, plain.len() - 1),
            Err(CodecError::TooLarge {
                claimed: plain.len() as u64,
                max: plain.len() - 1
            })
        );
    }

    #[test]
    fn partial_decoding_stops_at_its_fields() {
        #[derive(serde::Deserialize, PartialEq, Debug)]
        struct Two {
            a: i64,
            c: String,
        }
        let full = from_json(&json!({"a": 1, "b": [1, 2, 3], "c": "x", "d": {"e": 1}}));
        assert_eq!(
            partial::<Two>(&full, &["a", "c"]).unwrap(),
            Two {
                a: 1,
                c: "x".into()
            }
        );
        // Nothing after its fields is read: a truncated tail is not noticed.
        assert_eq!(
            partial::<Two>(&full[..full.len() - 3], &["a", "c"]).unwrap(),
            Two {
                a: 1,
                c: "x".into()
            }
        );
        assert!(partial::<Two>(&from_json(&json!({"a": 1})), &["a", "c"]).is_err());
        // Keys of every string width are matched by their bytes; a key that
        // only starts like a field, or a non-string key, is not the field.
        #[derive(serde::Deserialize, PartialEq, Debug)]
        struct Long {
            #[serde(rename = "aVeryLongFieldNameOfMoreThanThirtyOneBytes")]
            long: i64,
            a: i64,
        }
        let mut map = rmp::encode::ByteBuf::new();
        rmp::encode::write_map_len(&mut map, 4).unwrap();
        rmp::encode::write_sint(&mut map, 5).unwrap(); // an integer key
        rmp::encode::write_sint(&mut map, 0).unwrap();
        rmp::encode::write_str(&mut map, "ab").unwrap();
        rmp::encode::write_sint(&mut map, 0).unwrap();
        rmp::encode::write_str(&mut map, "aVeryLongFieldNameOfMoreThanThirtyOneBytes").unwrap();
        rmp::encode::write_sint(&mut map, 2).unwrap();
        rmp::encode::write_str(&mut map, "a").unwrap();
        rmp::encode::write_sint(&mut map, 3).unwrap();
        assert_eq!(map.as_slice()[7], 0xd9, "the long key is a str8");
        assert_eq!(
            partial::<Long>(
                map.as_slice(),
                &["aVeryLongFieldNameOfMoreThanThirtyOneBytes", "a"]
            )
            .unwrap(),
            Long { long: 2, a: 3 }
        );
    }

    #[test]
    fn lz4_prefixes_match_the_whole_block() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for n in [0usize, 1, 15, 16, 300, 4096, 20_000] {
            // Repetitive bytes with some noise, as payloads are.
            let data: Vec<u8> = (0..n)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x.is_multiple_of(7) {
                        x as u8
                    } else {
                        b"abcabcabd"[i % 9]
                    }
                })
                .collect();
            let block = lz4_flex::block::compress(&data);
            assert_eq!(lz4_prefix(&block, n, usize::MAX).unwrap(), data, "{n}");
            for want in [1, 100, 1000] {
                let p = lz4_prefix(&block, n, want).unwrap();
                assert!(p.len() >= want.min(n), "{n} {want}");
                assert_eq!(&p[..], &data[..p.len()]);
            }
            assert!(n == 0 || lz4_prefix(&block, n - 1, usize::MAX).is_err());
        }
        assert!(
            lz4_prefix(&[0x1f, 0x00, 0x01], 100, usize::MAX).is_err(),
            "offset 0x0100 past the output"
        );
    }

    #[test]
    fn partial_of_stored_payloads() {
        #[derive(serde::Deserialize, PartialEq, Debug)]
        struct Head {
            a: i64,
        }
        let rows: Vec<Value> = (0..200)
            .map(|i| json!({"i": i, "s": "Scheduled"}))
            .collect();
        let v = json!({"a": 7, "rows": rows, "z": 1});
        let stored = compress(from_json(&v));
        assert_eq!(stored[0], 0xc8);
        assert_eq!(
            partial_stored::<Head>(&stored, &["a"], 1 << 20).unwrap(),
            Head { a: 7 }
        );
        // A field after the long array: found by decompressing further.
        #[derive(serde::Deserialize, PartialEq, Debug)]
        struct Tail {
            z: i64,
        }
        assert_eq!(
            partial_stored::<Tail>(&stored, &["z"], 1 << 20).unwrap(),
            Tail { z: 1 }
        );
        assert!(matches!(
            partial_stored::<Tail>(&stored, &["z"], 100),
            Err(CodecError::TooLarge { .. })
        ));
    }

    #[test]
    fn a_bomb_is_refused_before_decompressing() {
        // Claims 4 GiB - 1 with a 3-byte block.
        let mut bomb = Vec::new();
        rmp::encode::write_ext_meta(&mut bomb, 8, EXT_LZ4_BLOCK).unwrap();
        bomb.push(0xd2);
        bomb.extend_from_slice(&i32::MAX.to_be_bytes());
        bomb.extend_from_slice(&[0x1f, 0x00, 0x01]);
        assert!(matches!(
            decompress(&bomb, 65536),
            Err(CodecError::TooLarge { .. })
        ));
        // A block that lies about a small size fails cleanly.
        let mut liar = Vec::new();
        rmp::encode::write_ext_meta(&mut liar, 8, EXT_LZ4_BLOCK).unwrap();
        liar.push(0xd2);
        liar.extend_from_slice(&100i32.to_be_bytes());
        liar.extend_from_slice(&[0xff, 0xff, 0xff]);
        assert!(matches!(decompress(&liar, 65536), Err(CodecError::Lz4(_))));
    }

    #[test]
    fn malformed_messagepack_is_an_error() {
        assert!(to_json(&[0x82, 0xa1, b'a']).is_err(), "truncated map");
        assert!(to_json(&[0xc1]).is_err(), "never-used byte");
        assert!(to_json(&[0x80, 0x80]).is_err(), "trailing value");
        assert!(to_json(&[0xc4, 0x01, 0x00]).is_err(), "binary");
        assert!(to_json(&[]).is_err());
        assert!(check_wellformed(&[0x91, 0xc1], 8).is_err());
        assert!(
            check_json_map(&[0x81, 0x01, 0x02], 8).is_err(),
            "integer key"
        );
        assert!(
            check_json_map(&[0x81, 0xa1, b'a', 0xc4, 0x00], 8).is_err(),
            "binary"
        );
        assert!(check_json_map(&[0x91, 0x80], 8).is_err(), "not a map");
        assert!(check_json_map(&[0x81, 0xa1, b'a', 0x91, 0x80], 8).is_ok());
        assert!(
            check_wellformed(&[0x91, 0x91, 0x91, 0x80], 2).is_err(),
            "too deep"
        );
        assert!(check_wellformed(&[0xdd, 0xff, 0xff, 0xff, 0xff], 8).is_err());
        assert!(check_wellformed(
            &from_json(&serde_json::json!({"a": [1, "b", {"c": null}]})),
            8
        )
        .is_ok());
    }
}
