// Sign-off in a real browser (docs/operations/facilitator.md §5): `rimthan stage` drives a
// session of a workflow whose step needs two approvers (the test workflow of
// docs/examples/signed-off, built with `rimthan registry build`) to awaiting_approval;
// a facilitator signs in at /admin/login in headless chromium, sees the session's sign-off
// section (axe finds no serious violation), sends the step back with a note; `stage --resume`
// revises and stops at sign-off again; a role holder approves with `rimthan sessions approve`
// and the facilitator approves in the browser; `stage --resume` completes the session. Then the
// README's `serve` with no flags: a shipped workflow stops at sign-off, and the operator at the
// machine approves it in the browser under a name recorded as asserted.
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
const SOURCE = resolve(here, "../../docs/examples/signed-off");

const PEOPLE = {
  pat: { principal: "pat", organization: "acme", scopes: ["rimthan:workflow"] },
  fran: { principal: "fran", organization: "acme", facilitator: "organization" },
  rui: { principal: "rui", organization: "acme", roles: ["release-manager"] },
};

/** No serious or critical axe violation on the page as it stands. */
async function axeClean(page) {
  const { violations } = await new AxeBuilder({ page }).analyze();
  const serious = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  assert.deepEqual(serious.map((v) => `${v.id}: ${v.help}`), []);
}

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

  /** A browser context signed in through the login form (as fran unless told), on the session's page. */
  async function signedIn(token = tokens.fran) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(10_000);
    const page = await context.newPage();
    await page.goto(`${server.base}/admin/login`);
    await page.fill("#token", token);
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
      // What is signed, read as text with line numbers.
      assert.equal(await page.locator("#sign-off section.output").count(), 2);
      assert.ok((await page.locator("#sign-off table.text tbody tr").count()) > 2);
      assert.match(await page.locator("#who-decides").textContent(), /not pat/);
      await axeClean(page);
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
    // The role holder the step names signs in to what waits for them and reads it.
    const rui = await signedIn(tokens.rui);
    try {
      assert.match(await rui.page.locator("#sign-off").textContent(), /Unchanged since the send-back/);
      await rui.page.goto(`${server.base}/admin`);
      assert.equal(await rui.page.locator(`#waiting tr[data-session-id="${session}"]`).count(), 1);
      await axeClean(rui.page);
      await rui.page.screenshot({ path: join(SCREENSHOTS, "waiting-for-you.png"), fullPage: true });
    } finally {
      await rui.close();
    }
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

describe("sign-off at the machine where nobody authenticates", () => {
  let work;
  let server;
  let browser;

  before(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    work = await tempDir("asserted");
    server = await startServer(work.dir);
  }, { timeout: 300_000 });

  after(async () => {
    await browser?.close();
    await server?.stop();
    await work?.cleanup();
  });

  test("serve with no flags completes schema-migration with an approval asserted in /admin", async () => {
    const project = join(work.dir, "project");
    const args = ["stage", "--url", server.url, "--harness", "codex", "--workflow", "schema-migration", "--project", project];
    const { stdout } = await rimthan(args, {}, [4]);
    const session = stdout.split(/\s+/)[1];
    assert.match(session, /^[0-9a-f]{32}$/, stdout);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(10_000);
    try {
      const page = await context.newPage();
      await page.goto(`${server.base}/admin/sessions/${session}`);
      assert.match(await page.locator("#who-decides").textContent(), /operator at this machine/);
      await axeClean(page);
      await mkdir(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: join(SCREENSHOTS, "sign-off-asserted.png"), fullPage: true });
      await page.fill("#approve input[name=as]", "ada");
      await Promise.all([page.waitForLoadState("load"), page.click("#approve button[type=submit]")]);
      assert.match(await page.content(), /name asserted, not authenticated/);
    } finally {
      await context.close();
    }
    const done = await rimthan([...args, "--resume"]);
    assert.match(done.stdout, /\): completed/, done.stdout);
  });
});
