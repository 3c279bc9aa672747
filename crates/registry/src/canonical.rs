//! Canonical JSON: the one byte form of a JSON value that is digested and signed.
//!
//! Object keys are sorted by their UTF-8 bytes at every level, there is no insignificant
//! whitespace, strings use serde_json's escaping and numbers its shortest form. Sorting here,
//! not in the map type, keeps the form stable whatever serde_json features the build enables.

use serde::Serialize;
use serde_json::Value;

/// Serializes a value to canonical JSON bytes.
pub fn to_canonical_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let value = serde_json::to_value(value)?;
    let mut out = Vec::new();
    write_value(&value, &mut out);
    Ok(out)
}

/// Whether `bytes` are exactly the canonical form of the JSON they hold.
pub fn is_canonical(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| to_canonical_bytes(&v).ok())
        .is_some_and(|c| c == bytes)
}

fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(&Value::String(key.clone()), out);
                out.push(b':');
                write_value(item, out);
            }
            out.push(b'}');
        }
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

    proptest! {
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
