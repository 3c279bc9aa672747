//! Property tests beside the `registry_files` fuzz target (`fuzz/`): arbitrary manifests,
//! correctly signed so parsing is reached, never crash verification and fail with a named code.

use proptest::prelude::*;
use rimthan_registry::{external_policy, to_canonical_bytes, verify_registry};
use serde_json::{Value, json};

use crate::common::{RELEASE, test_registry, with_signed_manifest};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-z0-9./{}_-]{0,24}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid manifest with one field of one entry replaced by arbitrary JSON.
fn mutated_manifest() -> impl Strategy<Value = Value> {
    let files = test_registry();
    let manifest: Value = serde_json::from_slice(
        files
            .get(&format!("releases/{RELEASE}/manifest.json"))
            .unwrap(),
    )
    .unwrap();
    let count = manifest["entries"].as_array().unwrap().len();
    let fields = [
        "kind",
        "id",
        "version",
        "path",
        "media_type",
        "bytes",
        "sha256",
        "asset_kind",
        "rendition",
        "adapter_contract",
        "workflow",
        "extra",
    ];
    (0..count, prop::sample::select(fields.to_vec()), arb_json()).prop_map(
        move |(i, field, value)| {
            let mut m = manifest.clone();
            m["entries"][i][field] = value;
            m
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn signed_arbitrary_manifests_fail_with_a_code(manifest in arb_json()) {
        let bytes = to_canonical_bytes(&manifest).unwrap();
        let err = verify_registry(&with_signed_manifest(test_registry(), bytes), &external_policy()).unwrap_err();
        prop_assert!(!err.code().is_empty());
    }

    #[test]
    fn signed_manifests_with_one_bad_field_never_crash(manifest in mutated_manifest()) {
        let bytes = to_canonical_bytes(&manifest).unwrap();
        // Most mutations are refused; a few (e.g. the same value) verify. Neither may panic.
        if let Err(err) = verify_registry(&with_signed_manifest(test_registry(), bytes), &external_policy()) {
            prop_assert!(!err.code().is_empty());
        }
    }

    #[test]
    fn arbitrary_bytes_as_manifest_fail_with_a_code(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let err = verify_registry(&with_signed_manifest(test_registry(), bytes), &external_policy()).unwrap_err();
        prop_assert!(!err.code().is_empty());
    }
}
