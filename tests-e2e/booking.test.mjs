// The booking pages (/booking/ and /booking/manage) in headless Chromium
// against a real throng server (demo data: 20 places, 14 days from the
// server's UTC today, 25 slots a day from 08:00; slot times at UTC). Each
// test uses its own place, so the tests do not take each other's slots.
// Tests book tomorrow: today's slots may all have started. A failing test
// leaves a screenshot in target/e2e-screenshots/.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

import { REPO_ROOT, fetchWithin, sharedSession, todayUtc } from "./lib/server.mjs";

const SLOTS_PER_DAY = 25;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TEST_MS_MAX = 60_000;

const session = sharedSession();
const newPage = session.newPage;

const SHOTS = join(REPO_ROOT, "target", "e2e-screenshots");
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1000, height: 900 };

function tomorrowUtc() {
  return new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
}

/** Runs `body`; on failure saves a full-page screenshot named after the test, then fails. */
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

/** The page scrolls sideways when its content is wider than the viewport. */
async function assertNoSidewaysScroll(page, what) {
  const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  assert.ok(scroll <= inner, `${what}: the page is ${scroll} px wide in a ${inner} px viewport`);
}

/** Opens /booking/, picks tomorrow and the place at `placeIndex`, waits for its slots. */
async function openBooking(page, placeIndex) {
  await page.goto(`${session.server.url}/booking/`);
  await page.locator("#place option").nth(placeIndex).waitFor({ state: "attached" });
  // The page loads the first place's calendar and slots by itself; wait for
  // that first so the choices below do not race it.
  await page.locator("#slots button").first().waitFor({ state: "attached" });
  assert.equal(await page.getAttribute("#day", "min"), todayUtc(), "no day before today can be picked");
  const today = tomorrowUtc();
  await page.fill("#day", today);
  const placeId = await page.locator("#place option").nth(placeIndex).getAttribute("value");
  const slotsAnswer = page.waitForResponse((r) => r.url().includes(`/api/booking/places/${placeId}/slots?`));
  await page.selectOption("#place", placeId);
  assert.equal((await slotsAnswer).status(), 200);
  await page.locator("#slots button").first().waitFor({ state: "attached" });
  return { placeId: Number(placeId), day: today };
}

async function fillPerson(page, person) {
  await page.fill("#name", person.name);
  await page.fill("#nationalId", person.nationalId);
  await page.fill("#phone", person.phone);
  await page.fill("#email", person.email);
}

const ALICE = { name: "Alice Example", nationalId: "850101-1234", phone: "+420 601 123 456", email: "alice@example.org" };

/** Clicks the first free slot; returns its time-slot number. */
async function pickFirstFreeSlot(page) {
  const free = page.locator("#slots button:not([disabled])").first();
  const slot = Number(await free.getAttribute("data-slot"));
  await free.click();
  assert.equal(await free.getAttribute("aria-pressed"), "true");
  return slot;
}

async function readRegistration(id, code) {
  return fetchWithin(`${session.server.url}/api/booking/registrations/${id}`, { headers: { "X-Access-Code": code } });
}

test("register through the page; the API holds it; the slot is taken after reload", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  const { placeId, day } = await openBooking(page, 1);
  const buttons = page.locator("#slots button");
  assert.equal(await buttons.count(), SLOTS_PER_DAY, "one button per time slot, no duplicates");
  const slot = await pickFirstFreeSlot(page);
  await fillPerson(page, ALICE);
  await page.click("#submit");

  await page.locator("#confirmation").waitFor({ state: "visible" });
  assert.equal(await page.locator("#booking").isHidden(), true, "the form is hidden after registering");
  const id = (await page.textContent("#conf-id")).trim();
  const code = (await page.textContent("#conf-code")).trim();
  assert.match(id, UUID);
  assert.match(code, /^[2-9A-HJ-NP-Z]{4}-[2-9A-HJ-NP-Z]{4}-[2-9A-HJ-NP-Z]{4}$/, `access code '${code}': three groups of four, no 0/O/1/I/l`);
  assert.equal(await page.getAttribute("#conf-day", "datetime"), day);
  assert.match((await page.textContent("#conf-time")).trim(), /^\d\d:\d\d$/);

  const res = await readRegistration(id, code);
  assert.equal(res.status, 200);
  const reg = await res.json();
  assert.equal(reg.registrationId, id);
  assert.equal(reg.placeId, placeId);
  assert.equal(reg.day, day);
  assert.equal(reg.timeSlot, slot);
  assert.deepEqual(reg.person, ALICE);
  assert.equal((await readRegistration(id, "wrong-code-0000000")).status, 404, "a wrong code does not read it");

  await page.reload();
  await openBooking(page, 1);
  const taken = page.locator(`#slots button[data-slot="${slot}"]`);
  assert.equal(await taken.isDisabled(), true, "the taken slot is disabled after reload");
  assert.equal(await page.locator("#slots button:not([disabled])").count(), SLOTS_PER_DAY - 1);
  assert.deepEqual(errors, []);
});

test("429 with Retry-After: the page says it waits, retries after >= 1 s, then confirms", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await openBooking(page, 2);
  const posts = [];
  await page.route("**/api/booking/registrations", async (route) => {
    if (route.request().method() !== "POST") return route.continue();
    posts.push(Date.now());
    if (posts.length === 1) {
      return route.fulfill({
        status: 429,
        headers: { "Retry-After": "1", "Content-Type": "application/json" },
        body: JSON.stringify({ error: { code: "too_many_requests", message: "over capacity; retry later" } }),
      });
    }
    return route.continue();
  });
  await pickFirstFreeSlot(page);
  await fillPerson(page, { ...ALICE, name: "Bob Crowd", nationalId: "850101-2001", email: "bob@example.org" });
  await page.click("#submit");

  const status = page.locator("#status.waiting");
  await status.waitFor({ state: "visible" });
  assert.match(await status.textContent(), /waiting/i);
  assert.equal(await page.locator("#submit").isDisabled(), true, "no second submit while waiting");

  await page.locator("#confirmation").waitFor({ state: "visible" });
  assert.equal(posts.length, 2, "one refused POST, one retry");
  const waitedMs = posts[1] - posts[0];
  assert.ok(waitedMs >= 1000, `retried after ${waitedMs} ms; Retry-After asked for >= 1000 ms`);
  assert.equal(await page.getAttribute("#status", "class"), "", "the waiting message is gone");
  const id = (await page.textContent("#conf-id")).trim();
  const code = (await page.textContent("#conf-code")).trim();
  assert.equal((await readRegistration(id, code)).status, 200);
  // The refused 429 counts as a console error in Chromium ("Failed to load resource"); nothing else may.
  assert.deepEqual(errors.filter((e) => !/status of 429/.test(e)), []);
});

for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
  test(`field errors (${label}): every one at once beside its field, in plain words; a server 422 lands beside the field it names`, { timeout: TEST_MS_MAX }, async (t) => {
    const { page } = await newPage(t);
    await page.setViewportSize(viewport);
    await withScreenshot(t, page, async () => {
      await openBooking(page, 3);
      const posts = [];
      page.on("request", (r) => { if (r.method() === "POST") posts.push(r.url()); });
      await fillPerson(page, { name: "", nationalId: "12 34", phone: "call me maybe", email: "no-at-sign" });
      await page.click("#submit");
      for (const [field, words] of [["slots", /choose a time/i], ["name", /name/i], ["nationalId", /national id/i], ["phone", /6 to 15 digits/], ["email", /name@example\.org/]]) {
        const box = page.locator(`#${field}-error`);
        assert.equal(await box.isVisible(), true, `${field}: its message is shown`);
        const text = await box.textContent();
        assert.match(text, words, field);
        assert.doesNotMatch(text, /person\.|nationalId:/, `${field}: plain words, not API wording: ${text}`);
      }
      assert.equal(await page.getAttribute("#phone", "aria-invalid"), "true");
      // Each message sits right below its own field.
      const input = await page.locator("#phone").boundingBox();
      const msg = await page.locator("#phone-error").boundingBox();
      assert.ok(msg.y >= input.y + input.height - 1 && msg.y - (input.y + input.height) < 40, "the phone message is beside the phone field");
      assert.deepEqual(posts, [], "nothing is sent while a field is wrong");
      if (viewport === PHONE) await assertNoSidewaysScroll(page, "the form with its errors");

      // Corrected fields lose their message; a 422 the server gives is mapped to its field.
      await pickFirstFreeSlot(page);
      await fillPerson(page, { ...ALICE, nationalId: "850101-6001" });
      await page.route("**/api/booking/registrations", (route) => route.fulfill({
        status: 422,
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ error: { code: "invalid_field", message: "person.phone: 6 to 15 digits, optional leading '+', spaces allowed" } }),
      }));
      await page.click("#submit");
      await page.locator("#phone-error:not([hidden])").waitFor();
      assert.match(await page.textContent("#phone-error"), /^Enter a phone number of 6 to 15 digits/);
      for (const field of ["slots", "name", "nationalId", "email"]) {
        assert.equal(await page.locator(`#${field}-error`).isHidden(), true, `${field}: no message once right`);
      }
      assert.equal(await page.locator("#confirmation").isHidden(), true);
      assert.equal(await page.locator("#submit").isEnabled(), true, "the person can correct and resend");
    });
  });
}

test("the form's bounds are the API document's (both from the server's constants)", { timeout: TEST_MS_MAX }, async (t) => {
  const doc = await (await fetchWithin(`${session.server.url}/openapi.json`)).json();
  const person = doc.paths["/api/booking/registrations"].post.requestBody.content["application/json"].schema.properties.person.properties;
  const idMax = Number(/\{1,([0-9]+)\}/.exec(person.nationalId.pattern)[1]);
  const [phoneMin, phoneMax] = /\{([0-9]+),([0-9]+)\}/.exec(person.phone.pattern).slice(1).map(Number);
  const { page, errors } = await newPage(t);
  await page.goto(`${session.server.url}/booking/`);
  await page.locator("#place option").first().waitFor({ state: "attached" });
  assert.equal(await page.evaluate(() => document.getElementById("name").maxLength), person.name.maxLength);
  assert.equal(await page.evaluate(() => document.getElementById("nationalId").maxLength), idMax);
  // The rules' words and checks follow the same numbers.
  await fillPerson(page, { ...ALICE, name: "n".repeat(person.name.maxLength), nationalId: "12 34", phone: "1".repeat(phoneMax + 1) });
  await page.click("#submit");
  await page.locator("#phone-error:not([hidden])").waitFor();
  assert.match(await page.textContent("#phone-error"), new RegExp(`of ${phoneMin} to ${phoneMax} digits`));
  assert.match(await page.textContent("#nationalId-error"), new RegExp(`up to ${idMax} letters`));
  assert.equal(await page.locator("#name-error").isHidden(), true, `${person.name.maxLength} characters are a name`);
  assert.deepEqual(errors, []);
});

test("a slot taken meanwhile: 409 message stays visible and the slot turns disabled", { timeout: TEST_MS_MAX }, async (t) => {
  const { page } = await newPage(t);
  const { placeId, day } = await openBooking(page, 4);
  const slot = await pickFirstFreeSlot(page);
  // Someone else takes the slot while this person is typing.
  const res = await fetchWithin(`${session.server.url}/api/booking/registrations`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ placeId, day, timeSlot: slot, person: { ...ALICE, name: "Carol Quick", nationalId: "850101-3001" } }),
  });
  assert.equal(res.status, 201);

  await fillPerson(page, { ...ALICE, nationalId: "850101-4001" });
  const reload = page.waitForResponse((r) => r.url().includes(`/api/booking/places/${placeId}/slots?`));
  await page.click("#submit");
  await reload;
  await page.locator(`#slots button[data-slot="${slot}"][disabled]`).waitFor({ state: "attached" });
  const status = page.locator("#status");
  await page.locator("#status.error").waitFor();
  assert.match(await status.textContent(), /already taken/);
  assert.equal(await page.locator("#confirmation").isHidden(), true);
});

test("one registration per person: a second one shows why and keeps the form", { timeout: TEST_MS_MAX }, async (t) => {
  const { page } = await newPage(t);
  const { placeId, day } = await openBooking(page, 5);
  const dave = { ...ALICE, name: "Dave Twice", nationalId: "850101-5001" };
  // Dave already holds another free slot of this place, booked elsewhere.
  const other = Number(await page.locator("#slots button:not([disabled])").nth(1).getAttribute("data-slot"));
  const first = await fetchWithin(`${session.server.url}/api/booking/registrations`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ placeId, day, timeSlot: other, person: dave }),
  });
  assert.equal(first.status, 201);
  assert.equal(first.headers.get("cache-control"), "no-store");
  await pickFirstFreeSlot(page);
  await fillPerson(page, dave);
  const answer = page.waitForResponse((r) => r.url().endsWith("/api/booking/registrations"));
  await page.click("#submit");
  assert.equal((await answer).status(), 409);
  await page.locator("#status.error", { hasText: "already hold a registration" }).waitFor();
  assert.equal(await page.getAttribute("#status a", "href"), "/booking/manage", "it says where to move or cancel it");
  assert.equal(await page.locator("#confirmation").isHidden(), true);
});

test("a slow answer for an earlier choice does not mix into the later one", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await openBooking(page, 0);
  const places = await page.locator("#place option").evaluateAll((os) => os.map((o) => o.value));
  // Hold back the answer for place A, so that it lands after place B's.
  const [slowPlace, fastPlace] = [places[5], places[6]];
  await page.route(`**/api/booking/places/${slowPlace}/slots?*`, async (route) => {
    await new Promise((res) => setTimeout(res, 700));
    await route.continue();
  });
  const slowAnswer = page.waitForResponse((r) => r.url().includes(`/api/booking/places/${slowPlace}/slots?`));
  // The page asks for a place's slots after its calendar: wait until A's
  // slots request is on its way (held by the route) before choosing B.
  const slowAsked = page.waitForRequest((r) => r.url().includes(`/api/booking/places/${slowPlace}/slots?`));
  await page.selectOption("#place", slowPlace);
  await slowAsked;
  const fastAnswer = page.waitForResponse((r) => r.url().includes(`/api/booking/places/${fastPlace}/slots?`));
  await page.selectOption("#place", fastPlace);
  await fastAnswer;
  await slowAnswer;
  await page.waitForTimeout(300); // let the late answer's handler run
  assert.equal(await page.locator("#slots button").count(), SLOTS_PER_DAY, "only the chosen place's slots are shown");
  assert.equal(await page.inputValue("#place"), fastPlace);
  assert.deepEqual(errors, []);
});

/** Books through the page at place `placeIndex` tomorrow; returns the confirmation's facts. */
async function bookThroughPage(page, placeIndex, person) {
  const { placeId, day } = await openBooking(page, placeIndex);
  const slot = await pickFirstFreeSlot(page);
  await fillPerson(page, person);
  await page.click("#submit");
  await page.locator("#confirmation").waitFor({ state: "visible" });
  const id = (await page.textContent("#conf-id")).trim();
  const code = (await page.textContent("#conf-code")).trim();
  return { placeId, day, slot, id, code };
}

async function freeOf(placeId, day) {
  const res = await fetchWithin(`${session.server.url}/api/booking/places/${placeId}/slots?from=${day}&days=1`);
  return new Map((await res.json()).days[0].slots.map((s) => [s.timeSlot, s.free]));
}

for (const [label, viewport, placeIndex] of [["desktop", DESKTOP, 7], ["390 px", PHONE, 8]]) {
  test(`book, then find, move and cancel from the pages alone (${label})`, { timeout: TEST_MS_MAX }, async (t) => {
    const { page, errors } = await newPage(t);
    await page.setViewportSize(viewport);
    await withScreenshot(t, page, async () => {
      const erin = { ...ALICE, name: `Erin ${label}`, nationalId: `850101-70${placeIndex}` };
      const { placeId, day, slot, id, code } = await bookThroughPage(page, placeIndex, erin);
      if (viewport === PHONE) await assertNoSidewaysScroll(page, "the confirmation");

      // The calendar file, from the confirmation.
      const download = page.waitForEvent("download");
      await page.click("#conf-ics");
      const ics = readFileSync(await (await download).path(), "utf8");
      assert.match(ics, /^BEGIN:VCALENDAR\r\n/);
      assert.match(ics, new RegExp(`\r\nUID:${id}@`));
      assert.match(ics, new RegExp(`\r\nDTSTART:${day.replaceAll("-", "")}T\\d{6}Z\r\n`));

      // The link opens the registration; the id and code ride in the fragment only.
      const href = await page.getAttribute("#conf-manage", "href");
      assert.ok(href.startsWith("/booking/manage#") && href.includes(encodeURIComponent(code)), href);
      const served = [];
      page.on("request", (r) => served.push(r.url()));
      await page.click("#conf-manage");
      await page.locator("#registration").waitFor({ state: "visible" });
      assert.ok(served.every((u) => !u.includes(code)), "the code is never in a requested URL");
      assert.equal(await page.getAttribute("#r-day", "datetime"), day);
      assert.match((await page.textContent("#r-time")).trim(), /^\d\d:\d\d$/);
      assert.equal((await page.textContent("#r-name")).trim(), erin.name);
      await page.reload();
      await page.locator("#registration").waitFor({ state: "visible" });
      if (viewport === PHONE) await assertNoSidewaysScroll(page, "the registration");

      // Move to another free time of the same day.
      await page.click("#r-move-open");
      await page.locator("#m-slots button").first().waitFor({ state: "attached" });
      assert.equal(await page.getAttribute("#m-day", "min"), todayUtc());
      assert.equal(await page.locator(`#m-slots button[data-slot="${slot}"]`).isDisabled(), true, "its own time is taken");
      const target = page.locator("#m-slots button:not([disabled])").nth(2);
      const newSlot = Number(await target.getAttribute("data-slot"));
      const newTime = (await target.textContent()).trim();
      await target.click();
      if (viewport === PHONE) await assertNoSidewaysScroll(page, "the move form");
      await page.click("#m-move");
      await page.locator("#status", { hasText: "Moved" }).waitFor();
      assert.equal((await page.textContent("#r-time")).trim(), newTime);
      const reg = await (await readRegistration(id, code)).json();
      assert.equal(reg.timeSlot, newSlot);
      const free = await freeOf(placeId, day);
      assert.equal(free.get(slot), true, "the old time is free again");
      assert.equal(free.get(newSlot), false);

      // Cancel.
      await page.click("#r-cancel");
      await page.click("#r-cancel-yes");
      await page.locator("#cancelled").waitFor({ state: "visible" });
      assert.equal((await readRegistration(id, code)).status, 404);
      assert.equal((await freeOf(placeId, day)).get(newSlot), true);
      assert.deepEqual(errors, []);
    });
  });
}

test("the manage page finds a registration with the id and code typed in; a wrong code says so", { timeout: TEST_MS_MAX }, async (t) => {
  const { page } = await newPage(t);
  await withScreenshot(t, page, async () => {
    const day = tomorrowUtc();
    const res = await fetchWithin(`${session.server.url}/api/booking/registrations`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ placeId: 10, day, timeSlot: 3, person: { ...ALICE, name: "Frank Typed", nationalId: "850101-8001" } }),
    });
    assert.equal(res.status, 201);
    const { registrationId, accessCode } = await res.json();
    await page.goto(`${session.server.url}/booking/manage`);
    await page.fill("#m-id", registrationId);
    await page.fill("#m-code", "not-the-code-0000");
    await page.click("#m-open");
    await page.locator("#status.error", { hasText: "No registration matches" }).waitFor();
    assert.equal(await page.locator("#registration").isHidden(), true);
    await page.fill("#m-code", accessCode);
    await page.click("#m-open");
    await page.locator("#registration").waitFor({ state: "visible" });
    assert.equal(await page.getAttribute("#r-day", "datetime"), day);
    assert.equal((await page.textContent("#r-time")).trim(), "09:00");
    assert.ok(page.url().includes("#id="), "a reload keeps it open");
  });
});

for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
  test(`past days cannot be picked; days with free times are marked (${label})`, { timeout: TEST_MS_MAX }, async (t) => {
    const { page } = await newPage(t);
    await page.setViewportSize(viewport);
    await withScreenshot(t, page, async () => {
      await openBooking(page, 11);
      const today = todayUtc();
      const days = await page.locator("#calendar button[data-day]").evaluateAll((bs) => bs.map((b) => ({ day: b.dataset.day, disabled: b.disabled, free: b.classList.contains("has-free") })));
      assert.ok(days.length >= 28, "a whole month");
      for (const d of days.filter((d) => d.day < today)) assert.ok(d.disabled && !d.free, `${d.day} is past`);
      const tomorrow = days.find((d) => d.day === tomorrowUtc());
      if (tomorrow) assert.ok(tomorrow.free && !tomorrow.disabled, "tomorrow has free times");
      for (const d of days.filter((d) => d.day > new Date(Date.now() + 14 * 86_400_000).toISOString().slice(0, 10))) {
        assert.ok(!d.free, `${d.day} has no slots in the demo`);
      }
      if (tomorrowUtc().slice(0, 7) === today.slice(0, 7)) {
        assert.equal(await page.locator("#calendar .cal-prev").isDisabled(), true, "no month before this one");
      }
      // Typing a past day into the picker is refused beside it.
      const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
      await page.fill("#day", yesterday);
      await page.locator("#day-error:not([hidden])").waitFor();
      assert.match(await page.textContent("#day-error"), /passed/);
      assert.equal(await page.locator("#slots button").count(), 0, "no times offered for a past day");
      // The server refuses it too, whatever a page sends.
      const res = await fetchWithin(`${session.server.url}/api/booking/registrations`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ placeId: 12, day: yesterday, timeSlot: 0, person: { ...ALICE, nationalId: "850101-9001" } }),
      });
      assert.equal(res.status, 422);
      assert.equal((await res.json()).error.code, "day_passed");
      if (viewport === PHONE) await assertNoSidewaysScroll(page, "the booking page");
    });
  });
}
