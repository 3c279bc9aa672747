//! What a session leaves to be verified by others (`docs/engine.md` §10): its audit chains
//! walked from the store, and its signed provenance statement.

pub(crate) mod audit;
pub(crate) mod statement;
