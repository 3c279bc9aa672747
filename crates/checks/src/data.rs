//! The parsed forms of data inputs: `input.csv`, `input.json` and `input.yaml`. These parsers
//! stop at the first error, which becomes a `parse_error` finding at its line. JSON and YAML
//! are read straight into the values a script sees, each charged to the run's budget as it is
//! made, so a YAML alias repeated a million times stops at the budget, not in memory.

use std::fmt;

use rhai::{Array, Dynamic, ImmutableString, Map};
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

use crate::budget::{self, Budget, Unparsed};
use crate::{Finding, Severity};

/// The rule id of the finding an input that its own format cannot parse gets.
pub const PARSE_ERROR_RULE: &str = "parse_error";

/// serde_norway's recursion limit.
const MAX_YAML_FLOW_DEPTH: usize = 128;

pub(crate) fn parse_error(input: &str, line: Option<u64>, message: String) -> Finding {
    let line = line.and_then(|l| u32::try_from(l).ok()).filter(|&l| l > 0);
    Finding::new(PARSE_ERROR_RULE, Severity::Error, message).at(input, line)
}

/// `input.csv`: `header` (an array of names) and `rows`, each `#{ line, values, fields }` where
/// `fields` maps a header name to the row's value.
pub(crate) fn csv(input: &str, text: &str, budget: &Budget<'_>) -> Result<Dynamic, Unparsed> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(text.as_bytes());
    let csv_error = |e: csv::Error| {
        let line = e.position().map(csv::Position::line);
        Unparsed::Error(parse_error(input, line, format!("CSV does not parse: {e}")))
    };
    let header: Vec<ImmutableString> = reader
        .headers()
        .map_err(csv_error)?
        .iter()
        .map(ImmutableString::from)
        .collect();
    let header_cost: usize = header.iter().map(|h| budget::string(h.len())).sum();
    budget.spend(header_cost + budget::array(header.len()) + budget::map(2))?;
    // A row's `fields` keys are copies of the header's names (a map key is not shared).
    let keys_cost: usize = header.iter().map(|h| budget::key(h.len())).sum();
    let mut rows = Array::new();
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(csv_error)? {
        let line = record.position().map_or(0, csv::Position::line);
        let values_cost: usize = record.iter().map(|v| budget::string(v.len())).sum();
        let width = record.len();
        // Each value is one string, shared by `values` and `fields`.
        budget.spend(
            values_cost
                + 16 * width
                + keys_cost
                + budget::array(width)
                + budget::map(width)
                + budget::map(3)
                + 16,
        )?;
        let shared: Vec<ImmutableString> = record.iter().map(ImmutableString::from).collect();
        let values: Array = shared.iter().cloned().map(Dynamic::from).collect();
        let fields: Map = header
            .iter()
            .zip(shared)
            .map(|(name, value)| (name.as_str().into(), Dynamic::from(value)))
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
pub(crate) fn json(input: &str, text: &str, budget: &Budget<'_>) -> Result<Dynamic, Unparsed> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Value { budget }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| {
            spent(budget).unwrap_or_else(|| {
                let line = u64::try_from(e.line()).ok();
                Unparsed::Error(parse_error(
                    input,
                    line,
                    format!("JSON does not parse: {e}"),
                ))
            })
        })?;
    Ok(value)
}

/// Why the budget stopped a build, when it did: the deserializers pass on only a message.
fn spent(budget: &Budget<'_>) -> Option<Unparsed> {
    budget.spent().map(Unparsed::Spent)
}

/// `input.yaml`: like `input.json`; keys that are not strings are written as YAML would print
/// them, and tags are dropped. serde_norway bounds nesting; alias
/// expansion is charged to the budget like any other value.
pub(crate) fn yaml(input: &str, text: &str, budget: &Budget<'_>) -> Result<Dynamic, Unparsed> {
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
            let line = u64::try_from(line).ok();
            return Err(Unparsed::Error(parse_error(input, line, message)));
        }
    }
    let de = serde_norway::Deserializer::from_str(text);
    Value { budget }.deserialize(de).map_err(|e| {
        spent(budget).unwrap_or_else(|| {
            let line = e.location().and_then(|l| u64::try_from(l.line()).ok());
            Unparsed::Error(parse_error(
                input,
                line,
                format!("YAML does not parse: {e}"),
            ))
        })
    })
}

/// Reads one value of a self-describing format into the `Dynamic` a script sees, charging the
/// run's budget for each value as it is made. YAML tags are dropped; a key that is not a
/// string is written as YAML would print it.
#[derive(Clone, Copy)]
struct Value<'b, 'a> {
    budget: &'b Budget<'a>,
}

impl Value<'_, '_> {
    fn charge<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        self.budget
            .spend(bytes)
            .map_err(|_| E::custom("the parsed form is over its budget"))
    }
}

impl<'de> DeserializeSeed<'de> for Value<'_, '_> {
    type Value = Dynamic;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Dynamic, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Value<'_, '_> {
    type Value = Dynamic;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Dynamic, E> {
        self.charge(16)?;
        Ok(v.into())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dynamic, E> {
        self.charge(16)?;
        Ok(Dynamic::from_int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dynamic, E> {
        self.charge(16)?;
        Ok(match i64::try_from(v) {
            Ok(i) => Dynamic::from_int(i),
            // As serde_json's `Number::as_f64`: past i64, the nearest float.
            Err(_) => Dynamic::from_float(v as f64),
        })
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dynamic, E> {
        self.charge(16)?;
        Ok(Dynamic::from_float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Dynamic, E> {
        self.charge(budget::string(v.len()))?;
        Ok(v.into())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Dynamic, E> {
        self.charge(16)?;
        Ok(Dynamic::UNIT)
    }

    fn visit_none<E: de::Error>(self) -> Result<Dynamic, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Dynamic, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Dynamic, A::Error> {
        self.charge(budget::array(0))?;
        let mut items = Array::new();
        while let Some(item) = seq.next_element_seed(self)? {
            self.charge(16)?;
            items.push(item);
        }
        Ok(items.into())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Dynamic, A::Error> {
        self.charge(budget::map(0))?;
        let mut map = Map::new();
        while let Some(key) = entries.next_key_seed(Key(self))? {
            self.charge(48 + budget::key(key.len()))?;
            let value = entries.next_value_seed(self)?;
            map.insert(key.into(), value);
        }
        Ok(map.into())
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Dynamic, A::Error> {
        let (_tag, contents): (de::IgnoredAny, _) = data.variant()?;
        contents.newtype_variant_seed(self)
    }
}

/// A map key: a string as it is; a number, boolean or null as YAML prints it.
struct Key<'b, 'a>(Value<'b, 'a>);

impl<'de> DeserializeSeed<'de> for Key<'_, '_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_, '_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, number, boolean or null as a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        self.0.charge(v.len())?;
        Ok(v.to_owned())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        Ok(serde_norway::to_string(&v)
            .map(|s| s.trim_end().to_owned())
            .unwrap_or_default())
    }

    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        Ok("null".to_owned())
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<String, A::Error> {
        let (_tag, contents): (de::IgnoredAny, _) = data.variant()?;
        contents.newtype_variant_seed(self)
    }
}
