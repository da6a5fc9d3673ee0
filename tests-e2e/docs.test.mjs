// The API reference at /docs/ in headless Chromium against a real throng
// server: rendered from /openapi.json by the page's own script, with no
// request leaving the server's origin; an operation's parameters, bounds,
// answers and token requirement are on the page; the index links to it; it
// fits a 390 px phone. A failing test leaves a screenshot in the temp folder.

import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";

import { sharedSession, tempDir } from "./lib/server.mjs";

const TEST_MS_MAX = 60_000;
const session = sharedSession();

/** A tab that records every request it makes and screenshots itself if the test fails. */
async function openDocs(t, { width = 1000, height = 900, hash = "" } = {}) {
  const { page, errors } = await session.newPage(t);
  await page.setViewportSize({ width, height });
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));
  t.after(async () => {
    if (t.passed === false) {
      const shot = join(tempDir("docs-shot"), `${t.name.replace(/\W+/g, "-")}.png`);
      await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
      t.diagnostic(`screenshot: ${shot}`);
    }
  });
  await page.goto(`${session.server.url}/docs/${hash}`);
  await page.locator("body[data-ready='1']").waitFor({ state: "attached" });
  return { page, errors, requests };
}

function onlyLocal(requests) {
  const origin = new URL(session.server.url).origin;
  const away = requests.filter((u) => !u.startsWith(origin + "/"));
  assert.deepEqual(away, [], "no request leaves the server");
  assert.ok(requests.includes(`${origin}/openapi.json`), "the page reads /openapi.json");
}

test("an operation with its parameters, bounds, answers and token", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors, requests } = await openDocs(t);
  const op = page.locator("#op-get-api-events-all");
  await op.waitFor({ state: "visible" });
  const text = await op.innerText();
  assert.match(text, /GET\s+\/api\/events\/all/);
  assert.match(text, /Needs a token/, "the token requirement is stated");
  const limit = op.locator("li.param", { hasText: "limit" });
  assert.match(await limit.innerText(), /in query/);
  assert.match(await limit.innerText(), /from 1 to 1000/, "the bounds of limit");
  for (const status of ["200", "400", "401", "403", "429", "503"]) {
    assert.equal(await op.locator(`li.response[data-status='${status}']`).count(), 1, `answer ${status} listed`);
  }
  assert.match(await op.locator("li.response[data-status='401']").innerText(), /missing_token/);

  // A body: required fields, lengths; and an operation without a token.
  const register = page.locator("#op-post-api-booking-registrations");
  const body = await register.innerText();
  assert.match(body, /No token needed/);
  assert.match(body, /Request body/);
  assert.match(body, /timeSlot\s+required/);
  assert.match(body, /from 0 to 1439/);
  assert.match(body, /name\s+required[\s\S]*length 1 to 200/);
  assert.match(await register.locator("li.response[data-status='201']").innerText(), /201/);

  // Grouped by service, the platform last; a table of contents links each.
  const groups = await page.locator("main > section > h2").allInnerTexts();
  for (const tag of ["booking", "comments", "events", "invites", "voting"]) {
    assert.ok(groups.map((g) => g.toLowerCase()).includes(tag), `a ${tag} group in ${groups}`);
  }
  assert.equal(groups.at(-1).toLowerCase(), "platform");
  assert.equal(await page.locator("#toc a[href='#op-get-api-events-all']").count(), 1);
  onlyLocal(requests);
  assert.deepEqual(errors, []);
});

test("the index links to the reference; an anchor opens its operation", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await session.newPage(t);
  await page.goto(`${session.server.url}/`);
  const link = page.locator("a[href='/docs/#op-get-api-events-all']");
  assert.equal(await link.count(), 1, "the admin-only endpoint links to its reference");
  assert.match(await link.locator("xpath=..").innerText(), /admin token/);
  assert.equal(await page.locator("a[href='/api/events/all']").count(), 0, "no raw link to a 401");
  await link.click();
  await page.locator("body[data-ready='1']").waitFor({ state: "attached" });
  assert.equal(new URL(page.url()).hash, "#op-get-api-events-all");
  const box = await page.locator("#op-get-api-events-all").boundingBox();
  assert.ok(box && box.y < 900 && box.y + box.height > 0, "the operation is scrolled into view");
  assert.deepEqual(errors, []);
});

test("readable on a 390 px phone", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors, requests } = await openDocs(t, { width: 390, height: 844 });
  const widths = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    client: document.documentElement.clientWidth,
  }));
  assert.ok(widths.scroll <= widths.client, `no sideways scrolling (${widths.scroll} > ${widths.client})`);
  const op = page.locator("#op-post-api-booking-registrations");
  const box = await op.boundingBox();
  assert.ok(box.x >= 0 && box.x + box.width <= 390, `an operation fits the width (${JSON.stringify(box)})`);
  onlyLocal(requests);
  assert.deepEqual(errors, []);
});

test("search filters as one types; the token is typed once, kept in the tab, used in every curl line", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors, requests } = await openDocs(t);
  const all = await page.locator("section.op").count();
  assert.ok(all >= 40, `${all} operations`);
  // Every operation shows a description and its example request or answer.
  const described = await page.locator("section.op p.description").count();
  assert.equal(described, all, "every operation has a description");

  await page.fill("#filter", "/attendance");
  const shown = page.locator("section.op:visible");
  assert.equal(await shown.count(), 1, "one operation matches '/attendance'");
  assert.match(await shown.first().innerText(), /\/api\/booking\/staff\/registrations\/\{registration_id\}\/attendance/);
  assert.match(await page.textContent("#filter-count"), /^1 of \d+ operations match/);
  await page.fill("#filter", "post /api/voting/");
  const voting = await page.locator("section.op:visible h3").allInnerTexts();
  assert.ok(voting.length >= 3 && voting.every((h) => /POST\s+\/api\/voting\//.test(h)), voting.join("\n"));
  await page.fill("#filter", "no such operation at all");
  assert.equal(await page.locator("section.op:visible").count(), 0);
  assert.match(await page.textContent("#filter-count"), /^0 of/);
  await page.fill("#filter", "");
  assert.equal(await page.locator("section.op:visible").count(), all);

  // Without a token, a secured operation's curl line names $TOKEN.
  const stats = page.locator("#op-get-api-booking-admin-stats");
  assert.match(await stats.locator("pre.curl-line").innerText(), /Authorization: Bearer \$TOKEN/);
  await page.fill("#token", "abc.def.ghi");
  const origin = new URL(session.server.url).origin;
  assert.equal(
    await stats.locator("pre.curl-line").innerText(),
    `curl '${origin}/api/booking/admin/stats' -H 'Authorization: Bearer abc.def.ghi'`,
  );
  // A body goes in with its content type, from the example; no token where none is needed.
  const register = await page.locator("#op-post-api-booking-registrations pre.curl-line").innerText();
  assert.match(register, /^curl -X POST '.*\/api\/booking\/registrations' -H 'Content-Type: application\/json' --data-binary '\{"/);
  assert.doesNotMatch(register, /Authorization/);
  // Path parameters take their examples.
  assert.match(await page.locator("#op-post-api-invites-sites-site_id-pause pre.curl-line").innerText(), /\/api\/invites\/sites\/1\/pause'/);
  assert.match(await page.locator("#op-put-api-booking-places-place_id pre.curl-line").innerText(), /\/api\/booking\/places\/1' /);

  // The button copies the line (or selects it where the clipboard is refused).
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin });
  await stats.getByRole("button", { name: /Copy as curl/ }).click();
  await stats.locator(".copied").filter({ hasText: /Copied|Selected/ }).waitFor();

  // Kept in this tab only: a reload keeps it, another tab does not have it.
  assert.equal(await page.evaluate(() => sessionStorage.getItem("throng.docs.token")), "abc.def.ghi");
  assert.equal(await page.evaluate(() => localStorage.length), 0, "nothing in localStorage");
  await page.reload();
  await page.locator("body[data-ready='1']").waitFor({ state: "attached" });
  assert.equal(await page.inputValue("#token"), "abc.def.ghi");
  const other = await openDocs(t);
  assert.equal(await other.page.inputValue("#token"), "", "another tab starts without it");
  assert.match(await other.page.locator("#op-get-api-booking-admin-stats pre.curl-line").innerText(), /\$TOKEN/);

  // How to get a token.
  const tokens = await page.locator("#tokens").innerText();
  assert.match(tokens, /throng token --role admin/);
  assert.match(tokens, /identity provider/);
  onlyLocal(requests);
  assert.deepEqual(errors, []);
});
