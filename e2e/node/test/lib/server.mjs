// Starts the real rimthan binary (RIMTHAN_BIN) for one test file: Streamable HTTP on 127.0.0.1
// and a free port with its own SQLite file, or the parameters of a stdio server. Every server
// started here is stopped by the returned stop().
import { spawn } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
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
 * `rimthan serve --listen 127.0.0.1:PORT --database-url sqlite://DIR/db.sqlite`, waited for
 * until GET /readyz answers 200. Returns { url, base, log(), stop() }.
 */
export async function startHttpServer(extraArgs = []) {
  const { dir, cleanup } = await tempDir("server");
  let lastLog = "";
  for (let attempt = 1; attempt <= 3; attempt++) {
    const port = await freePort();
    const args = ["serve", "--listen", `127.0.0.1:${port}`, "--database-url", `sqlite://${dir}/db-${attempt}.sqlite`, ...extraArgs];
    const child = spawn(rimthanBin(), args, { stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    child.stdout.on("data", (d) => (log += d));
    child.stderr.on("data", (d) => (log += d));
    const base = `http://127.0.0.1:${port}`;
    if (await ready(`${base}/readyz`, child, Date.now() + 30_000)) {
      return {
        url: `${base}/mcp`,
        base,
        log: () => log,
        stop: async () => {
          await stopChild(child);
          await cleanup();
        },
      };
    }
    lastLog = log;
    await stopChild(child);
  }
  await cleanup();
  throw new Error(`rimthan serve did not become ready:\n${lastLog}`);
}

/**
 * `startHttpServer` with credentials (`--auth tokens`): a participant who runs sessions and a
 * facilitator of their organization, who may sign off a step that asks for it
 * (docs/operations/facilitator.md §5). Returns the server plus `tokens` { participant,
 * facilitator } and `decide(session, decision)`, a facilitator's decision over the JSON door.
 */
export async function startSignedHttpServer() {
  const { dir, cleanup } = await tempDir("tokens");
  const tokens = { participant: `rimthan-e2e-${randomUUID()}`, facilitator: `rimthan-e2e-${randomUUID()}` };
  const digest = (t) => createHash("sha256").update(t).digest("hex");
  const file = join(dir, "tokens.json");
  await writeFile(file, JSON.stringify({ tokens: [
    { sha256: digest(tokens.participant), principal: "pat", organization: "acme", scopes: ["rimthan:workflow"] },
    { sha256: digest(tokens.facilitator), principal: "ann", organization: "acme", facilitator: "organization" },
  ] }));
  const server = await startHttpServer(["--auth", "tokens", "--auth-tokens-file", file]);
  const decide = async (session, decision) => {
    const response = await fetch(`${server.base}/admin/api/sessions/${session}/decisions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${tokens.facilitator}` },
      body: JSON.stringify(decision),
    });
    return { status: response.status, body: await response.json() };
  };
  return { ...server, tokens, decide, stop: async () => { await server.stop(); await cleanup(); } };
}

/** Parameters for the SDK's StdioClientTransport: `rimthan serve --stdio` on a fresh SQLite file. */
export async function stdioServer() {
  const { dir, cleanup } = await tempDir("stdio");
  return {
    params: {
      command: rimthanBin(),
      args: ["serve", "--stdio", "--database-url", `sqlite://${dir}/db.sqlite`],
      stderr: "pipe",
    },
    cleanup,
  };
}
