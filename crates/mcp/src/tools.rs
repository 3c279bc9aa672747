//! The four workflow tools (`docs/mcp.md` §3): schemas generated from the engine's types, arguments
//! parsed once at the edge, results as `structuredContent` plus a text mirror.

use std::sync::{Arc, LazyLock};

use rimthan_engine::{
    ActiveStepRequest, Code, Engine, EngineError, Failure, PrepareRequest, PrepareResult,
    Principal, Rejected, StartRequest, StartResult, StepResult, SubmitRequest, ToolOutcome,
};
use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use schemars::{JsonSchema, generate::SchemaSettings};

use crate::metrics::Metrics;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The four workflow tools, declared once: their wire names, their declarations and their
/// dispatch all follow from this enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowTool {
    /// `rimthan.start_workflow`
    Start,
    /// `rimthan.get_active_step`
    ActiveStep,
    /// `rimthan.prepare_step_validation`
    Prepare,
    /// `rimthan.submit_step_reports`
    Submit,
}

impl WorkflowTool {
    /// Every tool, in the order `tools/list` gives them.
    pub const ALL: [WorkflowTool; 4] = [
        WorkflowTool::Start,
        WorkflowTool::ActiveStep,
        WorkflowTool::Prepare,
        WorkflowTool::Submit,
    ];

    /// The tool's name on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            WorkflowTool::Start => "rimthan.start_workflow",
            WorkflowTool::ActiveStep => "rimthan.get_active_step",
            WorkflowTool::Prepare => "rimthan.prepare_step_validation",
            WorkflowTool::Submit => "rimthan.submit_step_reports",
        }
    }

    /// The tool a name on the wire names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The tool as `tools/list` declares it.
    fn declaration(self) -> Tool {
        match self {
            WorkflowTool::Start => tool::<StartRequest, StartResult>(
                self,
                "Start a workflow",
                "Start a workflow session. Declare only the host and validator capabilities the \
                 harness really has and the adapter pinned for the harness. Returns the active \
                 setup step with its host assets, or every blocker at once.",
                Effect::Changes,
            ),
            WorkflowTool::ActiveStep => tool::<ActiveStepRequest, StepResult>(
                self,
                "Get the active step",
                "Return the session's active step for a checkpoint, e.g. from \
                 .rimthan/workflow-session.json after a Git handoff. Changes nothing.",
                Effect::Reads,
            ),
            WorkflowTool::Prepare => tool::<PrepareRequest, PrepareResult>(
                self,
                "Prepare step validation",
                "Attest the active step: host_attestation for setup-workspace, output_attestation \
                 for work steps, built by reading the files back. Returns the validation plan, or \
                 every failure with its code.",
                Effect::Changes,
            ),
            WorkflowTool::Submit => tool::<SubmitRequest, StepResult>(
                self,
                "Submit step reports",
                "Submit one structured report per validator of the plan. All pass: the session \
                 advances; any fail: status revise with findings.",
                Effect::Changes,
            ),
        }
    }
}

/// `rimthan.start_workflow`
pub const START: &str = WorkflowTool::Start.name();
/// `rimthan.get_active_step`
pub const ACTIVE_STEP: &str = WorkflowTool::ActiveStep.name();
/// `rimthan.prepare_step_validation`
pub const PREPARE: &str = WorkflowTool::Prepare.name();
/// `rimthan.submit_step_reports`
pub const SUBMIT: &str = WorkflowTool::Submit.name();

/// What a tool does to a session, as its annotations tell a client.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// Reads only; the same call gives the same answer.
    Reads,
    /// Changes the session.
    Changes,
}

/// Drops schemars' numeric `format`s (`uint64`, …): they are not JSON Schema formats, and every
/// official client warns about them.
fn drop_numeric_formats(value: &mut Value) {
    const NUMERIC: &[&str] = &[
        "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float",
        "double",
    ];
    match value {
        Value::Object(map) => {
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| NUMERIC.contains(&f))
            {
                map.remove("format");
            }
            map.values_mut().for_each(drop_numeric_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_numeric_formats),
        _ => {}
    }
}

fn schema_for<T: JsonSchema>() -> Arc<JsonObject> {
    let schema = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).expect("schemas serialize");
    drop_numeric_formats(&mut value);
    // Results are unions; both protocol revisions accept an object schema at the root.
    value
        .as_object_mut()
        .expect("root schema is an object")
        .insert("type".into(), json!("object"));
    Arc::new(rmcp::model::object(value))
}

fn tool<In: JsonSchema, Out: JsonSchema>(
    which: WorkflowTool,
    title: &str,
    description: &str,
    effect: Effect,
) -> Tool {
    let reads = effect == Effect::Reads;
    Tool::new(which.name(), description.to_owned(), schema_for::<In>())
        .with_raw_output_schema(schema_for::<Out>())
        .with_title(title.to_owned())
        .with_annotations(
            ToolAnnotations::with_title(title)
                .read_only(reads)
                .destructive(false)
                .idempotent(reads)
                .open_world(false),
        )
}

static TOOLS: LazyLock<Vec<Tool>> =
    LazyLock::new(|| WorkflowTool::ALL.map(WorkflowTool::declaration).to_vec());

/// The four tools, in a fixed order.
pub(crate) fn list() -> Vec<Tool> {
    TOOLS.clone()
}

/// A failed argument parse or argument rule, as a tool result naming the field.
fn invalid_arguments(field: &str, message: &str) -> CallToolResult {
    let field = if field.is_empty() || field == "." {
        "(arguments)"
    } else {
        field
    };
    let failure =
        Failure::new(Code::InvalidArguments, format!("{field}: {message}")).with("field", field);
    CallToolResult::structured_error(
        serde_json::to_value(Rejected::new(vec![failure])).expect("results serialize"),
    )
}

fn parse<T: DeserializeOwned>(arguments: Option<JsonObject>) -> Result<T, CallToolResult> {
    let value = Value::Object(arguments.unwrap_or_default());
    serde_path_to_error::deserialize(value)
        .map_err(|e| invalid_arguments(&e.path().to_string(), &e.inner().to_string()))
}

fn result(outcome: &(impl ToolOutcome + serde::Serialize)) -> CallToolResult {
    let value = serde_json::to_value(outcome).expect("results serialize");
    if outcome.is_error() {
        CallToolResult::structured_error(value)
    } else {
        CallToolResult::structured(value)
    }
}

fn engine_error(e: EngineError, metrics: &Metrics) -> Result<CallToolResult, rmcp::ErrorData> {
    match e {
        EngineError::InvalidArgument { field, message } => Ok(invalid_arguments(&field, &message)),
        other => {
            if matches!(other, EngineError::Store(_)) {
                metrics.store_error();
            }
            tracing::error!(code = other.code(), error = %other, "tool call failed");
            Err(rmcp::ErrorData::internal_error(
                format!(
                    "{}: the server could not complete the call; retry later",
                    other.code()
                ),
                Some(json!({"code": other.code()})),
            ))
        }
    }
}

/// The outcome label and first code of a finished call, for metrics: taken from the typed
/// result, never read back out of its JSON.
type Labels = (&'static str, &'static str);

fn labels(outcome: &impl ToolOutcome) -> Labels {
    (
        outcome.outcome().as_str(),
        outcome.codes().first().map_or("none", |c| c.as_str()),
    )
}

/// Runs a tool; `None` when no tool has that name.
pub(crate) async fn call(
    engine: &Engine,
    metrics: &Metrics,
    name: &str,
    arguments: Option<JsonObject>,
    principal: Option<&Principal>,
) -> Option<Result<CallToolResult, rmcp::ErrorData>> {
    let started = std::time::Instant::now();
    let tool = WorkflowTool::from_name(name)?;
    let (result, (outcome, code)) = dispatch(engine, metrics, tool, arguments, principal).await;
    metrics.tool_call(tool.name(), outcome, code, started.elapsed());
    Some(result)
}

async fn dispatch(
    engine: &Engine,
    metrics: &Metrics,
    tool: WorkflowTool,
    arguments: Option<JsonObject>,
    principal: Option<&Principal>,
) -> (Result<CallToolResult, rmcp::ErrorData>, Labels) {
    macro_rules! run {
        ($request:ty, |$req:ident| $call:expr) => {
            match parse::<$request>(arguments) {
                Err(rejected) => (Ok(rejected), ("rejected", Code::InvalidArguments.as_str())),
                Ok($req) => match $call.await {
                    Ok(outcome) => (Ok(result(&outcome)), labels(&outcome)),
                    Err(e) => {
                        let labels = match &e {
                            EngineError::InvalidArgument { .. } => {
                                ("rejected", Code::InvalidArguments.as_str())
                            }
                            other => ("error", other.code()),
                        };
                        (engine_error(e, metrics), labels)
                    }
                },
            }
        };
    }
    match tool {
        WorkflowTool::Start => run!(StartRequest, |r| engine.start(r, principal)),
        WorkflowTool::ActiveStep => run!(ActiveStepRequest, |r| engine.active_step(r, principal)),
        WorkflowTool::Prepare => run!(PrepareRequest, |r| engine.prepare(r, principal)),
        WorkflowTool::Submit => run!(SubmitRequest, |r| engine.submit(r, principal)),
    }
}
