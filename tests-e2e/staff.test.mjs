// The staff page (/booking/staff/) in headless Chromium against a real
// throng server (demo data: 20 places, 14 days from today, 25 slots a day
// from 08:00): a place's day with a staff token, check-in, the print
// layout, a place the token does not cover; on a desk and on a 390 px
// phone. Each viewport uses its own place. A failing test leaves a
// screenshot in target/e2e-screenshots/.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { REPO_ROOT, binPath, fetchWithin, run, sharedSession } from "./lib/server.mjs";

const TEST_MS_MAX = 60_000;
const session = sharedSession();
const SHOTS = join(REPO_ROOT, "target", "e2e-screenshots");
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1100, height: 900 };
let token = "";

function tomorrowUtc() {
  return new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
}

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

/** A staff token for places 3 and 4, made once with `throng token`. */
async function staffToken() {
  if (token) return token;
  const out = await run(binPath("throng"), [
    "token", "--data-dir", session.server.dataDir, "--sub", "nurse-7", "--role", "staff", "--claim", "places=3,4",
  ]);
  assert.equal(out.code, 0, out.stderr);
  token = out.stdout.trim();
  return token;
}

async function register(placeId, day, timeSlot, n) {
  const res = await fetchWithin(`${session.server.url}/api/booking/registrations`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      placeId, day, timeSlot,
      person: { name: `Person ${n} Example`, nationalId: `900101/${1000 + n}`, phone: `+421 900 000 ${100 + n}`, email: `p${n}@example.org` },
    }),
  });
  const text = await res.text();
  assert.equal(res.status, 201, text);
  return JSON.parse(text).registrationId;
}

async function list(placeId, day) {
  const res = await fetchWithin(`${session.server.url}/api/booking/places/${placeId}/days/${day}/registrations`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  assert.equal(res.status, 200);
  return res.json();
}

for (const [label, viewport, placeId, first] of [["desktop", DESKTOP, 3, 10], ["390 px", PHONE, 4, 20]]) {
  test(`staff see their place's day, check people in and print it (${label})`, { timeout: TEST_MS_MAX }, async (t) => {
    const { page, errors } = await session.newPage(t);
    await page.setViewportSize(viewport);
    await withScreenshot(t, page, async () => {
      const day = tomorrowUtc();
      await staffToken();
      await register(placeId, day, 2, first);
      const checkedIn = await register(placeId, day, 0, first + 1);
      await register(placeId, day, 1, first + 2);

      await page.goto(`${session.server.url}/booking/staff/#place=${placeId}&day=${day}`);
      await page.fill("#s-token", token);
      await page.click("#s-load");
      await page.locator("#d-rows tr").nth(2).waitFor();
      const names = await page.locator("#d-rows tr td[data-label='Name']").allTextContents();
      assert.deepEqual(names, [`Person ${first + 1} Example`, `Person ${first + 2} Example`, `Person ${first} Example`], "in slot order");
      assert.match(await page.textContent("#d-summary"), /3 expected, 0 checked in/);

      // Check the first person in: the row and the server say so.
      const row = page.locator(`#d-rows tr[data-id="${checkedIn}"]`);
      await row.getByRole("button", { name: /^Check in/ }).click();
      await page.locator(`#d-rows tr[data-id="${checkedIn}"].checked_in`).waitFor();
      assert.equal(await page.locator(`#d-rows tr[data-id="${checkedIn}"] td.att`).textContent(), "Checked in");
      const after = await list(placeId, day);
      assert.equal(after.registrations.find((r) => r.registrationId === checkedIn).attendance, "checked_in");
      assert.match(await page.textContent("#d-summary"), /3 expected, 1 checked in/);

      if (viewport === PHONE) {
        // Cards, not a table wider than the phone; buttons big enough to tap.
        assert.equal(await page.locator("thead").isVisible(), false);
        const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
        assert.ok(scroll <= inner, `the page is ${scroll} px wide in a ${inner} px viewport`);
        const box = await row.getByRole("button", { name: /^No-show/ }).boundingBox();
        assert.ok(box.height >= 40, `a tap target of ${box.height} px`);
      } else {
        assert.equal(await page.locator("thead").isVisible(), true);
      }

      // On paper: the list, no form and no buttons.
      await page.emulateMedia({ media: "print" });
      assert.equal(await page.locator("#d-table").isVisible(), true);
      assert.equal(await page.locator("thead").isVisible(), true);
      assert.equal(await page.locator("#pick").isVisible(), false);
      assert.equal(await page.locator("#status").isVisible(), false);
      assert.equal(await row.getByRole("button", { name: /^Check in/ }).isVisible(), false);
      await page.emulateMedia({ media: "screen" });

      // A place the token does not cover: refused, in words.
      await page.fill("#s-place", "5");
      await page.click("#s-load");
      await page.locator("#status.error").waitFor();
      assert.match(await page.textContent("#status"), /covers places 3, 4, not place 5/);
      assert.equal(await page.locator("#day").isVisible(), false);
      assert.deepEqual(errors.filter((e) => !e.includes("403")), []);
    });
  });
}
