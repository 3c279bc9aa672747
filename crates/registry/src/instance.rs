//! Placeholder until the generator branch merges: a schema's first example.

/// The schema's first `examples` entry.
pub fn example_or_instance(schema: &serde_json::Value) -> Option<serde_json::Value> {
    schema.get("examples")?.as_array()?.first().cloned()
}
