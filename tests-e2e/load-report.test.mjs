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

/** Every value axis ticks on multiples of 1, 2 or 5 x 10^n from 0; the time axis has ticks between its ends. */
async function assertNiceAxes(page) {
  for (const id of ["chart-rate", "chart-latency", "chart-codes"]) {
    const ticks = (await page.locator(`#${id} text.tick-y`).allTextContents()).map(Number);
    assert.ok(ticks.length >= 2 && ticks[0] === 0, `#${id} ticks from 0: ${ticks}`);
    const step = ticks[1];
    const mantissa = step / 10 ** Math.floor(Math.log10(step));
    assert.ok([1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-6), `#${id}: step ${step} of ${ticks}`);
    ticks.forEach((v, i) => assert.ok(Math.abs(v - i * step) < step * 1e-6, `#${id}: ${ticks}`));
  }
  for (const id of ["chart-rate", "chart-latency"]) {
    const times = await page.locator(`#${id} text.tick-x`).allTextContents();
    assert.ok(times.length >= 3, `#${id}: intermediate time ticks, not only both ends: ${times}`);
    assert.ok(times.every((t) => /^\d+(\.\d+)? s$/.test(t)), `#${id}: ${times}`);
  }
}

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
      "  ensure:",
      "    thresholds:",
      "      - http.response_time.p99: 60000",
      "    conditions:",
      '      - expression: "http.codes.200 > 1000000"',
      "        strict: false",
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

  // What was asked: target, model, duration and the phase as written.
  const setup = await page.locator("#setup").innerText();
  assert.match(setup, new RegExp(`target\\s+${server.url.replace(/[.]/g, "\\.")}`));
  assert.match(setup, /model\s+script phases/);
  assert.match(setup, new RegExp(`duration\\s+${DURATION_S} s`));
  assert.match(await page.locator("#plan tbody tr").first().innerText(), new RegExp(`arrivals\\s+${DURATION_S}\\s+${ARRIVAL_RATE} arrivals/s`));
  // Each threshold with its measured value and verdict.
  const rows = await page.locator("#thresholds tbody tr").allInnerTexts();
  assert.equal(rows.length, 2, rows.join("\n"));
  assert.match(rows[0], /http\.response_time\.p99 < 60000\s+http\.response_time\.p99 = [\d.]+\s+pass/);
  assert.match(rows[1], new RegExp(`http\\.codes\\.200 > 1000000\\s+http\\.codes\\.200 = ${ok}\\s+warn`));
  assert.match(await page.locator("#thresholds-verdict").innerText(), /all passed/);
  // The banner says how the run ended, as its exit code does.
  const banner = page.locator("#verdict");
  assert.match(await banner.innerText(), /PASSED \(exit code 0\)/);
  assert.equal(await banner.getAttribute("class"), "banner pass");
  // The endpoint table: the one path, its count as the JSON report's, its percentiles.
  const endpoint = await page.locator("#endpoints tbody tr").allInnerTexts();
  assert.equal(endpoint.length, 1, endpoint.join("\n"));
  assert.match(endpoint[0], new RegExp(`^/health\\s+${ok}\\s+[\\d.]+\\s+[\\d.]+\\s+[\\d.]+\\s+200: ${ok}$`));
  // The command as typed, arguments and all.
  assert.match(await page.locator("#setup").innerText(), /command\s+\S*throng\S*( load)? run \S*health\.yml --report \S*report\.html --output/);
  await assertNiceAxes(page);

  const shot = join(dir, "report.png");
  await page.screenshot({ path: shot, fullPage: true });
  assert.ok(statSync(shot).size > 1000, "a screenshot was taken");
  t.diagnostic(`screenshot: ${shot}`);

  // On a phone: no sideways scroll of the page; wide tables scroll in their own box.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(pathToFileURL(html).href);
  const widths = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, view: window.innerWidth }));
  assert.ok(widths.page <= widths.view, `no sideways scroll at 390 px: ${JSON.stringify(widths)}`);
  assert.ok(await page.locator("#verdict").isVisible(), "the banner shows on a phone");
  await page.screenshot({ path: join(dir, "report-phone.png"), fullPage: true });
  assert.deepEqual(errors, []);
});

test("the HTML report of `load url --report` shows the rate, connections and duration", { timeout: 120_000 }, async (t) => {
  const cmd = await loadCommand();
  if (!cmd) {
    t.skip("throng-load not built yet (neither target/debug/throng-load nor `throng load --help`)");
    return;
  }
  server ??= await startThrong();
  const html = join(dir, "url.html");
  const [bin, ...pre] = cmd;
  const res = await run(bin, [...pre, "url", `${server.url}/health`, "--rate", "40", "--connections", "4", "--duration", "3s", "--report", html], { cwd: dir, timeoutMs: RUN_MS_MAX });
  assert.equal(res.code, 0, `load url failed (exit ${res.code}):\n${res.stdout}\n${res.stderr}`);
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const { page, errors } = browser;
  await page.goto(pathToFileURL(html).href);
  const setup = await page.locator("#setup").innerText();
  assert.match(setup, /target\s+GET http:\/\/127\.0\.0\.1:\d+\/health/);
  assert.match(setup, /model\s+open/);
  assert.match(setup, /rate\s+40 req\/s/);
  assert.match(setup, /connections \(at most\)\s+4/);
  assert.match(setup, /duration\s+3 s/);
  assert.ok(await page.locator("#thresholds-section").isHidden(), "no thresholds without a script");
  await assertNiceAxes(page);
  assert.deepEqual(errors, []);
});
