//! The schema-instance generator: a schema's own example, else a small instance that validates,
//! else `None` (never an invalid instance).

use proptest::prelude::*;
use rimthan_registry::{example_or_instance, generate_instance};
use serde_json::{Value, json};

use crate::common::repo_root;

fn valid(schema: &Value, instance: &Value) -> bool {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("schema compiles")
        .is_valid(instance)
}

/// The generated instance, asserted to validate.
fn instance(schema: Value) -> Value {
    let generated = example_or_instance(&schema).unwrap_or_else(|| panic!("no instance: {schema}"));
    assert!(valid(&schema, &generated), "{generated} fails {schema}");
    generated
}

#[test]
fn every_shipped_schema_yields_a_valid_instance() {
    let dir = repo_root().join("registry/source/schemas");
    let mut seen = 0;
    for schema_dir in std::fs::read_dir(&dir).unwrap() {
        for file in std::fs::read_dir(schema_dir.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            let schema: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let generated = generate_instance(&schema)
                .unwrap_or_else(|| panic!("{}: no instance", path.display()));
            assert!(
                valid(&schema, &generated),
                "{}: {generated}",
                path.display()
            );
            seen += 1;
        }
    }
    assert!(seen >= 4, "found only {seen} shipped schemas");
}

#[test]
fn the_first_valid_example_is_returned_as_is() {
    let schema = json!({"type": "object", "examples": [{"a": 1}, {"b": 2}]});
    assert_eq!(instance(schema), json!({"a": 1}));
}

#[test]
fn an_invalid_first_example_is_replaced_by_a_generated_instance() {
    let schema = json!({"type": "string", "examples": [3]});
    assert_eq!(instance(schema), json!("example"));
}

#[test]
fn only_required_properties_are_written() {
    let schema = json!({
        "type": "object", "additionalProperties": false, "required": ["id", "count"],
        "properties": {"id": {"type": "string"}, "count": {"type": "integer", "minimum": 3},
                       "note": {"type": "string"}}
    });
    assert_eq!(instance(schema), json!({"id": "example", "count": 3}));
}

#[test]
fn min_properties_adds_declared_then_synthesized_properties() {
    let schema = json!({"type": "object", "minProperties": 3, "properties": {"a": {"const": 1}}});
    let generated = instance(schema);
    assert_eq!(generated["a"], 1);
    assert_eq!(generated.as_object().unwrap().len(), 3);
}

#[test]
fn type_lists_prefer_the_most_informative_type() {
    assert_eq!(
        instance(json!({"type": ["null", "string"]})),
        json!("example")
    );
    assert_eq!(instance(json!({"type": ["null", "object"]})), json!({}));
}

#[test]
fn const_and_enum_give_their_value() {
    assert_eq!(instance(json!({"const": {"k": [1]}})), json!({"k": [1]}));
    assert_eq!(instance(json!({"enum": ["b", "a"]})), json!("b"));
}

#[test]
fn arrays_meet_prefix_items_and_min_items() {
    let schema = json!({
        "type": "array", "minItems": 3,
        "prefixItems": [{"const": "first"}], "items": {"type": "integer", "minimum": 7}
    });
    assert_eq!(instance(schema), json!(["first", 7, 7]));
}

#[test]
fn unique_items_get_distinct_values() {
    let schema = json!({"type": "array", "minItems": 3, "uniqueItems": true,
                        "items": {"enum": ["x", "y", "z"]}});
    assert_eq!(instance(schema), json!(["x", "y", "z"]));
    instance(json!({"type": "array", "minItems": 4, "uniqueItems": true,
                    "items": {"type": "string", "format": "date"}}));
}

#[test]
fn strings_respect_lengths_and_formats() {
    assert_eq!(
        instance(json!({"type": "string", "minLength": 10})),
        json!("exampleexa")
    );
    assert_eq!(
        instance(json!({"type": "string", "maxLength": 3})),
        json!("exa")
    );
    for format in ["date", "date-time", "uri", "email", "uuid"] {
        instance(json!({"type": "string", "format": format}));
    }
}

#[test]
fn simple_patterns_are_satisfied() {
    assert_eq!(
        instance(json!({"type": "string", "pattern": "^S[0-9]+$"})),
        json!("S0")
    );
    assert_eq!(
        instance(json!({"type": "string", "pattern": "^(?:ab|cd){2}-[A-Z]{3}$"})),
        json!("abab-AAA")
    );
    let name_rule = json!({"type": "string", "pattern": "^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$"});
    assert_eq!(instance(name_rule), json!("a"));
    // Unanchored: padding to minLength keeps the match.
    instance(json!({"type": "string", "pattern": "x", "minLength": 4}));
}

#[test]
fn patterns_it_cannot_satisfy_give_none_not_an_invalid_instance() {
    // Anchored and too short for minLength: padding would break the match.
    let schema = json!({"type": "string", "pattern": "^a$", "minLength": 3});
    assert_eq!(example_or_instance(&schema), None);
    // Look-ahead is outside the supported pattern subset.
    assert_eq!(
        example_or_instance(&json!({"type": "string", "pattern": "^(?=b)b$"})),
        None
    );
}

#[test]
fn numbers_respect_bounds_and_multiples() {
    assert_eq!(
        instance(json!({"type": "integer", "exclusiveMinimum": 5})),
        json!(6)
    );
    assert_eq!(
        instance(json!({"type": "integer", "maximum": -3})),
        json!(-3)
    );
    assert_eq!(
        instance(json!({"type": "integer", "exclusiveMaximum": -3})),
        json!(-4)
    );
    assert_eq!(
        instance(json!({"type": "integer", "minimum": 10, "multipleOf": 4})),
        json!(12)
    );
    let narrow = instance(json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}));
    assert_eq!(narrow, json!(0.5));
    assert_eq!(
        example_or_instance(
            &json!({"type": "integer", "minimum": 1, "maximum": 2, "multipleOf": 5})
        ),
        None
    );
}

#[test]
fn one_of_takes_the_first_branch_that_alone_matches() {
    // Branch 0 would also satisfy branch 1 (both accept any string), so it is skipped.
    let schema = json!({"oneOf": [
        {"type": "string"},
        {"type": "string", "maxLength": 100},
        {"type": "integer"}
    ]});
    assert_eq!(instance(schema), json!(0));
}

#[test]
fn any_of_branches_combine_with_the_parent_properties() {
    let schema = json!({
        "type": "object", "additionalProperties": false, "required": ["id"],
        "properties": {"id": {"type": "string"}, "url": {"type": "string", "format": "uri"}},
        "anyOf": [{"required": ["url"]}, {"required": ["citation"]}]
    });
    let generated = instance(schema);
    assert_eq!(generated["url"], "https://example.com/0");
}

#[test]
fn all_of_merges_objects() {
    let schema = json!({"allOf": [
        {"type": "object", "required": ["a"], "properties": {"a": {"type": "boolean"}}},
        {"type": "object", "required": ["b"], "properties": {"b": {"type": "null"}}}
    ]});
    assert_eq!(instance(schema), json!({"a": false, "b": null}));
}

#[test]
fn local_refs_to_defs_are_followed() {
    let schema = json!({
        "$defs": {"id": {"type": "string", "pattern": "^T-[0-9]{2}$"}},
        "type": "object", "required": ["id"], "properties": {"id": {"$ref": "#/$defs/id"}}
    });
    assert_eq!(instance(schema), json!({"id": "T-00"}));
}

#[test]
fn endless_recursion_is_cut_at_the_depth_bound() {
    let schema = json!({
        "$defs": {"node": {"type": "object", "required": ["next"],
                           "properties": {"next": {"$ref": "#/$defs/node"}}}},
        "$ref": "#/$defs/node"
    });
    assert_eq!(example_or_instance(&schema), None);
}

#[test]
fn unsatisfiable_or_invalid_schemas_give_none() {
    assert_eq!(example_or_instance(&json!(false)), None);
    assert_eq!(example_or_instance(&json!({"type": 12})), None);
    assert_eq!(
        example_or_instance(
            &json!({"type": "object", "required": ["a"], "additionalProperties": false})
        ),
        None
    );
}

/// Leaf schemas the generator promises to handle, with satisfiable random bounds.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..40, 0u64..40).prop_map(
            |(min, extra)| json!({"type": "string", "minLength": min, "maxLength": min + extra})
        ),
        prop::sample::select(vec!["date", "date-time", "uri", "email", "uuid"])
            .prop_map(|f| json!({"type": "string", "format": f})),
        (-1000i64..1000, 1i64..50, any::<bool>()).prop_map(|(lo, m, exclusive)| {
            let bound = if exclusive {
                "exclusiveMinimum"
            } else {
                "minimum"
            };
            json!({"type": "integer", bound: lo, "maximum": lo + 2 * m + 1, "multipleOf": m})
        }),
        (-1000i64..1000, 1u32..1000).prop_map(|(lo, d)| {
            let hi = lo as f64 + f64::from(d) / 1000.0;
            json!({"type": "number", "exclusiveMinimum": lo, "exclusiveMaximum": hi})
        }),
        prop::collection::vec("[a-z]{1,8}", 1..4).prop_map(|v| json!({"enum": v})),
        any::<bool>().prop_map(|b| json!({"const": b})),
        Just(json!({"type": ["null", "boolean"]})),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (
                prop::collection::btree_map("[a-z]{1,6}", inner.clone(), 0..4),
                any::<u8>()
            )
                .prop_map(|(props, mask)| {
                    let required: Vec<&String> = props
                        .keys()
                        .enumerate()
                        .filter(|(i, _)| mask & (1 << i) != 0)
                        .map(|(_, k)| k)
                        .collect();
                    json!({"type": "object", "additionalProperties": false,
                           "required": required, "properties": props})
                }),
            (inner.clone(), 0u64..4)
                .prop_map(|(items, min)| json!({"type": "array", "minItems": min, "items": items})),
            (inner.clone(), inner).prop_map(|(a, b)| json!({"anyOf": [a, b]})),
        ]
    })
}

/// A supported schema, sometimes reached through a local `$ref`.
fn top_level() -> impl Strategy<Value = Value> {
    prop_oneof![
        schema(),
        schema().prop_map(|s| json!({"$defs": {"x": s}, "$ref": "#/$defs/x"})),
    ]
}

proptest! {
    #[test]
    fn generated_instances_of_supported_schemas_validate(schema in top_level()) {
        let generated = example_or_instance(&schema);
        prop_assert!(generated.is_some(), "no instance for {}", schema);
        prop_assert!(valid(&schema, generated.as_ref().unwrap()));
    }

    #[test]
    fn a_valid_example_is_always_preferred(schema in top_level()) {
        let Some(generated) = generate_instance(&schema) else { return Ok(()); };
        let mut with_example = schema.clone();
        with_example["examples"] = json!([generated.clone()]);
        prop_assert_eq!(example_or_instance(&with_example), Some(generated));
    }
}

#[test]
fn a_conditional_is_met_by_its_then_or_its_else() {
    // The first enum value meets `if`, so `then`'s requirement is written.
    let agent = instance(json!({
        "type": "object",
        "properties": {"who": {"enum": ["agent", "person"]}, "model": {"type": "string", "minLength": 1}},
        "required": ["who"],
        "if": {"properties": {"who": {"const": "agent"}}},
        "then": {"required": ["model"]},
    }));
    assert_eq!(agent["who"], "agent");
    assert!(agent["model"].is_string(), "{agent}");
    // A value that does not meet `if` is held to `else`.
    let person = instance(json!({
        "type": "object",
        "properties": {"who": {"enum": ["person", "agent"]}, "role": {"type": "string", "minLength": 1}},
        "required": ["who"],
        "if": {"properties": {"who": {"const": "agent"}}},
        "then": {"required": ["model"]},
        "else": {"required": ["role"]},
    }));
    assert_eq!(person["who"], "person", "{person}");
    assert!(person["role"].is_string(), "{person}");
}
