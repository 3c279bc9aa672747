//! YAML frontmatter of Markdown files (`---` at byte 0, a closing `---` line, then the body).

use serde::de::DeserializeOwned;

/// Splits `text` into its frontmatter YAML and body, or `None` when it has no frontmatter.
pub(crate) fn split(text: &str) -> Option<(&str, &str)> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

/// Parses the frontmatter of `text` as `T`, returning it with the body.
pub(crate) fn parse<T: DeserializeOwned>(text: &str) -> Result<(T, &str), String> {
    let (yaml, body) =
        split(text).ok_or("no YAML frontmatter: start the file with a '---' line and close it")?;
    let value = serde_norway::from_str(yaml).map_err(|e| format!("frontmatter: {e}"))?;
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
        assert_eq!(split("---\na: 1\n---\nbody\n"), Some(("a: 1\n", "body\n")));
        assert_eq!(split("no frontmatter"), None);
        assert_eq!(split("---\nunclosed\n"), None);
    }
}
