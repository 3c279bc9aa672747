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

/// `rimthan.start_workflow`
pub const START: &str = "rimthan.start_workflow";
/// `rimthan.get_active_step`
pub const ACTIVE_STEP: &str = "rimthan.get_active_step";
/// `rimthan.prepare_step_validation`
pub const PREPARE: &str = "rimthan.prepare_step_validation";
/// `rimthan.submit_step_reports`
pub const SUBMIT: &str = "rimthan.submit_step_reports";

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
    name: &'static str,
    title: &str,
    description: &str,
) -> Tool {
    Tool::new(name, description.to_owned(), schema_for::<In>())
        .with_raw_output_schema(schema_for::<Out>())
        .with_title(title.to_owned())
}

static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    vec![
        tool::<StartRequest, StartResult>(
            START,
            "Start a workflow",
            "Start a workflow session. Declare only the host and validator capabilities the \
             harness really has and the adapter pinned for the harness. Returns the active setup \
             step with its host assets, or every blocker at once.",
        )
        .with_annotations(
            ToolAnnotations::with_title("Start a workflow")
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        tool::<ActiveStepRequest, StepResult>(
            ACTIVE_STEP,
            "Get the active step",
            "Return the session's active step for a checkpoint, e.g. from \
             .rimthan/workflow-session.json after a Git handoff. Changes nothing.",
        )
        .with_annotations(
            ToolAnnotations::with_title("Get the active step")
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        tool::<PrepareRequest, PrepareResult>(
            PREPARE,
            "Prepare step validation",
            "Attest the active step: host_attestation for setup-workspace, output_attestation \
             for work steps, built by reading the files back. Returns the validation plan, or \
             every failure with its code.",
        )
        .with_annotations(
            ToolAnnotations::with_title("Prepare step validation")
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        tool::<SubmitRequest, StepResult>(
            SUBMIT,
            "Submit step reports",
            "Submit one structured report per validator of the plan. All pass: the session \
             advances; any fail: status revise with findings.",
        )
        .with_annotations(
            ToolAnnotations::with_title("Submit step reports")
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
    ]
});

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
    let tool = [START, ACTIVE_STEP, PREPARE, SUBMIT]
        .into_iter()
        .find(|t| *t == name)?;
    let (result, (outcome, code)) = dispatch(engine, metrics, tool, arguments, principal).await?;
    metrics.tool_call(tool, outcome, code, started.elapsed());
    Some(result)
}

async fn dispatch(
    engine: &Engine,
    metrics: &Metrics,
    name: &str,
    arguments: Option<JsonObject>,
    principal: Option<&Principal>,
) -> Option<(Result<CallToolResult, rmcp::ErrorData>, Labels)> {
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
    Some(match name {
        START => run!(StartRequest, |r| engine.start(r, principal)),
        ACTIVE_STEP => run!(ActiveStepRequest, |r| engine.active_step(r, principal)),
        PREPARE => run!(PrepareRequest, |r| engine.prepare(r, principal)),
        SUBMIT => run!(SubmitRequest, |r| engine.submit(r, principal)),
        _ => return None,
    })
}
