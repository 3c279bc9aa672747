// Sign-off in a real browser (docs/operations/facilitator.md §5): `rimthan stage` drives a
// session of a workflow whose step needs two approvers (the test workflow of
// crates/engine/tests/data/signed-off, built with `rimthan registry build`) to awaiting_approval;
// a facilitator signs in at /admin/login in headless chromium, sees the session's sign-off
// section (axe finds no serious violation), sends the step back with a note; `stage --resume`
// revises and stops at sign-off again; a role holder approves with `rimthan sessions approve`
// and the facilitator approves in the browser; `stage --resume` completes the session.
import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import AxeBuilder from "@axe-core/playwright";
import { chromium } from "playwright-core";
import { rimthan, showSession, startServer, tempDir, writeTokensFile } from "./lib/rimthan.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const SCREENSHOTS = process.env.RIMTHAN_ADMIN_SCREENSHOTS ?? resolve(here, "../../target/ci-artifacts/admin");
const CHROMIUM = process.env.RIMTHAN_CHROMIUM ?? "/usr/bin/chromium";
const SOURCE = resolve(here, "../../crates/engine/tests/data/signed-off");

const PEOPLE = {
  pat: { principal: "pat", organization: "acme", scopes: ["rimthan:workflow"] },
  fran: { principal: "fran", organization: "acme", facilitator: "organization" },
  rui: { principal: "rui", organization: "acme", roles: ["release-manager"] },
};

describe("sign-off in headless chromium and on the command line", () => {
  let work;
  let server;
  let browser;
  let tokens;
  let session;
  const project = () => join(work.dir, "project");
  // `rimthan stage` exits 0 when the session completed and 4 when it waits for sign-off.
  const stage = async (resume) => {
    const { stdout, code } = await rimthan(
      ["stage", "--url", server.url, "--harness", "codex", "--project", project(), ...(resume ? ["--resume"] : [])],
      { RIMTHAN_TOKEN: tokens.pat },
      [0, 4],
    );
    assert.equal(code, /\): awaiting_approval/.test(stdout) ? 4 : 0, stdout);
    return stdout;
  };

  before(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    work = await tempDir("sign-off");
    const key = join(work.dir, "author.key");
    const registry = join(work.dir, "registry");
    await rimthan(["registry", "keygen", "--out", key]);
    await rimthan(["registry", "build", SOURCE, "--out", registry, "--release", "2027.1.0", "--key", key, "--channel", "stable"]);
    const written = await writeTokensFile(work.dir, PEOPLE);
    tokens = written.tokens;
    server = await startServer(work.dir, ["--auth", "tokens", "--auth-tokens-file", written.file, "--registry", registry]);
  }, { timeout: 300_000 });

  after(async () => {
    await browser?.close();
    await server?.stop();
    await work?.cleanup();
  });

  /** A browser context signed in as fran through the login form, on the session's page. */
  async function signedIn() {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(10_000);
    const page = await context.newPage();
    await page.goto(`${server.base}/admin/login`);
    await page.fill("#token", tokens.fran);
    await Promise.all([page.waitForURL(`${server.base}/admin`), page.click("button[type=submit]")]);
    await page.goto(`${server.base}/admin/sessions/${session}`);
    return { page, close: () => context.close() };
  }

  test("stage stops at sign-off", async () => {
    const out = await stage(false);
    assert.match(out, /\): awaiting_approval/, out);
    session = out.split(/\s+/)[1];
    assert.match(session, /^[0-9a-f]{32}$/);
  });

  test("a facilitator sees the sign-off and sends the step back with a note", async () => {
    const { page, close } = await signedIn();
    try {
      assert.equal(await page.locator("#sign-off").count(), 1, await page.content());
      assert.equal(await page.locator("#approval-outputs tbody tr").count(), 2);
      const { violations } = await new AxeBuilder({ page }).analyze();
      const serious = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
      assert.deepEqual(serious.map((v) => `${v.id}: ${v.help}`), []);
      await mkdir(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: join(SCREENSHOTS, "sign-off.png"), fullPage: true });
      await page.fill("#send-back-note", "Batch the backfill in 10,000-row steps.");
      await Promise.all([page.waitForLoadState("load"), page.click("#send-back button[type=submit]")]);
      assert.equal(await page.locator("#sign-off").count(), 0, "the session no longer waits");
    } finally {
      await close();
    }
    const shown = await showSession(server.databaseUrl, session);
    assert.equal(shown.status, "revise", JSON.stringify(shown));
  });

  test("the harness revises, and a role holder and the facilitator approve it to completion", async () => {
    const out = await stage(true);
    assert.match(out, /\): awaiting_approval/, out);
    await assert.rejects(
      rimthan(["sessions", "approve", session, "--step", "write-note", "--server", server.base], { RIMTHAN_TOKEN: tokens.pat }),
      /approval_not_allowed/,
    );
    await rimthan(
      ["sessions", "approve", session, "--step", "write-note", "--server", server.base, "--note", "Timeouts checked."],
      { RIMTHAN_TOKEN: tokens.rui },
    );
    const { page, close } = await signedIn();
    try {
      assert.match(await page.locator("#approvals").textContent(), /rui/);
      await Promise.all([page.waitForLoadState("load"), page.click("#approve button[type=submit]")]);
    } finally {
      await close();
    }
    const done = await stage(true);
    assert.match(done, /\): completed/, done);
  });
});
