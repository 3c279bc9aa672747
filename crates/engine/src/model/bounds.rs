//! Bounds on what one request may make the engine do or say, and the cheap measures that check
//! them before the expensive work (docs/engine.md §1.1).

use std::{fmt, io};

/// The most schema errors one failure lists; `detail.error_count` gives the total.
pub const MAX_SCHEMA_ERRORS: usize = 20;

/// The most characters of one schema error message; longer ones are cut and end in `…`.
pub const MAX_SCHEMA_ERROR_CHARS: usize = 200;

/// The most globs a repository policy may forbid.
pub const MAX_FORBIDDEN_PATHS: usize = 64;

/// The most bytes of one forbidden-path glob.
pub const MAX_GLOB_BYTES: usize = 1024;

/// The most characters of a library's reason (which may quote input) an error message carries.
pub(crate) const MAX_CAUSE_CHARS: usize = 200;

/// The most characters of caller input an error message quotes.
pub(crate) const MAX_ECHO_CHARS: usize = 32;

/// Counts serialized bytes, so sizing a value allocates nothing.
struct ByteCount(usize);

impl io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The length of `value` as compact JSON: the length of its canonical form too, since sorting
/// keys does not change it.
pub(crate) fn json_len(value: &impl serde::Serialize) -> usize {
    let mut count = ByteCount(0);
    serde_json::to_writer(&mut count, value).expect("counting never fails");
    count.0
}

/// Collects at most `max` characters and then refuses more, so formatting a value that would
/// render huge stops early.
struct Capped {
    text: String,
    left: usize,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            if self.left == 0 {
                return Err(fmt::Error);
            }
            self.text.push(c);
            self.left -= 1;
        }
        Ok(())
    }
}

/// `value` displayed, cut to `max` characters (ending in `…` when cut) without rendering the rest.
pub(crate) fn display_capped(value: &impl fmt::Display, max: usize) -> String {
    let mut capped = Capped {
        text: String::new(),
        left: max,
    };
    if fmt::write(&mut capped, format_args!("{value}")).is_err() {
        capped.text.pop();
        capped.text.push('…');
    }
    capped.text
}

/// At most [`MAX_ECHO_CHARS`] characters of caller input, quoted, for an error message.
pub(crate) fn echo(input: &str) -> String {
    let shown = display_capped(&input, MAX_ECHO_CHARS);
    format!("{shown:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_cut_to_the_bound_with_an_ellipsis() {
        assert_eq!(display_capped(&"abc", 3), "abc");
        assert_eq!(display_capped(&"abcd", 3), "ab…");
        assert_eq!(display_capped(&"ééééé", 4).chars().count(), 4);
        assert_eq!(echo(&"x".repeat(1000)).chars().count(), MAX_ECHO_CHARS + 2);
    }

    #[test]
    fn json_len_is_the_compact_length() {
        let v = serde_json::json!({"b": [1, "x"], "a": null});
        assert_eq!(json_len(&v), serde_json::to_vec(&v).unwrap().len());
    }
}
