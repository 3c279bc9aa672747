// The official TypeScript SDK (@modelcontextprotocol/client) against the real rimthan binary:
// whole sessions of every shipped workflow (research-study, schema-migration) over Streamable HTTP in
// the legacy era (2025-11-25, initialize and Mcp-Session-Id) and pinned to 2026-07-28
// (server/discover, no session), as a participant of a server with credentials whose facilitator
// signs off the steps that ask for it, and over stdio, where such a step waits;
// plus the discovery surface, blocked starts (legacy adapter, a harness a workflow does not pin)
// and a rejected attestation.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ResourceNotFoundError } from "@modelcontextprotocol/client";
import { startSignedHttpServer, stdioServer, tempDir } from "./lib/server.mjs";
import {
  GET_ACTIVE, START, TEMPLATES, TOOLS, WORKFLOWS,
  assertProjectFiles, blockedStartArguments, rejectedAttestation, runSession, unpinnedStarts,
} from "./lib/session.mjs";
import { httpClient, sdkDriver, stdioClient, structured } from "./lib/sdk.mjs";

const TIMEOUT = { timeout: 120_000 };

/** The checks every client of every transport and era runs. */
function surfaceAndSessionTests(label, setup) {
  let ctx;
  before(async () => {
    ctx = await setup();
  });
  after(async () => {
    await ctx?.close();
  });

  test(`${label}: server identity, instructions and protocol era`, () => {
    assert.equal(ctx.client.getServerVersion()?.name, "rimthan-workflow-engine");
    assert.equal(ctx.client.getProtocolEra(), ctx.era);
    assert.equal(ctx.client.getNegotiatedProtocolVersion(), ctx.version);
    const caps = ctx.client.getServerCapabilities();
    assert.ok(caps.tools && caps.resources && caps.prompts, JSON.stringify(caps));
    assert.match(ctx.client.getInstructions() ?? "", /rimthan\.start_workflow/);
  });

  test(`${label}: tools/list is exactly the four workflow tools`, async () => {
    const { tools } = await ctx.client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
    for (const t of tools) {
      assert.equal(t.inputSchema.type, "object", t.name);
      assert.ok(t.outputSchema, `${t.name} has an outputSchema`);
      assert.ok(t.annotations, `${t.name} has annotations`);
    }
    const get = tools.find((t) => t.name === GET_ACTIVE);
    assert.equal(get.annotations.readOnlyHint, true);
    assert.equal(get.annotations.idempotentHint, true);
  });

  test(`${label}: resources, the six templates, the bootstrap prompt`, async () => {
    // Called without a cursor, the SDK walks every page (the release lists more than one).
    const listed = await ctx.client.listResources();
    const { resources } = listed;
    assert.ok(resources.length > 50 && listed.nextCursor === undefined, `${resources.length} resources`);
    const uris = resources.map((r) => r.uri);
    assert.ok(uris.includes("rimthan://bootstrap/agent-entrypoint"), "the bootstrap entrypoint is listed");
    assert.deepEqual(uris, [...uris].sort(), "resources are sorted by URI");
    for (const r of resources) assert.equal(r._meta?.["rimthan/cache-scope"], "private", r.uri);

    const templates = await ctx.client.listResourceTemplates();
    assert.deepEqual(templates.resourceTemplates.map((t) => t.name).sort(), [...TEMPLATES].sort());
    const definitions = WORKFLOWS.map((wf) => {
      const found = uris.find((u) => u.endsWith(`/workflows/${wf.id}/1.0.0/definition`));
      assert.ok(found, `the ${wf.id} definition is listed`);
      return found;
    });
    const read = await ctx.client.readResource({ uri: definitions[0] });
    assert.equal(read.contents[0]._meta?.["rimthan/immutable"], true);
    if (ctx.era === "modern") {
      // SEP-2549: the list and read results carry the private cache scope and a TTL
      for (const [what, r] of [["resources/list", listed], ["resources/templates/list", templates], ["resources/read", read]]) {
        assert.equal(r.cacheScope, "private", `${what} cacheScope`);
        assert.ok(Number.isInteger(r.ttlMs) && r.ttlMs >= 0, `${what} ttlMs ${r.ttlMs}`);
      }
    }

    const { prompts } = await ctx.client.listPrompts();
    assert.deepEqual(prompts.map((p) => p.name), ["rimthan.start_workflow"]);
    const prompt = await ctx.client.getPrompt({ name: "rimthan.start_workflow" });
    const text = prompt.messages[0].content.text;
    const boot = await ctx.client.readResource({ uri: "rimthan://bootstrap/agent-entrypoint" });
    assert.equal(boot.contents[0].text, text, "bootstrap resource and prompt hold the same paragraph");
    assert.equal(ctx.client.getInstructions(), text, "the instructions are the same paragraph");
  });

  test(`${label}: reading an unknown resource is resource-not-found naming the URI`, async () => {
    const uri = "rimthan://registry/0000.0.0/summary";
    // The SDK folds the legacy wire code -32002 and the 2026-07-28 code -32602 into one
    // ResourceNotFoundError when error.data carries the URI.
    await assert.rejects(ctx.client.readResource({ uri }), (err) => {
      assert.ok(err instanceof ResourceNotFoundError, `${err.name} ${err.code}: ${err.message}`);
      assert.equal(err.uri, uri);
      assert.ok(err.message.includes(uri), err.message);
      return true;
    });
  });

  for (const wf of WORKFLOWS) {
    test(`${label}: a whole ${wf.id} session completes with real files`, TIMEOUT, async () => {
      await ctx.client.listTools(); // primes the SDK's outputSchema validation of every call below
      const project = await tempDir("project");
      try {
        const signOff = ctx.decide && (async (payload) => {
          const { status, body } = await ctx.decide(payload.session_id, { step: payload.approval.step, action: "approve" });
          assert.equal(status, 200, JSON.stringify(body));
        });
        const { final } = await runSession(sdkDriver(ctx.client), project.dir, wf, signOff);
        if (!signOff && wf.signedOff.length > 0) {
          // Over stdio nobody is authenticated, so nobody can sign the step off: it waits.
          assert.equal(final.status, "awaiting_approval");
          return;
        }
        assert.equal(final.status, "completed");
        await assertProjectFiles(project.dir, final, wf);
        const again = await ctx.client.callTool({ name: GET_ACTIVE, arguments: { checkpoint: final.checkpoint } });
        assert.notEqual(again.isError, true);
        assert.equal(structured(again).status, "completed");
      } finally {
        await project.cleanup();
      }
    });
  }

  test(`${label}: a harness the workflow does not pin is blocked with unsupported_harness`, async () => {
    const starts = unpinnedStarts();
    assert.ok(starts.length > 0, "a shipped workflow leaves a harness out");
    for (const { wf, harness, args } of starts) {
      const result = await ctx.client.callTool({ name: START, arguments: args });
      assert.equal(result.isError, true, `${wf.id} as ${harness}`);
      const blocked = structured(result);
      assert.equal(blocked.status, "blocked");
      assert.deepEqual(blocked.blockers.map((b) => b.code), ["unsupported_harness"]);
    }
  });

  test(`${label}: codex declaring the legacy adapter is blocked`, async () => {
    const result = await ctx.client.callTool({ name: START, arguments: blockedStartArguments() });
    assert.equal(result.isError, true);
    const blocked = structured(result);
    assert.equal(blocked.status, "blocked");
    assert.deepEqual(blocked.blockers.map((b) => b.code), [
      "host_adapter_contract_unavailable",
      "host_adapter_binding_mismatch",
    ]);
  });

  for (const wf of WORKFLOWS) {
    test(`${label}: ${wf.id}: a delivery whose sha256 is 64 zeros is rejected`, TIMEOUT, async () => {
      await ctx.client.listTools();
      const project = await tempDir("project");
      try {
        const { prepared } = await rejectedAttestation(sdkDriver(ctx.client), project.dir, wf);
        assert.equal(prepared.isError, true);
        assert.equal(prepared.structured.status, "rejected");
        assert.deepEqual(prepared.structured.failures.map((f) => f.code), ["asset_digest_mismatch"]);
      } finally {
        await project.cleanup();
      }
    });
  }
}

describe("TypeScript SDK, Streamable HTTP, legacy era (2025-11-25)", () => {
  surfaceAndSessionTests("http legacy", async () => {
    const server = await startSignedHttpServer();
    try {
      const client = await httpClient(server.url, "legacy", { authorization: `Bearer ${server.tokens.participant}` });
      return {
        client, era: "legacy", version: "2025-11-25", decide: server.decide,
        close: async () => { await client.close(); await server.stop(); },
      };
    } catch (e) {
      await server.stop();
      throw e;
    }
  });
});

describe("TypeScript SDK, Streamable HTTP, pinned 2026-07-28", () => {
  surfaceAndSessionTests("http 2026-07-28", async () => {
    const server = await startSignedHttpServer();
    try {
      const client = await httpClient(server.url, { pin: "2026-07-28" }, { authorization: `Bearer ${server.tokens.participant}` });
      return {
        client, era: "modern", version: "2026-07-28", decide: server.decide,
        close: async () => { await client.close(); await server.stop(); },
      };
    } catch (e) {
      await server.stop();
      throw e;
    }
  });
});

describe("TypeScript SDK, stdio, legacy era (2025-11-25)", () => {
  surfaceAndSessionTests("stdio", async () => {
    const server = await stdioServer();
    try {
      const { client } = await stdioClient(server.params, "legacy");
      return {
        client, era: "legacy", version: "2025-11-25",
        close: async () => { await client.close(); await server.cleanup(); },
      };
    } catch (e) {
      await server.cleanup();
      throw e;
    }
  });
});

describe("TypeScript SDK, stdio, pinned 2026-07-28", () => {
  surfaceAndSessionTests("stdio 2026-07-28", async () => {
    const server = await stdioServer();
    try {
      const { client } = await stdioClient(server.params, { pin: "2026-07-28" });
      return {
        client, era: "modern", version: "2026-07-28",
        close: async () => { await client.close(); await server.cleanup(); },
      };
    } catch (e) {
      await server.cleanup();
      throw e;
    }
  });
});
