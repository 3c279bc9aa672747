// Whether Codex holds rimthan's validator roles to read-only. `rimthan stage --harness codex`
// renders each validator as `.codex/agents/<validator>.toml` with `sandbox_mode = "read-only"`;
// a scripted model on loopback (the Responses API, responses-model.mjs) has the main agent spawn
// the claim-checker role and the subagent try to create a file through Codex's shell tool. The
// evidence behind the codex adapter's `validator_isolation`: only the session's own sandbox holds.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { CODEX, codexEnv, scratch, stagedProject, startServer } from './support.mjs';
import {
  developerText, functionCall, functionOutputs, isSubagent, message, startModel, turnMetadata,
} from './responses-model.mjs';

const ROLE = 'claim-checker';
const MARKER = `written-by-${ROLE}`;
const TASK = 'Check research/findings.md (rimthan e2e subagent task).';
// Codex 0.171 offers the multi-agent tools (feature `multi_agent`, on by default) in this
// namespace, and its shell tool as `exec_command`.
const MULTI_AGENT = 'multi_agent_v1';
const RUN_TIMEOUT = 90_000;

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

after(() => {
  if (project) rmSync(join(project, MARKER), { force: true });
});

/** A string field of the staged role file, basic or multi-line (rimthan renders no escapes). */
function roleField(field) {
  const toml = readFileSync(join(project, '.codex', 'agents', `${ROLE}.toml`), 'utf8');
  const found = new RegExp(`^${field} = (?:"""\\n([\\s\\S]*?)"""|"(.*)")$`, 'm').exec(toml);
  assert.ok(found, `${field} in ${ROLE}.toml`);
  return found[1] ?? found[2];
}

/**
 * `codex exec --sandbox <sandbox>` in the trusted project with a fresh CODEX_HOME whose model is
 * the scripted endpoint. The main agent spawns the role and waits for it; the subagent runs
 * `touch` on the marker. Returns whether the marker exists, the requests the model saw, and what
 * the subagent's command got back.
 */
async function roleTriesToWrite(sandbox) {
  rmSync(join(project, MARKER), { force: true });
  let spawnCall;
  let waitCall;
  let touchCall;
  const model = await startModel((body, headers) => {
    const outputs = functionOutputs(body);
    if (isSubagent(headers)) {
      if (touchCall && outputs.has(touchCall.call_id)) return [message(`subagent saw: ${outputs.get(touchCall.call_id)}`)];
      touchCall = functionCall('exec_command', { cmd: `touch ${MARKER}` });
      return [touchCall];
    }
    if (!spawnCall) {
      spawnCall = functionCall('spawn_agent', { agent_type: ROLE, message: TASK }, MULTI_AGENT);
      return [spawnCall];
    }
    if (!waitCall && outputs.has(spawnCall.call_id)) {
      const spawned = outputs.get(spawnCall.call_id);
      let agentId;
      try {
        agentId = JSON.parse(spawned).agent_id;
      } catch {
        return [message(`spawn_agent failed: ${spawned}`)];
      }
      waitCall = functionCall('wait_agent', { targets: [agentId], timeout_ms: 30_000 }, MULTI_AGENT);
      return [waitCall];
    }
    return [message('main done')];
  });

  const home = scratch('codex-home');
  // Analytics off: otherwise Codex spends ~5 s at exit trying to flush them to a host it cannot reach.
  writeFileSync(join(home, 'config.toml'), [
    'model = "scripted"',
    'model_provider = "scripted"',
    '[model_providers.scripted]',
    'name = "scripted"',
    `base_url = ${JSON.stringify(model.url)}`,
    'wire_api = "responses"',
    '[analytics]',
    'enabled = false',
    // Trusted, so the project's `.codex/agents/*.toml` roles load.
    `[projects.${JSON.stringify(project)}]`,
    'trust_level = "trusted"',
    '',
  ].join('\n'));

  // Its own process group: the npm wrapper, the native binary and the shells it runs end together.
  // `--skip-git-repo-check`: the staged project is no git repository.
  const child = spawn(CODEX, ['exec', '--skip-git-repo-check', '--sandbox', sandbox, '--json', 'Run the claim checker.'], {
    env: codexEnv(home), cwd: project, stdio: ['ignore', 'pipe', 'pipe'], detached: true,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => { stdout += c; });
  child.stderr.on('data', (c) => { stderr += c; });
  const killGroup = () => { try { process.kill(-child.pid, 'SIGKILL'); } catch { /* already gone */ } };
  const timer = setTimeout(killGroup, RUN_TIMEOUT);
  try {
    const code = await new Promise((resolve) => child.on('close', (c, signal) => resolve(c ?? signal)));
    const subagent = model.requests.filter((r) => isSubagent(r.headers));
    const touchOutput = subagent
      .map((r) => functionOutputs(r.body).get(touchCall?.call_id))
      .find((o) => o !== undefined);
    return {
      code,
      written: existsSync(join(project, MARKER)),
      main: model.requests.filter((r) => !isSubagent(r.headers)),
      subagent,
      touchOutput,
      log: `codex exec ended with ${code}\nstdout:\n${stdout}\nstderr:\n${stderr}`,
    };
  } finally {
    clearTimeout(timer);
    killGroup();
    rmSync(join(project, MARKER), { force: true });
    await model.stop();
  }
}

/** Checks that the role was spawned, got its own instructions, and ran the command. */
function assertRoleRan(result) {
  assert.equal(result.code, 0, result.log);
  assert.ok(result.subagent.length > 0, `no subagent request: spawn_agent did not start ${ROLE}\n${result.log}`);
  const [first] = result.subagent;
  assert.ok(JSON.stringify(first.body.input).includes(TASK), 'the subagent request lacks the task');
  // The role's developer_instructions reached the model for the subagent, and only for it.
  const instructions = roleField('developer_instructions').trim();
  assert.ok(instructions.startsWith('# Claim checker'), instructions.slice(0, 80));
  assert.ok(developerText(first.body).includes(instructions), `the ${ROLE} instructions did not reach the subagent`);
  assert.ok(!result.main.some((r) => developerText(r.body).includes(instructions)), 'the main agent got the role instructions');
  assert.ok(result.touchOutput !== undefined, `the subagent's exec_command got no answer\n${result.log}`);
}

test('codex: a spawned validator role is NOT held to its read-only sandbox under a workspace-write session (why the codex adapter says isolation is instructed only)', async () => {
  assert.equal(roleField('sandbox_mode'), 'read-only', `the staged ${ROLE} role asks for read-only`);
  const result = await roleTriesToWrite('workspace-write');
  assertRoleRan(result);
  // Codex loads the role (its instructions arrive) but runs the subagent in the session's sandbox:
  // its turn metadata and permissions instructions say workspace-write, not the role's read-only.
  const subagentSandbox = turnMetadata(result.subagent[0].headers).sandbox_mode;
  assert.equal(result.written, true,
    `the ${ROLE} subagent (role sandbox_mode = "read-only") could not create a file under a workspace-write session ` +
    `(its turn ran as ${subagentSandbox}; its command got: ${result.touchOutput}). If Codex now enforces the role's ` +
    `sandbox, the codex adapter's validator_isolation can become host-enforced: update the adapter and this test.`);
  assert.match(result.touchOutput, /Process exited with code 0/);
});

test('codex: with the session itself read-only, the same write is refused by Codex', async () => {
  const result = await roleTriesToWrite('read-only');
  assertRoleRan(result);
  assert.equal(result.written, false, `the ${ROLE} subagent wrote under a read-only session: ${result.touchOutput}`);
  // The sandbox (bubblewrap, Codex's bundled one if none is on PATH) mounts the project read-only.
  assert.match(result.touchOutput, /Process exited with code [1-9]/);
  assert.match(result.touchOutput, new RegExp(`touch: cannot touch '${MARKER}': Read-only file system`));
});
