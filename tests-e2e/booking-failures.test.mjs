// The booking pages never go silent, on a desk and on a 390 px phone,
// against a real throng server (demo data): with the API unreachable the
// page says so with a Try again that works once it is back; with 429 on
// every API request it says it waits, then that the server is busy, with a
// Try again that works; a 500 says what to do; and a server whose per-client
// rate limit refuses quick reloads still ends in a working page (its files
// are never refused, a refused page load reloads itself). A failing test
// leaves a screenshot in target/e2e-screenshots/.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { REPO_ROOT, fetchWithin, launchBrowser, sharedSession, startThrong, watchErrors } from "./lib/server.mjs";

const TEST_MS_MAX = 90_000;
const session = sharedSession();
const SHOTS = join(REPO_ROOT, "target", "e2e-screenshots");
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1000, height: 900 };

async function withScreenshot(t, page, body) {
  try {
    await body();
  } catch (e) {
    mkdirSync(SHOTS, { recursive: true });
    const shot = join(SHOTS, `${t.name.replace(/[^a-z0-9]+/gi, "-").slice(0, 80)}.png`);
    await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
    t.diagnostic(`screenshot: ${shot}`);
    throw e;
  }
}

/** The page shows words: its heading and a status sentence, never a blank page. */
async function assertNotBlank(page, what) {
  assert.equal(await page.locator("h1").isVisible(), true, `${what}: the heading is shown`);
  const status = (await page.textContent("#status")).trim();
  assert.ok(status.length > 10, `${what}: the status says something ('${status}')`);
}

async function assertNoSidewaysScroll(page, what) {
  const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  assert.ok(scroll <= inner, `${what}: the page is ${scroll} px wide in a ${inner} px viewport`);
}

for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
  test(`the API unreachable: the page says so, and Try again works once it is back (${label})`, { timeout: TEST_MS_MAX }, async (t) => {
    const { page, errors } = await session.newPage(t);
    await page.setViewportSize(viewport);
    await withScreenshot(t, page, async () => {
      await page.route("**/api/**", (route) => route.abort("connectionrefused"));
      await page.goto(`${session.server.url}/booking/`);
      await page.locator("#retry").waitFor();
      assert.match(await page.textContent("#status"), /Cannot reach the server; check your connection/);
      assert.equal(await page.getAttribute("#status", "class"), "error");
      await assertNotBlank(page, "unreachable");
      await assertNoSidewaysScroll(page, "unreachable");
      // On screen without scrolling, however long the page.
      const box = await page.locator("#retry").boundingBox();
      assert.ok(box && box.y >= 0 && box.y + box.height <= viewport.height, `Try again is on screen: ${JSON.stringify(box)}`);
      assert.equal(await page.textContent("#place option"), "Places could not be loaded");
      // Still unreachable: Try again says so again.
      await page.click("#retry");
      await page.locator("#retry:not([disabled])").waitFor();
      assert.match(await page.textContent("#status"), /Cannot reach the server/);

      await page.unroute("**/api/**");
      await page.click("#retry");
      await page.locator("#slots button").first().waitFor({ state: "attached" });
      assert.ok((await page.locator("#place option").count()) > 1, "the places are listed");
      assert.equal((await page.textContent("#status")).trim(), "", "the failure is gone");

      // The manage page too: its link opens once the server answers again.
      await page.route("**/api/**", (route) => route.abort("connectionrefused"));
      await page.goto(`${session.server.url}/booking/manage#id=0190a1b2-0000-7000-8000-000000000001&code=K7QM-3XHT-9WCF`);
      await page.locator("#retry").waitFor();
      assert.match(await page.textContent("#status"), /Cannot reach the server/);
      await page.unroute("**/api/**");
      await page.click("#retry");
      await page.waitForFunction(() => /No registration matches/.test(document.getElementById("status").textContent));
      assert.deepEqual(errors.filter((e) => !/ERR_CONNECTION_REFUSED|status of 404/.test(e)), []);
    });
  });

  test(`429 on every API request: a waiting message, then busy with a Try again that works (${label})`, { timeout: TEST_MS_MAX }, async (t) => {
    const { page, errors } = await session.newPage(t);
    await page.setViewportSize(viewport);
    await withScreenshot(t, page, async () => {
      const refused = [];
      await page.route("**/api/**", (route) => {
        refused.push(Date.now());
        return route.fulfill({
          status: 429,
          headers: { "Retry-After": "1", "Content-Type": "application/json" },
          body: JSON.stringify({ error: { code: "too_many_requests", message: "too many requests from this client; retry after the given seconds" } }),
        });
      });
      await page.goto(`${session.server.url}/booking/`);
      await page.locator("#status.waiting").waitFor();
      assert.match(await page.textContent("#status"), /Waiting \d+ s, then trying again \(attempt \d+\)/);
      await assertNotBlank(page, "waiting");
      // The waits give out: busy, with what to do and Try again.
      await page.locator("#retry").waitFor({ timeout: 30_000 });
      assert.match(await page.textContent("#status"), /too busy right now\. Wait a minute, then try again/);
      await assertNotBlank(page, "busy");
      await assertNoSidewaysScroll(page, "busy");
      const gaps = refused.slice(1).map((at, i) => at - refused[i]);
      assert.ok(gaps.some((g) => g >= 1000), `the page waited Retry-After between tries: ${gaps}`);

      await page.unroute("**/api/**");
      await page.click("#retry");
      await page.locator("#slots button").first().waitFor({ state: "attached" });
      assert.equal((await page.textContent("#status")).trim(), "");
      assert.deepEqual(errors.filter((e) => !/status of 429/.test(e)), []);
    });
  });
}

test("a 500 on the times says what to do, and Try again loads them", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await session.newPage(t);
  await withScreenshot(t, page, async () => {
    await page.route("**/api/booking/places/*/slots?*", (route) =>
      route.fulfill({ status: 500, headers: { "Content-Type": "application/json" }, body: JSON.stringify({ error: { code: "internal", message: "internal error; it was logged" } }) }),
    );
    await page.goto(`${session.server.url}/booking/`);
    await page.locator("#retry").waitFor();
    assert.match(await page.textContent("#status"), /Something went wrong on the server \(error 500\)\. Nothing you entered is lost; try again in a moment\./);
    assert.equal(await page.locator("#slots button").count(), 0);
    await page.unroute("**/api/booking/places/*/slots?*");
    await page.click("#retry");
    await page.locator("#slots button").first().waitFor({ state: "attached" });
    assert.deepEqual(errors.filter((e) => !/status of 500/.test(e)), []);
  });
});

test("quick reloads under a per-client rate limit: the files are never refused and the page ends working", { timeout: TEST_MS_MAX }, async (t) => {
  const server = await startThrong({ extraArgs: ["--rate-limit-per-s", "2", "--rate-limit-burst", "4"] });
  const browser = await launchBrowser({ viewport: PHONE });
  t.after(async () => { await browser.close(); await server.stop(); });
  const { page } = browser;
  const errors = watchErrors(page);
  await withScreenshot(t, page, async () => {
    const answers = [];
    page.on("response", (r) => answers.push({ url: new URL(r.url()).pathname, status: r.status() }));
    for (let i = 0; i < 4; i++) {
      await page.goto(`${server.url}/booking/`, { waitUntil: "commit" });
    }
    // Whatever was refused, the page ends with its places and times.
    await page.locator("#slots button").first().waitFor({ state: "attached", timeout: 30_000 });
    const files = answers.filter((a) => a.url.startsWith("/assets/"));
    assert.ok(files.length > 0, "the page's files were asked for");
    assert.deepEqual(files.filter((a) => a.status !== 200), [], "no file was refused");
    const refused = answers.filter((a) => a.status === 429);
    assert.ok(refused.length > 0, `the limit refused some requests: ${JSON.stringify(answers)}`);
    // A refused page load is a page that says so and reloads itself.
    let busy = null;
    for (let i = 0; i < 10 && !busy; i++) {
      const res = await fetchWithin(`${server.url}/booking/`, { headers: { Accept: "text/html" } });
      if (res.status === 429) busy = res; else await res.arrayBuffer();
    }
    assert.ok(busy, "quick page loads are refused");
    assert.ok(Number(busy.headers.get("retry-after")) >= 1);
    const html = await busy.text();
    assert.match(html, /<meta http-equiv="refresh" content="\d+">/);
    assert.match(html, /Try again now/);
    assert.deepEqual(errors.filter((e) => !/status of 429/.test(e)), [], JSON.stringify(answers.filter((a) => a.status === 404)));
  });
});
