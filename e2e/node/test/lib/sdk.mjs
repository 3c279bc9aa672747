// Clients of the official TypeScript SDK (@modelcontextprotocol/client v2) and a session driver
// on top of them. The SDK validates every tool result's structuredContent against the tool's
// outputSchema (from the cached tools/list), so listTools() runs before any call.
import assert from "node:assert/strict";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const INFO = { name: "rimthan-e2e-typescript-sdk", version: "1.0.0" };

/**
 * mode: 'legacy' (initialize + Mcp-Session-Id) or { pin: '2026-07-28' } (server/discover);
 * `headers` go on every request (an Authorization header, say).
 */
export async function httpClient(url, mode, headers = {}) {
  const client = new Client(INFO, { versionNegotiation: { mode } });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

export async function stdioClient(params, mode = "legacy") {
  const transport = new StdioClientTransport(params);
  let stderr = "";
  transport.stderr?.on("data", (d) => (stderr += d));
  const client = new Client(INFO, { versionNegotiation: { mode } });
  await client.connect(transport);
  return { client, stderr: () => stderr };
}

/** The structured content of a tool result, checked against its JSON text mirror. */
export function structured(result) {
  assert.notEqual(result.structuredContent, undefined, "the result carries structuredContent");
  const text = result.content.find((c) => c.type === "text");
  assert.ok(text, "the result carries a text mirror");
  assert.deepEqual(JSON.parse(text.text), result.structuredContent, "the text mirrors structuredContent");
  return result.structuredContent;
}

/** A W3C trace context of its own: every call and read of a driver carries it in `_meta`, as a
 * traced host's requests do, so the server's spans for the session are one trace
 * (docs/operations/tracing.md §3). */
function traceparent() {
  const hex = (bytes) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex");
  return `00-${hex(16)}-${hex(8)}-01`;
}

export function sdkDriver(client) {
  const _meta = { traceparent: traceparent() };
  return {
    async call(name, args) {
      const result = await client.callTool({ name, arguments: args, _meta });
      return { structured: structured(result), isError: result.isError === true, raw: result };
    },
    read: (uri) => client.readResource({ uri, _meta }),
  };
}
