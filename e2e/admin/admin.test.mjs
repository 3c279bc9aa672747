// The facilitator's /admin view of the real rimthan binary, in a real browser: Playwright
// (playwright-core) drives Debian's chromium headless against `rimthan serve --auth tokens`
// whose store holds sessions staged by `rimthan stage` as three participants of two
// organizations, plus one start refused for a harness the workflow does not pin. The pages
// are checked against `rimthan sessions list/show --json` on the same store, for who may see
// what, for a principal that is an HTML payload, and by axe-core for accessibility.
// Full-page screenshots go to RIMTHAN_ADMIN_SCREENSHOTS (run.sh sets it).
import assert from "node:assert/strict";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import AxeBuilder from "@axe-core/playwright";
import { chromium } from "playwright-core";
import {
  callTool, listSessions, rimthan, showSession, startServer, tempDir, writeTokensFile,
} from "./lib/rimthan.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const SCREENSHOTS = process.env.RIMTHAN_ADMIN_SCREENSHOTS ?? resolve(here, "../../target/ci-artifacts/admin");
const CHROMIUM = process.env.RIMTHAN_CHROMIUM ?? "/usr/bin/chromium";

/** The shipped workflow every session runs: it pins all four harnesses. */
const WORKFLOW = "research-study";
/** Participant A's principal: it must reach the page as text, never as markup. */
const HOSTILE = "<script>alert(1)</script>";
const WORKFLOW_SCOPE = ["rimthan:workflow"];

/** The token file's entries, by a short name the test uses. */
const PEOPLE = {
  alice: { principal: HOSTILE, organization: "acme", scopes: WORKFLOW_SCOPE },
  bob: { principal: "bob", organization: "acme", scopes: WORKFLOW_SCOPE },
  carol: { principal: "carol", organization: "globex", scopes: WORKFLOW_SCOPE },
  fran: { principal: "fran", organization: "acme", facilitator: "organization" },
  root: { principal: "root-facilitator", facilitator: "all" },
};
const PARTICIPANTS = ["alice", "bob", "carol"];

/**
 * The staged sessions and where each must end up; `steps` stands for the workflow's step count.
 * Each (principal, harness) pair is staged once, so it names its session.
 */
const STAGED = [
  { who: "alice", harness: "codex", flags: [], status: "completed", stepIndex: "steps", reviseRounds: 0 },
  { who: "bob", harness: "claude-code", flags: ["--revise"], status: "completed", stepIndex: "steps", reviseRounds: 1 },
  { who: "alice", harness: "cowork", flags: ["--revise", "--stop-after", "2"], status: "revise", stepIndex: 1, reviseRounds: 1 },
  { who: "carol", harness: "buzz", flags: ["--stop-after", "1"], status: "active", stepIndex: 1, reviseRounds: 0 },
  { who: "bob", harness: "codex", flags: ["--stop-after", "2"], status: "active", stepIndex: 2, reviseRounds: 0 },
];

/** The text of an HTML document's first <h1>, tags stripped; null when it has none. */
function h1Text(html) {
  const m = /<h1\b[^>]*>([\s\S]*?)<\/h1>/i.exec(html);
  return m ? m[1].replace(/<[^>]*>/g, "").trim() : null;
}

const count = (list, pred) => list.filter(pred).length;

describe("the /admin facilitator view in headless chromium", () => {
  let work;
  let server;
  let browser;
  let tokens;
  let sessions; // `rimthan sessions list --json` after staging
  let steps; // the workflow's step count
  let version; // the workflow version the sessions run
  let blocked; // the JSON-RPC answer to the refused start

  /** The session `who` staged on `harness`, from the CLI's list. */
  const sessionOf = (who, harness) => {
    const found = sessions.filter((s) => s.principal === PEOPLE[who].principal && s.harness === harness);
    assert.equal(found.length, 1, `one session of ${who} on ${harness}: ${JSON.stringify(sessions, null, 2)}`);
    return found[0];
  };
  const workflowPath = () => `/admin/workflows/${WORKFLOW}/${version}`;

  /**
   * A fresh browser context sending `who`'s bearer token (none when who is null) on every
   * request, with `path` loaded. Returns { page, response, dialogs, close() }: `dialogs` lists
   * every alert, confirm or prompt the page opened (dismissed at once).
   */
  async function open(who, path) {
    const context = await browser.newContext({
      extraHTTPHeaders: who ? { Authorization: `Bearer ${tokens[who]}` } : {},
      viewport: { width: 1280, height: 900 },
    });
    context.setDefaultTimeout(10_000);
    const page = await context.newPage();
    const dialogs = [];
    page.on("dialog", async (d) => {
      dialogs.push(`${d.type()} "${d.message()}" on ${page.url()}`);
      await d.dismiss().catch(() => {});
    });
    const response = path ? await page.goto(server.base + path) : null;
    return { page, response, dialogs, close: () => context.close() };
  }

  /** Runs fn({ page, response }) on `path` as `who`; fails if the page opened a dialog. */
  async function onPage(who, path, fn) {
    const opened = await open(who, path);
    try {
      const result = await fn(opened);
      assert.deepEqual(opened.dialogs, [], `${path} opened a dialog`);
      return result;
    } catch (e) {
      if (opened.dialogs.length > 0) e.message += `\n${path} opened a dialog: ${opened.dialogs.join("; ")}`;
      throw e;
    } finally {
      await opened.close();
    }
  }

  /** The body rows of #sessions, as their data attributes, first-cell link and text. */
  const sessionRows = (page) =>
    page.$$eval("#sessions tbody tr[data-session-id]", (trs) =>
      trs.map((tr) => ({
        id: tr.dataset.sessionId,
        status: tr.dataset.status,
        step_index: Number(tr.dataset.stepIndex),
        harness: tr.dataset.harness,
        workflow: tr.dataset.workflow,
        revise_rounds: Number(tr.dataset.reviseRounds),
        link: tr.cells[0]?.querySelector("a[href]")
          ? new URL(tr.cells[0].querySelector("a[href]").getAttribute("href"), location.href).pathname
          : null,
        text: tr.textContent,
      })));

  const scriptCount = (page) => page.evaluate(() => document.querySelectorAll("script").length);
  const pageH1 = async (page) => ((await page.locator("h1").first().textContent({ timeout: 5000 })) ?? "").trim();

  before(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    work = await tempDir("admin");
    const written = await writeTokensFile(work.dir, PEOPLE);
    tokens = written.tokens;
    server = await startServer(work.dir, ["--auth", "tokens", "--auth-tokens-file", written.file]);
    try {
      for (const [i, s] of STAGED.entries()) {
        await rimthan(
          ["stage", "--url", server.url, "--harness", s.harness, "--workflow", WORKFLOW,
            "--project", join(work.dir, `project-${i}-${s.who}-${s.harness}`), ...s.flags],
          { RIMTHAN_TOKEN: tokens[s.who] },
        );
      }
      sessions = await listSessions(server.databaseUrl);
      assert.equal(sessions.length, STAGED.length, JSON.stringify(sessions, null, 2));
      version = sessions[0].workflow_version;
      steps = sessions[0].steps;
      assert.ok(Number.isInteger(steps) && steps > 2, `the CLI counts the workflow's steps: ${steps}`);
      // As bob: a harness the workflow does not pin. Blocked; stores no session.
      blocked = await callTool(server.url, tokens.bob, "rimthan.start_workflow", {
        workflow_id: WORKFLOW,
        workflow_version: version,
        host: {
          harness: "not-a-harness",
          adapter: { id: "codex", version: "1.2.0" },
          capabilities: ["mcp.tools", "mcp.resources", "mcp.prompts", "native-subagents", "scoped-inputs",
            "read-only-capabilities", "structured-reports", "project-local-assets"],
          validator_capabilities: ["workspace.read", "web.read", "git.read"],
        },
      });
    } catch (e) {
      e.message += `\n--- rimthan serve log ---\n${server.log()}`;
      throw e;
    }
  }, { timeout: 600_000 });

  after(async () => {
    await browser?.close();
    await server?.stop();
    if (server) {
      await mkdir(SCREENSHOTS, { recursive: true });
      await writeFile(join(SCREENSHOTS, "server.log"), server.log());
    }
    await work?.cleanup();
  });

  test("staging left each session where its flags say", () => {
    for (const s of STAGED) {
      const got = sessionOf(s.who, s.harness);
      const want = s.stepIndex === "steps" ? steps : s.stepIndex;
      assert.equal(got.workflow, WORKFLOW);
      assert.equal(got.status, s.status, `${s.who} on ${s.harness}: status`);
      assert.equal(got.step_index, want, `${s.who} on ${s.harness}: step_index`);
      assert.equal(got.revise_rounds, s.reviseRounds, `${s.who} on ${s.harness}: revise_rounds`);
      assert.equal(got.organization, PEOPLE[s.who].organization);
    }
  });

  test("a start on a harness the workflow does not pin is blocked and stores nothing", async () => {
    const result = blocked.result;
    assert.ok(result, `a tool result, not a JSON-RPC error: ${JSON.stringify(blocked)}`);
    assert.equal(result.isError, true, JSON.stringify(result));
    const codes = (result.structuredContent?.blockers ?? []).map((b) => b.code);
    assert.ok(codes.includes("unsupported_harness"), `blockers: ${JSON.stringify(codes)}`);
    assert.equal((await listSessions(server.databaseUrl)).length, STAGED.length);
  });

  test("without a token: 401; with a participant's token: 403; both readable HTML", async () => {
    const anyId = sessionOf("alice", "codex").id;
    for (const path of ["/admin", `/admin/sessions/${anyId}`, workflowPath()]) {
      const anonymous = await fetch(server.base + path);
      const body = await anonymous.text();
      assert.equal(anonymous.status, 401, `${path} without a token`);
      assert.match(anonymous.headers.get("content-type") ?? "", /text\/html/, `${path} 401 is HTML`);
      assert.ok(h1Text(body), `${path} 401 has an <h1>:\n${body}`);
      for (const who of PARTICIPANTS) {
        const refused = await fetch(server.base + path, { headers: { Authorization: `Bearer ${tokens[who]}` } });
        const text = await refused.text();
        assert.equal(refused.status, 403, `${path} as participant ${who}`);
        assert.match(refused.headers.get("content-type") ?? "", /text\/html/, `${path} 403 is HTML`);
        assert.ok(h1Text(text), `${path} 403 has an <h1>:\n${text}`);
        assert.ok(!text.includes(anyId) || path.includes(anyId), `${path} 403 names no session`);
      }
    }
    await onPage("bob", "/admin", async ({ page, response }) => {
      assert.equal(response.status(), 403);
      assert.ok((await pageH1(page)).length > 0, "the refusal has a heading");
      const text = await page.locator("body").innerText();
      assert.ok(text.trim().length > 0, "the refusal says something");
      assert.equal(await page.locator("#sessions").count(), 0, "no session table behind a refusal");
      for (const s of sessions) assert.ok(!text.includes(s.id), `the refusal shows no session id (${s.id})`);
    });
  });

  test("the all-organizations facilitator's list shows every session; the HTML principal stays text", async () => {
    await onPage("root", "/admin", async ({ page, response }) => {
      assert.equal(response.status(), 200);
      assert.match(response.headers()["content-type"] ?? "", /text\/html/);
      assert.equal(await pageH1(page), "Sessions");
      assert.equal(await scriptCount(page), 0, "the page has no <script> element at all");

      const rows = await sessionRows(page);
      assert.deepEqual(rows.map((r) => r.id).sort(), sessions.map((s) => s.id).sort());
      for (const r of rows) assert.equal(r.link, `/admin/sessions/${r.id}`, `the first cell of ${r.id} links to it`);
      const alices = sessions.filter((s) => s.principal === HOSTILE).map((s) => s.id);
      for (const r of rows.filter((r) => alices.includes(r.id))) {
        assert.ok(r.text.includes(HOSTILE), `alice's row shows her principal as text: ${JSON.stringify(r.text)}`);
      }
      assert.ok(rows.some((r) => r.text.includes("carol")), "carol's session is listed with her name");

      // The filter form: a GET form with a labelled field for each filter.
      const fields = await page.$$eval("form [name]", (els) =>
        els.map((el) => ({
          name: el.getAttribute("name"),
          method: (el.form?.getAttribute("method") ?? "get").toLowerCase(),
          labelled: (el.labels?.length ?? 0) > 0 || el.hasAttribute("aria-label") || el.hasAttribute("aria-labelledby"),
        })));
      for (const name of ["status", "workflow", "organization", "since"]) {
        const field = fields.find((f) => f.name === name);
        assert.ok(field, `a form field named ${name}: ${JSON.stringify(fields)}`);
        assert.equal(field.method, "get", `${name} is in a GET form`);
        assert.ok(field.labelled, `${name} has a label`);
      }

      const workflows = await page.$$eval("#workflows tbody tr[data-workflow]", (trs) =>
        trs.map((tr) => ({
          workflow: tr.dataset.workflow,
          version: tr.dataset.version,
          links: [...tr.querySelectorAll("a[href]")].map((a) => new URL(a.getAttribute("href"), location.href).pathname),
        })));
      const row = workflows.find((w) => w.workflow === WORKFLOW && w.version === version);
      assert.ok(row, `#workflows has ${WORKFLOW} ${version}: ${JSON.stringify(workflows)}`);
      assert.ok(row.links.includes(workflowPath()), `it links to ${workflowPath()}: ${row.links}`);
    });
  });

  test("the list filters by status, organization and workflow, from the URL and from the form", async () => {
    const ids = (pred) => sessions.filter(pred).map((s) => s.id).sort();
    const cases = [
      ["status=completed", ids((s) => s.status === "completed")],
      ["status=revise", ids((s) => s.status === "revise")],
      ["status=active", ids((s) => s.status === "active")],
      ["organization=globex", ids((s) => s.organization === "globex")],
      [`workflow=${WORKFLOW}`, ids(() => true)],
      ["workflow=no-such-workflow", []],
    ];
    for (const [query, want] of cases) {
      await onPage("root", `/admin?${query}`, async ({ page, response }) => {
        assert.equal(response.status(), 200, query);
        assert.deepEqual((await sessionRows(page)).map((r) => r.id).sort(), want, query);
      });
    }
    await onPage("root", "/admin", async ({ page }) => {
      const field = page.locator("form [name=status]").first();
      if ((await field.evaluate((el) => el.tagName)) === "SELECT") await field.selectOption("revise");
      else await field.fill("revise");
      await Promise.all([
        page.waitForURL((u) => u.searchParams.get("status") === "revise"),
        field.evaluate((el) => void setTimeout(() => el.form.requestSubmit(), 0)),
      ]);
      assert.deepEqual((await sessionRows(page)).map((r) => r.id).sort(), ids((s) => s.status === "revise"),
        `the form's GET request ${page.url()} (other fields left blank) lists the revise session`);
    });
  });

  test("the list agrees with `rimthan sessions list --json` on the same store", async () => {
    const listed = await listSessions(server.databaseUrl);
    await onPage("root", "/admin", async ({ page }) => {
      const rows = await sessionRows(page);
      assert.deepEqual(rows.map((r) => r.id).sort(), listed.map((s) => s.id).sort());
      for (const s of listed) {
        const r = rows.find((row) => row.id === s.id);
        const pick = (o) => ({ status: o.status, step_index: o.step_index, harness: o.harness, workflow: o.workflow, revise_rounds: o.revise_rounds });
        assert.deepEqual(pick(r), pick(s), `session ${s.id}`);
      }
    });
  });

  test("a session page: reached from the list, one timeline row per audited call", async () => {
    const revised = sessionOf("bob", "claude-code");
    const shown = await showSession(server.databaseUrl, revised.id);
    assert.ok(shown.timeline.length >= 2, JSON.stringify(shown.timeline));
    await onPage("root", "/admin", async ({ page }) => {
      await Promise.all([
        page.waitForURL((u) => u.pathname === `/admin/sessions/${revised.id}`),
        page.locator(`#sessions tr[data-session-id="${revised.id}"] > :first-child a`).first().click(),
      ]);
      assert.ok((await pageH1(page)).includes(revised.id), "the heading names the session");
      assert.equal(await scriptCount(page), 0);
      const rows = await page.$$eval("#timeline tbody tr", (trs) => trs.map((tr) => tr.textContent));
      assert.equal(rows.length, shown.timeline.length, `timeline rows:\n${rows.join("\n")}`);
      for (const [i, e] of shown.timeline.entries()) {
        assert.ok(rows.some((t) => t.includes(e.tool) && t.includes(e.outcome)),
          `a row for call ${i}: ${e.tool} ${e.outcome}\n${rows.join("\n")}`);
      }
      assert.ok(rows.some((t) => t.includes("revise")), "the round sent back shows as revise");
    });
    // Alice's own session page shows her principal as text too, if at all.
    await onPage("root", `/admin/sessions/${sessionOf("alice", "codex").id}`, async ({ page, response }) => {
      assert.equal(response.status(), 200);
      assert.equal(await scriptCount(page), 0);
    });
  });

  test("the workflow page: funnel, completed, refused starts, charts and harnesses agree with the store", async () => {
    await onPage("root", workflowPath(), async ({ page, response }) => {
      assert.equal(response.status(), 200);
      assert.ok((await pageH1(page)).length > 0);
      assert.equal(await scriptCount(page), 0);
      const funnel = await page.$$eval("#funnel tbody tr[data-step-index]", (trs) =>
        trs.map((tr) => ({ index: tr.dataset.stepIndex, reached: tr.dataset.reached })));
      assert.deepEqual(funnel.map((f) => f.index), [...Array(steps).keys()].map(String), "one funnel row per step");
      for (const f of funnel) {
        const i = Number(f.index);
        assert.equal(Number(f.reached), count(sessions, (s) => s.step_index >= i), `sessions that reached step ${i}`);
      }
      const dataCount = (sel) => page.locator(sel).getAttribute("data-count").then(Number);
      assert.equal(await dataCount("#completed"), count(sessions, (s) => s.status === "completed"));
      assert.equal(await dataCount("#refused-starts"), 1);
      for (const id of ["funnel-chart", "revise-chart", "times-chart", "harness-chart"]) {
        assert.equal(await page.locator(`figure#${id} svg[role="img"]`).count(), 1, `an <svg role=img> in figure#${id}`);
      }
      const harnesses = await page.$$eval("#harnesses tbody tr[data-harness]", (trs) =>
        trs.map((tr) => ({ harness: tr.dataset.harness, count: Number(tr.dataset.count) })));
      for (const h of new Set(sessions.map((s) => s.harness))) {
        const row = harnesses.find((r) => r.harness === h);
        assert.ok(row, `#harnesses has ${h}: ${JSON.stringify(harnesses)}`);
        assert.equal(row.count, count(sessions, (s) => s.harness === h), `sessions on ${h}`);
      }
      for (const r of harnesses.filter((r) => !sessions.some((s) => s.harness === r.harness))) {
        assert.equal(r.count, 0, `${r.harness} ran no session`);
      }
    });
  });

  test("the organization facilitator sees its organization's sessions only", async () => {
    const acme = sessions.filter((s) => s.organization === "acme");
    const carols = sessionOf("carol", "buzz");
    await onPage("fran", "/admin", async ({ page, response }) => {
      assert.equal(response.status(), 200);
      const rows = await sessionRows(page);
      assert.deepEqual(rows.map((r) => r.id).sort(), acme.map((s) => s.id).sort());
      assert.ok(!(await page.locator("body").innerText()).includes("carol"), "carol is nowhere on the page");
    });
    await onPage("fran", `/admin/sessions/${carols.id}`, async ({ page, response }) => {
      assert.ok([403, 404].includes(response.status()), `carol's session as fran: ${response.status()}`);
      assert.equal(await page.locator("#timeline").count(), 0);
      assert.ok(!(await page.locator("body").innerText()).includes("carol"));
    });
    await onPage("fran", "/admin?organization=globex", async ({ page, response }) => {
      // The server may refuse the filter or hold it to fran's own organization; either way
      // nothing of globex may show.
      assert.ok([200, 400, 403].includes(response.status()), `organization=globex as fran: ${response.status()}`);
      const shown = (await sessionRows(page)).map((r) => r.id);
      for (const id of shown) assert.ok(acme.some((s) => s.id === id), `${id} is acme's`);
      assert.ok(!shown.includes(carols.id), "carol's session stays hidden");
    });
  });

  test("the organization facilitator's workflow page counts its organization's sessions only", async () => {
    const acme = sessions.filter((s) => s.organization === "acme");
    await onPage("fran", workflowPath(), async ({ page, response }) => {
      assert.equal(response.status(), 200);
      const reached0 = await page.locator('#funnel tbody tr[data-step-index="0"]').getAttribute("data-reached");
      assert.equal(Number(reached0), acme.length, "step 1 was reached by acme's sessions");
      const buzz = await page.locator('#harnesses tbody tr[data-harness="buzz"]').getAttribute("data-count", { timeout: 1000 }).catch(() => null);
      assert.ok(buzz === null || Number(buzz) === 0, `carol's buzz session is not counted: ${buzz}`);
      assert.equal(Number(await page.locator("#refused-starts").getAttribute("data-count")), 1, "bob (acme) was refused once");
    });
  });

  test("bad input: unknown session 404, bad filter 400, page past the end 404, each an HTML page with a heading", async () => {
    const cases = [
      ["/admin/sessions/doesnotexist", 404],
      [`/admin/sessions/${"0".repeat(32)}`, 404],
      ["/admin?status=bogus", 400],
      ["/admin?page=999", 404],
    ];
    for (const [path, status] of cases) {
      await onPage("root", path, async ({ page, response }) => {
        assert.equal(response.status(), status, path);
        assert.match(response.headers()["content-type"] ?? "", /text\/html/, `${path} is HTML`);
        assert.ok((await pageH1(page)).length > 0, `${path} has a heading`);
        assert.equal(await scriptCount(page), 0);
      });
    }
  });

  /** The three pages the screenshots, axe and the keyboard look at. */
  const views = () => [
    ["list", "/admin"],
    ["session", `/admin/sessions/${sessionOf("bob", "claude-code").id}`],
    ["workflow", workflowPath()],
  ];

  test("full-page screenshots of the list, a session and the workflow page", async (t) => {
    await mkdir(SCREENSHOTS, { recursive: true });
    for (const [name, path] of views()) {
      await onPage("root", path, async ({ page, response }) => {
        assert.equal(response.status(), 200, path);
        const file = join(SCREENSHOTS, `${name}.png`);
        await page.screenshot({ path: file, fullPage: true });
        t.diagnostic(`${name}: ${file}`);
      });
    }
  });

  test("axe finds no serious or critical violation on the three pages", async (t) => {
    const serious = [];
    for (const [name, path] of views()) {
      await onPage("root", path, async ({ page }) => {
        const { violations } = await new AxeBuilder({ page }).analyze();
        for (const v of violations) {
          const line = `${name} ${path}: [${v.impact}] ${v.id}: ${v.help} (${v.helpUrl})\n    ${v.nodes.map((n) => n.target.join(" ")).join("\n    ")}`;
          t.diagnostic(line);
          if (v.impact === "serious" || v.impact === "critical") serious.push(line);
        }
      });
    }
    assert.deepEqual(serious, [], `serious or critical axe violations:\n${serious.join("\n")}`);
  });

  test("Tab from the top of each page focuses a link or a form control", async () => {
    for (const [name, path] of views()) {
      await onPage("root", path, async ({ page }) => {
        await page.keyboard.press("Tab");
        const focused = await page.evaluate(() => {
          const el = document.activeElement;
          return el && el !== document.body ? { tag: el.tagName, href: el.getAttribute("href"), type: el.getAttribute("type") } : null;
        });
        assert.ok(focused, `${name}: Tab focuses something`);
        const control = ["INPUT", "SELECT", "BUTTON", "TEXTAREA"].includes(focused.tag) || (focused.tag === "A" && focused.href !== null);
        assert.ok(control, `${name}: Tab focuses a link or form control, not ${JSON.stringify(focused)}`);
      });
    }
  });
});
