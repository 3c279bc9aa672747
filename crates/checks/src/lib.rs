//! Deterministic, bounded checks over the text of a workflow step's outputs.
//!
//! A check is compiled once ([`Check::script`] for a Rhai script, [`Check::sql_lint`] for
//! squawk's PostgreSQL linter) and run on named [`Input`]s, each the output's text with the
//! parsed form its [`Format`] names (Markdown, CSV, JSON, YAML, SQL). A run returns sorted
//! [`Finding`]s, the same on every run and every machine, or one [`CheckError`] naming the
//! bound ([`Limits`]) or the input that stopped it. Nothing a check runs can read a file, the
//! clock, the network or a random number. `docs/checks.md` is the reference.
//!
//! ```
//! use rimthan_checks::{Check, Input, Limits, Severity};
//!
//! let check = Check::script(
//!     r#"
//!     for quote in inputs["findings.md"].markdown.quotes {
//!         if !quote.text.contains("—") {
//!             error("quote-cites-source", "a quotation names its source after a dash",
//!                   "findings.md", quote.line);
//!         }
//!     }
//!     "#,
//!     Limits::default(),
//! )?;
//! let findings = check.run(&[Input::new("findings.md", b"# Findings\n\n> Data is king.\n")])?;
//! assert_eq!(findings.len(), 1);
//! assert_eq!(findings[0].rule, "quote-cites-source");
//! assert_eq!(findings[0].severity, Severity::Error);
//! assert_eq!(findings[0].line, Some(3));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod budget;
mod check;
mod data;
mod error;
mod finding;
mod input;
mod limits;
mod markdown;
mod psql;
mod runner;
mod script;
mod sql;

pub use check::{Check, Running};
pub use data::PARSE_ERROR_RULE;
pub use error::CheckError;
pub use finding::{Finding, Severity};
pub use input::{Format, Input};
pub use limits::Limits;
pub use sql::{SQL_IGNORE_COMMENT_RULE, SQL_SYNTAX_ERROR_RULE};
