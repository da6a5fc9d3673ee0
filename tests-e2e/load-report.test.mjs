// The load generator's HTML report: run a tiny Artillery script against a
// real throng server, open the report via file:// in Chromium, and check that
// its three charts were drawn from the run's data. Skips itself (with the
// reason) while neither `throng-load` nor `throng load` is built.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

import { binPath, launchBrowser, removeDir, run, startThrong, tempDir } from "./lib/server.mjs";

const DURATION_S = 3;
const ARRIVAL_RATE = 20;
const RUN_MS_MAX = 60_000;

/** The command prefix that runs the load generator, or null while it is not built. */
async function loadCommand() {
  const standalone = binPath("throng-load");
  if (existsSync(standalone)) return [standalone];
  const throng = binPath("throng");
  if (!existsSync(throng)) return null;
  const help = await run(throng, ["load", "--help"], { timeoutMs: 10_000 });
  return help.code === 0 ? [throng, "load"] : null;
}

let server;
let dir;

before(async () => {
  dir = tempDir("load-report");
});

after(async () => {
  await server?.stop();
  // Keep the report and screenshot when asked, to look at them.
  if (process.env.THRONG_E2E_KEEP) console.log(`kept ${dir}`);
  else removeDir(dir);
});

test("the HTML report of `load run --report` draws rate, latency and status-code charts", { timeout: 120_000 }, async (t) => {
  const cmd = await loadCommand();
  if (!cmd) {
    t.skip("throng-load not built yet (neither target/debug/throng-load nor `throng load --help`)");
    return;
  }
  server = await startThrong();
  const script = join(dir, "health.yml");
  writeFileSync(
    script,
    [
      "config:",
      `  target: "${server.url}"`,
      "  phases:",
      `    - duration: ${DURATION_S}`,
      `      arrivalRate: ${ARRIVAL_RATE}`,
      "scenarios:",
      "  - name: health",
      "    flow:",
      "      - get:",
      '          url: "/health"',
      "",
    ].join("\n"),
  );
  const html = join(dir, "report.html");
  const json = join(dir, "report.json");
  const [bin, ...pre] = cmd;
  const started = Date.now();
  const res = await run(bin, [...pre, "run", script, "--report", html, "--output", json], { cwd: dir, timeoutMs: RUN_MS_MAX });
  assert.equal(res.code, 0, `load run failed (exit ${res.code}):\n${res.stdout}\n${res.stderr}`);
  t.diagnostic(`load run took ${Date.now() - started} ms`);
  assert.ok(existsSync(html) && statSync(html).size > 0, "the HTML report was written");

  const counters = JSON.parse(readFileSync(json, "utf8")).aggregate.counters;
  const ok = counters["http.codes.200"];
  assert.ok(ok > 0, `some 200s in the JSON report: ${JSON.stringify(counters)}`);

  const browser = await launchBrowser();
  t.after(() => browser.close());
  const { page, errors } = browser;
  await page.goto(pathToFileURL(html).href);

  for (const id of ["chart-rate", "chart-latency", "chart-codes"]) {
    const marks = await page.locator(`#${id} svg`).locator("path, rect, polyline, circle").count();
    assert.ok(marks > 0, `#${id} holds an SVG with drawn marks`);
  }
  // Data points, not just the empty-chart baseline: dots on the line charts...
  assert.ok((await page.locator("#chart-rate svg circle").count()) >= 1, "request rate has data points");
  const latencySeries = await page.locator("#chart-latency svg path[data-series]").evaluateAll((ps) => ps.map((p) => p.dataset.series));
  assert.deepEqual(latencySeries, ["p50", "p95", "p99"]);
  assert.ok((await page.locator("#chart-latency svg circle").count()) >= 3, "latency percentiles have data points");
  // ...and a bar for the 200s whose height label is the JSON report's count.
  const bar200 = page.locator('#chart-codes svg rect[data-label="200"]');
  assert.equal(await bar200.count(), 1, "a bar for status 200");
  assert.equal(await page.locator('#chart-codes svg rect[data-label="none"]').count(), 0, "not the 'no responses' chart");
  const barText = await page.locator("#chart-codes svg text", { hasText: new RegExp(`^${ok}$`) }).count();
  assert.ok(barText >= 1, `the 200 bar is labelled ${ok}`);

  const shot = join(dir, "report.png");
  await page.screenshot({ path: shot, fullPage: true });
  assert.ok(statSync(shot).size > 1000, "a screenshot was taken");
  t.diagnostic(`screenshot: ${shot}`);
  assert.deepEqual(errors, []);
});
