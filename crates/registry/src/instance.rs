//! A worked instance of a JSON Schema: the schema's own first example, else a small generated
//! instance that validates (docs/registry-format.md §8).
//!
//! The generator covers the keywords authors use for artifact and report schemas (types,
//! `const`/`enum`, required properties, array lengths, string lengths, formats and simple
//! patterns, numeric bounds, `oneOf`/`anyOf`/`allOf`, local `$ref`). It does not search: when a
//! schema asks for more than it understands, the candidate fails the final check against the
//! compiled schema and the answer is `None`, never an invalid instance.

use jsonschema::Validator;
use regex_syntax::hir::{Class, Hir, HirKind};
use serde_json::{Map, Number, Value, json};

/// Deepest nesting of subschemas (and `$ref` hops) followed before giving up.
const MAX_DEPTH: usize = 32;
/// Longest string the generator writes (a `minLength` above it is given up on).
const MAX_STRING_CHARS: u64 = 4096;
/// Most array items or object properties the generator writes to meet a minimum.
const MAX_FILL: u64 = 256;

/// The schema's first `examples` entry when it validates, else a generated minimal instance
/// that validates, else `None` (the schema does not compile, or asks for what the generator
/// cannot produce).
pub fn example_or_instance(schema: &Value) -> Option<Value> {
    example_where_or_instance(schema, |_| true)
}

/// Like [`example_or_instance`], from the first valid example that `wanted` accepts (for a
/// report schema: a passing report, whose extra fields describe a pass).
pub fn example_where_or_instance(schema: &Value, wanted: impl Fn(&Value) -> bool) -> Option<Value> {
    let validator = compile(schema)?;
    if let Some(example) = schema
        .get("examples")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|e| wanted(e) && validator.is_valid(e))
    {
        return Some(example.clone());
    }
    generate_instance_with(schema, &validator)
}

/// A generated minimal instance of `schema` that validates (ignoring its `examples`).
pub fn generate_instance(schema: &Value) -> Option<Value> {
    generate_instance_with(schema, &compile(schema)?)
}

fn generate_instance_with(schema: &Value, validator: &Validator) -> Option<Value> {
    let instance = Generator { root: schema }.generate(schema, 0, 0)?;
    validator.is_valid(&instance).then_some(instance)
}

fn compile(schema: &Value) -> Option<Validator> {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .ok()
}

struct Generator<'a> {
    root: &'a Value,
}

impl Generator<'_> {
    /// `variant` asks for a different value than variant 0 where the schema leaves room (items
    /// of a `uniqueItems` array).
    fn generate(&self, schema: &Value, depth: usize, variant: u64) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let object = match schema {
            Value::Bool(true) => return Some(Value::Null),
            Value::Bool(false) => return None,
            Value::Object(o) => o,
            _ => return None,
        };
        if let Some(target) = object.get("$ref") {
            let target = self.resolve(target)?;
            let merged = combine(&without(object, &["$ref"]), target);
            return self.generate(&merged, depth + 1, variant);
        }
        if let Some(parts) = object.get("allOf").and_then(Value::as_array) {
            let mut merged = without(object, &["allOf"]);
            for part in parts {
                merged = combine(&merged, part);
            }
            return self.generate(&merged, depth + 1, variant);
        }
        // A conditional: an instance of the schema with `then` (whose `if` it must meet), or
        // failing that one with `else` that does not meet `if`.
        if let Some(condition) = object.get("if") {
            let rest = without(object, &["if", "then", "else"]);
            let then = object
                .get("then")
                .map_or(rest.clone(), |t| combine(&rest, t));
            let otherwise = object
                .get("else")
                .map_or(rest.clone(), |e| combine(&rest, e));
            let meets = self
                .generate(&then, depth + 1, variant)
                .filter(|v| self.satisfies(condition, v) && self.satisfies(&then, v));
            return meets.or_else(|| {
                self.generate(&otherwise, depth + 1, variant)
                    .filter(|v| !self.satisfies(condition, v) && self.satisfies(&otherwise, v))
            });
        }
        for keyword in ["oneOf", "anyOf"] {
            if let Some(branches) = object.get(keyword).and_then(Value::as_array) {
                let rest = without(object, &[keyword]);
                return branches.iter().enumerate().find_map(|(i, branch)| {
                    let candidate = self.generate(&combine(&rest, branch), depth + 1, variant)?;
                    let exclusive = keyword == "anyOf"
                        || branches
                            .iter()
                            .enumerate()
                            .all(|(j, other)| i == j || !self.satisfies(other, &candidate));
                    (exclusive && self.satisfies(&rest, &candidate)).then_some(candidate)
                });
            }
        }
        self.generate_plain(object, depth, variant)
    }

    /// A schema without combinators.
    fn generate_plain(
        &self,
        schema: &Map<String, Value>,
        depth: usize,
        variant: u64,
    ) -> Option<Value> {
        if let Some(value) = schema.get("const") {
            return Some(value.clone());
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            let index = usize::try_from(variant).ok()? % values.len().max(1);
            return values.get(index).cloned();
        }
        match pick_type(schema)? {
            "object" => self.object(schema, depth, variant),
            "array" => self.array(schema, depth),
            "string" => string(schema, variant).map(Value::String),
            "integer" => number(schema, true, variant),
            "number" => number(schema, false, variant),
            "boolean" => Some(Value::Bool(variant % 2 == 1)),
            _ => Some(Value::Null),
        }
    }

    fn object(&self, schema: &Map<String, Value>, depth: usize, variant: u64) -> Option<Value> {
        let properties = schema.get("properties").and_then(Value::as_object);
        let extra = schema
            .get("additionalProperties")
            .unwrap_or(&Value::Bool(true));
        let declared = |name: &str| properties.and_then(|p| p.get(name)).unwrap_or(extra);
        let mut out = Map::new();
        for name in strings(schema.get("required")) {
            let value = self.generate(declared(name), depth + 1, variant)?;
            out.insert(name.to_owned(), value);
        }
        let min = schema
            .get("minProperties")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if min > MAX_FILL {
            return None;
        }
        for (name, sub) in properties.into_iter().flatten() {
            if out.len() as u64 >= min {
                break;
            }
            if !out.contains_key(name) {
                out.insert(name.clone(), self.generate(sub, depth + 1, variant)?);
            }
        }
        let mut index = 0;
        while (out.len() as u64) < min {
            index += 1;
            let name = format!("property{index}");
            if !out.contains_key(&name) {
                out.insert(name, self.generate(extra, depth + 1, variant)?);
            }
        }
        Some(Value::Object(out))
    }

    fn array(&self, schema: &Map<String, Value>, depth: usize) -> Option<Value> {
        let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        if min > MAX_FILL {
            return None;
        }
        let unique = schema.get("uniqueItems").and_then(Value::as_bool) == Some(true);
        let prefix = schema.get("prefixItems").and_then(Value::as_array);
        let items = schema.get("items").unwrap_or(&Value::Bool(true));
        let mut out = Vec::new();
        for index in 0..min {
            let sub = prefix
                .and_then(|p| p.get(usize::try_from(index).ok()?))
                .unwrap_or(items);
            // Unique items differ by variant; others repeat the minimal value.
            let variant = if unique { index } else { 0 };
            out.push(self.generate(sub, depth + 1, variant)?);
        }
        Some(Value::Array(out))
    }

    fn resolve(&self, reference: &Value) -> Option<&Value> {
        let pointer = reference.as_str()?.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    /// Whether `instance` satisfies `schema`, a subschema of the root; `true` when the
    /// subschema cannot be checked alone (the final check against the root decides then).
    fn satisfies(&self, schema: &Value, instance: &Value) -> bool {
        let mut standalone = match schema {
            Value::Object(o) => o.clone(),
            Value::Bool(b) => return *b,
            _ => return true,
        };
        for defs in ["$defs", "definitions"] {
            if let Some(d) = self.root.get(defs) {
                standalone.entry(defs).or_insert_with(|| d.clone());
            }
        }
        compile(&Value::Object(standalone)).is_none_or(|v| v.is_valid(instance))
    }
}

fn without(schema: &Map<String, Value>, keys: &[&str]) -> Value {
    let mut copy = schema.clone();
    for key in keys {
        copy.remove(*key);
    }
    Value::Object(copy)
}

/// The constraints of both schemas in one (enough for generation: the final check is exact).
/// `required` and `properties` are united (a property in both becomes the `allOf` of its two
/// schemas), `type`s intersected; any other keyword keeps `base`'s value when both have it.
fn combine(base: &Value, extra: &Value) -> Value {
    let (Value::Object(base), Value::Object(extra)) = (base, extra) else {
        return match extra {
            Value::Bool(true) => base.clone(),
            _ => extra.clone(),
        };
    };
    let mut out = base.clone();
    for (key, value) in extra {
        let Some(existing) = out.get(key) else {
            out.insert(key.clone(), value.clone());
            continue;
        };
        let merged = match key.as_str() {
            "required" => {
                let mut names: Vec<Value> = existing.as_array().cloned().unwrap_or_default();
                for name in value.as_array().into_iter().flatten() {
                    if !names.contains(name) {
                        names.push(name.clone());
                    }
                }
                Value::Array(names)
            }
            "properties" => {
                let mut props = existing.as_object().cloned().unwrap_or_default();
                for (name, sub) in value.as_object().into_iter().flatten() {
                    let joined = match props.get(name) {
                        Some(old) => json!({"allOf": [old, sub]}),
                        None => sub.clone(),
                    };
                    props.insert(name.clone(), joined);
                }
                Value::Object(props)
            }
            "type" => {
                let theirs = types(value);
                let both: Vec<Value> = types(existing)
                    .into_iter()
                    .filter(|t| theirs.contains(t))
                    .map(|t| Value::String(t.to_owned()))
                    .collect();
                Value::Array(both)
            }
            "allOf" => {
                let mut parts = existing.as_array().cloned().unwrap_or_default();
                parts.extend(value.as_array().into_iter().flatten().cloned());
                Value::Array(parts)
            }
            // Two alternatives at once: keep ours, and require theirs through allOf.
            "anyOf" | "oneOf" => {
                let mut parts = out
                    .get("allOf")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                parts.push(json!({ key.as_str(): value }));
                out.insert("allOf".into(), Value::Array(parts));
                continue;
            }
            _ => continue,
        };
        out.insert(key.clone(), merged);
    }
    Value::Object(out)
}

fn types(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        other => strings(Some(other)),
    }
}

fn strings(value: Option<&Value>) -> Vec<&str> {
    value
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Preferred among the allowed types, most informative first; inferred from the keywords when
/// `type` is absent.
fn pick_type(schema: &Map<String, Value>) -> Option<&'static str> {
    const PREFERENCE: &[&str] = &[
        "object", "string", "integer", "number", "array", "boolean", "null",
    ];
    if let Some(declared) = schema.get("type") {
        let allowed = types(declared);
        return PREFERENCE.iter().copied().find(|t| allowed.contains(t));
    }
    let has = |keys: &[&str]| keys.iter().any(|k| schema.contains_key(*k));
    Some(
        if has(&[
            "properties",
            "required",
            "minProperties",
            "additionalProperties",
        ]) {
            "object"
        } else if has(&["items", "prefixItems", "minItems"]) {
            "array"
        } else if has(&["minLength", "maxLength", "pattern", "format"]) {
            "string"
        } else if has(&[
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        ]) {
            "number"
        } else {
            "null"
        },
    )
}

fn string(schema: &Map<String, Value>, variant: u64) -> Option<String> {
    let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0);
    let max = schema.get("maxLength").and_then(Value::as_u64);
    if min > MAX_STRING_CHARS || max.is_some_and(|m| m < min) {
        return None;
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        return from_pattern(pattern, min, max);
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str) {
        return formatted(format, variant);
    }
    let base = if variant == 0 {
        "example".to_owned()
    } else {
        format!("example-{variant}")
    };
    let mut text: String = base
        .chars()
        .cycle()
        .take(base.len().max(usize::try_from(min).ok()?))
        .collect();
    if let Some(max) = max {
        text = text.chars().take(usize::try_from(max).ok()?).collect();
    }
    Some(text)
}

fn formatted(format: &str, variant: u64) -> Option<String> {
    let n = variant % 28;
    Some(match format {
        "date" => format!("2026-01-{:02}", n + 1),
        "date-time" => format!("2026-01-{:02}T00:00:00Z", n + 1),
        "time" => format!("00:00:{n:02}Z"),
        "uri" | "iri" | "uri-reference" | "iri-reference" => format!("https://example.com/{n}"),
        "email" | "idn-email" => format!("user{n}@example.com"),
        "uuid" => format!("00000000-0000-4000-8000-{n:012}"),
        "hostname" | "idn-hostname" => format!("host{n}.example.com"),
        "ipv4" => format!("192.0.2.{n}"),
        "ipv6" => format!("2001:db8::{n:x}"),
        _ => return None,
    })
}

/// A string matching `pattern` within the length bounds, for the patterns whose shortest match
/// is found by taking each repetition's minimum and each alternation's first branch.
fn from_pattern(pattern: &str, min: u64, max: Option<u64>) -> Option<String> {
    let hir = regex_syntax::parse(pattern).ok()?;
    let mut text = String::new();
    shortest(&hir, &mut text, 0)?;
    let matcher = regex::Regex::new(pattern).ok()?;
    // Padding keeps an unanchored match; the regex check refuses it when the pattern is anchored.
    while (text.chars().count() as u64) < min {
        text.push('a');
    }
    let fits = max.is_none_or(|m| text.chars().count() as u64 <= m);
    (fits && matcher.is_match(&text)).then_some(text)
}

fn shortest(hir: &Hir, out: &mut String, depth: usize) -> Option<()> {
    if depth > MAX_DEPTH || out.len() as u64 > MAX_STRING_CHARS {
        return None;
    }
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(literal) => out.push_str(std::str::from_utf8(&literal.0).ok()?),
        HirKind::Class(Class::Unicode(class)) => {
            let pick = ['a', '0', 'A'].into_iter().find(|c| {
                class
                    .ranges()
                    .iter()
                    .any(|r| r.start() <= *c && *c <= r.end())
            });
            out.push(pick.or_else(|| class.ranges().first().map(|r| r.start()))?);
        }
        HirKind::Class(Class::Bytes(_)) => return None,
        HirKind::Repetition(repetition) => {
            for _ in 0..repetition.min {
                shortest(&repetition.sub, out, depth + 1)?;
            }
        }
        HirKind::Capture(capture) => shortest(&capture.sub, out, depth + 1)?,
        HirKind::Concat(parts) => {
            for part in parts {
                shortest(part, out, depth + 1)?;
            }
        }
        HirKind::Alternation(branches) => shortest(branches.first()?, out, depth + 1)?,
    }
    Some(())
}

/// The smallest number in bounds (0 when unbounded below and 0 fits), a multiple of
/// `multipleOf` when given, offset by `variant` steps.
fn number(schema: &Map<String, Value>, integer: bool, variant: u64) -> Option<Value> {
    let get = |k: &str| schema.get(k).and_then(Value::as_f64);
    let step = get("multipleOf").filter(|m| *m > 0.0);
    let unit = step.unwrap_or(1.0);
    let lower = match (get("minimum"), get("exclusiveMinimum")) {
        (Some(a), Some(b)) => Some(Bound::tighter_lower(
            Bound::Inclusive(a),
            Bound::Exclusive(b),
        )),
        (Some(a), None) => Some(Bound::Inclusive(a)),
        (None, Some(b)) => Some(Bound::Exclusive(b)),
        (None, None) => None,
    };
    let upper = match (get("maximum"), get("exclusiveMaximum")) {
        (Some(a), Some(b)) => Some(if b <= a {
            Bound::Exclusive(b)
        } else {
            Bound::Inclusive(a)
        }),
        (Some(a), None) => Some(Bound::Inclusive(a)),
        (None, Some(b)) => Some(Bound::Exclusive(b)),
        (None, None) => None,
    };
    let fits = |x: f64| lower.is_none_or(|l| l.below(x)) && upper.is_none_or(|u| u.above(x));
    // Integers (and multiples of the step) first: they suit both `integer` and `number`. Search
    // upwards from the lower bound (or 0), or downwards from a negative upper bound.
    let grid = if integer && step.is_none() { 1.0 } else { unit };
    let (first, direction) = match (lower, upper) {
        (Some(l), _) => ((l.value() / grid).floor() * grid, 1.0),
        (None, Some(u)) if u.value() < 0.0 => ((u.value() / grid).ceil() * grid, -1.0),
        _ => (0.0, 1.0),
    };
    let candidate = (0..=64u32)
        .map(|k| first + direction * grid * f64::from(k))
        .filter(|x| fits(*x) && (!integer || x.fract() == 0.0))
        .nth(usize::try_from(variant % 8).ok()?)
        .or_else(|| {
            // A real-valued gap narrower than the step, e.g. 0 < x < 1.
            let mid = (lower?.value() + upper?.value()) / 2.0;
            (!integer && step.is_none() && fits(mid)).then_some(mid)
        })?;
    if candidate.fract() == 0.0 && candidate.abs() < 9.0e15 {
        // Integral and within i64's exact range, so the cast is exact.
        return Some(Value::Number(Number::from(candidate as i64)));
    }
    Number::from_f64(candidate).map(Value::Number)
}

#[derive(Clone, Copy)]
enum Bound {
    Inclusive(f64),
    Exclusive(f64),
}

impl Bound {
    fn value(self) -> f64 {
        match self {
            Bound::Inclusive(v) | Bound::Exclusive(v) => v,
        }
    }

    /// The tighter of two lower bounds.
    fn tighter_lower(a: Bound, b: Bound) -> Bound {
        if b.value() >= a.value() { b } else { a }
    }

    fn below(self, x: f64) -> bool {
        match self {
            Bound::Inclusive(v) => v <= x,
            Bound::Exclusive(v) => v < x,
        }
    }

    fn above(self, x: f64) -> bool {
        match self {
            Bound::Inclusive(v) => x <= v,
            Bound::Exclusive(v) => x < v,
        }
    }
}
