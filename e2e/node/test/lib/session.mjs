// The harness side of a workflow session, independent of the client that carries it
// (TypeScript SDK over HTTP or stdio, Inspector CLI). It is the JavaScript twin of `run_session`
// in crates/mcp/tests/common/mod.rs, except that every file is really written into a temporary
// project and READ BACK before it is attested: host assets come from resources/read of their
// URI, step outputs are the worked examples of the built default release (the step document's
// `example`, or the first entry of its schema's `examples`) written to their declared paths.
//
// Every session runs once per shipped workflow (`WORKFLOWS`): research-study (four steps, JSON and
// Markdown outputs, base reports) and schema-migration (three steps, SQL outputs, a validator
// whose report schema adds required fields and that needs database.read, no buzz pin).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { lstat, mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

export const TOOLS = [
  "rimthan.start_workflow",
  "rimthan.get_active_step",
  "rimthan.prepare_step_validation",
  "rimthan.submit_step_reports",
];
export const [START, GET_ACTIVE, PREPARE, SUBMIT] = TOOLS;
export const TEMPLATES = [
  "workflow-definition",
  "workflow-step",
  "workflow-check",
  "workflow-asset-content",
  "validator-definition",
  "workflow-versioned-schema",
];
export const SESSION_FILE = ".rimthan/workflow-session.json";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
const releasesRoot = join(repoRoot, "registry/default/releases");

/**
 * What the suites need to know about each shipped workflow. `codexAssets` are the files a codex
 * setup writes project-local; `reportExtras` the fields a validator's own report schema adds;
 * `planCapabilities` capabilities a validator's plan entry must carry.
 */
export const WORKFLOWS = Object.freeze([
  {
    id: "research-study",
    steps: ["setup-workspace", "frame-question", "gather-sources", "synthesize-findings"],
    outputs: ["research/question.json", "research/sources.json", "research/notes.md", "research/findings.md"],
    codexAssets: [
      ".agents/skills/rimthan-research/SKILL.md",
      ".codex/agents/scope-reviewer.toml",
      ".codex/agents/source-auditor.toml",
      ".codex/agents/claim-checker.toml",
    ],
    validatorCapabilities: ["workspace.read", "web.read", "git.read"],
    reportExtras: {},
    planCapabilities: {},
    unpinnedHarnesses: [],
    signedOff: [],
  },
  {
    id: "schema-migration",
    steps: ["setup-workspace", "describe-change", "write-migration"],
    outputs: ["migration/change.json", "migration/up.sql", "migration/down.sql", "migration/verify.sql"],
    codexAssets: [
      ".agents/skills/rimthan-migration/SKILL.md",
      ".codex/agents/change-reviewer.toml",
      ".codex/agents/migration-checker.toml",
    ],
    validatorCapabilities: ["workspace.read", "database.read"],
    reportExtras: {
      "migration-checker": {
        statements_checked: 10,
        reversible: true,
        destructive_statements: [{
          path: "migration/down.sql",
          line: 47,
          statement: "ALTER TABLE public.orders DROP COLUMN IF EXISTS sales_channel",
          destroys: "Every order's sales channel; 'phone' and 'partner' are copied out first.",
        }],
        server_version: "PostgreSQL 16.4",
      },
    },
    planCapabilities: { "migration-checker": ["workspace.read", "database.read"] },
    unpinnedHarnesses: ["buzz"],
    signedOff: ["write-migration"],
  },
].map((w) => Object.freeze(w)));
export const [RESEARCH] = WORKFLOWS;

export const HOST = Object.freeze({
  harness: "codex",
  adapter: { id: "codex", version: "1.2.0" },
  capabilities: [
    "mcp.tools",
    "mcp.resources",
    "mcp.prompts",
    "native-subagents",
    "scoped-inputs",
    "read-only-capabilities",
    "structured-reports",
    "project-local-assets",
  ],
  validator_capabilities: RESEARCH.validatorCapabilities,
});

/** The codex host declaring exactly the validator capabilities the workflow needs. */
export const hostFor = (wf) => ({ ...structuredClone(HOST), validator_capabilities: [...wf.validatorCapabilities] });

export const startArguments = (wf = RESEARCH, host = hostFor(wf)) => ({ workflow_id: wf.id, host: structuredClone(host) });

/** codex declaring the legacy adapter: blocked before anything is stored. */
export const blockedStartArguments = () =>
  startArguments(RESEARCH, { ...hostFor(RESEARCH), adapter: { id: "legacy-generic", version: "1.0.0" } });

/** Each [workflow, harness] a workflow leaves out, declared with that harness's own adapter. */
export const unpinnedStarts = () =>
  WORKFLOWS.flatMap((wf) => wf.unpinnedHarnesses.map((harness) => ({
    wf, harness,
    args: startArguments(wf, { ...hostFor(wf), harness, adapter: { id: harness, version: "1.2.0" } }),
  })));

export const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

/** Resolves a declared project-relative path inside the project, refusing anything that escapes. */
function inProject(project, rel) {
  assert.equal(typeof rel, "string");
  assert.ok(!rel.startsWith("/") && !rel.split("/").includes(".."), `declared path ${rel} is relative and normalized`);
  const full = resolve(project, rel);
  assert.ok(full.startsWith(project + sep), `${rel} stays inside the project`);
  return full;
}

/** lstat of every component from the project root down: true when none is a symlink. */
async function symlinkFree(project, rel) {
  let at = project;
  for (const part of rel.split("/")) {
    at = join(at, part);
    if ((await lstat(at)).isSymbolicLink()) return false;
  }
  return true;
}

/** Writes bytes at a declared path, then reads them back; returns what was read. */
export async function writeAndReadBack(project, rel, bytes) {
  const full = inProject(project, rel);
  await mkdir(dirname(full), { recursive: true });
  await writeFile(full, bytes);
  const back = await readFile(full);
  return { bytes: back, sha256: sha256(back), symlinkFree: await symlinkFree(project, rel) };
}

/** The bytes of a resources/read result with exactly one content entry for `uri`. */
export function contentBytes(result, uri) {
  assert.ok(Array.isArray(result.contents) && result.contents.length === 1, `one content entry for ${uri}`);
  const [c] = result.contents;
  assert.equal(c.uri, uri);
  if (typeof c.text === "string") return Buffer.from(c.text, "utf8");
  assert.equal(typeof c.blob, "string", `${uri} has text or blob`);
  return Buffer.from(c.blob, "base64");
}

/**
 * The host attestation for the setup step: every asset with a project-local path is fetched with
 * resources/read of its URI, written there, read back and attested with the sha256 of what was
 * read; the others are fetched and attested as dynamic-context deliveries.
 * `overrides(delivery)` may tamper with a delivery (used by the rejection test).
 */
export async function hostAttestation(driver, project, payload, host = HOST, overrides = (d) => d) {
  const deliveries = [];
  for (const asset of payload.host_assets) {
    const fetched = contentBytes(await driver.read(asset.uri), asset.uri);
    let delivery;
    if (asset.project_local_path) {
      assert.ok(asset.delivery_modes.includes("project-local"));
      const back = await writeAndReadBack(project, asset.project_local_path, fetched);
      assert.ok(back.symlinkFree);
      delivery = {
        kind: asset.kind, id: asset.id, version: asset.version, sha256: back.sha256,
        delivery_mode: "project-local", path: asset.project_local_path,
      };
    } else {
      assert.ok(asset.delivery_modes.includes("dynamic-context"));
      delivery = {
        kind: asset.kind, id: asset.id, version: asset.version, sha256: sha256(fetched),
        delivery_mode: "dynamic-context",
      };
    }
    deliveries.push(overrides(delivery));
  }
  return {
    harness: host.harness,
    adapter: host.adapter,
    capabilities: host.capabilities,
    validator_capabilities: host.validator_capabilities,
    deliveries,
  };
}

/** The newest version folder under `parent`: the version a start that names none gets. */
async function newestVersionDir(parent) {
  const parse = (v) => v.split(".").map(Number);
  const found = (await readdir(parent, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
  assert.ok(found.length > 0, `no version under ${parent}`);
  found.sort((a, b) => {
    const [x, y] = [parse(a), parse(b)];
    return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
  });
  return join(parent, found.at(-1));
}

/**
 * Per declared output path of a workflow in the built default release, the bytes of its worked
 * example: the step document's `example`, else its schema's `examples[0]` as JSON.
 */
async function loadReleaseExamples(workflowId) {
  // The release `stable` names: what a start that names none gets.
  const channels = JSON.parse(await readFile(join(releasesRoot, "..", "channels.json"), "utf8"));
  const release = join(releasesRoot, channels.channels.stable);
  const version = await newestVersionDir(join(release, "workflows", workflowId));
  const stepsDir = join(version, "steps");
  const examples = new Map();
  for (const name of (await readdir(stepsDir)).filter((n) => n.endsWith(".json")).sort()) {
    const step = JSON.parse(await readFile(join(stepsDir, name), "utf8"));
    for (const o of step.outputs) {
      const where = `${workflowId} step ${name}: output ${o.path}`;
      if ("example" in o) {
        assert.equal(typeof o.example, "string", `${where}: example is a string`);
        examples.set(o.path, Buffer.from(o.example, "utf8"));
        continue;
      }
      assert.ok(o.schema, `${where} has an example or a schema`);
      const schemaFile = join(release, "schemas", o.schema.id, o.schema.version, "schema.json");
      const shipped = JSON.parse(await readFile(schemaFile, "utf8")).examples;
      assert.ok(Array.isArray(shipped) && shipped.length > 0, `${where}: ${schemaFile} has examples`);
      examples.set(o.path, Buffer.from(JSON.stringify(shipped[0], null, 2) + "\n", "utf8"));
    }
  }
  return examples;
}

const releaseExamples = new Map(); // workflow id -> Promise of its examples, read once

/** The bytes a harness writes at the declared output path `rel` of `wf`: the release's example. */
export async function outputContent(wf, rel) {
  if (!releaseExamples.has(wf.id)) releaseExamples.set(wf.id, loadReleaseExamples(wf.id));
  const examples = await releaseExamples.get(wf.id);
  assert.ok(examples.has(rel), `${wf.id} declares ${rel} in the default release: ${[...examples.keys()]}`);
  return examples.get(rel);
}

/** The output attestation of a work step: the release's examples written to the declared paths and read back. */
export async function outputAttestation(project, step, wf) {
  const artifacts = [];
  for (const o of step.outputs) {
    const back = await writeAndReadBack(project, o.path, await outputContent(wf, o.path));
    assert.ok(back.bytes.length <= o.max_bytes, `${o.path} fits max_bytes`);
    const artifact = {
      artifact_id: o.artifact_id, path: o.path, owner_step: o.owner_step, media_type: o.media_type,
      bytes: back.bytes.length, sha256: back.sha256, symlink_free: back.symlinkFree, read_back: true,
      write_policy: o.write_policy,
    };
    if (o.schema) {
      artifact.schema_sha256 = o.schema.sha256;
      artifact.content = JSON.parse(back.bytes.toString("utf8"));
    }
    // A deterministic check reads it: the server holds this text to the digest before running it.
    if (o.send_text) artifact.text = back.bytes.toString("utf8");
    artifacts.push(artifact);
  }
  const inputs = [];
  for (const i of step.inputs.filter((i) => i.send_text)) {
    inputs.push({ artifact_id: i.artifact_id, path: i.path, text: await readFile(join(project, i.path), "utf8") });
  }
  return { artifacts, inputs };
}

/**
 * One passing report per validator of a plan, reading exactly its declared inputs and carrying
 * the fields the validator's own report schema adds.
 */
export const passingReports = (plan, wf) =>
  plan.validators.map((v) => {
    for (const cap of wf.planCapabilities[v.id] ?? []) {
      assert.ok(v.capabilities.includes(cap), `${v.id} is planned with ${cap}: ${v.capabilities}`);
    }
    return {
      validator_id: v.id,
      validator_version: v.version,
      verdict: "pass",
      summary: "Checked the declared inputs; they answer the step.",
      findings: [],
      inputs_read: v.inputs.map((i) => i.path),
      capabilities_used: v.capabilities,
      ...structuredClone(wf.reportExtras[v.id] ?? {}),
    };
  });

async function persistSessionFile(project, payload) {
  assert.equal(payload.session_file?.path, SESSION_FILE);
  await writeAndReadBack(project, SESSION_FILE, JSON.stringify(payload.session_file.content, null, 2) + "\n");
}

/**
 * One step of a session: attest, prepare, submit passing reports. Returns the next payload
 * (status "active" or "completed"), after saving its session file.
 */
export async function advance(driver, project, payload, wf, host = hostFor(wf)) {
  const step = payload.step;
  const prepare = { checkpoint: payload.checkpoint, step_id: step.id };
  if (step.kind === "setup") prepare.host_attestation = await hostAttestation(driver, project, payload, host);
  else prepare.output_attestation = await outputAttestation(project, step, wf);
  const prepared = await driver.call(PREPARE, prepare);
  assert.notEqual(prepared.isError, true, JSON.stringify(prepared.structured));
  const plan = prepared.structured;
  assert.equal(plan.status, "ready", JSON.stringify(plan));
  const submitted = await driver.call(SUBMIT, {
    checkpoint: payload.checkpoint,
    validation_id: plan.validation_id,
    reports: passingReports(plan, wf),
  });
  assert.notEqual(submitted.isError, true, JSON.stringify(submitted.structured));
  assert.notEqual(submitted.structured.checkpoint, payload.checkpoint, "submitting moves the checkpoint");
  const next = submitted.structured;
  assert.ok(["active", "awaiting_approval", "completed"].includes(next.status), JSON.stringify(next));
  await persistSessionFile(project, next);
  return next;
}

/**
 * A whole session. `driver` = { call(tool, args) -> { structured, isError }, read(uri) -> result }.
 * Returns { final, steps, signedOff } after asserting every step ends in status "completed". A
 * step waiting for sign-off is decided by `signOff(payload)` (a facilitator of an authenticated
 * server); without one (stdio, or a server that authenticates nobody, where no one can sign off)
 * the run ends there with the session waiting.
 */
export async function runSession(driver, project, wf, signOff = null) {
  const host = hostFor(wf);
  const started = await driver.call(START, startArguments(wf, host));
  assert.notEqual(started.isError, true, JSON.stringify(started.structured));
  let payload = started.structured;
  assert.equal(payload.status, "active", JSON.stringify(payload));
  assert.equal(payload.host_adapter.id, "codex");
  assert.equal(payload.workflow.id, wf.id);
  await persistSessionFile(project, payload);
  const steps = [];
  const signedOff = [];
  let guard = 0;
  while (payload.status !== "completed") {
    assert.ok(++guard <= 10, "the session ends within ten steps");
    if (payload.status === "awaiting_approval") {
      assert.equal(payload.approval.step, steps.at(-1), JSON.stringify(payload.approval));
      assert.equal(payload.approval.self_approval, false);
      // No tool call moves a waiting step.
      const again = await driver.call(GET_ACTIVE, { checkpoint: payload.checkpoint });
      assert.equal(again.structured.status, "awaiting_approval", JSON.stringify(again.structured));
      if (!signOff) break;
      await signOff(payload);
      signedOff.push(payload.approval.step);
      const read = await driver.call(GET_ACTIVE, { checkpoint: payload.checkpoint });
      assert.notEqual(read.isError, true, JSON.stringify(read.structured));
      payload = read.structured;
      await persistSessionFile(project, payload);
      continue;
    }
    steps.push(payload.step.id);
    payload = await advance(driver, project, payload, wf, host);
  }
  assert.deepEqual(steps, wf.steps);
  if (payload.status === "completed") {
    assert.equal(payload.step ?? null, null, "no active step once completed");
    assert.deepEqual(signedOff, wf.signedOff);
  }
  return { final: payload, steps, signedOff };
}

/** The files a completed codex session leaves in the project: its assets and the examples. */
export async function assertProjectFiles(project, final, wf) {
  for (const rel of wf.codexAssets) {
    const bytes = await readFile(join(project, rel));
    assert.ok(bytes.length > 0, `${rel} is written`);
  }
  for (const rel of wf.outputs) {
    assert.deepEqual(await readFile(join(project, rel)), await outputContent(wf, rel), `${rel} holds the example`);
  }
  const session = JSON.parse(await readFile(join(project, SESSION_FILE), "utf8"));
  assert.equal(session.status, "completed");
  assert.equal(session.checkpoint, final.checkpoint);
  assert.equal(session.session_id, final.session_id);
  assert.equal(session.server, "rimthan-workflow-engine");
  assert.equal(session.workflow.id, wf.id);
}

/** A started session whose setup attestation claims one delivery's sha256 is 64 zeros. */
export async function rejectedAttestation(driver, project, wf) {
  const host = hostFor(wf);
  const started = await driver.call(START, startArguments(wf, host));
  assert.equal(started.structured.status, "active", JSON.stringify(started.structured));
  let tampered = false;
  const attestation = await hostAttestation(driver, project, started.structured, host, (d) => {
    if (tampered) return d;
    tampered = true;
    return { ...d, sha256: "0".repeat(64) };
  });
  const prepared = await driver.call(PREPARE, {
    checkpoint: started.structured.checkpoint,
    step_id: "setup-workspace",
    host_attestation: attestation,
  });
  return { started: started.structured, prepared };
}
