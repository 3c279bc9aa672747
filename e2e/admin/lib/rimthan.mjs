// The real rimthan binary (RIMTHAN_BIN) for the /admin test: `rimthan serve --auth tokens` on
// 127.0.0.1 and a free port with its own SQLite store, `rimthan stage` and `rimthan sessions`
// beside it, and one raw JSON-RPC tools/call. The server helpers follow e2e/node's
// test/lib/server.mjs; every server started here is stopped by the returned stop().
import { execFile, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export function rimthanBin() {
  const bin = process.env.RIMTHAN_BIN;
  if (!bin) throw new Error("RIMTHAN_BIN must name the rimthan binary");
  return bin;
}

/** A fresh temporary folder; removed by the returned cleanup. */
export async function tempDir(prefix) {
  const dir = await mkdtemp(join(tmpdir(), `rimthan-e2e-${prefix}-`));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function ready(url, child, deadline) {
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (r.status === 200) return true;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  return false;
}

function stopChild(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/**
 * Bearer tokens for `--auth-tokens-file`: `entries` maps a name to the token entry without its
 * sha256 ({ principal, organization?, scopes?, facilitator? }). Writes the file into `dir` and
 * returns { file, tokens: { name: token } }.
 */
export async function writeTokensFile(dir, entries) {
  const tokens = {};
  const listed = [];
  for (const [name, entry] of Object.entries(entries)) {
    const token = `rimthan-e2e-admin-${name}-${randomBytes(16).toString("hex")}`;
    tokens[name] = token;
    listed.push({ sha256: createHash("sha256").update(token).digest("hex"), ...entry });
  }
  const file = join(dir, "tokens.json");
  await writeFile(file, JSON.stringify({ tokens: listed }, null, 2));
  return { file, tokens };
}

/**
 * `rimthan serve --listen 127.0.0.1:PORT --database-url sqlite://DIR/store.db ...extraArgs`,
 * waited for until GET /readyz answers 200. Returns { url, base, databaseUrl, log(), stop() };
 * the store stays in `dir` (the caller's to remove).
 */
export async function startServer(dir, extraArgs = []) {
  const databaseUrl = `sqlite://${dir}/store.db`;
  let lastLog = "";
  for (let attempt = 1; attempt <= 3; attempt++) {
    const port = await freePort();
    const args = ["serve", "--listen", `127.0.0.1:${port}`, "--database-url", databaseUrl, ...extraArgs];
    const child = spawn(rimthanBin(), args, { stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    child.stdout.on("data", (d) => (log += d));
    child.stderr.on("data", (d) => (log += d));
    const base = `http://127.0.0.1:${port}`;
    if (await ready(`${base}/readyz`, child, Date.now() + 30_000)) {
      return { url: `${base}/mcp`, base, databaseUrl, log: () => log, stop: () => stopChild(child) };
    }
    lastLog = log;
    await stopChild(child);
  }
  throw new Error(`rimthan serve did not become ready:\n${lastLog}`);
}

/**
 * Runs `rimthan ...args`; resolves { stdout, stderr, code } on an exit status in `codes` (0 unless
 * told), rejects with both otherwise.
 */
export function rimthan(args, env = {}, codes = [0]) {
  return new Promise((resolve, reject) => {
    execFile(
      rimthanBin(),
      args,
      { env: { ...process.env, ...env }, timeout: 180_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? error.code : 0;
        if (codes.includes(code)) {
          resolve({ stdout, stderr, code });
        } else {
          reject(new Error(`rimthan ${args.join(" ")} failed (${error?.code ?? error?.signal}):\n${stdout}\n${stderr}`));
        }
      },
    );
  });
}

/** `rimthan sessions list --json` on a store: every session (up to 1000), as parsed JSON. */
export async function listSessions(databaseUrl) {
  const { stdout } = await rimthan(["sessions", "list", "--database-url", databaseUrl, "--json", "--limit", "1000"]);
  return JSON.parse(stdout);
}

/** `rimthan sessions show ID --json` on a store. */
export async function showSession(databaseUrl, id) {
  const { stdout } = await rimthan(["sessions", "show", "--database-url", databaseUrl, id, "--json"]);
  return JSON.parse(stdout);
}

/** The JSON-RPC answer in a Streamable HTTP response body: plain JSON, or the last SSE `data:`. */
function jsonRpcAnswer(contentType, text) {
  if (!contentType.includes("text/event-stream")) return JSON.parse(text);
  const data = text.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim());
  if (data.length === 0) throw new Error(`no data in the event stream:\n${text}`);
  return JSON.parse(data.at(-1));
}

/**
 * One raw `tools/call` POST to the MCP endpoint on the 2026-07-28 revision (stateless: the
 * revision's headers and `_meta`, no initialize), with a bearer token. Returns the JSON-RPC answer.
 */
export async function callTool(url, token, name, args) {
  const version = "2026-07-28";
  const body = {
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: {
      name,
      arguments: args,
      _meta: {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
      },
    },
  };
  const response = await fetch(url, {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": version,
      "Mcp-Method": "tools/call",
      "Mcp-Name": name,
      Authorization: `Bearer ${token}`,
    },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`tools/call ${name}: HTTP ${response.status}\n${text}`);
  return jsonRpcAnswer(response.headers.get("content-type") ?? "", text);
}
