"""End-to-end tests of the rimthan MCP server, driven by the official Python MCP SDK (`mcp` 2.x).

The server under test is the real binary named by $RIMTHAN_BIN, started on a free loopback port
(Streamable HTTP, both protocol revisions) or spawned by the SDK's stdio client. The client side is
software nobody on the team wrote: the SDK negotiates the protocol, frames the requests, and checks
each tool result against the outputSchema the server itself published.

A session is driven the way a harness would: start -> deliver the host assets (read each asset's
`uri` over MCP, write the bytes to the project-local path in a temporary project, read them back
and attest the digest of what is on disk) -> submit the empty report set -> for every work step,
write the declared outputs, read them back, attest (sha256, size, symlink-freeness, parsed JSON
content) -> submit one passing report per validator -> until status "completed".

Every session test runs once per workflow in `WORKFLOWS`: the shipped `research-study` (four
steps, JSON and Markdown outputs, base reports) and `schema-migration` (three steps, SQL outputs, a
validator whose report schema adds required fields and that needs `database.read`, no adapter
pinned for `buzz`), whose output content is each output's worked example in the built default
release (`registry/default/releases/<release>/`): the step document's `example`, or the first entry
of its schema's `examples`, read the way an agent would see them; and
`changelog-entry`, written outside this repository's registry (`crates/cli/tests/data/outside-workflow/`),
built into a release signed with a fresh key and served with `--registry`. Its outputs are composed
by the test itself (JSON, plain text, a shell script), and `entry-reviewer`'s report schema adds the
required `files_checked`; only `codex` and `claude-code` are pinned.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import functools
import hashlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

RIMTHAN_BIN = os.environ.get("RIMTHAN_BIN", "")
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_RELEASES = REPO_ROOT / "registry" / "default" / "releases"
REGISTRY_SOURCE = REPO_ROOT / "registry" / "source"
OUTSIDE_SOURCE = REPO_ROOT / "crates" / "cli" / "tests" / "data" / "outside-workflow"
OUTSIDE_RELEASE = "2027.1.0"
CHECKED_SOURCE = REPO_ROOT / "docs" / "examples" / "checked-workflow"

SERVER_NAME = "rimthan-workflow-engine"
START = "rimthan.start_workflow"
GET_ACTIVE = "rimthan.get_active_step"
PREPARE = "rimthan.prepare_step_validation"
SUBMIT = "rimthan.submit_step_reports"
FOUR_TOOLS = [START, GET_ACTIVE, PREPARE, SUBMIT]
BOOTSTRAP_URI = "rimthan://bootstrap/agent-entrypoint"

HARNESS = "claude-code"
ADAPTER = {"id": "claude-code", "version": "1.2.0"}
CAPABILITIES = [
    "mcp.tools",
    "mcp.resources",
    "mcp.prompts",
    "native-subagents",
    "scoped-inputs",
    "read-only-capabilities",
    "structured-reports",
    "project-local-assets",
]


@dataclass(frozen=True)
class WorkflowCase:
    """What the suite needs to know about one workflow to drive and check a session."""

    id: str
    steps: list[str]
    outputs: list[str]  # every declared output path, in step order
    claude_assets: list[str]  # the project-local files a claude-code setup writes
    validator_capabilities: list[str]  # exactly what the workflow's validators need
    # Per validator id: fields its own report schema adds, and capabilities its plan must carry.
    report_extras: dict[str, dict[str, Any]] = field(default_factory=dict)
    plan_capabilities: dict[str, list[str]] = field(default_factory=dict)
    unpinned_harnesses: list[str] = field(default_factory=list)
    # A registry source folder the suite builds and signs a release from (None: the embedded
    # default release), and the output bytes the test composes itself (otherwise the worked
    # examples of the default release).
    source: Path | None = None
    written: dict[str, bytes] = field(default_factory=dict)
    # The steps that wait for a person's sign-off after their validators pass.
    signed_off: list[str] = field(default_factory=list)

    def content(self, rel: str) -> bytes:
        """The bytes the harness writes at the declared output path `rel`."""
        if rel in self.written:
            return self.written[rel]
        examples = release_examples(self.id)
        assert rel in examples, f"{self.id} declares no output {rel} in the default release: {sorted(examples)}"
        return examples[rel]


@functools.cache
def release_examples(workflow_id: str) -> dict[str, bytes]:
    """Per declared output path of a workflow in the built default release, the bytes of its
    worked example: the step document's `example`, else its schema's `examples[0]` as JSON."""
    # The release `stable` names: what a start that names none gets.
    channels = json.loads((DEFAULT_RELEASES.parent / "channels.json").read_bytes())
    release = DEFAULT_RELEASES / channels["channels"]["stable"]
    # The newest version: what a start that names none gets.
    versions = [p for p in (release / "workflows" / workflow_id).iterdir() if p.is_dir()]
    version = max(versions, key=lambda p: tuple(int(n) for n in p.name.split(".")))
    examples: dict[str, bytes] = {}
    for step_file in sorted((version / "steps").glob("*.json")):
        for output in json.loads(step_file.read_bytes())["outputs"]:
            where = f"{step_file.relative_to(release)}: output {output['path']}"
            if "example" in output:
                assert isinstance(output["example"], str), f"{where}: example is not a string"
                examples[output["path"]] = output["example"].encode()
                continue
            schema_ref = output["schema"]
            assert schema_ref is not None, f"{where} has neither an example nor a schema"
            schema_file = release / "schemas" / schema_ref["id"] / schema_ref["version"] / "schema.json"
            shipped = json.loads(schema_file.read_bytes()).get("examples")
            assert isinstance(shipped, list) and shipped, f"{where}: {schema_file.relative_to(release)} has no examples"
            examples[output["path"]] = (json.dumps(shipped[0], indent=2, ensure_ascii=False) + "\n").encode()
    return examples


# A changelog entry valid against the outside workflow's `changelog-entry` schema, which has no
# examples to copy from.
CHANGELOG_ENTRY = {
    "kind": "fixed",
    "summary": "Exports keep the last row when the file ends without a newline.",
    "ships_on": "2027-01-15",
    "issues": [412],
    "breaking": False,
}
RELEASE_NOTES = "Fixed: exports keep the last row when the file ends without a newline (#412).\n"
CHECK_SCRIPT = """#!/bin/sh
# Checks that the change drafted in changes/entry.json shipped: the last row survives an export.
set -eu
printf 'id\\n1\\n2' > "${TMPDIR:-/tmp}/rows.csv"
test "$(tail -n 1 "${TMPDIR:-/tmp}/rows.csv")" = 2
"""


WORKFLOWS = [
    WorkflowCase(
        id="research-study",
        steps=["setup-workspace", "frame-question", "gather-sources", "synthesize-findings"],
        outputs=["research/question.json", "research/sources.json", "research/notes.md", "research/findings.md"],
        claude_assets=[
            ".claude/skills/rimthan-research/SKILL.md",
            ".claude/agents/scope-reviewer.md",
            ".claude/agents/source-auditor.md",
            ".claude/agents/claim-checker.md",
            ".claude/commands/rimthan-resume.md",
        ],
        validator_capabilities=["workspace.read", "web.read", "git.read"],
    ),
    WorkflowCase(
        id="schema-migration",
        steps=["setup-workspace", "describe-change", "write-migration"],
        outputs=["migration/change.json", "migration/up.sql", "migration/down.sql", "migration/verify.sql"],
        claude_assets=[
            ".claude/skills/rimthan-migration/SKILL.md",
            ".claude/agents/change-reviewer.md",
            ".claude/agents/migration-checker.md",
            ".claude/commands/rimthan-resume.md",
        ],
        validator_capabilities=["workspace.read", "database.read"],
        report_extras={
            "migration-checker": {
                "statements_checked": 10,
                "reversible": True,
                "destructive_statements": [
                    {
                        "path": "migration/down.sql",
                        "line": 47,
                        "statement": "ALTER TABLE public.orders DROP COLUMN IF EXISTS sales_channel",
                        "destroys": "Every order's sales channel; 'phone' and 'partner' are copied out first.",
                    }
                ],
                "server_version": "PostgreSQL 16.4",
            }
        },
        plan_capabilities={"migration-checker": ["workspace.read", "database.read"]},
        unpinned_harnesses=["buzz"],
        signed_off=["write-migration"],
    ),
    WorkflowCase(
        id="changelog-entry",
        steps=["setup-workspace", "draft-entry", "publish-notes"],
        outputs=["changes/entry.json", "changes/notes.txt", "changes/check.sh"],
        claude_assets=[".claude/agents/entry-reviewer.md", ".claude/agents/notes-reviewer.md"],
        validator_capabilities=["workspace.read"],
        # entry-reviewer reads one declared input, changes/entry.json.
        report_extras={"entry-reviewer": {"files_checked": 1}},
        plan_capabilities={"entry-reviewer": ["workspace.read"], "notes-reviewer": ["workspace.read"]},
        unpinned_harnesses=["cowork", "buzz"],
        source=OUTSIDE_SOURCE,
        written={
            "changes/entry.json": json.dumps(CHANGELOG_ENTRY, indent=2).encode() + b"\n",
            "changes/notes.txt": RELEASE_NOTES.encode(),
            "changes/check.sh": CHECK_SCRIPT.encode(),
        },
    ),
]
WORKFLOW_IDS = [w.id for w in WORKFLOWS]
RESEARCH = WORKFLOWS[0]

HTTP_MODES = ["legacy", "2026-07-28"]
CALL_TIMEOUT_S = 60
TEST_TIMEOUT_S = 180
READY_TIMEOUT_S = 60

# Never route loopback traffic through a proxy configured in the environment.
os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1", "localhost"]))
os.environ["no_proxy"] = os.environ["NO_PROXY"]

# --------------------------------------------------------------------------------------------
# Server processes
# --------------------------------------------------------------------------------------------


def _require_binary() -> str:
    if not RIMTHAN_BIN:
        pytest.fail("RIMTHAN_BIN is not set (path to the built rimthan binary)", pytrace=False)
    if not (os.path.isfile(RIMTHAN_BIN) and os.access(RIMTHAN_BIN, os.X_OK)):
        pytest.fail(f"RIMTHAN_BIN={RIMTHAN_BIN!r} is not an executable file", pytrace=False)
    return RIMTHAN_BIN


def _die_with_parent() -> None:
    """preexec_fn: deliver SIGTERM to the server if this pytest process dies without cleanup."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_status(url: str) -> int | None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@dataclass
class HttpServer:
    url: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    # Bearer tokens by person (SERVED_PEOPLE): the participant runs sessions, the facilitator
    # signs steps off.
    tokens: dict[str, str]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no server log)"


def _run_cli(args: list[str]) -> None:
    out = subprocess.run([_require_binary(), *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    if out.returncode != 0:
        pytest.fail(f"rimthan {' '.join(args)} exited {out.returncode}:\n{out.stderr.decode(errors='replace')}")


def _build_release(wf: WorkflowCase, workdir: Path) -> Path:
    """Sign a release of `wf.source` as its author would: their workflow plus the shared host
    adapters and base report schema, under a fresh key (as `crates/cli/tests/stage.rs` does)."""
    assert wf.source is not None
    source = workdir / "source"
    shutil.copytree(wf.source, source, ignore=shutil.ignore_patterns("README.md"))
    # A complete example (docs/examples/) brings its own; the shipped ones are the same bytes.
    shutil.copytree(REGISTRY_SOURCE / "adapters", source / "adapters", dirs_exist_ok=True)
    shutil.copytree(
        REGISTRY_SOURCE / "schemas" / "validator-report", source / "schemas" / "validator-report", dirs_exist_ok=True
    )
    key = workdir / "author.key"
    registry = workdir / "registry"
    _run_cli(["registry", "keygen", "--out", str(key)])
    _run_cli(
        ["registry", "build", str(source), "--out", str(registry), "--release", OUTSIDE_RELEASE]
        + ["--key", str(key), "--channel", "stable"]
    )
    return registry


def _registry_args(registry: Path | None) -> list[str]:
    return [] if registry is None else ["--registry", str(registry)]


# Who the served engine knows (`--auth tokens`): a participant and a facilitator of their
# organization, who may sign off a step that asks for one (docs/operations/facilitator.md §5).
SERVED_PEOPLE = {
    "participant": {"principal": "pat", "organization": "acme", "scopes": ["rimthan:workflow"]},
    "facilitator": {"principal": "ann", "organization": "acme", "facilitator": "organization"},
}


def _start_http_server(workdir: Path, registry: Path | None = None, extra: list[str] | None = None) -> HttpServer:
    binary = _require_binary()
    db = workdir / "db.sqlite"
    tokens = {name: f"rimthan-e2e-{name}-{os.urandom(8).hex()}" for name in SERVED_PEOPLE}
    token_file = workdir / "tokens.json"
    token_file.write_text(json.dumps(
        {"tokens": [{"sha256": sha256_hex(tokens[n].encode()), **e} for n, e in SERVED_PEOPLE.items()]}))
    last_log = ""
    for attempt in range(3):
        port = _free_port()
        log = workdir / f"server-{attempt}.log"
        with open(log, "wb") as log_file:
            proc = subprocess.Popen(
                [binary, "serve", "--listen", f"127.0.0.1:{port}", "--database-url", f"sqlite://{db}",
                 "--auth", "tokens", "--auth-tokens-file", str(token_file)]
                + _registry_args(registry) + (extra or []),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                preexec_fn=_die_with_parent,
            )
        server = HttpServer(url=f"http://127.0.0.1:{port}/mcp", port=port, proc=proc, log=log, tokens=tokens)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None:
            if _http_status(f"http://127.0.0.1:{port}/readyz") == 200:
                return server
            time.sleep(0.1)
        _stop(proc)
        last_log = server.log_tail()
        # A lost race for the port exits early; anything else is not worth retrying.
        if "in use" not in last_log.lower():
            break
    pytest.fail(f"rimthan serve did not become ready (GET /readyz != 200):\n{last_log}", pytrace=False)


def _serving(request: pytest.FixtureRequest, workdir: Path, registry: Path | None = None):
    server = _start_http_server(workdir, registry)
    failed_before = request.session.testsfailed
    try:
        yield server
    finally:
        _stop(server.proc)
        if request.session.testsfailed > failed_before:
            print(f"\n--- rimthan HTTP server log ({server.log}) ---\n{server.log_tail(80)}")


@pytest.fixture(scope="module")
def http_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A server on the embedded default release."""
    yield from _serving(request, tmp_path_factory.mktemp("rimthan-http"))


@pytest.fixture(scope="module")
def outside_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (wf,) = [w for w in WORKFLOWS if w.source is not None]
    return _build_release(wf, tmp_path_factory.mktemp("rimthan-outside"))


@pytest.fixture(scope="module")
def outside_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, outside_registry: Path):
    """A server on the release built from the outside workflow."""
    yield from _serving(request, tmp_path_factory.mktemp("rimthan-http-outside"), outside_registry)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=WORKFLOWS, ids=WORKFLOW_IDS)
def workflow(request: pytest.FixtureRequest) -> WorkflowCase:
    return request.param


@pytest.fixture
def release(request: pytest.FixtureRequest, workflow: WorkflowCase) -> Path | None:
    """The registry folder serving `workflow` (None: the embedded default release)."""
    return request.getfixturevalue("outside_registry") if workflow.source is not None else None


@pytest.fixture
def server(request: pytest.FixtureRequest, workflow: WorkflowCase) -> HttpServer:
    """The HTTP server whose release has `workflow`."""
    return request.getfixturevalue("outside_server" if workflow.source is not None else "http_server")


def workflows_where(predicate) -> pytest.MarkDecorator:
    """Parametrize the `workflow` fixture over the workflows that have what a test needs."""
    cases = [w for w in WORKFLOWS if predicate(w)]
    return pytest.mark.parametrize("workflow", cases, ids=[w.id for w in cases], indirect=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


@contextlib.asynccontextmanager
async def http_client(server: HttpServer, mode: str, who: str = "participant"):
    """A Client over Streamable HTTP with `who`'s bearer token."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.tokens[who]}"}, timeout=CALL_TIMEOUT_S)
    async with http, Client(streamable_http_client(server.url, http_client=http), mode=mode,
                            read_timeout_seconds=CALL_TIMEOUT_S) as client:
        yield client


@contextlib.asynccontextmanager
async def stdio_session(workdir: Path, mode: str, registry: Path | None = None):
    """A Client over the SDK's stdio transport; the SDK spawns and stops the server process."""
    binary = _require_binary()
    params = StdioServerParameters(
        command=binary,
        args=["serve", "--stdio", "--database-url", f"sqlite://{workdir / 'db.sqlite'}"] + _registry_args(registry),
        cwd=str(workdir),
    )
    log_path = workdir / "stdio-server.log"
    with open(log_path, "w") as errlog:
        try:
            async with Client(
                stdio_client(params, errlog=errlog), mode=mode, read_timeout_seconds=CALL_TIMEOUT_S
            ) as client:
                yield client
        except BaseException:
            errlog.flush()
            print(f"\n--- rimthan stdio server log ({log_path}) ---\n{log_path.read_text(errors='replace')[-6000:]}")
            raise


# --------------------------------------------------------------------------------------------
# Tool calls, judged by the SDK
# --------------------------------------------------------------------------------------------


def _text_mirror(result: types.CallToolResult) -> Any:
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    assert texts, f"tool result has no text content mirroring structuredContent: {result!r}"
    return json.loads(texts[0])


# Every tool call carries a W3C trace context in `_meta`, as a traced host's does: the server joins
# it (docs/operations/tracing.md §3), on both revisions and over stdio.
TRACEPARENT = f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01"


async def call(client: Client, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """tools/call via Client.call_tool, which checks structuredContent against the tool's outputSchema."""
    result = await client.call_tool(name, arguments, meta={"traceparent": TRACEPARENT})
    assert result.structured_content is not None, f"{name} returned no structuredContent: {result!r}"
    assert _text_mirror(result) == result.structured_content, f"{name}: text content != structuredContent"
    if result.is_error:
        # The SDK skips isError results, but blocked/rejected payloads are in the outputSchema too.
        await client.session.validate_tool_result(name, result)
    return result


async def call_ok(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await call(client, name, arguments)
    assert result.is_error is not True, f"{name} failed: {json.dumps(result.structured_content, indent=1)}"
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def codes(items: list[dict[str, Any]]) -> list[str]:
    return [item["code"] for item in items]


# --------------------------------------------------------------------------------------------
# The harness side: files on disk
# --------------------------------------------------------------------------------------------


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _components(project: Path, rel: str) -> list[Path]:
    parts = Path(rel).parts
    assert parts and not Path(rel).is_absolute() and ".." not in parts, f"unsafe declared path {rel!r}"
    return [project.joinpath(*parts[: i + 1]) for i in range(len(parts))]


def symlink_free(project: Path, rel: str) -> bool:
    """os.lstat every component of the path, from the project root down."""
    for p in [project, *_components(project, rel)]:
        if stat.S_ISLNK(os.lstat(p).st_mode):
            return False
    return True


def write_project_file(project: Path, rel: str, data: bytes) -> bytes:
    """Write `data` at project/rel refusing symlinked components; return the bytes read back."""
    for p in _components(project, rel)[:-1]:
        if os.path.lexists(p):
            assert not os.path.islink(p), f"refusing to write through symlink {p}"
        else:
            p.mkdir()
    target = project / rel
    assert not os.path.islink(target), f"refusing to write through symlink {target}"
    target.write_bytes(data)
    return target.read_bytes()


async def read_asset_bytes(client: Client, uri: str) -> bytes:
    result = await client.read_resource(uri)
    assert len(result.contents) == 1, f"{uri}: expected one content item, got {len(result.contents)}"
    content = result.contents[0]
    assert str(content.uri) == uri
    if isinstance(content, types.TextResourceContents):
        return content.text.encode("utf-8")
    return base64.b64decode(content.blob)


async def deliver_host_assets(client: Client, project: Path, host_assets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Deliver every offered host asset project-locally (or dynamically when no path is offered)."""
    deliveries = []
    for asset in host_assets:
        received = await read_asset_bytes(client, asset["uri"])
        assert sha256_hex(received) == asset["sha256"], f"asset {asset['uri']} bytes do not match its sha256"
        delivery = {k: asset[k] for k in ("kind", "id", "version")}
        local = asset.get("project_local_path")
        if local is not None:
            assert "project-local" in asset["delivery_modes"]
            on_disk = write_project_file(project, local, received)
            assert symlink_free(project, local)
            delivery.update(sha256=sha256_hex(on_disk), delivery_mode="project-local", path=local)
        else:
            assert "dynamic-context" in asset["delivery_modes"]
            delivery.update(sha256=sha256_hex(received), delivery_mode="dynamic-context")
        deliveries.append(delivery)
    return deliveries


def host_attestation(wf: WorkflowCase, deliveries: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "harness": HARNESS,
        "adapter": ADAPTER,
        "capabilities": CAPABILITIES,
        "validator_capabilities": wf.validator_capabilities,
        "deliveries": deliveries,
    }


def write_and_attest_output(wf: WorkflowCase, project: Path, output: dict[str, Any]) -> dict[str, Any]:
    rel = output["path"]
    write_project_file(project, rel, wf.content(rel))
    on_disk = (project / rel).read_bytes()  # read back from disk; everything below is computed from it
    assert len(on_disk) <= output["max_bytes"], f"{rel}: {len(on_disk)} bytes > max_bytes {output['max_bytes']}"
    artifact = {
        "artifact_id": output["artifact_id"],
        "path": rel,
        "owner_step": output["owner_step"],
        "media_type": output["media_type"],
        "bytes": len(on_disk),
        "sha256": sha256_hex(on_disk),
        "symlink_free": symlink_free(project, rel),
        "read_back": True,
        "write_policy": output["write_policy"],
    }
    if output.get("schema") is not None:
        artifact["schema_sha256"] = output["schema"]["sha256"]
        artifact["content"] = json.loads(on_disk)
    if output.get("send_text"):  # a deterministic check reads it: the server hashes this text
        artifact["text"] = on_disk.decode()
    return artifact


def input_texts(project: Path, step: dict[str, Any]) -> list[dict[str, Any]]:
    """The text of every earlier output the step's deterministic checks read, from disk."""
    return [
        {"artifact_id": i["artifact_id"], "path": i["path"], "text": (project / i["path"]).read_text()}
        for i in step["inputs"]
        if i.get("send_text")
    ]


def save_session_file(project: Path, payload: dict[str, Any]) -> None:
    session_file = payload["session_file"]
    assert session_file["path"] == ".rimthan/workflow-session.json"
    assert session_file["content"]["checkpoint"] == payload["checkpoint"]
    assert session_file["content"]["server"] == SERVER_NAME
    write_project_file(project, session_file["path"], json.dumps(session_file["content"], indent=2).encode())


def start_arguments(wf: WorkflowCase, **host_overrides: Any) -> dict[str, Any]:
    host = {
        "harness": HARNESS,
        "adapter": ADAPTER,
        "capabilities": CAPABILITIES,
        "validator_capabilities": wf.validator_capabilities,
    }
    host.update(host_overrides)
    return {"workflow_id": wf.id, "host": host}


def passing_reports(wf: WorkflowCase, project: Path, plan: dict[str, Any]) -> list[dict[str, Any]]:
    """One passing report per planned validator, carrying the fields its own report schema adds."""
    reports = []
    for v in plan["validators"]:
        inputs = [i["path"] for i in v["inputs"]]
        for rel in inputs:  # the validator reads its declared inputs
            assert (project / rel).is_file(), f"validator {v['id']} input {rel} is not on disk"
        for cap in wf.plan_capabilities.get(v["id"], []):
            assert cap in v["capabilities"], f"validator {v['id']} is planned without {cap}: {v['capabilities']}"
        report = {
            "validator_id": v["id"],
            "validator_version": v["version"],
            "verdict": "pass",
            "summary": "Checked the declared inputs.",
            "findings": [],
            "inputs_read": inputs,
            "capabilities_used": v["capabilities"],
        }
        report.update(wf.report_extras.get(v["id"], {}))
        reports.append(report)
    return reports


@dataclass
class SessionRun:
    final: dict[str, Any]
    steps: list[str] = field(default_factory=list)
    signed_off: list[str] = field(default_factory=list)


async def run_session(client: Client, project: Path, wf: WorkflowCase, server: HttpServer | None = None) -> SessionRun:
    """Drives a whole session. A step that waits for sign-off is approved by `server`'s
    facilitator over the JSON door, as a person would in the view; without a server (stdio,
    which authenticates nobody) the run ends there, waiting."""
    payload = await call_ok(client, START, start_arguments(wf))
    assert payload["workflow"]["id"] == wf.id, payload["workflow"]
    assert payload["status"] == "active", payload
    assert payload["host_adapter"]["id"] == ADAPTER["id"]
    assert payload["host_adapter"]["version"] == ADAPTER["version"]
    run = SessionRun(final=payload)
    while payload["status"] != "completed":
        if payload["status"] == "awaiting_approval":
            save_session_file(project, payload)
            approval = payload["approval"]
            assert approval["step"] == run.steps[-1] and not approval["self_approval"], approval
            # No tool call moves a waiting step.
            again = await call_ok(client, GET_ACTIVE, {"checkpoint": payload["checkpoint"]})
            assert again["status"] == "awaiting_approval", again
            if server is None:
                break
            status, answer = decide(server.base, server.tokens["facilitator"], payload["session_id"],
                                    {"step": approval["step"], "action": "approve", "note": "Read it."})
            assert status == 200, answer
            run.signed_off.append(approval["step"])
            payload = await call_ok(client, GET_ACTIVE, {"checkpoint": payload["checkpoint"]})
            continue
        assert payload["status"] == "active", payload
        save_session_file(project, payload)
        step = payload["step"]
        step_id = step["id"]
        run.steps.append(step_id)

        again = await call_ok(client, GET_ACTIVE, {"checkpoint": payload["checkpoint"]})
        assert again["step"]["id"] == step_id and again["checkpoint"] == payload["checkpoint"]

        prepare: dict[str, Any] = {"checkpoint": payload["checkpoint"], "step_id": step_id}
        if step_id == "setup-workspace":
            assert step["outputs"] == [] and step["validators"] == []
            assert payload["host_assets"], "setup step offers no host assets"
            prepare["host_attestation"] = host_attestation(
                wf, await deliver_host_assets(client, project, payload["host_assets"])
            )
        else:
            assert step["outputs"], f"work step {step_id} declares no outputs"
            prepare["output_attestation"] = {
                "artifacts": [write_and_attest_output(wf, project, o) for o in step["outputs"]],
                "inputs": input_texts(project, step),
            }

        plan = await call_ok(client, PREPARE, prepare)
        assert plan["status"] == "ready", plan
        assert [v["id"] for v in plan["validators"]] == [v["id"] for v in step["validators"]]
        submit = {
            "checkpoint": payload["checkpoint"],
            "validation_id": plan["validation_id"],
            "reports": passing_reports(wf, project, plan),
        }
        nxt = await call_ok(client, SUBMIT, submit)
        assert nxt["status"] in ("active", "awaiting_approval", "completed"), nxt
        assert nxt["checkpoint"] != payload["checkpoint"], "submit did not move the checkpoint"
        assert nxt["session_id"] == payload["session_id"]
        payload = nxt
    save_session_file(project, payload)
    run.final = payload
    return run


def assert_completed_session(run: SessionRun, project: Path, wf: WorkflowCase) -> None:
    assert run.steps == wf.steps
    final = run.final
    assert final["status"] == "completed"
    assert final.get("step") is None
    assert final["session_file"]["content"]["status"] == "completed"
    # Every declared output and every project-local asset is really on disk, with the bytes written.
    for rel in wf.outputs:
        assert (project / rel).read_bytes() == wf.content(rel)
    for rel in wf.claude_assets:
        assert (project / rel).is_file(), f"host asset {rel} was not delivered"
    saved = json.loads((project / ".rimthan/workflow-session.json").read_bytes())
    assert saved["status"] == "completed" and saved["checkpoint"] == final["checkpoint"]


def save_statement(project: Path, payload: dict[str, Any]) -> Path:
    """Writes the completed session's provenance statement where the skills say: unchanged,
    beside the session file."""
    provenance = payload["provenance"]
    assert provenance["path"] == ".rimthan/workflow-session.intoto.json"
    write_project_file(project, provenance["path"], json.dumps(provenance["content"], indent=2).encode())
    return project / provenance["path"]


def third_party_verify(envelope: dict[str, Any], keys: dict[str, Any], project: Path) -> dict[str, Any]:
    """Verifies a statement with code rimthan did not write: securesystemslib's DSSE envelope and
    ed25519 key checks the signature over the PAE, then every in-toto subject is re-hashed in the
    project. Raises on any failure; returns the statement."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    trusted = [
        SSlibKey(k["key_id"], "ed25519", "ed25519", {"public": k["public_key"]}) for k in keys["keys"]
    ]
    parsed = Envelope.from_dict(json.loads(json.dumps(envelope)))
    assert parsed.payload_type == "application/vnd.in-toto+json"
    parsed.verify(trusted, 1)  # raises VerificationError unless a trusted key signed it
    statement = json.loads(parsed.payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    for subject in statement["subject"]:
        actual = sha256_hex((project / subject["name"]).read_bytes())
        if actual != subject["digest"]["sha256"]:
            raise ValueError(f"subject {subject['name']} changed: sha256 {actual}")
    return statement


def provenance_keys(server: HttpServer) -> dict[str, Any]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    url = f"http://127.0.0.1:{server.port}/.well-known/rimthan/provenance-keys.json"
    with opener.open(url, timeout=5) as resp:
        return json.loads(resp.read())


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", HTTP_MODES)
async def test_http_whole_session(server: HttpServer, project: Path, workflow: WorkflowCase, mode: str) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_client(server, mode) as client:
            expected = "2025-11-25" if mode == "legacy" else mode
            assert client.protocol_version == expected
            run = await run_session(client, project, workflow, server)
    assert_completed_session(run, project, workflow)
    assert run.signed_off == workflow.signed_off
    # The completing answer carries a signed statement that a DSSE library written by others
    # accepts, as does rimthan's own verifier; both refuse it once one output byte changes.
    statement_file = save_statement(project, run.final)
    keys = provenance_keys(server)
    keys_file = project.parent / "provenance-keys.json"
    keys_file.write_text(json.dumps(keys))
    envelope = json.loads(statement_file.read_bytes())
    statement = third_party_verify(envelope, keys, project)
    assert statement["predicate"]["workflow"]["id"] == workflow.id
    assert statement["predicate"]["session"] == run.final["session_id"]
    assert sorted(s["name"] for s in statement["subject"]) == sorted(workflow.outputs)
    approved = {s["id"]: [a["subject"] for a in s.get("approvals", [])] for s in statement["predicate"]["steps"]}
    assert [step for step, who in approved.items() if who] == workflow.signed_off, approved
    assert all(who == ["ann"] for step, who in approved.items() if step in workflow.signed_off), approved

    def ours() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [_require_binary(), "provenance", "verify", str(statement_file), "--keys", str(keys_file),
             "--project", str(project)],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
        )

    assert ours().returncode == 0, ours().stdout
    changed = project / statement["subject"][0]["name"]
    data = bytearray(changed.read_bytes())
    data[0] ^= 1
    changed.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="changed"):
        third_party_verify(envelope, keys, project)
    refused = ours()
    assert refused.returncode == 1 and refused.stdout.startswith(b"subject_changed"), refused.stdout
    # A statement whose payload was altered fails the third-party signature check.
    from securesystemslib.exceptions import VerificationError

    forged = dict(envelope, payload=base64.b64encode(base64.b64decode(envelope["payload"]).replace(
        b'"verdict":"pass"', b'"verdict":"fail"')).decode())
    with pytest.raises(VerificationError):
        third_party_verify(forged, keys, project)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_whole_session(
    tmp_path: Path, project: Path, workflow: WorkflowCase, release: Path | None, mode: str
) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with stdio_session(tmp_path, mode, release) as client:
            expected = "2025-11-25" if mode == "legacy" else "2026-07-28"
            assert client.protocol_version == expected
            assert client.server_info is not None and client.server_info.name == SERVER_NAME
            run = await run_session(client, project, workflow)
    if workflow.signed_off:
        # Over stdio nobody is authenticated, so nobody can sign the step off: it waits, and the
        # facilitator's view of a server with credentials is where it would be decided.
        assert run.final["status"] == "awaiting_approval", run.final
        assert run.steps == workflow.steps and run.final["approval"]["step"] == workflow.signed_off[0]
        return
    assert_completed_session(run, project, workflow)


@pytest.mark.parametrize("mode", HTTP_MODES)
@workflows_where(lambda w: w.report_extras)
async def test_a_report_without_a_field_its_own_schema_requires_is_rejected(
    server: HttpServer, project: Path, workflow: WorkflowCase, mode: str
) -> None:
    """A validator's report schema adds required fields; the base report alone is refused."""
    wf = workflow
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_client(server, mode) as client:
            payload = await call_ok(client, START, start_arguments(wf))
            while True:
                step = payload["step"]
                prepare: dict[str, Any] = {"checkpoint": payload["checkpoint"], "step_id": step["id"]}
                if step["kind"] == "setup":
                    deliveries = await deliver_host_assets(client, project, payload["host_assets"])
                    prepare["host_attestation"] = host_attestation(wf, deliveries)
                else:
                    prepare["output_attestation"] = {
                        "artifacts": [write_and_attest_output(wf, project, o) for o in step["outputs"]],
                        "inputs": input_texts(project, step),
                    }
                plan = await call_ok(client, PREPARE, prepare)
                reports = passing_reports(wf, project, plan)
                extended = [r for r in reports if r["validator_id"] in wf.report_extras]
                if not extended:
                    payload = await call_ok(
                        client,
                        SUBMIT,
                        {"checkpoint": payload["checkpoint"], "validation_id": plan["validation_id"], "reports": reports},
                    )
                    continue
                for report in extended:
                    for extra in wf.report_extras[report["validator_id"]]:
                        report.pop(extra)
                rejected = await call(
                    client,
                    SUBMIT,
                    {"checkpoint": payload["checkpoint"], "validation_id": plan["validation_id"], "reports": reports},
                )
                assert rejected.is_error is True
                sc = rejected.structured_content
                assert sc["status"] == "rejected", sc
                assert "report_schema_invalid" in codes(sc["failures"]), sc
                # Each stripped report is refused only for missing fields its own schema adds.
                invalid = {
                    f["detail"]["validator_id"]: f for f in sc["failures"] if f["code"] == "report_schema_invalid"
                }
                assert sorted(invalid) == sorted(r["validator_id"] for r in extended), sc
                for vid, failure in invalid.items():
                    missing = [e["message"] for e in failure["detail"]["errors"]]
                    assert missing, failure
                    for message in missing:
                        assert message.endswith(" is a required property"), failure
                        assert message.split('"')[1] in wf.report_extras[vid], failure
                return


@pytest.mark.parametrize("mode", HTTP_MODES)
@workflows_where(lambda w: w.unpinned_harnesses)
async def test_a_harness_the_workflow_does_not_pin_is_blocked(
    server: HttpServer, workflow: WorkflowCase, mode: str
) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_client(server, mode) as client:
            for harness in workflow.unpinned_harnesses:
                result = await call(
                    client,
                    START,
                    start_arguments(workflow, harness=harness, adapter={"id": harness, "version": "1.2.0"}),
                )
                assert result.is_error is True
                sc = result.structured_content
                assert sc["status"] == "blocked", sc
                assert codes(sc["blockers"]) == ["unsupported_harness"], sc
                assert "checkpoint" not in sc and "session_file" not in sc


# `auto` probes server/discover (2026-07-28) and reads serverInfo from its _meta stamp; `legacy`
# reads it from the initialize result. A pinned "2026-07-28" client skips discover and so has no
# serverInfo or instructions at all (SDK behaviour), hence `auto` here.
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_server_identity_tools_resources_prompt(http_server: HttpServer, mode: str) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_client(http_server, mode) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            assert client.server_info is not None
            assert client.server_info.name == SERVER_NAME

            tools = (await client.list_tools()).tools
            assert sorted(t.name for t in tools) == sorted(FOUR_TOOLS)
            assert len(tools) == 4
            for tool in tools:
                assert tool.input_schema and tool.output_schema, f"{tool.name} lacks a schema"
            by_name = {t.name: t for t in tools}
            get_active = by_name[GET_ACTIVE].annotations
            assert get_active is not None and get_active.read_only_hint is True
            assert get_active.idempotent_hint is True

            uris: list[str] = []
            cursor = None
            for _ in range(100):
                page = await client.list_resources(cursor=cursor)
                uris += [str(r.uri) for r in page.resources]
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert BOOTSTRAP_URI in uris
            assert uris == sorted(uris), "resources/list is not sorted by URI"

            bootstrap = await client.read_resource(BOOTSTRAP_URI)
            assert len(bootstrap.contents) == 1
            assert isinstance(bootstrap.contents[0], types.TextResourceContents)
            bootstrap_text = bootstrap.contents[0].text
            assert bootstrap_text.strip()

            prompts = (await client.list_prompts()).prompts
            assert [p.name for p in prompts] == [START]
            prompt = await client.get_prompt(START)
            texts = [m.content.text for m in prompt.messages if isinstance(m.content, types.TextContent)]
            assert texts == [bootstrap_text]
            assert client.instructions == bootstrap_text


@pytest.mark.parametrize("mode", HTTP_MODES)
async def test_protocol_errors(http_server: HttpServer, mode: str) -> None:
    """Unknown tool -> -32602; unknown resource -> -32002 (2025-11-25) / -32602 (2026-07-28)."""
    from mcp.shared.exceptions import MCPError

    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_client(http_server, mode) as client:
            with pytest.raises(MCPError) as unknown_tool:
                await client.call_tool("rimthan.no_such_tool", {})
            assert unknown_tool.value.code == -32602
            missing = "rimthan://registry/2026.12.0/no-such-resource"
            with pytest.raises(MCPError) as unknown_resource:
                await client.read_resource(missing)
            assert unknown_resource.value.code == (-32002 if mode == "legacy" else -32602)
            assert missing in unknown_resource.value.error.message


@pytest.mark.parametrize("mode", HTTP_MODES)
async def test_blocked_start_legacy_adapter(http_server: HttpServer, mode: str) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_client(http_server, mode) as client:
            result = await call(
                client,
                START,
                start_arguments(RESEARCH, harness="codex", adapter={"id": "legacy-generic", "version": "1.0.0"}),
            )
    assert result.is_error is True
    sc = result.structured_content
    assert sc["status"] == "blocked", sc
    assert codes(sc["blockers"]) == ["host_adapter_contract_unavailable", "host_adapter_binding_mismatch"]
    for blocker in sc["blockers"]:
        assert blocker["message"] and isinstance(blocker["detail"], dict)
    assert "checkpoint" not in sc and "session_file" not in sc and "host_assets" not in sc


@pytest.mark.parametrize("mode", HTTP_MODES)
async def test_rejected_attestation_asset_digest(
    server: HttpServer, project: Path, workflow: WorkflowCase, mode: str
) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_client(server, mode) as client:
            payload = await call_ok(client, START, start_arguments(workflow))
            deliveries = await deliver_host_assets(client, project, payload["host_assets"])
            tampered = [dict(d) for d in deliveries]
            tampered[1]["sha256"] = "0" * 64
            prepare = {"checkpoint": payload["checkpoint"], "step_id": "setup-workspace"}

            rejected = await call(client, PREPARE, {**prepare, "host_attestation": host_attestation(workflow, tampered)})
            assert rejected.is_error is True
            sc = rejected.structured_content
            assert sc["status"] == "rejected", sc
            assert codes(sc["failures"]) == ["asset_digest_mismatch"]
            assert "validation_id" not in sc

            # Preparing does not move the checkpoint: the honest attestation is accepted next.
            plan = await call_ok(client, PREPARE, {**prepare, "host_attestation": host_attestation(workflow, deliveries)})
            assert plan["status"] == "ready"
            assert plan["validators"] == []


@pytest.mark.parametrize("mode", HTTP_MODES)
async def test_sdk_call_tool_accepts_active_payload(server: HttpServer, workflow: WorkflowCase, mode: str) -> None:
    """Plain Client.call_tool (no helper) accepts active payloads; `findings` is always present."""
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_client(server, mode) as client:
            started = await client.call_tool(START, start_arguments(workflow))
            assert started.is_error is not True
            assert started.structured_content["status"] == "active"
            assert started.structured_content["findings"] == []
            again = await client.call_tool(GET_ACTIVE, {"checkpoint": started.structured_content["checkpoint"]})
            assert again.is_error is not True
            assert again.structured_content["findings"] == []


# The outside workflow with deterministic checks (`docs/examples/checked-workflow/`): a
# Markdown rule on fix/notes.md and squawk on fix/up.sql.
DATA_FIX_NOTES_BROKEN = "# Backfill\n\n## Rollback\n\n- Restore the column from the snapshot.\n"
DATA_FIX_NOTES_FIXED = "# Backfill\n\n## Rollback\n\n- Restore the column from the snapshot (on-call DBA).\n"
DATA_FIX = WorkflowCase(
    id="data-fix",
    steps=["setup-workspace", "write-fix"],
    outputs=["fix/notes.md", "fix/up.sql"],
    claude_assets=[".claude/agents/fix-reviewer.md"],
    validator_capabilities=["workspace.read"],
    source=CHECKED_SOURCE,
    written={
        "fix/notes.md": DATA_FIX_NOTES_BROKEN.encode(),
        "fix/up.sql": b"SET statement_timeout = '5s';\nUPDATE orders SET sales_channel = 'web' WHERE sales_channel IS NULL;\n",
    },
)


@pytest.fixture(scope="module")
def checked_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A server on the release built from the outside workflow with deterministic checks."""
    registry = _build_release(DATA_FIX, tmp_path_factory.mktemp("rimthan-checked"))
    yield from _serving(request, tmp_path_factory.mktemp("rimthan-http-checked"), registry)


@pytest.mark.parametrize("mode", HTTP_MODES)
async def test_an_output_that_breaks_a_check_is_sent_to_revise_with_rule_and_line_then_passes_once_fixed(
    checked_server: HttpServer, project: Path, mode: str
) -> None:
    """Driven by hand: the server runs the step's checks on the text the harness attests, a
    failing one sends the step to revise whatever the reports say, and the fixed file passes."""
    wf = DATA_FIX
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http_client(checked_server, mode) as client:
            payload = await call_ok(client, START, start_arguments(wf))
            deliveries = await deliver_host_assets(client, project, payload["host_assets"])
            prepare = {"checkpoint": payload["checkpoint"], "step_id": "setup-workspace",
                       "host_attestation": host_attestation(wf, deliveries)}
            plan = await call_ok(client, PREPARE, prepare)
            payload = await call_ok(client, SUBMIT, {"checkpoint": payload["checkpoint"],
                                                    "validation_id": plan["validation_id"], "reports": []})
            step = payload["step"]
            assert step["id"] == "write-fix"
            assert [c["id"] for c in step["checks"]] == ["notes-name-rollback", "up-lint"]
            assert all(o["send_text"] for o in step["outputs"])
            checked = await client.read_resource(step["checks"][0]["uri"])
            doc = json.loads(checked.contents[0].text)
            assert doc["kind"] == "script" and "rollback-owner" in doc["script"]

            async def round_with(notes: str) -> dict[str, Any]:
                wf.written["fix/notes.md"] = notes.encode()
                prepare = {"checkpoint": payload["checkpoint"], "step_id": "write-fix",
                           "output_attestation": {"artifacts": [write_and_attest_output(wf, project, o)
                                                                for o in step["outputs"]]}}
                plan = await call_ok(client, PREPARE, prepare)
                return plan

            plan = await round_with(DATA_FIX_NOTES_BROKEN)
            verdicts = {c["id"]: c["verdict"] for c in plan["checks"]}
            assert verdicts == {"notes-name-rollback": "fail", "up-lint": "pass"}, plan["checks"]
            sent_back = await call(client, SUBMIT, {"checkpoint": payload["checkpoint"],
                                                    "validation_id": plan["validation_id"],
                                                    "reports": passing_reports(wf, project, plan)})
            revise = sent_back.structured_content
            assert revise["status"] == "revise", revise
            finding = revise["findings"][0]
            assert (finding["check_id"], finding["rule"], finding["path"], finding["line"]) == (
                "notes-name-rollback", "rollback-owner", "fix/notes.md", 5), finding

            payload = revise
            plan = await round_with(DATA_FIX_NOTES_FIXED)
            assert all(c["verdict"] == "pass" for c in plan["checks"]), plan["checks"]
            done = await call_ok(client, SUBMIT, {"checkpoint": payload["checkpoint"],
                                                  "validation_id": plan["validation_id"],
                                                  "reports": passing_reports(wf, project, plan)})
            assert done["status"] == "completed", done
    # The session's timeline says what sent the step back: the check and its rule.
    shown = subprocess.run([_require_binary(), "sessions", "show", done["session_id"], "--server", checked_server.base],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                           env={**os.environ, "RIMTHAN_TOKEN": checked_server.tokens["facilitator"]})
    assert shown.returncode == 0, shown.stderr
    assert b"write-fix failed by check notes-name-rollback (rollback-owner)" in shown.stdout, shown.stdout


@pytest.mark.parametrize("workflow_id", ["research-study", "schema-migration"])
async def test_a_session_rimthan_stage_completes_leaves_a_statement_a_third_party_accepts(
    http_server: HttpServer, tmp_path: Path, workflow_id: str
) -> None:
    """`rimthan stage` plays a real harness against the served engine and writes the statement
    where the skills say; securesystemslib's DSSE verifier accepts it with the keys the server
    publishes, and refuses it once one output byte changes."""
    project = tmp_path / "staged"

    def run(*args: str, who: str = "participant") -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run([_require_binary(), *args], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=300, env={**os.environ, "RIMTHAN_TOKEN": http_server.tokens[who]})
        # `rimthan stage` exits 4 when the session waits for sign-off, 0 when it completed.
        waits = args[0] == "stage" and b"): awaiting_approval" in done.stdout
        assert done.returncode == (4 if waits else 0), done.stderr.decode(errors="replace")[-4000:]
        return done

    stage = ["stage", "--harness", "claude-code", "--url", http_server.url, "--project", str(project)]
    staged = run(*stage, "--workflow", workflow_id)
    if b"): awaiting_approval" in staged.stdout:
        # The facilitator signs the step off with their own token; the harness resumes.
        session = staged.stdout.split()[1].decode()
        run("sessions", "approve", session, "--step", "write-migration", "--server", http_server.base,
            who="facilitator")
        staged = run(*stage, "--resume")
    assert b"): completed" in staged.stdout, staged.stdout
    envelope = json.loads((project / ".rimthan/workflow-session.intoto.json").read_bytes())
    keys = provenance_keys(http_server)
    statement = third_party_verify(envelope, keys, project)
    assert statement["predicate"]["workflow"]["id"] == workflow_id
    changed = project / statement["subject"][-1]["name"]
    data = bytearray(changed.read_bytes())
    data[-1] ^= 1
    changed.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="changed"):
        third_party_verify(envelope, keys, project)


# A step signed off by people (`docs/examples/signed-off/`, docs/operations/facilitator.md
# §5): write-note needs two approvers, facilitators of the session's organization or holders of
# the role release-manager, never the participant.
SIGNED_OFF_SOURCE = REPO_ROOT / "docs" / "examples" / "signed-off"
SIGNED_OFF = WorkflowCase(
    id="release-note",
    steps=["setup-workspace", "draft-plan", "write-note"],
    outputs=["plan/plan.json", "note/note.md", "note/migrate.sql"],
    claude_assets=[],
    validator_capabilities=["workspace.read"],
    source=SIGNED_OFF_SOURCE,
    written={
        "plan/plan.json": b'{"title": "Add a sales channel", "risks": ["backfill load"]}',
        "note/note.md": b"# Add a sales channel\n\n## Risks\n\n- The backfill loads the primary (data team).\n",
        "note/migrate.sql": b"SET statement_timeout = '5s';\nALTER TABLE orders ADD COLUMN sales_channel text;\n",
    },
)
SIGNED_OFF_PEOPLE = {
    "pat": {"principal": "pat", "organization": "acme", "scopes": ["rimthan:workflow"]},
    "ann": {"principal": "ann", "organization": "acme", "facilitator": "organization"},
    "rui": {"principal": "rui", "organization": "acme", "roles": ["release-manager"]},
}


@dataclass(frozen=True)
class SignOffServer:
    mcp: str
    base: str
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def sign_off_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """`rimthan serve --auth tokens` on a release built from the signed-off test workflow."""
    workdir = tmp_path_factory.mktemp("rimthan-sign-off")
    source = workdir / "source"
    shutil.copytree(SIGNED_OFF_SOURCE, source, ignore=shutil.ignore_patterns("README.md"))
    key, registry = workdir / "author.key", workdir / "registry"
    _run_cli(["registry", "keygen", "--out", str(key)])
    _run_cli(["registry", "build", str(source), "--out", str(registry), "--release", OUTSIDE_RELEASE,
              "--key", str(key), "--channel", "stable"])
    tokens = {name: f"rimthan-e2e-{name}-{os.urandom(8).hex()}" for name in SIGNED_OFF_PEOPLE}
    entries = [{"sha256": sha256_hex(tokens[n].encode()), **e} for n, e in SIGNED_OFF_PEOPLE.items()]
    token_file = workdir / "tokens.json"
    token_file.write_text(json.dumps({"tokens": entries}))
    port = _free_port()
    log = workdir / "server.log"
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            [_require_binary(), "serve", "--listen", f"127.0.0.1:{port}", "--database-url", f"sqlite://{workdir}/db.sqlite",
             "--registry", str(registry), "--auth", "tokens", "--auth-tokens-file", str(token_file)],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, cwd=workdir,
            preexec_fn=_die_with_parent,
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while _http_status(f"http://127.0.0.1:{port}/readyz") != 200:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield SignOffServer(mcp=f"http://127.0.0.1:{port}/mcp", base=f"http://127.0.0.1:{port}", tokens=tokens)
    finally:
        _stop(proc)


def decide(base: str, token: str, session: str, decision: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """An approver's decision over the JSON door, with their own bearer token."""
    request = urllib.request.Request(
        f"{base}/admin/api/sessions/{session}/decisions",
        data=json.dumps(decision).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=CALL_TIMEOUT_S) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.parametrize("mode", HTTP_MODES)
async def test_a_step_sent_back_by_an_approver_is_revised_and_two_approvals_complete_it(
    sign_off_server: SignOffServer, project: Path, mode: str
) -> None:
    """The official client as the participant's harness: the step waits for sign-off, no tool call
    moves it, an approver's send-back reaches it as a revise finding, and it completes only after
    two approvals, neither the participant's."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    wf = SIGNED_OFF
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {sign_off_server.tokens['pat']}"},
                              timeout=CALL_TIMEOUT_S)
    host = {"harness": "codex", "adapter": {"id": "codex", "version": "1.1.0"}, "capabilities": CAPABILITIES,
            "validator_capabilities": wf.validator_capabilities}
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with http, Client(streamable_http_client(sign_off_server.mcp, http_client=http), mode=mode,
                                read_timeout_seconds=CALL_TIMEOUT_S) as client:
            payload = await call_ok(client, START, {"workflow_id": wf.id, "host": host})
            deliveries = await deliver_host_assets(client, project, payload["host_assets"])

            async def step_through(payload: dict[str, Any]) -> dict[str, Any]:
                step = payload["step"]
                prepare: dict[str, Any] = {"checkpoint": payload["checkpoint"], "step_id": step["id"]}
                if step["kind"] == "setup":
                    prepare["host_attestation"] = {**host, "deliveries": deliveries}
                else:
                    prepare["output_attestation"] = {
                        "artifacts": [write_and_attest_output(wf, project, o) for o in step["outputs"]],
                        "inputs": input_texts(project, step)}
                plan = await call_ok(client, PREPARE, prepare)
                return await call_ok(client, SUBMIT, {"checkpoint": payload["checkpoint"],
                                                      "validation_id": plan["validation_id"],
                                                      "reports": passing_reports(wf, project, plan)})

            while payload["status"] == "active":
                payload = await step_through(payload)
            assert payload["status"] == "awaiting_approval", payload
            assert payload["approval"]["approvals_needed"] == 2
            session = payload["session_id"]

            def decide_as(who: str, decision: dict[str, Any]) -> tuple[int, dict[str, Any]]:
                return decide(sign_off_server.base, sign_off_server.tokens[who], session,
                              {"step": "write-note", **decision})

            stuck = await call(client, PREPARE, {"checkpoint": payload["checkpoint"], "step_id": "write-note",
                                                 "output_attestation": {"artifacts": []}})
            assert codes(stuck.structured_content["failures"]) == ["awaiting_approval"], stuck.structured_content

            status, answer = decide_as("ann", {"action": "send_back", "note": "Batch the backfill."})
            assert status == 200, answer
            # A revise answer is a tool error, as a failed submission's is.
            revise = (await call(client, GET_ACTIVE, {"checkpoint": payload["checkpoint"]})).structured_content
            assert revise["status"] == "revise", revise
            assert "Batch the backfill." in revise["findings"][0]["message"], revise["findings"]

            payload = await step_through(revise)
            assert payload["status"] == "awaiting_approval", payload
            status, answer = decide_as("pat", {"action": "approve"})
            assert (status, answer["failure"]["code"]) == (403, "approval_not_allowed"), answer
            for approver in ("rui", "ann"):
                status, answer = decide_as(approver, {"action": "approve"})
                assert status == 200, answer
            done = await call_ok(client, GET_ACTIVE, {"checkpoint": payload["checkpoint"]})
            assert done["status"] == "completed", done
            assert done["provenance"]["content"]["payloadType"] == "application/vnd.in-toto+json"


# Webhooks (docs/operations/deploy.md, Webhooks): a receiver that verifies every delivery with
# the Standard Webhooks library, written by others, and was down while the events happened.
from standardwebhooks.webhooks import Webhook  # noqa: E402


class _Receiver:
    """An HTTP receiver of signed events: 204 for each delivery the library verifies, 400 for
    any it refuses; it keeps what it saw."""

    def __init__(self, port: int, secret: str) -> None:
        verifier = Webhook(secret)
        self.seen: list[tuple[str, str]] = []
        self.refused = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    event = verifier.verify(body, headers)
                except Exception:  # noqa: BLE001 - any refusal is counted
                    receiver.refused += 1
                    self.send_response(400)
                    self.end_headers()
                    return
                receiver.seen.append((headers["webhook-id"], event["type"]))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def test_webhooks_reach_a_receiver_that_was_down_signed_and_each_event_once_per_id(tmp_path: Path) -> None:
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    secret_file = tmp_path / "webhook.secret"
    secret_file.write_text(secret)
    port = _free_port()  # nothing listens here until the session is done
    server = _start_http_server(tmp_path, None, ["--notify-url", f"http://127.0.0.1:{port}/hooks",
                                                 "--notify-secret-file", str(secret_file)])
    receiver = None
    try:
        project = tmp_path / "staged"

        def run(*args: str, who: str = "participant") -> subprocess.CompletedProcess[bytes]:
            return subprocess.run([_require_binary(), *args], stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=300, env={**os.environ, "RIMTHAN_TOKEN": server.tokens[who]})

        stage = ["stage", "--harness", "claude-code", "--url", server.url, "--project", str(project)]
        staged = run(*stage, "--workflow", "schema-migration")
        assert b"): awaiting_approval" in staged.stdout, staged.stdout
        session = staged.stdout.split()[1].decode()
        approved = run("sessions", "approve", session, "--step", "write-migration", "--server", server.base,
                       who="facilitator")
        assert approved.returncode == 0, approved.stderr
        assert b"): completed" in run(*stage, "--resume").stdout

        def metrics() -> str:
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            return opener.open(f"{server.base}/metrics", timeout=5).read().decode()

        # The receiver is down: attempts fail and are retried later, and nothing is lost.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and 'deliveries_total{outcome="retried"}' not in metrics():
            time.sleep(0.5)
        assert 'rimthan_webhooks_pending 3' in metrics(), metrics()
        shown = run("sessions", "show", session, "--server", server.base, who="facilitator")
        assert b"webhook events not delivered" in shown.stdout, shown.stdout
        assert b"approval.requested" in shown.stdout, shown.stdout
        receiver = _Receiver(port, secret)
        wanted = {"approval.requested", "approval.decided", "session.completed"}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and {t for _, t in receiver.seen} != wanted:
            time.sleep(0.5)
        assert {t for _, t in receiver.seen} == wanted, (receiver.seen, server.log_tail())
        assert receiver.refused == 0
        # Deduplicated by webhook-id, each event arrived once.
        by_id = dict(receiver.seen)
        assert sorted(by_id.values()) == sorted(wanted), receiver.seen
        page = metrics()
        assert 'rimthan_webhook_deliveries_total{outcome="delivered"} 3' in page, page
        assert "rimthan_webhooks_pending 0" in page, page
    finally:
        if receiver is not None:
            receiver.close()
        _stop(server.proc)
