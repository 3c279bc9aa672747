//! The script check kind: a Rhai script, compiled once, run in a sandbox of its own per run
//! with every bound of `Limits` set on the interpreter (`docs/checks.md` §Why Rhai).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use rhai::packages::{Package, StandardPackage};
use rhai::{AST, Dynamic, Engine, EvalAltResult, ImmutableString, Map, NativeCallContext, Scope};

use crate::{CheckError, Finding, Limits, Severity};

/// Longest script source a check may have.
pub(crate) const MAX_SCRIPT_BYTES: usize = 64 << 10;
/// Most `let`, `const` and `fn` declarations a script may make: Rhai's compiler looks each
/// name up among those declared before it, so compiling is quadratic in their number (30,000
/// `let`s took 19 s, at every server start).
pub(crate) const MAX_SCRIPT_DECLARATIONS: usize = 2_000;
/// Longest rule id a check may report.
const MAX_RULE_BYTES: usize = 128;
/// Longest message a check may report.
const MAX_MESSAGE_BYTES: usize = 4096;
/// Longest input name a finding may carry.
const MAX_PATH_BYTES: usize = 1024;

/// The standard library, built once: arithmetic, strings, arrays, maps, iteration. Built with
/// `no_time` and `no_module`, it has no clock and no `import`; `Engine::new_raw` adds no print.
static STANDARD: LazyLock<rhai::Shared<rhai::Module>> =
    LazyLock::new(|| StandardPackage::new().as_shared_module());

/// A compiled script check.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    ast: AST,
}

/// Why the script stopped, when it was the runtime that stopped it.
enum Stop {
    TooManyFindings,
    Invalid { line: usize, reason: String },
}

#[derive(Default)]
struct Sink {
    findings: Vec<Finding>,
    stop: Option<Stop>,
}

fn engine(limits: &Limits) -> Engine {
    let mut engine = Engine::new_raw();
    engine.register_global_module(STANDARD.clone());
    // `eval` would run text the build never compiled.
    engine.disable_symbol("eval");
    engine
        .set_max_operations(limits.max_operations)
        .set_max_string_size(limits.max_string_bytes)
        .set_max_array_size(limits.max_array_len)
        .set_max_map_size(limits.max_map_len)
        .set_max_call_levels(limits.max_call_depth);
    engine
}

impl Script {
    pub(crate) fn compile(source: &str, limits: &Limits) -> Result<Self, CheckError> {
        if source.len() > MAX_SCRIPT_BYTES {
            return Err(CheckError::ScriptTooLarge {
                reason: format!(
                    "{} bytes, over the limit of {MAX_SCRIPT_BYTES}",
                    source.len()
                ),
            });
        }
        let declarations = source
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|word| matches!(*word, "let" | "const" | "fn"))
            .count();
        if declarations > MAX_SCRIPT_DECLARATIONS {
            return Err(CheckError::ScriptTooLarge {
                reason: format!(
                    "{declarations} `let`, `const` and `fn` declarations, over the limit of \
                     {MAX_SCRIPT_DECLARATIONS}"
                ),
            });
        }
        let ast = engine(limits).compile(source).map_err(|e| {
            let position = e.position();
            CheckError::CompileFailed {
                line: position.line().unwrap_or(0),
                column: position.position().unwrap_or(0),
                message: e.err_type().to_string(),
            }
        })?;
        Ok(Self { ast })
    }

    /// Runs the script with `inputs` (the map a script reads as `inputs`) and returns what it
    /// reported, unsorted. The interpreter looks at `stop`, which the run's deadline raises,
    /// between any two operations.
    pub(crate) fn run(
        &self,
        inputs: Map,
        limits: &Limits,
        stop: Arc<AtomicBool>,
    ) -> Result<Vec<Finding>, CheckError> {
        let sink = Arc::new(Mutex::new(Sink::default()));
        let mut engine = engine(limits);
        register_findings(&mut engine, &sink, limits.max_findings);
        engine.on_progress(move |_| stop.load(Ordering::Relaxed).then_some(Dynamic::UNIT));
        let mut scope = Scope::new();
        scope.push_constant("inputs", inputs);
        let outcome = engine.run_ast_with_scope(&mut scope, &self.ast);
        let sink = std::mem::take(&mut *sink.lock().unwrap_or_else(PoisonError::into_inner));
        match sink.stop {
            Some(Stop::TooManyFindings) => {
                return Err(CheckError::TooManyFindings {
                    limit: limits.max_findings,
                });
            }
            Some(Stop::Invalid { line, reason }) => {
                return Err(CheckError::FindingInvalid { line, reason });
            }
            None => {}
        }
        outcome.map_err(|e| runtime_error(&e, limits))?;
        Ok(sink.findings)
    }
}

fn runtime_error(error: &EvalAltResult, limits: &Limits) -> CheckError {
    match error {
        EvalAltResult::ErrorInFunctionCall(_, _, inner, _) => runtime_error(inner, limits),
        EvalAltResult::ErrorTooManyOperations(_) => CheckError::OperationsExceeded {
            limit: limits.max_operations,
        },
        EvalAltResult::ErrorDataTooLarge(what, _) => {
            CheckError::DataTooLarge { what: what.clone() }
        }
        EvalAltResult::ErrorStackOverflow(_) => CheckError::CallDepthExceeded {
            limit: limits.max_call_depth,
        },
        EvalAltResult::ErrorTerminated(_, _) => CheckError::WallTimeExceeded {
            limit: limits.max_wall_time,
        },
        other => {
            let position = other.position();
            CheckError::ScriptFailed {
                line: position.line().unwrap_or(0),
                column: position.position().unwrap_or(0),
                message: other.to_string(),
            }
        }
    }
}

type Reported = Result<(), Box<EvalAltResult>>;

/// `error(rule, message)`, `error(rule, message, path)`, `error(rule, message, path, line)`, and
/// the same three for `warning`.
fn register_findings(engine: &mut Engine, sink: &Arc<Mutex<Sink>>, max: usize) {
    for (name, severity) in [("error", Severity::Error), ("warning", Severity::Warning)] {
        let s = Arc::clone(sink);
        engine.register_fn(
            name,
            move |ctx: NativeCallContext,
                  rule: ImmutableString,
                  message: ImmutableString|
                  -> Reported {
                report(&ctx, &s, max, severity, &rule, &message, None, None)
            },
        );
        let s = Arc::clone(sink);
        engine.register_fn(
            name,
            move |ctx: NativeCallContext,
                  rule: ImmutableString,
                  message: ImmutableString,
                  path: ImmutableString|
                  -> Reported {
                report(&ctx, &s, max, severity, &rule, &message, Some(&path), None)
            },
        );
        let s = Arc::clone(sink);
        engine.register_fn(
            name,
            move |ctx: NativeCallContext,
                  rule: ImmutableString,
                  message: ImmutableString,
                  path: ImmutableString,
                  line: rhai::INT|
                  -> Reported {
                report(
                    &ctx,
                    &s,
                    max,
                    severity,
                    &rule,
                    &message,
                    Some(&path),
                    Some(line),
                )
            },
        );
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "one call site per arity, all in this file"
)]
fn report(
    ctx: &NativeCallContext,
    sink: &Mutex<Sink>,
    max: usize,
    severity: Severity,
    rule: &str,
    message: &str,
    path: Option<&str>,
    line: Option<rhai::INT>,
) -> Reported {
    let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
    let source_line = ctx.call_position().line().unwrap_or(0);
    let stop = |sink: &mut Sink, stop: Stop| -> Reported {
        sink.stop = Some(stop);
        Err(EvalAltResult::ErrorTerminated(Dynamic::UNIT, ctx.call_position()).into())
    };
    let invalid = |reason: String| Stop::Invalid {
        line: source_line,
        reason,
    };
    if rule.is_empty() || rule.len() > MAX_RULE_BYTES {
        return stop(
            &mut sink,
            invalid(format!("a rule id is 1 to {MAX_RULE_BYTES} bytes")),
        );
    }
    if message.is_empty() || message.len() > MAX_MESSAGE_BYTES {
        return stop(
            &mut sink,
            invalid(format!("a message is 1 to {MAX_MESSAGE_BYTES} bytes")),
        );
    }
    if path.is_some_and(|p| p.is_empty() || p.len() > MAX_PATH_BYTES) {
        return stop(
            &mut sink,
            invalid(format!("a path is 1 to {MAX_PATH_BYTES} bytes")),
        );
    }
    let line = match line.map(u32::try_from) {
        None => None,
        Some(Ok(line)) if line > 0 => Some(line),
        Some(_) => return stop(&mut sink, invalid("a line is a number from 1".to_owned())),
    };
    if sink.findings.len() == max {
        return stop(&mut sink, Stop::TooManyFindings);
    }
    let mut finding = Finding::new(rule, severity, message);
    if let Some(path) = path {
        finding = finding.at(path, line);
    }
    sink.findings.push(finding);
    Ok(())
}
