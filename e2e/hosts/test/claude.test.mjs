// Claude Code, the real CLI at the pinned version, against the rimthan release binary on
// loopback: the connection over HTTP and stdio, the four tools, a tool call and a resource read
// through its own MCP client (a scripted model on loopback asks for them), and every file
// `rimthan stage --harness claude-code` renders, as Claude Code loads and validates it; and each
// validator rendition is read-only by Claude Code's own enforcement, whatever the session allows.
// Claude Code speaks 2025-11-25 only; 2026-07-28 is proved by the SDK suites.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';

import { CLAUDE, RIMTHAN, claudeEnv, run, scratch, stagedProject, startServer } from './support.mjs';
import { startModel, text, toolResults, toolUse } from './anthropic-model.mjs';

const TOOLS = ['start_workflow', 'get_active_step', 'prepare_step_validation', 'submit_step_reports'];
const VALIDATORS = ['claim-checker', 'scope-reviewer', 'source-auditor'];

let server;
let project;

before(async () => {
  server = await startServer();
  project = await stagedProject('claude-code', server.url);
});

after(async () => {
  await server?.stop();
});

/** A scratch HOME with rimthan added over HTTP, and the environment to run Claude Code in. */
async function claudeWith(extra = {}) {
  const env = claudeEnv(scratch('claude-home'), extra);
  await run(CLAUDE, ['mcp', 'add', '--transport', 'http', 'rimthan', server.url], { env, cwd: project });
  return env;
}

/** Runs `claude -p` in the rendered project with the scripted `model`; the parsed stream. */
async function scriptedSession(model, allowedTools) {
  const env = await claudeWith({ ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'sk-ant-scripted' });
  const { stdout } = await run(
    CLAUDE,
    ['-p', 'Continue the rimthan workflow.', '--output-format', 'stream-json', '--verbose', '--allowedTools', allowedTools],
    { env, cwd: project, timeout: 90_000 },
  );
  return stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line));
}

/** The tool results Claude Code fed back to the model, as text. */
function resultsIn(stream) {
  return stream
    .filter((m) => m.type === 'user')
    .flatMap((m) => m.message.content)
    .filter((c) => c.type === 'tool_result')
    .map((c) => (typeof c.content === 'string' ? c.content : JSON.stringify(c.content)));
}

test('claude: mcp list connects to rimthan over HTTP and over stdio', async () => {
  const env = await claudeWith();
  await run(CLAUDE, ['mcp', 'add', 'rimthan-stdio', '--', RIMTHAN, 'serve', '--stdio', '--database-url', 'sqlite::memory:'], { env, cwd: project });
  const { stdout } = await run(CLAUDE, ['mcp', 'list'], { env, cwd: project, timeout: 60_000 });
  assert.match(stdout, new RegExp(`rimthan: ${server.url.replaceAll('.', '\\.')} \\(HTTP\\) - ✔ Connected`));
  assert.match(stdout, /rimthan-stdio: .* - ✔ Connected/);
});

test('claude: a header registered as ${RIMTHAN_TOKEN} is stored unexpanded and sent with the token from the environment', async () => {
  // The adapter's registration line, as the shell passes it inside single quotes.
  const token = 'hosts-test-token-0123456789abcdef';
  const tokens = join(scratch('claude-tokens'), 'tokens.json');
  const digest = createHash('sha256').update(token).digest('hex');
  writeFileSync(tokens, JSON.stringify({ tokens: [{ sha256: digest, principal: 'alice', organization: 'example', scopes: ['rimthan:workflow'] }] }));
  const guarded = await startServer(['--auth', 'tokens', '--auth-tokens-file', tokens]);
  try {
    const shared = scratch('claude-shared');
    await run('git', ['init', '--quiet'], { cwd: shared, env: { PATH: process.env.PATH } });
    const env = claudeEnv(scratch('claude-home'));
    await run(CLAUDE, ['mcp', 'add', '--transport', 'http', '-s', 'project', 'rimthan', guarded.url, '--header', 'Authorization: Bearer ${RIMTHAN_TOKEN}'], { env, cwd: shared });
    const committed = readFileSync(join(shared, '.mcp.json'), 'utf8');
    assert.ok(committed.includes('"Bearer ${RIMTHAN_TOKEN}"'), committed);
    assert.ok(!committed.includes(token));
    mkdirSync(join(shared, '.claude'));
    writeFileSync(join(shared, '.claude', 'settings.local.json'), JSON.stringify({ enabledMcpjsonServers: ['rimthan'] }));
    const list = async (extra) => (await run(CLAUDE, ['mcp', 'list'], { env: { ...env, ...extra }, cwd: shared, timeout: 60_000 })).stdout;
    assert.match(await list({ RIMTHAN_TOKEN: token }), /rimthan: .*✔ Connected/);
    assert.doesNotMatch(await list({ RIMTHAN_TOKEN: 'not-the-token' }), /rimthan: .*✔ Connected/);
  } finally {
    await guarded.stop();
  }
});

test('claude: a session lists the four tools, the rendered agents, skill and command, and a tool call reaches the server', async () => {
  const model = await startModel((body) => (toolResults(body).length
    ? [text('done')]
    : [toolUse('mcp__rimthan__rimthan_get_active_step', { checkpoint: 'rc1.not-issued' })]));
  try {
    const stream = await scriptedSession(model, 'mcp__rimthan__rimthan_get_active_step');
    const init = stream.find((m) => m.type === 'system' && m.subtype === 'init');
    assert.ok(init, 'no start-up summary');
    assert.deepEqual(init.mcp_servers, [{ name: 'rimthan', status: 'connected' }]);
    const mcpTools = init.tools.filter((t) => t.startsWith('mcp__rimthan__')).sort();
    assert.deepEqual(mcpTools, TOOLS.map((t) => `mcp__rimthan__rimthan_${t}`).sort());
    for (const agent of VALIDATORS) assert.ok(init.agents.includes(agent), `agent ${agent} not loaded`);
    assert.ok(init.skills.includes('rimthan-research'), 'skill not loaded');
    assert.ok(init.slash_commands.includes('rimthan-resume'), 'command not loaded');
    assert.ok(init.slash_commands.includes('mcp__rimthan__rimthan.start_workflow'), 'the MCP prompt is not offered');
    // The call went through Claude Code's MCP client to the server and back.
    const [result] = resultsIn(stream);
    assert.match(result, /"code":"invalid_checkpoint"/);
    assert.equal(stream.at(-1).subtype, 'success');
  } finally {
    await model.stop();
  }
});

test('claude: Claude Code lists the resources and reads the bootstrap text', async () => {
  // First the list, then (once its result is back) the read, then done.
  const model = await startModel((body) => {
    const results = body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []))
      .filter((c) => c.type === 'tool_result');
    if (results.length === 0) return [toolUse('ListMcpResourcesTool', { server: 'rimthan' })];
    if (results.length === 1) {
      return [toolUse('ReadMcpResourceTool', { server: 'rimthan', uri: 'rimthan://bootstrap/agent-entrypoint' })];
    }
    return [text('done')];
  });
  try {
    const [shown, read] = resultsIn(await scriptedSession(model, 'ListMcpResourcesTool,ReadMcpResourceTool'));
    // A list past Claude Code's inline limit is kept in a file the model is shown the path of.
    const kept = shown.match(/Full output saved to: (\S+)/);
    const listed = kept ? readFileSync(kept[1], 'utf8') : shown;
    assert.match(listed, /rimthan:\/\/bootstrap\/agent-entrypoint/);
    assert.match(listed, /rimthan:\/\/registry\/[^"]+\/workflows\/research-study\/1\.0\.0\/definition/);
    assert.match(read, /rimthan-workflow-engine/);
    assert.match(read, /research-study/);
  } finally {
    await model.stop();
  }
});

/** The rendered agents, commands and skills wrapped as a plugin, as `plugin validate` takes them. */
function asPlugin() {
  const plugin = scratch('plugin');
  mkdirSync(join(plugin, '.claude-plugin'));
  writeFileSync(join(plugin, '.claude-plugin', 'plugin.json'), JSON.stringify({
    name: 'rimthan-rendered', version: '0.0.0', description: 'Files rimthan renders for Claude Code',
    author: { name: 'rimthan e2e' },
  }));
  for (const kind of ['agents', 'commands', 'skills']) {
    cpSync(join(project, '.claude', kind), join(plugin, kind), { recursive: true });
  }
  return plugin;
}

test('claude: plugin validate --strict accepts every rendered file and refuses a broken one', async () => {
  const env = claudeEnv(scratch('claude-home'));
  const plugin = asPlugin();
  const ok = await run(CLAUDE, ['plugin', 'validate', '--strict', plugin], { env, allowFailure: true });
  assert.equal(ok.code, 0, ok.stdout + ok.stderr);
  // The same check on a rendition with broken frontmatter fails: the validation is real.
  const agent = join(plugin, 'agents', `${VALIDATORS[0]}.md`);
  writeFileSync(agent, readFileSync(agent, 'utf8').replace(/^---\nname: .*\n/, '---\nname: [unclosed\n'));
  const broken = await run(CLAUDE, ['plugin', 'validate', '--strict', plugin], { env, allowFailure: true });
  assert.notEqual(broken.code, 0, broken.stdout + broken.stderr);
});

/** Whether a request is the subagent's: its first user message carries the task's marker. */
const SUBAGENT_TASK = 'Check the files under research/ (rimthan e2e subagent task).';
function isSubagent(body) {
  const first = body.messages?.[0]?.content;
  return JSON.stringify(first ?? '').includes(SUBAGENT_TASK);
}

/**
 * Runs a session in which the main agent (allowed `Task` and `Bash`) starts subagent `agent`,
 * and that subagent, as its scripted model tells it, tries to create a file. Returns whether
 * the file exists afterwards and what the subagent's Bash call got back.
 */
async function subagentTriesToWrite(agent) {
  const marker = `written-by-${agent}`;
  const model = await startModel((body) => {
    const results = toolResults(body);
    if (isSubagent(body)) {
      return results.length
        ? [text(`subagent saw: ${results.join(' | ')}`)]
        : [toolUse('Bash', { command: `touch ${marker}`, description: 'Create a file' })];
    }
    return results.length
      ? [text('main done')]
      : [toolUse('Task', { description: 'Validate', prompt: SUBAGENT_TASK, subagent_type: agent })];
  });
  try {
    await scriptedSession(model, 'Task,Bash');
    const subagentResults = model.requests.filter(isSubagent).flatMap(toolResults);
    return { written: existsSync(join(project, marker)), subagentResults };
  } finally {
    rmSync(join(project, marker), { force: true });
    await model.stop();
  }
}

test('claude: a general-purpose subagent can write when the session allows Bash (the control)', async () => {
  const { written } = await subagentTriesToWrite('general-purpose');
  assert.ok(written, 'the control did not write: the probe below would prove nothing');
});

for (const validator of VALIDATORS) {
  test(`claude: the ${validator} rendition is refused a write by Claude Code itself, although the session allows Bash`, async () => {
    const { written, subagentResults } = await subagentTriesToWrite(validator);
    assert.equal(written, false, `${validator} created a file`);
    assert.ok(subagentResults.length > 0, 'the subagent never got an answer to its Bash call');
  });
}
