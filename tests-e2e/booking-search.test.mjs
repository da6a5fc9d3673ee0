// Finding a place among 2,000 on the booking page (/booking/), on a desk
// and on a 390 px phone, against a real throng server seeded with 2,000
// places (`throng seed booking`): the page lists a page of the search's
// matches, never all; typing part of a name finds the one place, the region
// and service choices narrow the list to what the API counts, "Show more"
// appends the next page, and a place found by its name can be booked. A
// failing test leaves a screenshot in target/e2e-screenshots/.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { REPO_ROOT, fetchWithin, launchBrowser, run, startThrong, watchErrors } from "./lib/server.mjs";

const TEST_MS_MAX = 90_000;
const PLACES = 2000;
const SHOTS = join(REPO_ROOT, "target", "e2e-screenshots");
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1000, height: 900 };
let server, browser;

before(async () => {
  server = await startThrong({
    demo: false,
    prepare: async (dataDir, bin) => {
      const out = await run(bin, ["seed", "booking", "--places", String(PLACES), "--days", "3", "--slots-per-day", "6", "--data-dir", dataDir], { timeoutMs: 120_000 });
      assert.equal(out.code, 0, out.stderr);
    },
  });
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

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

async function api(path) {
  const res = await fetchWithin(`${server.url}${path}`);
  assert.equal(res.status, 200, path);
  return res.json();
}

async function assertNoSidewaysScroll(page, what) {
  const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  assert.ok(scroll <= inner, `${what}: the page is ${scroll} px wide in a ${inner} px viewport`);
}

const countText = (page) => page.textContent("#place-count");

for (const [label, viewport, target, n] of [["desktop", DESKTOP, 1734, 1], ["390 px", PHONE, 1899, 2]]) {
  test(`find one place among ${PLACES} by name, region and service, and book it (${label})`, { timeout: TEST_MS_MAX }, async (t) => {
    const page = await browser.context.newPage();
    t.after(() => page.close());
    const errors = watchErrors(page);
    await page.setViewportSize(viewport);
    const placeQueries = [];
    page.on("request", (r) => { if (r.url().includes("/api/booking/places?")) placeQueries.push(new URL(r.url()).searchParams); });
    await withScreenshot(t, page, async () => {
      await page.goto(`${server.url}/booking/`);
      await page.waitForFunction((total) => document.getElementById("place-count").textContent.startsWith(`${total.toLocaleString("en-GB")} places match`), PLACES);
      assert.match(await countText(page), /the first 20 are listed/);
      assert.equal(await page.locator("#place option").count(), 20, "a page of places, not all");
      assert.ok(placeQueries.every((q) => Number(q.get("size")) <= 20), "never asks for a long list");
      await page.locator("#slots button").first().waitFor({ state: "attached" });
      await assertNoSidewaysScroll(page, "the first page");

      // The search field's bound is the API's.
      const doc = await api("/openapi.json");
      const q = doc.paths["/api/booking/places"].get.parameters.find((p) => p.name === "q");
      assert.equal(await page.evaluate(() => document.getElementById("place-q").maxLength), q.schema.maxLength);

      // "Show more" appends the next page.
      await page.click("#place-more");
      await page.waitForFunction(() => document.querySelectorAll("#place option").length === 40);

      // One place by a part of its name: listed alone, chosen, its times shown.
      const place = (await api(`/api/booking/places?cursor=${target - 1}&size=1`)).places[0];
      assert.equal(place.id, target);
      const slots = page.waitForResponse((r) => r.url().includes(`/api/booking/places/${target}/slots?`));
      await page.fill("#place-q", String(target));
      await page.waitForFunction(() => document.getElementById("place-count").textContent === "1 place matches.");
      assert.equal(await page.inputValue("#place"), String(target));
      assert.equal((await slots).status(), 200);
      await page.locator("#slots button").first().waitFor({ state: "attached" });
      assert.equal(await page.locator("#place-more").isHidden(), true);

      // By city, any case, narrowed by region and service: the API's counts.
      await page.fill("#place-q", place.city.toUpperCase());
      const byCity = (await api(`/api/booking/places?q=${encodeURIComponent(place.city)}&size=1`)).total;
      await page.waitForFunction((total) => document.getElementById("place-count").textContent.startsWith(`${total.toLocaleString("en-GB")} place`), byCity);
      const service = place.services[0];
      await page.selectOption("#place-region", place.region);
      await page.selectOption("#place-service", service);
      const narrowed = (await api(`/api/booking/places?q=${encodeURIComponent(place.city)}&region=${encodeURIComponent(place.region)}&service=${encodeURIComponent(service)}&size=1`)).total;
      assert.ok(narrowed >= 1 && narrowed <= byCity);
      await page.waitForFunction((total) => document.getElementById("place-count").textContent.startsWith(`${total.toLocaleString("en-GB")} place`), narrowed);
      const last = placeQueries[placeQueries.length - 1];
      assert.equal(last.get("region"), place.region);
      assert.equal(last.get("service"), service);
      // Nothing matches: said, and no times of another place left on screen.
      await page.fill("#place-q", "no such place anywhere");
      await page.waitForFunction(() => document.getElementById("place-count").textContent.startsWith("No place matches"));
      assert.equal(await page.locator("#slots button").count(), 0);
      assert.equal(await page.isDisabled("#place"), true);

      // Back to the one place, and book it.
      await page.selectOption("#place-region", "");
      await page.selectOption("#place-service", "");
      await page.fill("#place-q", place.name);
      await page.waitForFunction(() => document.getElementById("place-count").textContent === "1 place matches.");
      await page.locator("#slots button:not([disabled])").first().waitFor();
      await page.locator("#slots button:not([disabled])").first().click();
      await page.fill("#name", `Search Person ${n}`);
      await page.fill("#nationalId", `770101/${5000 + n}`);
      await page.fill("#phone", `+421 900 111 ${200 + n}`);
      await page.fill("#email", `search${n}@example.org`);
      await page.click("#submit");
      await page.locator("#confirmation").waitFor({ state: "visible" });
      assert.ok((await page.textContent("#conf-place")).startsWith(place.name));
      await assertNoSidewaysScroll(page, "the confirmation");
      assert.deepEqual(errors, []);
    });
  });
}
