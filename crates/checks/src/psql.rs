//! psql scripts as the server receives them. A migration written for psql mixes SQL with psql's
//! own meta-commands (`\set ON_ERROR_STOP on`, `\if :{?phase}`, `SELECT … \gset`) and variables
//! (`:'name'`, `:"name"`, `:name`), which no SQL parser reads. psql strips the one and
//! substitutes the other before any byte reaches PostgreSQL; this does the same, byte for byte
//! in length, so every offset (and line) squawk reports is the offset in the author's file.
//!
//! A file is read as a psql script only when a line of it starts with a meta-command (`\`): plain
//! SQL, where `a[lo:hi]` is an array slice, passes through unchanged.

use std::borrow::Cow;

/// The SQL psql would send for `text`, of the same length: each meta-command becomes spaces
/// (`\gset` and friends, which end the query before them, a `;` and spaces), and each variable
/// a placeholder of its own length (`:'name'` a string literal, `:"name"` a quoted identifier,
/// `:name` and `:{?name}` an identifier), outside quotes, dollar quotes and comments.
pub(crate) fn as_sent(text: &str) -> Cow<'_, str> {
    let script = text.lines().any(|l| l.trim_start().starts_with('\\'));
    if !script {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    // The closing tag of an open dollar quote (`$$` or `$tag$`).
    let mut dollar: Option<Vec<u8>> = None;
    while i < bytes.len() {
        if let Some(tag) = &dollar {
            if bytes[i..].starts_with(tag) {
                i += tag.len();
                dollar = None;
            } else {
                i += 1;
            }
            continue;
        }
        match bytes[i] {
            b'\'' | b'"' => i = skip_quoted(bytes, i),
            b'-' if bytes.get(i + 1) == Some(&b'-') => i = line_end(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = find(bytes, i + 2, b"*/").map_or(bytes.len(), |e| e + 2);
            }
            b'$' => match dollar_tag(bytes, i) {
                Some(tag) => {
                    i += tag.len();
                    dollar = Some(tag);
                }
                None => i += 1,
            },
            b'\\' => {
                // A meta-command runs to the end of its line. `\g` and its kin (`\gset`,
                // `\gexec`, `\gx`) send the query before them, as a semicolon would.
                let end = line_end(bytes, i);
                let sends = bytes.get(i + 1) == Some(&b'g');
                out[i..end].fill(b' ');
                if sends {
                    out[i] = b';';
                }
                i = end;
            }
            b':' => i = variable(bytes, &mut out, i),
            _ => i += 1,
        }
    }
    // Every write replaces a `:` or a whole meta-command (to the end of its line) with ASCII, so
    // no multi-byte character is split and the lossy path never runs.
    Cow::Owned(
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

/// Replaces the psql variable at `i` (a `:`), if any, and returns where scanning goes on.
fn variable(bytes: &[u8], out: &mut [u8], i: usize) -> usize {
    let prev = i.checked_sub(1).map(|p| bytes[p]);
    let next = bytes.get(i + 1).copied();
    // `::` casts and `:=` assignments are SQL, not variables.
    if prev == Some(b':') || matches!(next, Some(b':' | b'=')) {
        return i + 1;
    }
    match next {
        Some(quote @ (b'\'' | b'"')) => {
            let Some(close) = bytes[i + 2..]
                .iter()
                .position(|&b| b == quote || b == b'\n')
            else {
                return i + 1;
            };
            let end = i + 2 + close;
            if bytes[end] != quote {
                return i + 1;
            }
            // `:'name'` → ` 'name'`: a literal (or quoted identifier) where the value goes.
            out[i] = b' ';
            end + 1
        }
        Some(b'{') if bytes.get(i + 2) == Some(&b'?') => {
            let Some(close) = bytes[i..].iter().position(|&b| b == b'}' || b == b'\n') else {
                return i + 1;
            };
            let end = i + close;
            if bytes[end] != b'}' {
                return i + 1;
            }
            // `:{?name}` tests whether a variable is set: a boolean where psql puts one.
            out[i..=end].fill(b' ');
            out[i..i + 4].copy_from_slice(b"true");
            end + 1
        }
        Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
            out[i] = b' ';
            i + 1
        }
        _ => i + 1,
    }
}

fn skip_quoted(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        if bytes[i] == quote {
            // A doubled quote is an escaped one.
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    bytes.len()
}

fn line_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| from + p)
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

/// The dollar-quote tag starting at `i` (`$$`, `$body$`), if one does.
fn dollar_tag(bytes: &[u8], i: usize) -> Option<Vec<u8>> {
    let rest = &bytes[i + 1..];
    let len = rest.iter().position(|&b| b == b'$').filter(|&n| {
        rest[..n]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_')
    })?;
    // `$1` is a parameter, not a tag.
    if rest.first().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    Some(bytes[i..i + len + 2].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_sql_passes_through() {
        let sql = "SELECT a[lo:hi], 'x'::text FROM t;\n";
        assert!(matches!(as_sent(sql), Cow::Borrowed(_)));
    }

    #[test]
    fn meta_commands_and_variables_keep_every_offset() {
        let script = "\\set ON_ERROR_STOP on\n\\if :{?phase}\nSELECT :'phase', x::int FROM t WHERE n = :batch \\gset\n\\endif\nDO $$ BEGIN x := ':y'; END $$;\n";
        let sent = as_sent(script);
        assert_eq!(sent.len(), script.len());
        let lines: Vec<&str> = sent.lines().collect();
        assert_eq!(lines[0].trim(), "");
        assert_eq!(lines[1].trim(), "");
        assert_eq!(
            lines[2],
            "SELECT  'phase', x::int FROM t WHERE n =  batch ;    "
        );
        assert_eq!(lines[4], "DO $$ BEGIN x := ':y'; END $$;");
    }
}
