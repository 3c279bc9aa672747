//! Canonical JSON: the one byte form of a JSON value that is digested and signed.
//!
//! Object keys are sorted by their UTF-8 bytes at every level, there is no insignificant
//! whitespace, strings use serde_json's escaping and numbers its shortest form. Sorting here,
//! not in the map type, keeps the form stable whatever serde_json features the build enables.

use std::borrow::Cow;
use std::ops::Range;

use serde::Serialize;
use serde_json::Value;

/// Serializes a value to canonical JSON bytes.
pub fn to_canonical_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let value = serde_json::to_value(value)?;
    let mut out = Vec::new();
    write_value(&value, &mut out);
    Ok(out)
}

/// Canonical JSON bytes, and where in them each asked-for member's value lies.
pub type WithMembers<const N: usize> = (Vec<u8>, [Option<Range<usize>>; N]);

/// Serializes a value to canonical JSON bytes and says where in them the value of each of the
/// top-level `members` lies, if the value is an object that has it. A member's slice is its
/// own canonical form, byte for byte, so a digest of the whole and digests of its parts come
/// from one serialization.
pub fn to_canonical_bytes_with_members<T: Serialize + ?Sized, const N: usize>(
    value: &T,
    members: [&str; N],
) -> Result<WithMembers<N>, serde_json::Error> {
    let value = serde_json::to_value(value)?;
    let mut out = Vec::new();
    let mut ranges = [const { None }; N];
    match &value {
        Value::Object(map) => write_object(map, &mut out, |key, range| {
            for (member, found) in members.iter().zip(&mut ranges) {
                if *member == key {
                    *found = Some(range.clone());
                }
            }
        }),
        other => write_value(other, &mut out),
    }
    Ok((out, ranges))
}

/// Whether `bytes` are exactly the canonical form of the JSON they hold, checked in one pass
/// over the bytes: no whitespace, keys strictly increasing by their UTF-8 bytes (so no duplicate),
/// strings escaped as serde_json escapes them, integers in their shortest form, nesting no
/// deeper than serde_json parses. A number that is not an integer serde_json reads exactly is
/// decided by parsing and re-serializing, as before.
pub fn is_canonical(bytes: &[u8]) -> bool {
    if std::str::from_utf8(bytes).is_err() {
        return false;
    }
    let mut scan = Scan {
        bytes,
        at: 0,
        inexact: false,
    };
    let canonical = scan.value(0) && scan.at == bytes.len();
    if canonical && scan.inexact {
        return reparsed_is_canonical(bytes);
    }
    canonical
}

/// The slow reference: parse, re-serialize, compare.
fn reparsed_is_canonical(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| to_canonical_bytes(&v).ok())
        .is_some_and(|c| c == bytes)
}

/// serde_json's default recursion limit: deeper input does not parse, so it is not canonical.
const MAX_DEPTH: usize = 127;

struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
    /// A number was seen that only a round trip can judge (a float, or an integer out of range).
    inexact: bool,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let ate = self.peek() == Some(byte);
        self.at += usize::from(ate);
        ate
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        let ate = self.bytes[self.at..].starts_with(word);
        self.at += if ate { word.len() } else { 0 };
        ate
    }

    fn value(&mut self, depth: usize) -> bool {
        match self.peek() {
            Some(b'{') => depth < MAX_DEPTH && self.object(depth + 1),
            Some(b'[') => depth < MAX_DEPTH && self.array(depth + 1),
            Some(b'"') => self.string().is_some(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => false,
        }
    }

    fn array(&mut self, depth: usize) -> bool {
        self.at += 1;
        if self.eat(b']') {
            return true;
        }
        loop {
            if !self.value(depth) {
                return false;
            }
            if self.eat(b']') {
                return true;
            }
            if !self.eat(b',') {
                return false;
            }
        }
    }

    fn object(&mut self, depth: usize) -> bool {
        self.at += 1;
        if self.eat(b'}') {
            return true;
        }
        let mut previous: Option<Cow<'a, [u8]>> = None;
        loop {
            let Some(key) = self.string() else {
                return false;
            };
            if previous.as_ref().is_some_and(|p| **p >= *key) {
                return false;
            }
            previous = Some(key);
            if !(self.eat(b':') && self.value(depth)) {
                return false;
            }
            if self.eat(b'}') {
                return true;
            }
            if !self.eat(b',') {
                return false;
            }
        }
    }

    /// A string in serde_json's escaping; its decoded bytes (borrowed when nothing is escaped).
    fn string(&mut self) -> Option<Cow<'a, [u8]>> {
        if !self.eat(b'"') {
            return None;
        }
        let bytes: &'a [u8] = self.bytes;
        let start = self.at;
        let mut decoded: Option<Vec<u8>> = None;
        loop {
            let byte = self.peek()?;
            self.at += 1;
            match byte {
                b'"' => {
                    return Some(match decoded {
                        Some(d) => Cow::Owned(d),
                        None => Cow::Borrowed(&bytes[start..self.at - 1]),
                    });
                }
                0x00..=0x1f => return None,
                b'\\' => {
                    let escaped = self.escape()?;
                    let before = self.at - 2 - usize::from(escaped.1);
                    let d = decoded.get_or_insert_with(|| bytes[start..before].to_vec());
                    d.push(escaped.0);
                }
                other => {
                    if let Some(d) = decoded.as_mut() {
                        d.push(other);
                    }
                }
            }
        }
    }

    /// The byte an escape after `\` stands for, and how many bytes past the escape letter it
    /// took (4 for `\u00XX`); only the escapes serde_json writes.
    fn escape(&mut self) -> Option<(u8, u8)> {
        let letter = self.peek()?;
        self.at += 1;
        let short = match letter {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            _ => None,
        };
        if let Some(byte) = short {
            return Some((byte, 0));
        }
        if letter != b'u' {
            return None;
        }
        let hex = self.bytes.get(self.at..self.at + 4)?;
        let digit = |b: u8| match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        };
        if &hex[..2] != b"00" {
            return None;
        }
        let byte = digit(hex[2])? << 4 | digit(hex[3])?;
        // serde_json writes \u00XX only for control characters without a short form.
        if byte >= 0x20 || matches!(byte, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
            return None;
        }
        self.at += 4;
        Some((byte, 4))
    }

    fn number(&mut self) -> bool {
        let start = self.at;
        self.eat(b'-');
        let digits = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        let integer = &self.bytes[digits..self.at];
        if integer.is_empty() || (integer[0] == b'0' && (integer.len() > 1 || start < digits)) {
            // No digits, a leading zero, or "-0" (serde_json writes 0 for it).
            return integer == b"0" && start == digits && !self.fraction_follows();
        }
        if self.fraction_follows() {
            // A float: canonical only as serde_json writes it, which a round trip decides.
            while matches!(
                self.peek(),
                Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
            ) {
                self.at += 1;
            }
            self.inexact = true;
            return true;
        }
        let text = std::str::from_utf8(&self.bytes[start..self.at]).expect("ASCII digits");
        if text.parse::<i64>().is_err() && text.parse::<u64>().is_err() {
            self.inexact = true;
        }
        true
    }

    fn fraction_follows(&self) -> bool {
        matches!(self.peek(), Some(b'.' | b'e' | b'E'))
    }
}

/// Writes an object's members sorted by key, telling `written` where each member's value went.
fn write_object(
    map: &serde_json::Map<String, Value>,
    out: &mut Vec<u8>,
    mut written: impl FnMut(&str, Range<usize>),
) {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    for (i, (key, item)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key.as_str())
            .expect("writing a JSON string to memory cannot fail");
        out.push(b':');
        let start = out.len();
        write_value(item, out);
        written(key, start..out.len());
    }
    out.push(b'}');
}

fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => write_object(map, out, |_, _| {}),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar(value: &Value, out: &mut Vec<u8>) {
    serde_json::to_writer(out, value).expect("writing a JSON scalar to memory cannot fail");
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_are_sorted_at_every_level_without_whitespace() {
        let v = json!({"b": 1, "a": {"d": [true, null], "c": "x\n"}});
        assert_eq!(
            to_canonical_bytes(&v).unwrap(),
            br#"{"a":{"c":"x\n","d":[true,null]},"b":1}"#
        );
        assert!(is_canonical(br#"{"a":1}"#));
        assert!(!is_canonical(br#"{ "a": 1 }"#));
        assert!(!is_canonical(br#"{"b":1,"a":2}"#));
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            (-1e9f64..1e9).prop_map(|f| json!(f)),
            ".*".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(".*", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn the_one_pass_check_agrees_with_a_round_trip_on_edge_cases() {
        let cases: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"-0".to_vec(),
            b"01".to_vec(),
            b"-1".to_vec(),
            b"1.5".to_vec(),
            b"1e5".to_vec(),
            b"1.0".to_vec(),
            b"18446744073709551615".to_vec(),
            b"18446744073709551616".to_vec(),
            b"-9223372036854775808".to_vec(),
            b"-9223372036854775809".to_vec(),
            br#""a\/b""#.to_vec(),
            br#""\u0041""#.to_vec(),
            br#""\u001f""#.to_vec(),
            br#""\u001F""#.to_vec(),
            br#""\u000a""#.to_vec(),
            br#""\n\t\r\b\f\"\\""#.to_vec(),
            b"\"\x7f\"".to_vec(),
            b"\"\x01\"".to_vec(),
            "\"é\"".as_bytes().to_vec(),
            br#"{"a":1,"a":2}"#.to_vec(),
            br#"{"b":1,"a":2}"#.to_vec(),
            br#"{"\n":1,"a":2}"#.to_vec(),
            br#"{"a":2,"\n":1}"#.to_vec(),
            b"[1,]".to_vec(),
            b"[1 ]".to_vec(),
            b"{}".to_vec(),
            b"[]".to_vec(),
            b"true ".to_vec(),
            b"nul".to_vec(),
            b"\"\xff\"".to_vec(),
            Vec::new(),
        ];
        let mut all = cases;
        for depth in [126, 127, 128, 129] {
            all.push(format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes());
        }
        for bytes in &all {
            assert_eq!(
                is_canonical(bytes),
                reparsed_is_canonical(bytes),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    proptest! {
        #[test]
        fn the_one_pass_check_agrees_with_a_round_trip(v in arb_json(), cut in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let canonical = to_canonical_bytes(&v).unwrap();
            let pretty = serde_json::to_vec_pretty(&v).unwrap();
            let mut mutated = canonical.clone();
            if !mutated.is_empty() {
                let i = cut.index(mutated.len());
                mutated[i] = byte;
            }
            for bytes in [&canonical, &pretty, &mutated] {
                prop_assert_eq!(is_canonical(bytes), reparsed_is_canonical(bytes));
            }
        }

        #[test]
        fn the_one_pass_check_agrees_with_a_round_trip_on_any_bytes(
            bytes in prop::collection::vec(prop::sample::select(b"{}[]\",:\\/0123456789-+.eEtrufalsn u\x01\xc3\xa9".to_vec()), 0..40)
        ) {
            prop_assert_eq!(is_canonical(&bytes), reparsed_is_canonical(&bytes));
        }

        #[test]
        fn a_members_slice_is_its_own_canonical_form(
            members in prop::collection::btree_map("[a-d]{1,2}", arb_json(), 0..6),
            asked in prop::array::uniform3("[a-d]{1,2}"),
        ) {
            let object = Value::Object(members.clone().into_iter().collect());
            let (bytes, ranges) = to_canonical_bytes_with_members(
                &object,
                [asked[0].as_str(), asked[1].as_str(), asked[2].as_str()],
            )
            .unwrap();
            prop_assert_eq!(&bytes, &to_canonical_bytes(&object).unwrap());
            for (name, range) in asked.iter().zip(ranges) {
                match members.get(name) {
                    Some(member) => {
                        let range = range.expect("a member the object has is found");
                        prop_assert_eq!(&bytes[range], &to_canonical_bytes(member).unwrap()[..]);
                    }
                    None => prop_assert!(range.is_none()),
                }
            }
        }

        #[test]
        fn canonical_bytes_round_trip_and_are_a_fixed_point(v in arb_json()) {
            let bytes = to_canonical_bytes(&v).unwrap();
            let back: Value = serde_json::from_slice(&bytes).unwrap();
            prop_assert_eq!(&back, &v);
            prop_assert!(is_canonical(&bytes));
            prop_assert_eq!(to_canonical_bytes(&back).unwrap(), bytes);
        }
    }
}
