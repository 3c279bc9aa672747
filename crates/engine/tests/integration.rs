//! Engine behaviour tests: one binary, one module per concern.

mod approvals;
mod artifact_fuzz;
mod attestations;
mod audit_chain;
mod backends;
mod blockers;
mod caches;
mod checks;
mod common;
mod docs;
mod durability;
mod facilitator;
mod faults;
mod floors;
mod isolation;
mod replicas;
mod report_contracts;
mod report_rounds;
mod submissions;
mod tenants;
mod timers;
mod upgrade;
mod webhooks;
