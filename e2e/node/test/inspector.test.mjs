// The MCP Inspector CLI against the real rimthan binary over Streamable HTTP: the discovery
// surface, and a whole session of every shipped workflow driven by repeated `--method tools/call
// --tool-args-json` invocations. Every invocation is a new process and a new MCP connection, so
// the only thing that carries the session from one call to the next is the checkpoint.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { inspector } from "./lib/inspector.mjs";
import { startHttpServer, tempDir } from "./lib/server.mjs";
import {
  GET_ACTIVE, START, TEMPLATES, TOOLS, WORKFLOWS,
  assertProjectFiles, blockedStartArguments, rejectedAttestation, runSession, unpinnedStarts,
} from "./lib/session.mjs";

describe("MCP Inspector CLI, Streamable HTTP", () => {
  let server;
  let home;
  let cli;
  before(async () => {
    server = await startHttpServer();
    home = await tempDir("inspector-home");
    cli = inspector(server.url, home.dir);
  });
  after(async () => {
    await server?.stop();
    await home?.cleanup();
  });

  test("tools/list: exactly the four workflow tools", async () => {
    const { result } = await cli.method("tools/list");
    assert.deepEqual(result.tools.map((t) => t.name).sort(), [...TOOLS].sort());
  });

  test("tools/list in the 2026-07-28 era (--protocol-era modern)", async () => {
    const { result } = await cli.method("tools/list", ["--protocol-era", "modern"]);
    assert.deepEqual(result.tools.map((t) => t.name).sort(), [...TOOLS].sort());
  });

  test("resources/list: the release's resources and the bootstrap entrypoint, sorted", async () => {
    const { result } = await cli.method("resources/list");
    const uris = result.resources.map((r) => r.uri);
    assert.ok(uris.includes("rimthan://bootstrap/agent-entrypoint"));
    for (const wf of WORKFLOWS) {
      const definition = new RegExp(`^rimthan://registry/[^/]+/workflows/${wf.id}/1\\.0\\.0/definition$`);
      assert.ok(uris.some((u) => definition.test(u)), `${wf.id} definition listed:\n${uris.join("\n")}`);
    }
    assert.deepEqual(uris, [...uris].sort());
  });

  test("resources/templates/list: the six templates", async () => {
    const { result } = await cli.method("resources/templates/list");
    assert.deepEqual(result.resourceTemplates.map((t) => t.name).sort(), [...TEMPLATES].sort());
  });

  test("prompts/get rimthan.start_workflow", async () => {
    const { result } = await cli.method("prompts/get", ["--prompt-name", "rimthan.start_workflow"]);
    assert.equal(result.messages.length, 1);
    assert.equal(result.messages[0].role, "user");
    assert.match(result.messages[0].content.text, /rimthan\.start_workflow/);
    assert.match(result.messages[0].content.text, /rimthan\.submit_step_reports/);
  });

  for (const wf of WORKFLOWS) {
    test(`a whole ${wf.id} session through repeated tools/call`, { timeout: 240_000 }, async () => {
      const project = await tempDir("inspector-project");
      try {
        const { final } = await runSession(cli, project.dir, wf);
        if (wf.signedOff.length > 0) {
          // This server authenticates nobody, so nobody can sign the step off: it waits.
          assert.equal(final.status, "awaiting_approval");
          return;
        }
        assert.equal(final.status, "completed");
        await assertProjectFiles(project.dir, final, wf);
        const again = await cli.call(GET_ACTIVE, { checkpoint: final.checkpoint });
        assert.equal(again.isError, false);
        assert.equal(again.structured.status, "completed");
      } finally {
        await project.cleanup();
      }
    });
  }

  test("a harness a workflow does not pin is blocked with unsupported_harness", async () => {
    const starts = unpinnedStarts();
    assert.ok(starts.length > 0, "a shipped workflow leaves a harness out");
    for (const { wf, harness, args } of starts) {
      const blocked = await cli.call(START, args);
      assert.equal(blocked.isError, true, `${wf.id} as ${harness}`);
      assert.deepEqual(blocked.structured.blockers.map((b) => b.code), ["unsupported_harness"]);
    }
  });

  test("a blocked start exits 5 with the blockers", async () => {
    const blocked = await cli.call(START, blockedStartArguments());
    assert.equal(blocked.isError, true);
    assert.deepEqual(blocked.structured.blockers.map((b) => b.code), [
      "host_adapter_contract_unavailable",
      "host_adapter_binding_mismatch",
    ]);
  });

  test("a delivery whose sha256 is 64 zeros is rejected", { timeout: 120_000 }, async () => {
    const project = await tempDir("inspector-project");
    try {
      const { prepared } = await rejectedAttestation(cli, project.dir, WORKFLOWS[0]);
      assert.equal(prepared.isError, true);
      assert.deepEqual(prepared.structured.failures.map((f) => f.code), ["asset_digest_mismatch"]);
    } finally {
      await project.cleanup();
    }
  });
});
