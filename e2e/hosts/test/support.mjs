// Shared support of the host tests: the rimthan release binary on a port it picks itself, scratch
// folders, the host CLIs with isolated homes, and `rimthan stage` to render a project.
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const RIMTHAN = process.env.RIMTHAN_BIN;
export const CLAUDE = join(here, '..', 'node_modules', '.bin', 'claude');
export const CODEX = join(here, '..', 'node_modules', '.bin', 'codex');

/** A fresh scratch folder. */
export function scratch(prefix) {
  return mkdtempSync(join(tmpdir(), `rimthan-hosts-${prefix}-`));
}

/** The environment for Claude Code: its own HOME, no telemetry, updates or error reports. */
export function claudeEnv(home, extra = {}) {
  mkdirSync(home, { recursive: true });
  return {
    PATH: process.env.PATH,
    HOME: home,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    ...extra,
  };
}

/** The environment for Codex: its own CODEX_HOME (and HOME). */
export function codexEnv(home, extra = {}) {
  mkdirSync(home, { recursive: true });
  return { PATH: process.env.PATH, HOME: home, CODEX_HOME: home, ...extra };
}

/**
 * Runs a program to its end with stdin closed; rejects on a non-zero exit (or after `timeout`)
 * unless `allowFailure`.
 */
export function run(file, args, { env, cwd, timeout = 120_000, allowFailure = false } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => { stdout += c; });
    child.stderr.on('data', (c) => { stderr += c; });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0 || (allowFailure && code !== null)) return resolve({ code, stdout, stderr });
      reject(new Error(`${file} ${args.join(' ')} ended with ${code ?? signal}\n${stdout}\n${stderr}`));
    });
  });
}

/**
 * `rimthan serve` on 127.0.0.1 with a memory store, on a port it picks and logs (so no other
 * test can take it in between). Returns its MCP URL and a `stop()`.
 */
export async function startServer(extraArgs = []) {
  const child = spawn(RIMTHAN, ['serve', '--listen', '127.0.0.1:0', '--database-url', 'sqlite::memory:', ...extraArgs], {
    env: { PATH: process.env.PATH, RUST_LOG: 'info', RIMTHAN_LOG_FORMAT: 'text' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`rimthan serve did not start:\n${log}`)), 20_000);
    child.stderr.on('data', (chunk) => {
      log += chunk;
      const found = /http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(log);
      if (found) {
        clearTimeout(timer);
        resolve(found[0]);
      }
    });
    child.on('exit', (code) => reject(new Error(`rimthan serve exited with ${code}:\n${log}`)));
  });
  return {
    url,
    log: () => log,
    stop: () => new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.on('exit', resolve);
      child.kill('SIGTERM');
    }),
  };
}

/** Runs `rimthan stage` for `harness` against `url` into a new project folder; returns it. */
export async function stagedProject(harness, url, workflow = 'research-study') {
  const project = scratch(`project-${harness}`);
  await run(RIMTHAN, ['stage', '--harness', harness, '--workflow', workflow, '--url', url, '--project', project], {
    env: { PATH: process.env.PATH },
  });
  return project;
}
