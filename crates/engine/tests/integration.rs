//! Engine behaviour tests: one binary, one module per concern.

mod attestations;
mod backends;
mod blockers;
mod common;
mod submissions;
