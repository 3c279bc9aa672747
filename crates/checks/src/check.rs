//! A check: compiled once from its source, run on named inputs as often as needed, each run
//! giving the same findings, sorted, or one named `CheckError`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use rhai::{Dynamic, Map};

use crate::budget::{self, Budget, Spent, Unparsed};
use crate::input::{Format, Input, OwnedText, TextInput, admit};
use crate::script::Script;
use crate::sql::SqlLint;
use crate::{CheckError, Finding, Limits, Severity, data, markdown, runner, sql};

/// A compiled check of one kind, with the bounds it runs under.
#[derive(Debug, Clone)]
pub struct Check {
    /// Shared with the runs in flight, which own what they read (`runner`).
    kind: Arc<Kind>,
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
            kind: Arc::new(Kind::Script(Script::compile(source, &limits)?)),
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
            kind: Arc::new(Kind::SqlLint(SqlLint::new(rules)?)),
            limits,
        })
    }

    /// The bounds this check runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Runs the check on `inputs` and waits for its findings: [`Check::start`], then
    /// [`Running::wait`].
    pub fn run(&self, inputs: &[Input<'_>]) -> Result<Vec<Finding>, CheckError> {
        self.start(inputs)?.wait()
    }

    /// Starts the check on `inputs`. Every input is bounded and checked to be text before any
    /// parser reads it; an input its own format cannot parse is a `parse_error` finding at its
    /// line, and the script does not run on it. Findings come back sorted
    /// (`Finding`'s order), so the same inputs give the same list on every run.
    ///
    /// The run gets a thread of its own (`runner`), and its deadline,
    /// `Limits::max_wall_time`, counts from now: whoever waits for it raises the flag the
    /// parsers and the interpreter look at once the deadline passes, so one deadline covers
    /// parsing, linting and the script. The admitted inputs are copied for the run, which owns
    /// what it reads. A bound the inputs break is the error of this call, before any thread.
    pub fn start(&self, inputs: &[Input<'_>]) -> Result<Running, CheckError> {
        let admitted: Vec<OwnedText> = admit(inputs, &self.limits)?
            .iter()
            .map(OwnedText::of)
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let (done, finished) = mpsc::sync_channel(1);
        let check = self.clone();
        let flag = Arc::clone(&stop);
        let deadline = Instant::now() + self.limits.max_wall_time;
        runner::run(Box::new(move || {
            let inputs: Vec<TextInput<'_>> = admitted.iter().map(OwnedText::borrow).collect();
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check.run_admitted(&inputs, &flag)
            }));
            // The waiting thread is there until it has the outcome.
            let _ = done.send(outcome);
        }))
        .map_err(|e| CheckError::RuntimeUnavailable {
            message: e.to_string(),
        })?;
        Ok(Running {
            finished,
            stop,
            deadline,
        })
    }

    fn run_admitted(
        &self,
        admitted: &[TextInput<'_>],
        stop: &Arc<AtomicBool>,
    ) -> Result<Vec<Finding>, CheckError> {
        let wall_time = CheckError::WallTimeExceeded {
            limit: self.limits.max_wall_time,
        };
        let mut findings = Vec::new();
        match &*self.kind {
            Kind::SqlLint(lint) => {
                for input in admitted {
                    if stop.load(Ordering::Relaxed) {
                        return Err(wall_time);
                    }
                    lint.lint(input, &mut findings);
                }
            }
            Kind::Script(script) => match parsed(admitted, &self.limits, stop)? {
                Ok(inputs) => findings = script.run(inputs, &self.limits, Arc::clone(stop))?,
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

/// What a run sends back: its findings or error, or the panic it ended in.
type Outcome = std::thread::Result<Result<Vec<Finding>, CheckError>>;

/// A check run under way on its own thread ([`Check::start`]).
#[derive(Debug)]
#[must_use = "a run is only judged by waiting for it"]
pub struct Running {
    finished: mpsc::Receiver<Outcome>,
    stop: Arc<AtomicBool>,
    deadline: Instant,
}

impl Running {
    /// The run's findings if it ends within `patience` (and before its deadline); `None` while
    /// it goes on, to be waited for again. A caller on an async runtime waits here a short
    /// while before it hands its thread over to block for longer.
    pub fn wait_for(&mut self, patience: Duration) -> Option<Result<Vec<Finding>, CheckError>> {
        let patience = patience.min(self.deadline.saturating_duration_since(Instant::now()));
        match self.finished.recv_timeout(patience) {
            Ok(outcome) => Some(Self::answer(Some(outcome))),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Self::answer(None)),
        }
    }

    /// Waits for the run's findings. At its deadline the run is told to stop, and ends
    /// `check_wall_time_exceeded` at the next point it looks; a panic in the run is resumed
    /// here.
    pub fn wait(self) -> Result<Vec<Finding>, CheckError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let outcome = match self.finished.recv_timeout(left) {
            Err(RecvTimeoutError::Timeout) => {
                self.stop.store(true, Ordering::Relaxed);
                self.finished.recv().ok()
            }
            received => received.ok(),
        };
        Self::answer(outcome)
    }

    fn answer(outcome: Option<Outcome>) -> Result<Vec<Finding>, CheckError> {
        match outcome {
            Some(outcome) => outcome.unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            None => Err(CheckError::RuntimeUnavailable {
                message: "the thread of the run ended before the run did".to_owned(),
            }),
        }
    }
}

/// The `inputs` map a script reads: each input's `name`, `format`, `text` and parsed form, or
/// the `parse_error` findings of the inputs that do not parse. The forms of all inputs share
/// one budget of `Limits::max_parsed_bytes`.
fn parsed(
    inputs: &[TextInput<'_>],
    limits: &Limits,
    stop: &AtomicBool,
) -> Result<Result<Map, Vec<Finding>>, CheckError> {
    let budget = Budget::new(limits.max_parsed_bytes, stop);
    let mut map = Map::new();
    let mut errors = Vec::new();
    for input in inputs {
        let spent = |spent: Spent| match spent {
            Spent::Memory => CheckError::InputTooComplex {
                input: input.name.to_owned(),
                limit: limits.max_parsed_bytes,
            },
            Spent::Time => CheckError::WallTimeExceeded {
                limit: limits.max_wall_time,
            },
        };
        budget
            .spend(budget::map(4) + budget::string(input.text.len()))
            .map_err(spent)?;
        let mut entry = Map::new();
        entry.insert("name".into(), input.name.into());
        entry.insert("format".into(), input.format.as_str().into());
        entry.insert("text".into(), input.text.into());
        let form: Result<Option<Dynamic>, Unparsed> = match input.format {
            Format::Text => Ok(None),
            Format::Markdown => markdown::parse(input.name, input.text, &budget).map(Some),
            Format::Csv => data::csv(input.name, input.text, &budget).map(Some),
            Format::Json => data::json(input.name, input.text, &budget).map(Some),
            Format::Yaml => data::yaml(input.name, input.text, &budget).map(Some),
            Format::Sql => sql::parse(input.text, &budget)
                .map(Some)
                .map_err(Unparsed::Spent),
        };
        match form {
            Ok(Some(form)) => {
                entry.insert(input.format.as_str().into(), form);
            }
            Ok(None) => {}
            Err(Unparsed::Error(finding)) => errors.push(finding),
            Err(Unparsed::Spent(s)) => return Err(spent(s)),
        }
        map.insert(input.name.into(), entry.into());
    }
    Ok(if errors.is_empty() {
        Ok(map)
    } else {
        Err(errors)
    })
}
