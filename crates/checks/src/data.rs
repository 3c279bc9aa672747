//! The parsed forms of data inputs: `input.csv`, `input.json` and `input.yaml`. These parsers
//! stop at the first error, which becomes a `parse_error` finding at its line.

use rhai::{Array, Dynamic, Map};

use crate::{Finding, Severity};

/// The rule id of the finding an input that its own format cannot parse gets.
pub const PARSE_ERROR_RULE: &str = "parse_error";

/// serde_norway's recursion limit.
const MAX_YAML_FLOW_DEPTH: usize = 128;

fn parse_error(input: &str, line: Option<u64>, message: String) -> Finding {
    let line = line.and_then(|l| u32::try_from(l).ok()).filter(|&l| l > 0);
    Finding::new(PARSE_ERROR_RULE, Severity::Error, message).at(input, line)
}

/// `input.csv`: `header` (an array of names) and `rows`, each `#{ line, values, fields }` where
/// `fields` maps a header name to the row's value.
pub(crate) fn csv(input: &str, text: &str) -> Result<Dynamic, Finding> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(text.as_bytes());
    let csv_error = |e: csv::Error| {
        let line = e.position().map(csv::Position::line);
        parse_error(input, line, format!("CSV does not parse: {e}"))
    };
    let header: Vec<String> = reader
        .headers()
        .map_err(csv_error)?
        .iter()
        .map(str::to_owned)
        .collect();
    let mut rows = Array::new();
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(csv_error)? {
        let line = record.position().map_or(0, csv::Position::line);
        let values: Array = record.iter().map(|v| Dynamic::from(v.to_owned())).collect();
        let fields: Map = header
            .iter()
            .zip(record.iter())
            .map(|(name, value)| (name.as_str().into(), Dynamic::from(value.to_owned())))
            .collect();
        let mut row = Map::new();
        row.insert(
            "line".into(),
            Dynamic::from_int(i64::try_from(line).unwrap_or(i64::MAX)),
        );
        row.insert("values".into(), values.into());
        row.insert("fields".into(), fields.into());
        rows.push(row.into());
    }
    let mut map = Map::new();
    map.insert(
        "header".into(),
        header
            .into_iter()
            .map(Dynamic::from)
            .collect::<Array>()
            .into(),
    );
    map.insert("rows".into(), rows.into());
    Ok(map.into())
}

/// `input.json`: the document as maps, arrays, strings, integers, floats, booleans and `()`.
/// serde_json's own nesting limit (128) bounds the recursion here.
pub(crate) fn json(input: &str, text: &str) -> Result<Dynamic, Finding> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        let line = u64::try_from(e.line()).ok();
        parse_error(input, line, format!("JSON does not parse: {e}"))
    })?;
    Ok(from_json(value))
}

fn from_json(value: serde_json::Value) -> Dynamic {
    use serde_json::Value;
    match value {
        Value::Null => Dynamic::UNIT,
        Value::Bool(b) => b.into(),
        Value::Number(n) => number(n.as_i64(), n.as_f64()),
        Value::String(s) => s.into(),
        Value::Array(items) => items.into_iter().map(from_json).collect::<Array>().into(),
        Value::Object(entries) => entries
            .into_iter()
            .map(|(k, v)| (k.into(), from_json(v)))
            .collect::<Map>()
            .into(),
    }
}

/// `input.yaml`: like `input.json`; keys that are not strings are written as YAML would print
/// them, and tags are dropped. serde_norway bounds nesting and alias expansion.
pub(crate) fn yaml(input: &str, text: &str) -> Result<Dynamic, Finding> {
    // libyaml's scanner slows quadratically with open flow collections long before
    // serde_norway's own nesting limit refuses them; refuse them first, at that same limit.
    let mut depth = 0usize;
    for (offset, byte) in text.bytes().enumerate() {
        match byte {
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => continue,
        }
        if depth > MAX_YAML_FLOW_DEPTH {
            let line = text[..offset].matches('\n').count() + 1;
            let message = format!("YAML nests more than {MAX_YAML_FLOW_DEPTH} brackets");
            return Err(parse_error(input, u64::try_from(line).ok(), message));
        }
    }
    let value: serde_norway::Value = serde_norway::from_str(text).map_err(|e| {
        let line = e.location().and_then(|l| u64::try_from(l.line()).ok());
        parse_error(input, line, format!("YAML does not parse: {e}"))
    })?;
    Ok(from_yaml(value))
}

fn from_yaml(value: serde_norway::Value) -> Dynamic {
    use serde_norway::Value;
    match value {
        Value::Null => Dynamic::UNIT,
        Value::Bool(b) => b.into(),
        Value::Number(n) => number(n.as_i64(), n.as_f64()),
        Value::String(s) => s.into(),
        Value::Sequence(items) => items.into_iter().map(from_yaml).collect::<Array>().into(),
        Value::Mapping(entries) => entries
            .into_iter()
            .map(|(k, v)| (yaml_key(k).into(), from_yaml(v)))
            .collect::<Map>()
            .into(),
        Value::Tagged(tagged) => from_yaml(tagged.value),
    }
}

fn yaml_key(key: serde_norway::Value) -> String {
    match key {
        serde_norway::Value::String(s) => s,
        other => serde_norway::to_string(&other)
            .map(|s| s.trim_end().to_owned())
            .unwrap_or_default(),
    }
}

fn number(int: Option<i64>, float: Option<f64>) -> Dynamic {
    match (int, float) {
        (Some(i), _) => Dynamic::from_int(i),
        (None, Some(f)) => Dynamic::from_float(f),
        (None, None) => Dynamic::UNIT,
    }
}
