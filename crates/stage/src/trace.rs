//! The W3C trace context a staged session carries (`docs/operations/tracing.md`): every request
//! of a run sends the same `traceparent`, in its `_meta` and, over HTTP, as a header, so the
//! server's spans for the whole session fall under one trace.

use std::{fmt, str::FromStr};

/// A `traceparent` of version `00`: a trace id, the caller's span id, and the sampled flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    trace_id: u128,
    parent_id: u64,
    flags: u8,
}

/// Why a `traceparent` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not a W3C traceparent: use 00-<32 hex digits, the trace id>-<16 hex digits, the parent span id>-<2 hex digits, the flags>, lowercase, neither id all zeros (e.g. 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01)"
)]
pub struct TraceParentError;

impl TraceParent {
    /// A new trace, sampled, with random ids.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 24];
        getrandom::fill(&mut bytes).expect("the system's random source works");
        let trace_id = u128::from_be_bytes(bytes[..16].try_into().expect("16 bytes"));
        let parent_id = u64::from_be_bytes(bytes[16..].try_into().expect("8 bytes"));
        // All zeros is invalid; a random draw of them is as good as impossible, but not a panic.
        Self {
            trace_id: trace_id.max(1),
            parent_id: parent_id.max(1),
            flags: 1,
        }
    }

    /// The trace id, as 32 lowercase hex digits: what a tracing backend finds the trace by.
    pub fn trace_id(&self) -> String {
        format!("{:032x}", self.trace_id)
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id, self.parent_id, self.flags
        )
    }
}

impl FromStr for TraceParent {
    type Err = TraceParentError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        fn hex(part: &str, digits: usize) -> Result<&str, TraceParentError> {
            (part.len() == digits && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
                .then_some(part)
                .ok_or(TraceParentError)
        }
        let mut parts = s.split('-');
        let (Some(version), Some(trace), Some(parent), Some(flags), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(TraceParentError);
        };
        if version != "00" {
            return Err(TraceParentError);
        }
        let parsed = Self {
            trace_id: u128::from_str_radix(hex(trace, 32)?, 16).map_err(|_| TraceParentError)?,
            parent_id: u64::from_str_radix(hex(parent, 16)?, 16).map_err(|_| TraceParentError)?,
            flags: u8::from_str_radix(hex(flags, 2)?, 16).map_err(|_| TraceParentError)?,
        };
        if parsed.trace_id == 0 || parsed.parent_id == 0 {
            return Err(TraceParentError);
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_back_as_written() {
        let given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed: TraceParent = given.parse().unwrap();
        assert_eq!(parsed.to_string(), given);
        assert_eq!(parsed.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let fresh = TraceParent::generate();
        assert_eq!(fresh.to_string().parse::<TraceParent>().unwrap(), fresh);
    }

    #[test]
    fn a_malformed_traceparent_is_refused() {
        for refused in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(
                refused.parse::<TraceParent>(),
                Err(TraceParentError),
                "{refused}"
            );
        }
    }
}
