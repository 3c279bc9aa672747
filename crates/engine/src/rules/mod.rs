//! Pure judgements over plain data (`docs/engine.md` §10): the session's pinned view of its
//! release, blockers and offers, attestations, report sets, deterministic checks, who may sign
//! off, and [`transition`], the one place a session's stage changes. Nothing here reads or
//! writes a store: what a rule needs is handed to it, and what it decides is returned.

pub(crate) mod approval;
pub(crate) mod attestation;
pub(crate) mod blockers;
pub(crate) mod checks;
pub(crate) mod notify;
pub(crate) mod offers;
pub(crate) mod reports;
pub(crate) mod schema;
pub(crate) mod timer;
pub(crate) mod transition;
pub(crate) mod view;
