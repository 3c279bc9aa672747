//! YAML frontmatter of Markdown files (`---` at byte 0, a closing `---` line, then the body).

use serde::de::DeserializeOwned;

/// Splits `text` into its frontmatter YAML and body, or `None` when it has no frontmatter. The
/// YAML keeps its opening `---` line, so a YAML parser counts lines exactly as the file does.
fn split(text: &str) -> Option<(&str, &str)> {
    let opening = if text.starts_with("---\n") {
        4
    } else if text.starts_with("---\r\n") {
        5
    } else {
        return None;
    };
    let mut offset = opening;
    for line in text[opening..].split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            return Some((&text[..offset], &text[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

/// A frontmatter that does not parse: the message, and the 1-based line of the file where
/// the YAML parser located the fault (the first line is the opening `---`).
#[derive(Debug)]
pub(crate) struct FrontmatterError {
    pub(crate) line: Option<usize>,
    pub(crate) message: String,
}

/// Parses the frontmatter of `text` as `T`, returning it with the body.
pub(crate) fn parse<T: DeserializeOwned>(text: &str) -> Result<(T, &str), String> {
    parse_located(text).map_err(|e| e.message)
}

/// [`parse`], keeping the line of the fault.
pub(crate) fn parse_located<T: DeserializeOwned>(
    text: &str,
) -> Result<(T, &str), FrontmatterError> {
    let (yaml, body) = split(text).ok_or_else(|| FrontmatterError {
        line: Some(1),
        message: "no YAML frontmatter: start the file with a '---' line and close it".into(),
    })?;
    // Parsed with its `---` document marker so the parser's line numbers are the file's.
    let value = serde_norway::from_str(yaml).map_err(|e| FrontmatterError {
        line: e.location().map(|l| l.line()),
        message: format!("frontmatter: {e}"),
    })?;
    Ok((value, body))
}

/// Renders `value` as a frontmatter block followed by `body`.
pub(crate) fn render<T: serde::Serialize>(value: &T, body: &str) -> String {
    let yaml = serde_norway::to_string(value).expect("frontmatter values serialize");
    format!("---\n{yaml}---\n\n{}\n", body.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_splits_from_body() {
        assert_eq!(
            split("---\na: 1\n---\nbody\n"),
            Some(("---\na: 1\n", "body\n"))
        );
        assert_eq!(split("no frontmatter"), None);
        assert_eq!(split("---\nunclosed\n"), None);
    }

    #[test]
    fn a_yaml_fault_is_located_on_the_file_line() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Two {
            a: u8,
            b: u8,
        }
        let err = parse_located::<Two>("---\na: 1\n\nb: [1]\n---\nbody\n").unwrap_err();
        assert_eq!(err.line, Some(4), "{}", err.message);
        let err = parse_located::<Two>("---\na: 1\nb: x\n---\n").unwrap_err();
        assert_eq!(err.line, Some(3), "{}", err.message);
    }
}
