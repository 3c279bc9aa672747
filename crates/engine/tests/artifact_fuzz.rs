//! Property tests beside the `json_artifact` fuzz target (`fuzz/`): any content attested for
//! a JSON output yields a plan or `schema_validation_failed`, deterministically, never a crash.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::common::*;

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        ".{0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("question".to_owned()),
                    Just("scope".to_owned()),
                    Just("in".to_owned()),
                    "[a-z_]{1,10}"
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn any_json_content_gets_a_plan_or_schema_validation_failed() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (engine, start, payload) = runtime.block_on(async {
        let engine = engine_on(sqlite_memory().await).await;
        let start = start_request("codex");
        let setup = active(engine.start(start.clone(), None).await.unwrap());
        let payload = pass_step(&engine, &setup, &start).await;
        (engine, start, payload)
    });
    proptest!(ProptestConfig::with_cases(128), |(content in arb_json())| {
        let mut req = prepare(&payload, &start);
        // The file is the JSON's text; the schema judges that text, content beside it repeats it.
        let text = serde_json::to_string(&content).unwrap();
        let artifact = &mut req.output_attestation.as_mut().unwrap().artifacts[0];
        artifact.bytes = text.len() as u64;
        artifact.sha256 = rimthan_registry::Sha256Digest::of(text.as_bytes()).to_string();
        artifact.text = artifact.text.is_some().then(|| text.clone());
        artifact.content = Some(content);
        let first = runtime.block_on(engine.prepare(req.clone(), None)).unwrap();
        let codes_seen = codes(&first);
        prop_assert!(codes_seen.is_empty() || codes_seen == ["schema_validation_failed"], "{codes_seen:?}");
        if !codes_seen.is_empty() {
            let again = runtime.block_on(engine.prepare(req, None)).unwrap();
            prop_assert_eq!(serde_json::to_value(&first).unwrap(), serde_json::to_value(&again).unwrap());
        }
    });
}
