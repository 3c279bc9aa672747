//! A check: compiled once from its source, run on named inputs as often as needed, each run
//! giving the same findings, sorted, or one named `CheckError`.

use rhai::{Dynamic, Map};

use crate::input::{Format, Input, TextInput, admit};
use crate::script::Script;
use crate::sql::SqlLint;
use crate::{CheckError, Finding, Limits, Severity, data, markdown, sql};

/// Stack of the thread a run gets. The parsers recurse per nesting level, which is bounded
/// (`sql::MAX_SQL_NESTING`, serde's limit of 128), but a debug build spends several times the
/// stack of a release build per level, more than a test or tokio thread's 2 MiB; the
/// reservation is virtual, and only what the parsers reach is committed.
const RUN_STACK: usize = 64 << 20;

/// A compiled check of one kind, with the bounds it runs under.
#[derive(Debug, Clone)]
pub struct Check {
    kind: Kind,
    limits: Limits,
}

#[derive(Debug, Clone)]
enum Kind {
    Script(Script),
    SqlLint(SqlLint),
}

impl Check {
    /// Compiles a script check (`docs/checks.md` §Scripts). A source that does not compile is
    /// `CheckError::CompileFailed` with its line and column.
    pub fn script(source: &str, limits: Limits) -> Result<Self, CheckError> {
        Ok(Self {
            kind: Kind::Script(Script::compile(source, &limits)?),
            limits,
        })
    }

    /// A `sql-lint` check: squawk's linter with exactly the named rules (kebab-case, as squawk
    /// spells them), each reporting at its severity. An unknown name is
    /// `CheckError::UnknownSqlRule`.
    pub fn sql_lint<'a>(
        rules: impl IntoIterator<Item = (&'a str, Severity)>,
        limits: Limits,
    ) -> Result<Self, CheckError> {
        Ok(Self {
            kind: Kind::SqlLint(SqlLint::new(rules)?),
            limits,
        })
    }

    /// The bounds this check runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Runs the check on `inputs`. Every input is bounded and checked to be text before any
    /// parser reads it; an input its own format cannot parse is a `parse_error` finding at its
    /// line, and the script does not run on it. Findings come back sorted
    /// (`Finding`'s order), so the same inputs give the same list on every run.
    pub fn run(&self, inputs: &[Input<'_>]) -> Result<Vec<Finding>, CheckError> {
        let admitted = admit(inputs, &self.limits)?;
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("rimthan-check".to_owned())
                .stack_size(RUN_STACK)
                .spawn_scoped(scope, || self.run_admitted(&admitted))
                .map_err(|e| CheckError::RuntimeUnavailable {
                    message: e.to_string(),
                })?
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    fn run_admitted(&self, admitted: &[TextInput<'_>]) -> Result<Vec<Finding>, CheckError> {
        let mut findings = Vec::new();
        match &self.kind {
            Kind::SqlLint(lint) => lint.run(admitted, &mut findings),
            Kind::Script(script) => match parsed(admitted) {
                Ok(inputs) => findings = script.run(inputs, &self.limits)?,
                Err(parse_errors) => findings = parse_errors,
            },
        }
        if findings.len() > self.limits.max_findings {
            return Err(CheckError::TooManyFindings {
                limit: self.limits.max_findings,
            });
        }
        findings.sort_unstable();
        Ok(findings)
    }
}

/// The `inputs` map a script reads: each input's `name`, `format`, `text` and parsed form.
fn parsed(inputs: &[TextInput<'_>]) -> Result<Map, Vec<Finding>> {
    let mut map = Map::new();
    let mut errors = Vec::new();
    for input in inputs {
        let mut entry = Map::new();
        entry.insert("name".into(), input.name.into());
        entry.insert("format".into(), input.format.as_str().into());
        entry.insert("text".into(), input.text.into());
        let form: Result<Option<Dynamic>, Finding> = match input.format {
            Format::Text => Ok(None),
            Format::Markdown => Ok(Some(markdown::parse(input.text))),
            Format::Csv => data::csv(input.name, input.text).map(Some),
            Format::Json => data::json(input.name, input.text).map(Some),
            Format::Yaml => data::yaml(input.name, input.text).map(Some),
            Format::Sql => Ok(Some(sql::parse(input.text))),
        };
        match form {
            Ok(Some(form)) => {
                entry.insert(input.format.as_str().into(), form);
            }
            Ok(None) => {}
            Err(finding) => errors.push(finding),
        }
        map.insert(input.name.into(), entry.into());
    }
    if errors.is_empty() {
        Ok(map)
    } else {
        Err(errors)
    }
}
