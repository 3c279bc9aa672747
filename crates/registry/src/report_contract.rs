//! The part of a validator's report that the engine itself reads, and the check that a
//! validator's `report_schema` keeps it (docs/registry-format.md §3, "Report contracts").
//!
//! A report schema is the contract of one validator's report: it may add fields, but the base
//! fields must stay required and keep their JSON types, or a report that satisfies the schema
//! could not be read by the engine (and one the engine can read would fail the schema).

use serde_json::Value;

/// A JSON type, as JSON Schema's `type` keyword names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum JsonType {
    /// `"string"`.
    String,
    /// `"array"`.
    Array,
    /// `"object"`.
    Object,
}

impl JsonType {
    /// The keyword value, e.g. `"string"`.
    pub fn as_str(self) -> &'static str {
        match self {
            JsonType::String => "string",
            JsonType::Array => "array",
            JsonType::Object => "object",
        }
    }
}

impl std::fmt::Display for JsonType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The fields every report carries and the engine reads, with their JSON types: a report
/// schema must require each and declare it with exactly this type.
pub const BASE_REPORT_FIELDS: &[(&str, JsonType)] = &[
    ("validator_id", JsonType::String),
    ("validator_version", JsonType::String),
    ("verdict", JsonType::String),
    ("summary", JsonType::String),
    ("findings", JsonType::Array),
    ("inputs_read", JsonType::Array),
    ("capabilities_used", JsonType::Array),
];

/// The verdicts the engine understands; a report schema's `verdict` enum may only narrow them.
pub const VERDICTS: &[&str] = &["pass", "fail"];

/// The fields each finding must require (both strings).
pub const FINDING_REQUIRED: &[&str] = &["severity", "message"];

/// The severities the engine understands; a finding's `severity` enum may only narrow them.
pub const SEVERITIES: &[&str] = &["info", "warning", "error"];

/// `$ref` hops followed before giving up (a cycle or a very deep chain).
const MAX_REF_HOPS: usize = 8;

/// How a report schema breaks the base contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractBreach {
    /// The base field (or a JSON pointer into the schema for nested declarations).
    pub field: String,
    /// What is wrong, in words.
    pub problem: String,
}

fn breach(field: impl Into<String>, problem: impl Into<String>) -> ContractBreach {
    ContractBreach {
        field: field.into(),
        problem: problem.into(),
    }
}

/// Checks that `schema` keeps every base field of [`BASE_REPORT_FIELDS`] required and typed as
/// the base does, `verdict`'s values within [`VERDICTS`], and findings as objects requiring
/// [`FINDING_REQUIRED`]. Declarations may be inline or a local `$ref` (`#/...`).
pub fn check_report_schema(schema: &Value) -> Result<(), ContractBreach> {
    let root = Node::new(schema);
    root.expect_type("(schema root)", JsonType::Object)?;
    let required = root.strings("required");
    let properties = root.keyword("properties");
    let mut verdict = None;
    let mut findings = None;
    for (field, ty) in BASE_REPORT_FIELDS {
        if !required.contains(field) {
            return Err(breach(*field, "missing from the schema's required list"));
        }
        let declared = properties
            .and_then(|p| p.value.get(*field))
            .ok_or_else(|| breach(*field, "not declared in the schema's properties"))?;
        let declared = root.at(declared).follow(field)?;
        declared.expect_type(field, *ty)?;
        match *field {
            "verdict" => verdict = Some(declared),
            "findings" => findings = Some(declared),
            _ => {}
        }
    }
    if let Some(verdict) = verdict {
        verdict.values_within("verdict", VERDICTS)?;
    }
    findings.map_or(Ok(()), check_findings)
}

fn check_findings(findings: Node<'_>) -> Result<(), ContractBreach> {
    const FIELD: &str = "findings/items";
    let items = findings
        .keyword("items")
        .ok_or_else(|| breach(FIELD, "declare items: each finding is an object"))?
        .follow(FIELD)?;
    items.expect_type(FIELD, JsonType::Object)?;
    let required = items.strings("required");
    let properties = items.keyword("properties");
    for name in FINDING_REQUIRED {
        let field = format!("findings/items/{name}");
        if !required.contains(name) {
            return Err(breach(field, "missing from the finding's required list"));
        }
        let Some(declared) = properties.and_then(|p| p.value.get(*name)) else {
            continue;
        };
        let declared = items.at(declared).follow(&field)?;
        declared.expect_type(&field, JsonType::String)?;
        if *name == "severity" {
            declared.values_within(&field, SEVERITIES)?;
        }
    }
    Ok(())
}

/// A subschema together with the document root its local `$ref`s resolve against.
#[derive(Clone, Copy)]
struct Node<'a> {
    root: &'a Value,
    value: &'a Value,
}

impl<'a> Node<'a> {
    fn new(root: &'a Value) -> Self {
        Node { root, value: root }
    }

    fn at(self, value: &'a Value) -> Self {
        Node {
            root: self.root,
            value,
        }
    }

    /// Follows `$ref`s to the declaration that carries the keywords (a bare `$ref` node).
    fn follow(self, field: &str) -> Result<Self, ContractBreach> {
        let mut node = self;
        for _ in 0..MAX_REF_HOPS {
            let Some(reference) = node.value.get("$ref") else {
                return Ok(node);
            };
            let target = reference
                .as_str()
                .and_then(|r| r.strip_prefix('#'))
                .and_then(|pointer| self.root.pointer(pointer))
                .ok_or_else(|| {
                    breach(
                        field,
                        "its $ref does not resolve inside the schema; declare it inline or with \
                         a local #/$defs/... reference",
                    )
                })?;
            node = node.at(target);
        }
        Err(breach(field, "its $ref chain is too long or circular"))
    }

    /// A keyword of this node, looked up at the end of its `$ref` chain when absent here.
    fn keyword(self, key: &str) -> Option<Node<'a>> {
        let value = match self.value.get(key) {
            Some(v) => v,
            None => self.follow(key).ok()?.value.get(key)?,
        };
        Some(self.at(value))
    }

    fn strings(self, key: &str) -> Vec<&'a str> {
        self.keyword(key)
            .and_then(|n| n.value.as_array())
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    fn expect_type(self, field: &str, ty: JsonType) -> Result<(), ContractBreach> {
        let declared = self.keyword("type").map(|n| n.value);
        let ok = match declared {
            Some(Value::String(s)) => s == ty.as_str(),
            Some(Value::Array(a)) => a.len() == 1 && a[0] == ty.as_str(),
            _ => false,
        };
        if ok {
            return Ok(());
        }
        let found = declared.map_or_else(|| "no type".to_owned(), |v| format!("type {v}"));
        Err(breach(
            field,
            format!("must be declared with type \"{ty}\" (found {found})"),
        ))
    }

    /// `enum`/`const`, when present, may only hold values from `allowed`.
    fn values_within(self, field: &str, allowed: &[&str]) -> Result<(), ContractBreach> {
        let mut values: Vec<&Value> = Vec::new();
        if let Some(e) = self.keyword("enum") {
            values.extend(e.value.as_array().into_iter().flatten());
        }
        if let Some(c) = self.keyword("const") {
            values.push(c.value);
        }
        match values
            .iter()
            .find(|v| !v.as_str().is_some_and(|s| allowed.contains(&s)))
        {
            None => Ok(()),
            Some(_) => Err(breach(
                field,
                format!("its enum/const may only use {}", allowed.join(", ")),
            )),
        }
    }
}
