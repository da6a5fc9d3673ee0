// The booking page at /booking/ in headless Chromium against a real throng
// server (demo data: 20 places, 14 days from the server's UTC today, 25 slots
// a day). Each test uses its own place, so the tests do not take each
// other's slots.

import { test } from "node:test";
import assert from "node:assert/strict";

import { fetchWithin, sharedSession, todayUtc } from "./lib/server.mjs";

const SLOTS_PER_DAY = 25;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TEST_MS_MAX = 60_000;

const session = sharedSession();
const newPage = session.newPage;

/** Opens /booking/, picks today and the place at `placeIndex`, waits for its slots. */
async function openBooking(page, placeIndex) {
  await page.goto(`${session.server.url}/booking/`);
  await page.locator("#place option").nth(placeIndex).waitFor({ state: "attached" });
  // The page loads the first place's slots by itself; wait for that first so
  // the choices below do not race it.
  await page.locator("#slots button").first().waitFor({ state: "attached" });
  const today = todayUtc();
  assert.equal(await page.inputValue("#day"), today, "the day starts at today");
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
  assert.ok(code.length >= 16, `access code '${code}' is shown`);
  assert.equal((await page.textContent("#conf-day")).trim(), day);
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

test("bad input: no slot chosen, then a bad phone shows the 422 message", { timeout: TEST_MS_MAX }, async (t) => {
  const { page } = await newPage(t);
  await openBooking(page, 3);
  await fillPerson(page, { ...ALICE, phone: "call me maybe" });
  await page.click("#submit");
  await page.locator("#status.error").waitFor();
  assert.equal(await page.textContent("#status"), "Choose a time first.");

  await pickFirstFreeSlot(page);
  const answer = page.waitForResponse((r) => r.url().endsWith("/api/booking/registrations"));
  await page.click("#submit");
  assert.equal((await answer).status(), 422);
  await page.locator("#status.error", { hasText: "person.phone" }).waitFor();
  const message = await page.textContent("#status");
  assert.match(message, /^person\.phone: 6 to 15 digits/);
  assert.ok(!message.includes("call me maybe"), "the error does not echo personal data");
  assert.equal(await page.locator("#confirmation").isHidden(), true);
  assert.equal(await page.locator("#submit").isEnabled(), true, "the person can correct and resend");
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
  await page.locator("#status.error", { hasText: "already holds a registration" }).waitFor();
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
  await page.selectOption("#place", slowPlace);
  const fastAnswer = page.waitForResponse((r) => r.url().includes(`/api/booking/places/${fastPlace}/slots?`));
  await page.selectOption("#place", fastPlace);
  await fastAnswer;
  await slowAnswer;
  await page.waitForTimeout(300); // let the late answer's handler run
  assert.equal(await page.locator("#slots button").count(), SLOTS_PER_DAY, "only the chosen place's slots are shown");
  assert.equal(await page.inputValue("#place"), fastPlace);
  assert.deepEqual(errors, []);
});
