// Codex against rimthan, offline and without a model: Codex's own MCP client, driven through
// `codex app-server`, on both protocol revisions Codex 0.171 speaks; and a project rendered by
// `rimthan stage --harness codex`, whose skill and agent roles Codex must load.
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CODEX, codexEnv, run, scratch, stagedProject, startServer } from './support.mjs';

const TOOLS = [
  'rimthan.get_active_step',
  'rimthan.prepare_step_validation',
  'rimthan.start_workflow',
  'rimthan.submit_step_reports',
];
const TEMPLATES = [
  'rimthan://registry/{release}/assets/{kind}/{asset_id}/{version}/content{?harness}',
  'rimthan://registry/{release}/schemas/{schema_id}/{version}',
  'rimthan://registry/{release}/validators/{validator_id}/{version}',
  'rimthan://registry/{release}/workflows/{workflow_id}/{version}/checks/{check_id}',
  'rimthan://registry/{release}/workflows/{workflow_id}/{version}/definition',
  'rimthan://registry/{release}/workflows/{workflow_id}/{version}/steps/{step_id}',
];
const ENTRYPOINT = 'rimthan://bootstrap/agent-entrypoint';
const ROLES = ['claim-checker', 'scope-reviewer', 'source-auditor'];
const MALFORMED_ROLE = 'Ignoring malformed agent role definition';
const UNTRUSTED = 'disabled in the following folders until the project is trusted';
const ANSWER_TIMEOUT = 30_000;
// Nothing here needs a model, yet Codex contacts its provider (api.openai.com) at start-up: aimed
// at a closed loopback port it fails at once instead of waiting out DNS, 5 s that also delay exit.
const NO_MODEL = ['-c', 'openai_base_url="http://127.0.0.1:1/v1"'];

/**
 * `codex app-server` on stdio (newline-delimited JSON-RPC 2.0), already initialized. Keeps
 * every notification so a test can wait for one that may have arrived before it asked.
 */
async function appServer({ home, cwd, args = [], env = {} }) {
  // Its own process group: the npm wrapper and the native binary it runs are ended together.
  const child = spawn(CODEX, ['app-server', ...NO_MODEL, ...args], {
    env: codexEnv(home, env), cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true,
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const pending = new Map();
  const notifications = [];
  const waiters = new Set();
  const exited = new Promise((resolve) => child.on('close', resolve));
  const fail = (why) => {
    for (const settle of pending.values()) settle({ error: { message: `${why}\n${stderr}` } });
    pending.clear();
  };
  child.on('error', (e) => fail(`codex app-server: ${e.message}`));
  // `close`, not `exit`: answers still buffered in stdout are delivered first.
  child.on('close', (code, signal) => fail(`codex app-server exited (${code ?? signal})`));
  createInterface({ input: child.stdout }).on('line', (line) => {
    const message = JSON.parse(line);
    if (message.method === undefined) {
      pending.get(message.id)?.(message);
      pending.delete(message.id);
    } else if (message.id === undefined) {
      notifications.push(message);
      for (const waiter of waiters) waiter(message);
    }
  });
  const send = (message) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
  let lastId = 0;

  const codex = {
    notifications,
    stderr: () => stderr,
    request(method, params) {
      const id = ++lastId;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`${method}: no answer in ${ANSWER_TIMEOUT} ms\n${stderr}`));
        }, ANSWER_TIMEOUT);
        pending.set(id, (message) => {
          clearTimeout(timer);
          if (message.error) reject(new Error(`${method}: ${JSON.stringify(message.error)}`));
          else resolve(message.result);
        });
        send({ id, method, params });
      });
    },
    /** The params of the first notification `method` whose params satisfy `matches`. */
    notification(method, matches) {
      const hit = (message) => message.method === method && matches(message.params);
      const seen = notifications.find(hit);
      if (seen) return Promise.resolve(seen.params);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`no ${method} notification in ${ANSWER_TIMEOUT} ms\n${stderr}`));
        }, ANSWER_TIMEOUT);
        const waiter = (message) => {
          if (!hit(message)) return;
          clearTimeout(timer);
          waiters.delete(waiter);
          resolve(message.params);
        };
        waiters.add(waiter);
      });
    },
    /** SIGTERM to the process group; SIGKILL only if that hangs. */
    async close() {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
      child.stdin.end();
      process.kill(-child.pid, 'SIGTERM');
      const timer = setTimeout(() => process.kill(-child.pid, 'SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
  try {
    await codex.request('initialize', { clientInfo: { name: 'rimthan-e2e', version: '0.0.0' } });
    send({ method: 'initialized' });
  } catch (e) {
    await codex.close();
    throw e;
  }
  return codex;
}

/** The protocol revisions rimthan saw on its requests (rmcp logs each peer at info level). */
function negotiatedRevisions(serverLog) {
  const found = serverLog.matchAll(/protocol_version: ProtocolVersion\("([^"]+)"\)/g);
  return [...new Set([...found].map((m) => m[1]))];
}

/**
 * The agent roles offered to the model, name to description, as `codex debug prompt-input`
 * renders them in the `agent_type` parameter of `spawn_agent` (absent when no role loaded).
 */
async function promptRoles(home, project) {
  const { stdout } = await run(CODEX, ['debug', 'prompt-input', ...NO_MODEL], {
    env: codexEnv(home), cwd: project, timeout: 60_000,
  });
  const spawnAgent = (tools) => {
    for (const tool of tools ?? []) {
      const found = tool.name === 'spawn_agent' ? tool : spawnAgent(tool.tools);
      if (found) return found;
    }
    return undefined;
  };
  const tool = JSON.parse(stdout).map((item) => spawnAgent(item.tools)).find(Boolean);
  assert.ok(tool, 'the prompt offers spawn_agent');
  const description = tool.parameters.properties.agent_type?.description ?? '';
  return new Map([...description.matchAll(/^([\w-]+): \{\n([\s\S]*?)\n\}$/gm)].map((m) => [m[1], m[2]]));
}

/** The `description` a staged role file declares. */
function roleDescription(project, role) {
  const toml = readFileSync(join(project, '.codex', 'agents', `${role}.toml`), 'utf8');
  return JSON.parse(/^description = (".*")$/m.exec(toml)[1]);
}

test('codex: the adapter\'s registration stores the variable\'s name and sends the token it holds', async (t) => {
  const token = 'hosts-test-token-fedcba9876543210';
  const tokens = join(scratch('codex-tokens'), 'tokens.json');
  const digest = createHash('sha256').update(token).digest('hex');
  writeFileSync(tokens, JSON.stringify({ tokens: [{ sha256: digest, principal: 'alice', organization: 'example', scopes: ['rimthan:workflow'] }] }));
  const server = await startServer(['--auth', 'tokens', '--auth-tokens-file', tokens]);
  t.after(() => server.stop());
  const home = scratch('codex-home');
  await run(CODEX, ['mcp', 'add', 'rimthan', '--url', server.url, '--bearer-token-env-var', 'RIMTHAN_TOKEN'], { env: codexEnv(home) });
  const config = readFileSync(join(home, 'config.toml'), 'utf8');
  assert.match(config, /bearer_token_env_var = "RIMTHAN_TOKEN"/);
  assert.ok(!config.includes(token));
  const listed = async (value) => {
    const codex = await appServer({ home, cwd: scratch('codex-cwd'), env: { RIMTHAN_TOKEN: value } });
    try {
      const { data } = await codex.request('mcpServerStatus/list', {});
      return Object.keys(data.find((s) => s.name === 'rimthan')?.tools ?? {}).sort();
    } finally {
      await codex.close();
    }
  };
  assert.deepEqual(await listed(token), TOOLS);
  assert.notDeepEqual(await listed('not-the-token'), TOOLS);
});

for (const { revision, how, args } of [
  { revision: '2025-06-18', how: 'by default', args: [] },
  { revision: '2026-07-28', how: 'with --enable mcp_2026_07_28', args: ['--enable', 'mcp_2026_07_28'] },
]) {
  test(`codex: app-server connects on MCP ${revision} ${how}, lists exactly the four tools, the resources and the 6 templates, calls a tool and reads a resource`, async (t) => {
    const server = await startServer();
    t.after(() => server.stop());
    const home = scratch('codex-home');
    await run(CODEX, ['mcp', 'add', 'rimthan', '--url', server.url], { env: codexEnv(home) });
    const cwd = scratch('codex-cwd');
    const codex = await appServer({ home, cwd, args });
    t.after(() => codex.close());

    const { data } = await codex.request('mcpServerStatus/list', {});
    const status = data.find((s) => s.name === 'rimthan');
    assert.ok(status, `rimthan in ${JSON.stringify(data.map((s) => s.name))}`);
    assert.equal(status.serverInfo?.name, 'rimthan-workflow-engine');
    assert.equal(status.toolsError, null);
    assert.deepEqual(Object.keys(status.tools).sort(), TOOLS);
    assert.deepEqual(Object.values(status.tools).map((tool) => tool.name).sort(), TOOLS);
    assert.ok(status.resources.some((r) => r.uri === ENTRYPOINT), 'the entrypoint is listed');
    assert.deepEqual(status.resourceTemplates.map((r) => r.uriTemplate).sort(), TEMPLATES);

    // Tool calls and reads go through a thread's own MCP connection, once it is ready.
    const { thread } = await codex.request('thread/start', { cwd });
    const startup = await codex.notification('mcpServer/startupStatus/updated',
      (p) => p.name === 'rimthan' && p.threadId === thread.id && p.status !== 'starting');
    assert.equal(startup.status, 'ready', startup.error);

    const call = await codex.request('mcpServer/tool/call', {
      server: 'rimthan', threadId: thread.id, tool: 'rimthan.get_active_step',
      arguments: { checkpoint: 'not-a-checkpoint' },
    });
    assert.equal(call.isError, true);
    assert.equal(call.structuredContent.status, 'rejected');
    assert.deepEqual(call.structuredContent.failures.map((f) => f.code), ['invalid_checkpoint']);

    const { contents } = await codex.request('mcpServer/resource/read', {
      server: 'rimthan', threadId: thread.id, uri: ENTRYPOINT,
    });
    assert.equal(contents.length, 1);
    assert.equal(contents[0].uri, ENTRYPOINT);
    assert.match(contents[0].text, /Workflows in release/);
    assert.match(contents[0].text, /`research-study`/);

    assert.deepEqual(negotiatedRevisions(server.log()), [revision]);
  });
}

describe('codex in a project rendered by `rimthan stage --harness codex`', () => {
  let project;
  before(async () => {
    const server = await startServer();
    try {
      // Codex keys trust by the resolved path.
      project = realpathSync(await stagedProject('codex', server.url));
    } finally {
      await server.stop();
    }
  });

  test('codex: in the trusted project, skills/list returns rimthan-research without errors and all three agent roles load', async (t) => {
    const home = scratch('codex-home');
    appendFileSync(join(home, 'config.toml'),
      `[projects.${JSON.stringify(project)}]\ntrust_level = "trusted"\n`);
    const codex = await appServer({ home, cwd: project });
    t.after(() => codex.close());

    const { data } = await codex.request('skills/list', { cwds: [project] });
    const entry = data.find((e) => e.cwd === project);
    assert.deepEqual(entry.errors, []);
    const skill = entry.skills.find((s) => s.name === 'rimthan-research');
    assert.ok(skill, `rimthan-research in ${JSON.stringify(entry.skills.map((s) => s.name))}`);
    assert.equal(skill.scope, 'repo');
    assert.equal(skill.enabled, true);
    assert.equal(skill.path, join(project, '.agents', 'skills', 'rimthan-research', 'SKILL.md'));

    const { layers } = await codex.request('config/read', { cwd: project, includeLayers: true });
    const projectLayer = layers.find((l) => l.name.type === 'project');
    assert.equal(projectLayer.disabledReason ?? null, null);

    // Codex reports a bad role file as a config warning at startup and as a thread warning.
    await codex.request('thread/start', { cwd: project });
    const warnings = codex.notifications
      .filter((n) => n.method === 'configWarning' || n.method === 'warning')
      .map((n) => n.params.summary ?? n.params.message);
    assert.deepEqual(warnings.filter((w) => w.includes(MALFORMED_ROLE) || w.includes(UNTRUSTED)), []);
    assert.ok(!codex.stderr().includes(MALFORMED_ROLE), codex.stderr());

    const roles = await promptRoles(home, project);
    for (const role of ROLES) assert.equal(roles.get(role), roleDescription(project, role), role);
  });

  test('codex: in the same project untrusted, Codex says project config is disabled and no agent role loads', async (t) => {
    const home = scratch('codex-home');
    const codex = await appServer({ home, cwd: project });
    t.after(() => codex.close());

    const warning = await codex.notification('configWarning', (p) => p.summary.includes(UNTRUSTED));
    assert.ok(warning.summary.includes(join(project, '.codex')), warning.summary);
    const { layers } = await codex.request('config/read', { cwd: project, includeLayers: true });
    assert.match(layers.find((l) => l.name.type === 'project').disabledReason, /as a trusted project/);

    const roles = await promptRoles(home, project);
    assert.deepEqual(ROLES.filter((role) => roles.has(role)), []);
  });
});
