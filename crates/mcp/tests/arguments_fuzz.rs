//! Property tests beside the `tool_arguments` fuzz target (`fuzz/`): valid
//! arguments with one field replaced by arbitrary JSON always get a well-formed tool result
//! that satisfies the tool's output schema (checked by `call`), never a protocol error.

use proptest::prelude::*;
use rimthan_mcp::Profile;
use serde_json::{Value, json};

use crate::common::*;

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        prop_oneof![
            Just("codex".to_owned()),
            Just("1.1.0".to_owned()),
            Just("rc1.".to_owned()),
            ".{0,24}"
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// (tool, valid arguments, pointers whose value the property replaces).
fn cases(checkpoint: &str) -> Vec<(&'static str, Value, Vec<&'static str>)> {
    vec![
        (
            rimthan_mcp::START,
            start_arguments("codex"),
            vec![
                "/workflow_id",
                "/host",
                "/host/harness",
                "/host/adapter",
                "/host/capabilities",
                "/host/validator_capabilities",
                "/repository_policy",
            ],
        ),
        (
            rimthan_mcp::ACTIVE_STEP,
            json!({"checkpoint": checkpoint}),
            vec!["/checkpoint"],
        ),
        (
            rimthan_mcp::PREPARE,
            json!({"checkpoint": checkpoint, "step_id": "setup-workspace", "host_attestation": {}}),
            vec![
                "/checkpoint",
                "/step_id",
                "/host_attestation",
                "/output_attestation",
            ],
        ),
        (
            rimthan_mcp::SUBMIT,
            json!({"checkpoint": checkpoint, "validation_id": "x", "reports": []}),
            vec!["/checkpoint", "/validation_id", "/reports"],
        ),
    ]
}

fn set(value: &mut Value, pointer: &str, replacement: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = if parent.is_empty() {
        &mut *value
    } else {
        value.pointer_mut(parent).unwrap()
    };
    target[key] = replacement;
}

#[test]
fn arbitrary_field_values_get_well_formed_tool_results() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (client, checkpoint) = runtime.block_on(async {
        let client = duplex_client(server(Profile::WorkflowEngine).await).await;
        let started =
            structured(&call(&client, rimthan_mcp::START, start_arguments("codex")).await);
        (client, started["checkpoint"].as_str().unwrap().to_owned())
    });
    let all = cases(&checkpoint);
    let picks: Vec<(usize, usize)> = all
        .iter()
        .enumerate()
        .flat_map(|(i, (_, _, ps))| (0..ps.len()).map(move |p| (i, p)))
        .collect();
    proptest!(ProptestConfig::with_cases(192), |(pick in prop::sample::select(picks.clone()), value in arb_json())| {
        let (tool, valid, pointers) = &all[pick.0];
        let mut arguments = valid.clone();
        set(&mut arguments, pointers[pick.1], value);
        let result = runtime.block_on(call(&client, tool, arguments));
        let content = structured(&result);
        let status = content["status"].as_str().unwrap_or_default().to_owned();
        prop_assert!(["active", "blocked", "rejected", "ready", "revise", "completed"].contains(&status.as_str()), "{content}");
        prop_assert_eq!(result.is_error == Some(true), ["blocked", "rejected", "revise"].contains(&status.as_str()));
    });
}
