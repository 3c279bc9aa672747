//! The inputs a check reads: named texts, bounded and checked to be text before any parser
//! runs, each with the parsed form its format names.

use crate::{CheckError, Limits};

/// Which parser gives a check the parsed form of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Text only.
    Text,
    /// CommonMark with tables and footnotes (`input.markdown`).
    Markdown,
    /// CSV with a header row (`input.csv`).
    Csv,
    /// JSON (`input.json`).
    Json,
    /// YAML (`input.yaml`).
    Yaml,
    /// SQL, split into statements by squawk's PostgreSQL parser (`input.sql`).
    Sql,
}

impl Format {
    /// The format a file's name implies by its extension; `Text` for any other.
    pub fn from_path(path: &str) -> Self {
        let extension = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        match extension.as_deref() {
            Some("md" | "markdown") => Self::Markdown,
            Some("csv") => Self::Csv,
            Some("json") => Self::Json,
            Some("yaml" | "yml") => Self::Yaml,
            Some("sql") => Self::Sql,
            _ => Self::Text,
        }
    }

    /// The lowercase name a check sees in `input.format`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Markdown => "markdown",
            Self::Csv => "csv",
            Self::Json => "json",
            Self::Yaml => "yaml",
            Self::Sql => "sql",
        }
    }
}

/// One named input to a check: the bytes of an output as the participant produced it.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    name: &'a str,
    bytes: &'a [u8],
    format: Format,
}

impl<'a> Input<'a> {
    /// An input whose format follows from its name (`Format::from_path`).
    pub fn new(name: &'a str, bytes: &'a [u8]) -> Self {
        Self::with_format(name, bytes, Format::from_path(name))
    }

    /// An input read with the given format.
    pub fn with_format(name: &'a str, bytes: &'a [u8], format: Format) -> Self {
        Self {
            name,
            bytes,
            format,
        }
    }

    /// The input's name (the output's path, as findings report it).
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// Its bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The format it is parsed with.
    pub fn format(&self) -> Format {
        self.format
    }
}

/// An input that passed the byte and text bounds.
pub(crate) struct TextInput<'a> {
    pub(crate) name: &'a str,
    pub(crate) text: &'a str,
    pub(crate) format: Format,
}

/// An admitted input copied for a run on another thread, which owns what it reads.
pub(crate) struct OwnedText {
    name: String,
    text: String,
    format: Format,
}

impl OwnedText {
    pub(crate) fn of(input: &TextInput<'_>) -> Self {
        Self {
            name: input.name.to_owned(),
            text: input.text.to_owned(),
            format: input.format,
        }
    }

    pub(crate) fn borrow(&self) -> TextInput<'_> {
        TextInput {
            name: &self.name,
            text: &self.text,
            format: self.format,
        }
    }
}

/// Checks the set of inputs and each input against `limits` before anything parses them.
pub(crate) fn admit<'a>(
    inputs: &[Input<'a>],
    limits: &Limits,
) -> Result<Vec<TextInput<'a>>, CheckError> {
    if inputs.len() > limits.max_inputs {
        return Err(CheckError::InputsInvalid {
            reason: format!(
                "{} inputs, over the limit of {}",
                inputs.len(),
                limits.max_inputs
            ),
        });
    }
    let mut admitted: Vec<TextInput<'a>> = Vec::with_capacity(inputs.len());
    for input in inputs {
        if admitted.iter().any(|a| a.name == input.name) {
            return Err(CheckError::InputsInvalid {
                reason: format!("two inputs are named `{}`", input.name),
            });
        }
        if input.bytes.len() > limits.max_input_bytes {
            return Err(CheckError::InputTooLarge {
                input: input.name.to_owned(),
                bytes: input.bytes.len(),
                limit: limits.max_input_bytes,
            });
        }
        let text = std::str::from_utf8(input.bytes).map_err(|e| CheckError::InputNotText {
            input: input.name.to_owned(),
            offset: e.valid_up_to(),
        })?;
        // A NUL byte is valid UTF-8 but marks a binary file, which no text parser should see.
        if let Some(offset) = text.bytes().position(|b| b == 0) {
            return Err(CheckError::InputNotText {
                input: input.name.to_owned(),
                offset,
            });
        }
        admitted.push(TextInput {
            name: input.name,
            text,
            format: input.format,
        });
    }
    Ok(admitted)
}

/// Byte offset to 1-based line, for every parser that reports offsets.
pub(crate) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { starts }
    }

    pub(crate) fn line(&self, offset: usize) -> u32 {
        let line = self.starts.partition_point(|&start| start <= offset);
        u32::try_from(line).unwrap_or(u32::MAX)
    }
}
