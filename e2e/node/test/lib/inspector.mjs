// The MCP Inspector CLI (@modelcontextprotocol/inspector v2, `mcp-inspector --cli`) spawned as a
// subprocess, one connection per invocation, with `--format json -q` so stdout is one JSON
// object {"result": …}. Its HOME is a temporary folder (it keeps ~/.mcp-inspector/storage).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const nodeRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const INSPECTOR_BIN = join(nodeRoot, "node_modules/.bin/mcp-inspector");

/** Exit code of `tools/call` when the tool answered isError: true (the result is still printed). */
export const EXIT_TOOL_IS_ERROR = 5;

export function inspector(url, home) {
  async function run(args) {
    return new Promise((resolveRun) => {
      execFile(
        process.execPath,
        [INSPECTOR_BIN, "--cli", url, ...args, "--format", "json", "-q"],
        {
          env: { ...process.env, HOME: home, NO_COLOR: "1" },
          maxBuffer: 64 * 1024 * 1024,
          timeout: 60_000,
        },
        (error, stdout, stderr) => {
          const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
          resolveRun({ code, stdout, stderr });
        },
      );
    });
  }

  /** Runs one method; returns its `result`. Fails unless the exit code is one of `okCodes`. */
  async function method(name, args = [], okCodes = [0]) {
    const out = await run(["--method", name, ...args]);
    assert.ok(
      okCodes.includes(out.code),
      `mcp-inspector --method ${name} ${args.join(" ")} exited ${out.code}\nstdout: ${out.stdout}\nstderr: ${out.stderr}`,
    );
    const parsed = JSON.parse(out.stdout);
    assert.ok(parsed && "result" in parsed, `result envelope: ${out.stdout.slice(0, 500)}`);
    return { result: parsed.result, code: out.code, stderr: out.stderr };
  }

  return {
    run,
    method,
    /** tools/call with --tool-args-json; isError results are returned, not thrown. */
    async call(tool, args) {
      const { result, code } = await method(
        "tools/call",
        ["--tool-name", tool, "--tool-args-json", JSON.stringify(args)],
        [0, EXIT_TOOL_IS_ERROR],
      );
      const isError = result.isError === true;
      assert.equal(code === EXIT_TOOL_IS_ERROR, isError, "exit code 5 exactly when isError");
      const text = result.content.find((c) => c.type === "text");
      assert.deepEqual(JSON.parse(text.text), result.structuredContent, "the text mirrors structuredContent");
      return { structured: result.structuredContent, isError, raw: result };
    },
    async read(uri) {
      return (await method("resources/read", ["--uri", uri])).result;
    },
  };
}
