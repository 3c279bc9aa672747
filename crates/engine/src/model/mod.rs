//! Plain data, the ground floor (`docs/engine.md` §10): sessions and their ids, sign-off,
//! check records, audit entries, the audit chain's digests and its pure verification, the seals over its heads, the
//! provenance shapes and keys, checkpoints, codes, bounds, requests and payload shapes. Nothing
//! here reads a store or judges a call; it imports only the registry and itself.

pub(crate) mod approval;
pub(crate) mod audit;
pub(crate) mod bounds;
pub(crate) mod chain;
pub(crate) mod checkpoint;
pub(crate) mod checks;
pub(crate) mod codes;
pub(crate) mod notify;
pub(crate) mod payload;
pub(crate) mod provenance;
pub(crate) mod request;
pub(crate) mod seal;
pub(crate) mod session;
