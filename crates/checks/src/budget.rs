//! What one run may spend before its script starts: the memory its inputs' parsed forms hold,
//! and the one deadline that covers parsing, linting and the script (`docs/checks.md` §Bounds).
//!
//! A parsed form can cost far more than its text: every element is a map with its own strings,
//! and a naive builder copies text into each enclosing element (a quotation inside a quotation
//! inside a list item), a heading into every element of its section, or a CSV header into every
//! row. The builders here share what they can (`ImmutableString` clones are reference counts)
//! and charge the rest to a [`Budget`] as they build, so a hostile input is stopped at a stated
//! size, not at the machine's memory. The charges are estimates of the allocations a value
//! makes on a 64-bit target (`crates/checks/tests/hostile.rs` holds them to the allocator's
//! own count).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// Estimated bytes of a string value: its `Dynamic`, the shared allocation behind an
/// `ImmutableString`, and its text.
pub(crate) const fn string(len: usize) -> usize {
    16 + 48 + len
}

/// Estimated bytes of a map value with `entries` entries, keys and values not counted: its
/// `Dynamic`, its box, and B-tree nodes, each allocated whole (eleven entries) however few it
/// holds.
pub(crate) const fn map(entries: usize) -> usize {
    let nodes = if 48 * entries > 464 {
        48 * entries
    } else {
        464
    };
    16 + 24 + nodes
}

/// Estimated bytes of a map key: inline up to 23 bytes, on the heap past that.
pub(crate) const fn key(len: usize) -> usize {
    if len <= 23 { 0 } else { 16 + len }
}

/// Estimated bytes of an array value of `len` elements, elements not counted; a vector grown
/// by pushing holds up to twice what it uses.
pub(crate) const fn array(len: usize) -> usize {
    16 + 24 + 32 * len
}

/// Why building stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spent {
    /// The parsed forms would hold more than the budget.
    Memory,
    /// The run's deadline passed.
    Time,
}

/// The bytes one run's parsed forms may still take, and the flag its deadline raises.
pub(crate) struct Budget<'a> {
    left: Cell<usize>,
    spent: Cell<Option<Spent>>,
    stop: &'a AtomicBool,
}

impl<'a> Budget<'a> {
    pub(crate) fn new(bytes: usize, stop: &'a AtomicBool) -> Self {
        Self {
            left: Cell::new(bytes),
            spent: Cell::new(None),
            stop,
        }
    }

    /// Takes `bytes` from the budget, or says why the build must stop.
    pub(crate) fn spend(&self, bytes: usize) -> Result<(), Spent> {
        let outcome = if self.stop.load(Ordering::Relaxed) {
            Err(Spent::Time)
        } else {
            self.left.get().checked_sub(bytes).ok_or(Spent::Memory)
        };
        match outcome {
            Ok(left) => {
                self.left.set(left);
                Ok(())
            }
            Err(spent) => {
                self.spent.set(Some(spent));
                Err(spent)
            }
        }
    }

    /// Why a `spend` failed, once one has.
    pub(crate) fn spent(&self) -> Option<Spent> {
        self.spent.get()
    }
}

/// Why an input has no parsed form.
#[derive(Debug)]
pub(crate) enum Unparsed {
    /// The input does not parse, or is past a structural limit: a `parse_error` finding.
    Error(crate::Finding),
    /// The budget or the deadline stopped the build.
    Spent(Spent),
}

impl From<Spent> for Unparsed {
    fn from(spent: Spent) -> Self {
        Self::Spent(spent)
    }
}
