// Reads the checks.json files one conformance run wrote (-o DIR) and its expected-failures
// baseline, and prints, per scored scenario, what passed, what failed as expected and what did
// not; then one closing line `conformance: P passed, F failed, X skipped`:
//   P = scored scenarios with no FAILURE and no WARNING check (listed in the baseline or not),
//   F = unexpected failures + stale baseline entries (what makes the suite exit non-zero),
//   X = scenarios whose failures are all expected by the baseline (not judged).
// The suite's own exit code stays the verdict; this only makes its result readable in CI logs
// and prints the details (errorMessage, details) of every unexpected failure.
//
// usage: node summarize.mjs LABEL RESULTS_DIR BASELINE.yml [SCORED_SCENARIOS_FILE]
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";

const [label, dir, baselinePath, scoredPath] = process.argv.slice(2);
const bad = (c) => c.status === "FAILURE" || c.status === "WARNING";

const baseline = (parse(readFileSync(baselinePath, "utf8")) ?? {}).server ?? [];
const wholeScenario = new Set();
const perCheck = new Map();
for (const raw of baseline) {
  const entry = String(raw);
  const colon = entry.indexOf(":");
  if (colon === -1) wholeScenario.add(entry);
  else {
    const [s, c] = [entry.slice(0, colon), entry.slice(colon + 1)];
    if (!perCheck.has(s)) perCheck.set(s, new Set());
    perCheck.get(s).add(c);
  }
}

const results = new Map();
for (const name of existsSync(dir) ? readdirSync(dir) : []) {
  const file = join(dir, name, "checks.json");
  if (!existsSync(file)) continue;
  const scenario = name.replace(/^server-/, "").replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, "");
  results.set(scenario, JSON.parse(readFileSync(file, "utf8")));
}
const scored = scoredPath
  ? new Set(readFileSync(scoredPath, "utf8").split("\n").map((l) => l.trim()).filter(Boolean))
  : new Set(results.keys());

let passed = 0;
let skipped = 0;
const unexpected = [];
const stale = [];
for (const scenario of [...scored].sort()) {
  const checks = results.get(scenario);
  if (!checks) {
    unexpected.push({ scenario, check: { id: "(not run)", status: "FAILURE", errorMessage: "no checks.json was written" } });
    continue;
  }
  // the worst status per check id, as the suite does
  const rank = (s) => ({ FAILURE: 3, WARNING: 2, SUCCESS: 1 })[s] ?? 0;
  const worst = new Map();
  for (const c of checks) {
    if (c.status === "INFO") continue;
    if (!worst.has(c.id) || rank(c.status) >= rank(worst.get(c.id).status)) worst.set(c.id, c);
  }
  const failing = [...worst.values()].filter(bad);
  if (wholeScenario.has(scenario)) {
    if (failing.length === 0) {
      stale.push(scenario);
      passed++;
    } else skipped++;
    continue;
  }
  const expected = perCheck.get(scenario) ?? new Set();
  const surprises = failing.filter((c) => !expected.has(c.id));
  for (const c of surprises) unexpected.push({ scenario, check: c });
  for (const id of expected) if (worst.get(id)?.status === "SUCCESS") stale.push(`${scenario}:${id}`);
  if (failing.length === 0) passed++;
  else if (surprises.length === 0) skipped++;
}

for (const { scenario, check } of unexpected) {
  console.log(`UNEXPECTED ${label} ${scenario}:${check.id} ${check.status}: ${check.errorMessage ?? check.description ?? ""}`);
  if (check.details) console.log(`    details: ${JSON.stringify(check.details)}`);
}
for (const entry of stale) console.log(`STALE ${label} baseline entry now passes: ${entry}`);
console.log(
  `${label}: ${scored.size} scored scenarios: ${passed} passed, ${skipped} failing only as the baseline expects, ` +
    `${unexpected.length} unexpected failing checks, ${stale.length} stale baseline entries`,
);
process.stdout.write(`conformance: ${passed} passed, ${unexpected.length + stale.length} failed, ${skipped} skipped\n`);
