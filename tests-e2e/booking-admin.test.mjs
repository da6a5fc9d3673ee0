// The places admin page (/booking/admin/) in headless Chromium against a
// real throng server (demo data), on a desk and on a 390 px phone: a wrong
// token shown beside the token field; a new place with a number that is not
// one and hours off the slot grid (each error beside its field), then
// saved; a closed day; an edit of its seats; a CSV import refused with its
// line named beside the CSV, then imported; the imported place found by the
// search and opened; the horizon extended. Each step is checked through the
// API. A failing test leaves a screenshot in target/e2e-screenshots/.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { REPO_ROOT, binPath, fetchWithin, run, sharedSession } from "./lib/server.mjs";

const TEST_MS_MAX = 90_000;
const session = sharedSession();
const SHOTS = join(REPO_ROOT, "target", "e2e-screenshots");
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1100, height: 900 };
let adminToken = "";

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

async function token() {
  if (adminToken) return adminToken;
  const out = await run(binPath("throng"), ["token", "--data-dir", session.server.dataDir, "--sub", "ops-1", "--role", "admin"]);
  assert.equal(out.code, 0, out.stderr);
  adminToken = out.stdout.trim();
  return adminToken;
}

async function getPlace(id) {
  const res = await fetchWithin(`${session.server.url}/api/booking/places/${id}`);
  assert.equal(res.status, 200);
  return res.json();
}

async function findByCode(code) {
  const res = await fetchWithin(`${session.server.url}/api/booking/places?q=&size=100`);
  const all = [];
  let body = await res.json();
  all.push(...body.places);
  while (body.nextCursor) {
    body = await (await fetchWithin(`${session.server.url}/api/booking/places?size=100&cursor=${body.nextCursor}`)).json();
    all.push(...body.places);
  }
  return all.find((p) => p.code === code);
}

/** The error element sits right under its field (not far below, not above). */
async function assertErrorUnder(page, field) {
  const input = await page.locator(`#${field}`).boundingBox();
  const error = await page.locator(`#${field}-error`).boundingBox();
  assert.ok(input && error, `${field} and its error are on screen`);
  const gap = error.y - (input.y + input.height);
  assert.ok(gap >= -1 && gap < 30, `${field}'s error is ${gap} px under it`);
}

async function assertNoSidewaysScroll(page, what) {
  const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  assert.ok(scroll <= inner, `${what}: the page is ${scroll} px wide in a ${inner} px viewport`);
}

function inDays(n) {
  return new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10);
}

for (const [label, viewport, suffix] of [["desktop", DESKTOP, "D"], ["390 px", PHONE, "P"]]) {
  test(`an admin defines, finds, changes and imports places from the page (${label})`, { timeout: TEST_MS_MAX }, async (t) => {
    const { page, errors } = await session.newPage(t);
    await page.setViewportSize(viewport);
    await withScreenshot(t, page, async () => {
      await page.goto(`${session.server.url}/booking/admin/`);
      // The places are listed without a token (they are public).
      await page.locator("#found li").first().waitFor();
      assert.match(await page.textContent("#found-count"), /^\d+ places? match/);
      // A change without a token, then with one that is not one: said
      // beside the token field.
      await page.click("#extend");
      await page.locator("#a-token-error").waitFor({ state: "visible" });
      assert.match(await page.textContent("#a-token-error"), /Paste an admin token/);
      await page.fill("#a-token", "not-a-token");
      await page.click("#extend");
      await page.waitForFunction(() => /not valid/.test(document.getElementById("a-token-error").textContent));
      await assertErrorUnder(page, "a-token");

      await page.fill("#a-token", await token());
      await assertNoSidewaysScroll(page, "the list");

      // A new place: a number that is not one (the page's own check), then
      // hours off the 15-minute grid (the server's), each beside its field.
      const code = `T-ADM-${suffix}`;
      await page.click("#new-place");
      assert.equal(await page.locator("#a-token-error").isHidden(), false, "still shown until the token works");
      await page.fill("#f-code", code);
      await page.fill("#f-name", `Test centre ${suffix}`);
      await page.fill("#f-address", "Hlavná 1");
      await page.fill("#f-city", "Trnava");
      await page.fill("#f-postcode", "917 01");
      await page.fill("#f-region", "TT");
      await page.fill("#f-timeZone", "Europe/Bratislava");
      await page.fill("#f-services", "vaccine-flu test-pcr");
      await page.fill("#f-hours", "Mo-Su 08:00-12:00");
      await page.fill("#f-seats", "two");
      await page.click("#save");
      await page.locator("#f-seats-error").waitFor({ state: "visible" });
      assert.match(await page.textContent("#f-seats-error"), /whole number/);
      await assertErrorUnder(page, "f-seats");
      assert.equal(await page.evaluate(() => document.activeElement.id), "f-seats", "the wrong field is focused");

      await page.fill("#f-seats", "2");
      await page.fill("#f-hours", "Mo-Su 08:07-12:00");
      await page.click("#save");
      await page.locator("#f-hours-error").waitFor({ state: "visible" });
      assert.equal(await page.locator("#f-seats-error").isHidden(), true);
      assert.ok((await page.textContent("#f-hours-error")).length > 5, "the server's reason for the hours");
      await assertErrorUnder(page, "f-hours");
      await assertNoSidewaysScroll(page, "the form with an error");

      await page.fill("#f-hours", "Mo-Su 08:00-12:00");
      await page.click("#save");
      await page.locator("#save-summary").waitFor({ state: "visible" });
      assert.match(await page.textContent("#save-summary"), /^Created: \d+ slots made/);
      assert.equal(await page.locator("#a-token-error").isHidden(), true, "the token's error is gone");
      const created = await findByCode(code);
      assert.ok(created, "the place is there");
      assert.equal(created.seats, 2);
      assert.equal(created.hours, "Mo-Su 08:00-12:00");
      assert.deepEqual(created.services, ["vaccine-flu", "test-pcr"]);

      // A closed day.
      const closed = inDays(5);
      await page.locator("#days-section").waitFor({ state: "visible" });
      await page.fill("#d-day", closed);
      await page.fill("#d-hours", "");
      await page.click("#day-save");
      await page.locator(`#days li[data-day="${closed}"]`).waitFor();
      assert.match(await page.textContent(`#days li[data-day="${closed}"]`), /closed/);
      assert.deepEqual((await getPlace(created.id)).days, [{ day: closed, hours: "" }]);
      // Hours of that day that are not hours: beside the day's hours.
      await page.fill("#d-day", inDays(6));
      await page.fill("#d-hours", "8 to 12");
      await page.click("#day-save");
      await page.locator("#d-hours-error").waitFor({ state: "visible" });
      await assertErrorUnder(page, "d-hours");

      // An edit of the seats.
      await page.fill("#f-seats", "3");
      await page.click("#save");
      await page.waitForFunction(() => /^Saved/.test(document.getElementById("save-summary").textContent));
      assert.equal((await getPlace(created.id)).place.seats, 3);

      // A CSV refused (its line named beside it, nothing written), then imported.
      const header = "code,name,address,city,postcode,region,time_zone,slot_minutes,seats,hours,closed,services";
      const good = `IMP-${suffix}-1,Imported one ${suffix},Street 1,Nitra,949 01,NR,Europe/Bratislava,20,1,"Mo-Fr 08:00-12:00",,test-pcr`;
      await page.fill("#i-csv", `${header}\n${good}\nIMP-${suffix}-2,Imported two,Street 2,Nitra,949 01,NR,Mars/Base,20,1,"Mo-Fr 08:00-12:00",,`);
      await page.click("#import-go");
      await page.locator("#i-csv-error").waitFor({ state: "visible" });
      assert.match(await page.textContent("#i-csv-error"), /line 3/i);
      await assertErrorUnder(page, "i-csv");
      assert.equal(await findByCode(`IMP-${suffix}-1`), undefined, "nothing of a refused file is written");
      await page.fill("#i-csv", `${header}\n${good}\nIMP-${suffix}-2,Imported two ${suffix},Street 2,Nitra,949 01,NR,Europe/Bratislava,20,1,"Mo-Fr 08:00-12:00",,`);
      await page.click("#import-go");
      await page.locator("#import-summary").waitFor({ state: "visible" });
      assert.match(await page.textContent("#import-summary"), /^Imported: 2 places created, 0 updated/);
      assert.equal(await page.locator("#i-csv-error").isHidden(), true);

      // The imported place found by the search, and opened.
      await page.fill("#q", `Imported two ${suffix}`);
      await page.click("#search");
      await page.waitForFunction(() => /^1 place match/.test(document.getElementById("found-count").textContent));
      await page.locator("#found li button").first().click();
      await page.waitForFunction((s) => document.getElementById("f-code").value === `IMP-${s}-2`, suffix);
      assert.equal(await page.inputValue("#f-city"), "Nitra");
      assert.equal(await page.inputValue("#f-slotMinutes"), "20");

      // The horizon.
      await page.click("#extend");
      await page.locator("#extend-summary").waitFor({ state: "visible" });
      assert.match(await page.textContent("#extend-summary"), /^Horizon: \d+ slots? made/);
      await assertNoSidewaysScroll(page, "the whole page");
      if (viewport === PHONE) {
        for (const id of ["search", "new-place", "save", "day-save", "import-go", "extend"]) {
          const box = await page.locator(`#${id}`).boundingBox();
          assert.ok(box && box.height >= 44, `#${id} is a touch target (${box && box.height} px)`);
        }
      }
      // Failed requests (the wrong token's 401, the 422s) count as console errors in Chromium.
      assert.deepEqual(errors.filter((e) => !/status of (401|422)/.test(e)), []);
    });
  });
}
