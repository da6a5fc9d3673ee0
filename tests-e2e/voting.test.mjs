// The voting pages, /voting/ and /voting/results, in headless Chromium
// against a real throng server (demo data: election 1, 3 districts, 4 parties
// of 6 candidates, at most 4 candidates per vote, open now). Ballots are
// published to the tallies in rounds of at least 1 here, so a vote shows in
// the results at once. Every voter comes from the demo endpoint, so the tests
// never share a voter.

import { test } from "node:test";
import assert from "node:assert/strict";

import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { fetchWithin, launchBrowser, sharedSession, startThrong } from "./lib/server.mjs";

const TEST_MS_MAX = 60_000;
const ELECTION = 1;
const N = 4;
const API = "/api/voting";

const session = sharedSession({ extraArgs: ["--voting-mix-ballots-min", "1"] });
const newPage = session.newPage;
const PHONE = { width: 390, height: 844 };
// Screenshots of failed tests go here (THRONG_E2E_SHOTS overrides).
const SHOTS_DIR = process.env.THRONG_E2E_SHOTS || join(tmpdir(), "throng-e2e-shots");

/** Runs `body`; when it throws, a full-page screenshot of `page` is written first. */
async function withShot(t, page, body) {
  try {
    return await body();
  } catch (e) {
    mkdirSync(SHOTS_DIR, { recursive: true });
    const path = join(SHOTS_DIR, `voting-${t.name.replace(/[^a-z0-9]+/gi, "-").slice(0, 80)}.png`);
    await page.screenshot({ path, fullPage: true }).catch(() => {});
    t.diagnostic(`screenshot: ${path}`);
    e.message += `\n(screenshot: ${path})`;
    throw e;
  }
}

/** The page's horizontal overflow in CSS px (0: nothing to scroll sideways). */
const overflowX = (page) => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);

// A 4xx answer the page handles counts as a console error in Chromium
// ("Failed to load resource"); nothing else may.
const unexpected = (errors, status) => errors.filter((e) => !e.includes(`status of ${status}`));

async function api(path, options) {
  return fetchWithin(`${session.server.url}${API}${path}`, options);
}

/** A demo voter of `district` (who has not voted) straight from the API. */
async function demoVoter(district) {
  const res = await api(`/demo/voter?electionId=${ELECTION}&districtId=${district}`, { method: "POST" });
  assert.equal(res.status, 200, await res.clone().text());
  return res.json();
}

/** The demo election's district ids, in order. */
async function districtIds() {
  const res = await api(`/elections/${ELECTION}`);
  assert.equal(res.status, 200);
  return (await res.json()).districts.map((d) => d.districtId);
}

async function ballot(district) {
  const res = await api(`/elections/${ELECTION}/districts/${district}/ballot`);
  assert.equal(res.status, 200);
  return res.json();
}

async function voteByApi(voter, partyId, candidateIds) {
  return api(`/elections/${ELECTION}/votes`, {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      "voter-id": String(voter.voterId),
      "election-district-id": String(voter.districtId),
      Authorization: `Bearer ${voter.token}`,
    },
    body: JSON.stringify({ partyId, candidateIds }),
  });
}

/** Opens /voting/ and waits until the ballot of the selected district is shown. */
async function openVoting(page, query = "") {
  await page.goto(`${session.server.url}/voting/${query}`);
  await page.locator('#parties input[name="party"]').first().waitFor({ state: "attached" });
}

const partyRadios = (page) => page.locator('#parties input[name="party"]');
const candidateBoxes = (page) => page.locator('#candidates input[name="candidate"]');

test("vote through the page: demo voter, one party, at most N candidates, receipt", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await openVoting(page);
  assert.equal(await page.textContent("#max"), String(N));
  const districts = await page.locator("#district option").count();
  assert.equal(districts, 3, "the demo election's districts are offered");

  await page.click("#demo-voter");
  await page.waitForFunction(() => document.getElementById("voter-id").value !== "");
  const voterId = await page.inputValue("#voter-id");
  assert.match(voterId, /^\d+$/);
  assert.notEqual(await page.inputValue("#token"), "", "the demo voter comes with a token");
  const district = await page.inputValue("#district");

  // The ballot shown is the district's.
  const expected = await ballot(district);
  assert.equal(await partyRadios(page).count(), expected.parties.length);

  // Party 1, then switch to party 2: the first party's choices are cleared.
  await partyRadios(page).nth(0).check();
  await candidateBoxes(page).nth(0).check();
  assert.equal(await page.textContent("#chosen-count"), "1");
  await partyRadios(page).nth(1).check();
  assert.equal(await page.textContent("#chosen-count"), "0", "switching party clears the candidates");
  const party = expected.parties[1];
  assert.equal(await candidateBoxes(page).count(), party.candidates.length);
  assert.equal(await page.locator('#candidates input[name="candidate"]:checked').count(), 0);

  // Up to N: the rest are disabled once N are chosen, enabled again when one is unchosen.
  for (let i = 0; i < N; i++) await candidateBoxes(page).nth(i).check();
  assert.equal(await page.textContent("#chosen-count"), String(N));
  assert.equal(await page.locator('#candidates input[name="candidate"]:disabled').count(), party.candidates.length - N);
  assert.equal(await candidateBoxes(page).nth(N).isDisabled(), true);
  await candidateBoxes(page).nth(0).uncheck();
  assert.equal(await page.locator('#candidates input[name="candidate"]:disabled').count(), 0);
  await candidateBoxes(page).nth(N).check();
  const chosen = await page.$$eval('#candidates input[name="candidate"]:checked', (bs) => bs.map((b) => Number(b.value)));
  assert.equal(chosen.length, N);

  const answer = page.waitForResponse((r) => r.url().endsWith(`${API}/elections/${ELECTION}/votes`));
  await page.click("#vote");
  await page.click("#confirm");
  const res = await answer;
  assert.equal(res.status(), 201);
  const sent = JSON.parse(res.request().postData());
  assert.deepEqual(sent, { partyId: party.partyId, candidateIds: chosen });
  assert.equal(res.request().headers()["voter-id"], voterId);
  assert.equal(res.request().headers()["election-district-id"], district);

  await page.locator("#receipt").waitFor({ state: "visible" });
  assert.equal(await page.locator("#vote-form").isHidden(), true, "the form is hidden after voting");
  const receiptId = (await page.textContent("#receipt-id")).trim();
  assert.ok(receiptId.length >= 8, `receipt id '${receiptId}' is shown`);
  const receipt = await api(`/elections/${ELECTION}/receipts/${encodeURIComponent(receiptId)}`);
  assert.equal(receipt.status, 200);
  const r = await receipt.json();
  assert.equal(r.receiptId, receiptId);
  assert.ok(["received", "counted"].includes(r.status), `receipt status ${r.status}`);
  assert.match(await page.getAttribute("#results-link", "href"), /^\/voting\/results\?/);
  assert.deepEqual(errors, []);
});

test("a second vote by the same voter shows the already-voted message", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await openVoting(page);
  await page.click("#demo-voter");
  await page.waitForFunction(() => document.getElementById("voter-id").value !== "");
  const voterId = await page.inputValue("#voter-id");
  const token = await page.inputValue("#token");
  const district = await page.inputValue("#district");
  await partyRadios(page).nth(0).check();
  await page.click("#vote");
  await page.click("#confirm");
  await page.locator("#receipt").waitFor({ state: "visible" });

  // The same voter again, typed in as a person would, on a fresh page.
  await openVoting(page, `?districtId=${district}`);
  assert.equal(await page.inputValue("#district"), district);
  await page.fill("#voter-id", voterId);
  await page.fill("#token", token);
  await partyRadios(page).nth(2).check();
  await candidateBoxes(page).nth(1).check();
  const answer = page.waitForResponse((r) => r.url().endsWith(`${API}/elections/${ELECTION}/votes`));
  await page.click("#vote");
  await page.click("#confirm");
  assert.equal((await answer).status(), 409);
  const status = page.locator("#status.error");
  await status.waitFor();
  assert.equal(await status.getAttribute("data-code"), "already_voted");
  assert.match(await status.textContent(), /already voted/i);
  assert.doesNotMatch(await status.textContent(), /\{|at .*\.js/, "a sentence, not an envelope or a stack");
  assert.equal(await page.locator("#receipt").isHidden(), true);
  assert.equal(await page.locator("#vote").isEnabled(), true);

  // A voter on another district's roll: a readable sentence too.
  const other = await demoVoter((await districtIds()).find((d) => String(d) !== district));
  await page.fill("#voter-id", String(other.voterId));
  await page.fill("#token", "");
  const answer2 = page.waitForResponse((r) => r.url().endsWith(`${API}/elections/${ELECTION}/votes`));
  await page.click("#vote");
  await page.click("#confirm");
  const status2 = (await answer2).status();
  assert.ok([401, 403].includes(status2), `a vote without token or on the wrong roll is refused (${status2})`);
  await page.locator("#status.error").waitFor();
  assert.notEqual(await page.getAttribute("#status", "data-code"), "already_voted");
  assert.ok((await page.textContent("#status")).length > 10);
  assert.deepEqual(unexpected(unexpected(unexpected(errors, 409), 401), 403), []);
});

test("results update over SSE after a vote made through the API, without reload", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  const ids = await districtIds();
  const district = ids[ids.length - 1];
  await page.goto(`${session.server.url}/voting/results?electionId=${ELECTION}&districtId=${district}`);
  const summary = page.locator("#summary");
  await page.waitForFunction(() => document.getElementById("summary").dataset.updates);
  assert.equal(await page.inputValue("#district"), String(district), "the filter comes from the address");
  await page.waitForFunction(() => document.getElementById("conn").dataset.state === "live");
  await page.evaluate(() => (window.__notReloaded = true));
  const before = Number(await summary.getAttribute("data-ballots"));
  const b = await ballot(district);
  const party = b.parties[b.parties.length - 1];
  const cand = party.candidates[0];
  const partyBefore = Number(await page.getAttribute(`#party-${party.partyId}-votes`, "data-votes"));
  const candBefore = Number(await page.getAttribute(`#candidate-${cand.candidateId}-votes`, "data-votes"));

  const voter = await demoVoter(district);
  const res = await voteByApi(voter, party.partyId, [cand.candidateId]);
  assert.equal(res.status, 201, await res.clone().text());

  await page.waitForFunction((n) => Number(document.getElementById("summary").dataset.ballots) === n, before + 1);
  assert.equal(Number(await page.getAttribute(`#party-${party.partyId}-votes`, "data-votes")), partyBefore + 1);
  assert.equal(Number(await page.getAttribute(`#candidate-${cand.candidateId}-votes`, "data-votes")), candBefore + 1);
  assert.equal(await page.evaluate(() => window.__notReloaded), true, "the page was not reloaded");
  assert.match(await summary.textContent(), /ballots? counted/);

  // A vote in another district does not move this district's figures; the whole election's do.
  await page.selectOption("#district", "");
  await page.waitForFunction(() => document.getElementById("summary").textContent.includes("all districts"));
  const allBefore = Number(await summary.getAttribute("data-ballots"));
  const elsewhere = await demoVoter(ids[0]);
  assert.equal((await voteByApi(elsewhere, b.parties[0].partyId, [])).status, 201);
  await page.waitForFunction((n) => Number(document.getElementById("summary").dataset.ballots) === n, allBefore + 1);
  assert.match(page.url(), new RegExp(`/voting/results\\?electionId=${ELECTION}$`), "the address follows the filter");
  assert.deepEqual(errors, []);
});

test("the results page polls, then goes live again, when a stream fails", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  let streams = 0;
  await page.route("**/results/stream*", (route) => {
    streams++;
    if (streams === 1) {
      return route.fulfill({
        status: 503,
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ error: { code: "store_unavailable", message: "try again" } }),
      });
    }
    return route.continue();
  });
  await page.goto(`${session.server.url}/voting/results`);
  // Refused: the page polls meanwhile, then a new stream makes it live again.
  await page.waitForFunction(() => document.getElementById("conn").dataset.state === "polling");
  await page.waitForFunction(() => document.getElementById("summary").dataset.updates);
  await page.waitForFunction(() => document.getElementById("conn").dataset.state === "live");
  assert.match(await page.textContent("#conn"), /^Live/);
  assert.ok(streams >= 2, `opened ${streams} streams`);
  assert.ok(Number(await page.getAttribute("#summary", "data-ballots")) >= 0);
  assert.deepEqual(unexpected(errors, 503), []);
});

/** Presses Tab until `selector` has the focus (at most `max` times). */
async function tabTo(page, selector, max = 60) {
  for (let i = 0; i < max; i++) {
    if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector)) return;
    await page.keyboard.press("Tab");
  }
  throw new Error(`Tab never reached ${selector}`);
}

test("keyboard only: demo voter, party, candidates and vote without the mouse", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await openVoting(page);
  await tabTo(page, "#demo-voter");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.getElementById("voter-id").value !== "");

  // Into the party group (Tab lands on its first radio), arrow to the second.
  await tabTo(page, '#parties input[name="party"]');
  await page.keyboard.press("Space");
  await page.keyboard.press("ArrowDown");
  assert.equal(await partyRadios(page).nth(1).isChecked(), true, "arrow keys choose the party");
  await tabTo(page, '#candidates input[name="candidate"]');
  for (let i = 0; i < N; i++) {
    await page.keyboard.press("Space");
    await page.keyboard.press("Tab");
  }
  assert.equal(await page.locator('#candidates input[name="candidate"]:checked').count(), N);
  // The boxes left are disabled, so the last Tab skipped them to the vote button.
  assert.equal(await page.evaluate(() => document.activeElement.id), "vote");
  await page.keyboard.press("Enter");
  // The review comes first: the vote is cast only once confirmed.
  await page.locator("#review").waitFor({ state: "visible" });
  assert.equal(await page.evaluate(() => document.activeElement.id), "review", "the review gets the focus");
  const answer = page.waitForResponse((r) => r.url().endsWith(`${API}/elections/${ELECTION}/votes`));
  await tabTo(page, "#confirm");
  await page.keyboard.press("Enter");
  assert.equal((await answer).status(), 201);
  await page.locator("#receipt").waitFor({ state: "visible" });
  assert.equal(await page.evaluate(() => document.activeElement.id), "receipt", "the receipt gets the focus");
  assert.deepEqual(errors, []);
});

test("check this receipt opens a page with a human answer: counted, or not found", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await withShot(t, page, async () => {
    await openVoting(page);
    await page.click("#demo-voter");
    await page.waitForFunction(() => document.getElementById("voter-id").value !== "");
    await partyRadios(page).nth(0).check();
    await page.click("#vote");
    await page.click("#confirm");
    await page.locator("#receipt").waitFor({ state: "visible" });
    const receiptId = (await page.textContent("#receipt-id")).trim();
    assert.match(await page.getAttribute("#receipt-link", "href"), /^\/voting\/receipt\?/, "a page, not the API");

    await page.click("#receipt-link");
    await page.waitForURL(/\/voting\/receipt\?/);
    const answer = page.locator("#answer");
    // Published at once here (rounds of 1): counted, or briefly still waiting.
    await page.waitForFunction(() => ["counted", "waiting"].includes(document.getElementById("answer").dataset.state));
    for (let i = 0; i < 50 && (await answer.getAttribute("data-state")) === "waiting"; i++) {
      await page.waitForTimeout(200);
      await page.click("#check-button");
      await page.waitForFunction(() => document.getElementById("answer").dataset.state !== "checking");
    }
    assert.equal(await answer.getAttribute("data-state"), "counted");
    const text = await answer.textContent();
    assert.match(text, /Counted/);
    assert.match(text, /not how you voted/);
    assert.doesNotMatch(text, /[{}"]|receiptId|true|false/, "words, not JSON");
    assert.equal(await page.inputValue("#receipt-id"), receiptId);

    // A receipt that was never given: not found, with what to check.
    await page.fill("#receipt-id", "00000000-0000-4000-8000-000000000000");
    await page.click("#check-button");
    await page.waitForFunction(() => document.getElementById("answer").dataset.state === "not_found");
    assert.match(await answer.textContent(), /Not found.*No ballot with this receipt id/s);
    assert.match(await answer.textContent(), /36 characters/);
    assert.deepEqual(unexpected(errors, 404), []);
  });
});

test("a waiting receipt says it is received and why it is not counted yet", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await withShot(t, page, async () => {
    const id = "11111111-2222-4333-8444-555555555555";
    await page.route(`**${API}/elections/${ELECTION}/receipts/${id}`, (route) =>
      route.fulfill({
        status: 200,
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ receiptId: id, electionId: ELECTION, status: "received", counted: false }),
      }),
    );
    await page.goto(`${session.server.url}/voting/receipt?electionId=${ELECTION}&receiptId=${id}`);
    await page.waitForFunction(() => document.getElementById("answer").dataset.state === "waiting");
    const text = await page.textContent("#answer");
    assert.match(text, /Received, waiting to be counted/);
    assert.match(text, /published to the results together, once its box holds at least \d+ ballots?/, "says why it waits");
    assert.match(text, /when the election closes/);
    assert.deepEqual(errors, []);
  });
});

test("the results show turnout, the last update, party colours and singular counts", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await withShot(t, page, async () => {
    const ids = await districtIds();
    const district = ids[1];
    const voter = await demoVoter(district);
    const b = await ballot(district);
    assert.equal((await voteByApi(voter, b.parties[0].partyId, [])).status, 201);
    const expected = await (await api(`/elections/${ELECTION}/results?districtId=${district}`)).json();
    assert.ok(expected.votersOnRoll > 0 && expected.updatedAt, JSON.stringify(expected));

    await page.goto(`${session.server.url}/voting/results?electionId=${ELECTION}&districtId=${district}`);
    await page.waitForFunction(() => document.getElementById("conn").dataset.state === "live");
    await page.waitForFunction(() => document.getElementById("turnout").dataset.turnout);
    const counted = Number(await page.getAttribute("#summary", "data-ballots"));
    const turnout = (100 * counted) / expected.votersOnRoll;
    assert.equal(await page.getAttribute("#turnout", "data-turnout"), turnout.toFixed(1));
    assert.match(await page.textContent("#turnout"), new RegExp(`Turnout: ${turnout.toFixed(1)}% \\(${counted} of ${expected.votersOnRoll} voters on the roll\\)`));
    assert.match(await page.textContent("#updated"), /^Last update: /);
    assert.ok(await page.getAttribute("#updated", "data-updated-at"));

    // Each party's bar in its colour from the API, and the colours differ.
    const colors = new Set();
    for (const p of expected.parties) {
      const li = page.locator(`#tally > li[data-party-id="${p.partyId}"]`);
      const bg = await li.locator(":scope > .bar > span").evaluate((e) => e.style.background || e.style.backgroundColor);
      const hex = p.color.match(/[0-9a-f]{2}/gi).map((h) => parseInt(h, 16));
      assert.equal(bg, `rgb(${hex.join(", ")})`, `party ${p.partyId}`);
      colors.add(p.color);
    }
    assert.equal(colors.size, expected.parties.length);
    assert.deepEqual(errors, []);
  });
});

test("one ballot and one voter read in the singular", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await withShot(t, page, async () => {
    const one = {
      electionId: ELECTION, districtId: null, ballots: 1, votersOnRoll: 1, updatedAt: "2026-11-25T01:02:03.000Z", position: 1,
      parties: [{ partyId: 1, name: "Party A", shortName: "A", color: "#4e79a7", votes: 1 }],
    };
    await page.route("**/results/stream*", (route) =>
      route.fulfill({
        status: 200,
        headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" },
        body: `event: results\ndata: ${JSON.stringify(one)}\n\n`,
      }),
    );
    await page.goto(`${session.server.url}/voting/results?electionId=${ELECTION}`);
    await page.waitForFunction(() => document.getElementById("summary").dataset.updates);
    assert.match(await page.textContent("#summary"), /^1 ballot counted in all districts\.$/);
    assert.match(await page.textContent("#turnout"), /Turnout: 100\.0% \(1 of 1 voter on the roll\)/);
    assert.deepEqual(errors, []);
  });
});

test("the results page polls /results when its stream is refused, and says it is not live", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await withShot(t, page, async () => {
    let streams = 0;
    await page.route("**/results/stream*", (route) => {
      streams++;
      return route.fulfill({
        status: 429,
        headers: { "Content-Type": "application/json", "Retry-After": "10" },
        body: JSON.stringify({ error: { code: "too_many_client_streams", message: "poll /results" } }),
      });
    });
    const ids = await districtIds();
    const district = ids[2];
    await page.goto(`${session.server.url}/voting/results?electionId=${ELECTION}&districtId=${district}`);
    await page.waitForFunction(() => document.getElementById("conn").dataset.state === "polling");
    assert.match(await page.textContent("#conn"), /Not live/);
    await page.waitForFunction(() => document.getElementById("summary").dataset.updates);
    const before = Number(await page.getAttribute("#summary", "data-ballots"));

    // A vote shows up by polling, with no stream at all.
    const b = await ballot(district);
    const voter = await demoVoter(district);
    assert.equal((await voteByApi(voter, b.parties[0].partyId, [])).status, 201);
    await page.waitForFunction((n) => Number(document.getElementById("summary").dataset.ballots) === n, before + 1, { timeout: 20_000 });
    assert.equal(await page.getAttribute("#conn", "data-state"), "polling");
    assert.ok(streams >= 1, `tried ${streams} streams`);
    assert.deepEqual(unexpected(errors, 429), []);
  });
});

test("the results page polls /results when its stream keeps dropping", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await withShot(t, page, async () => {
    let streams = 0;
    const real = await (await api(`/elections/${ELECTION}/results`)).json();
    // Each stream delivers the results, then the connection drops; EventSource retries after 100 ms.
    await page.route("**/results/stream*", (route) => {
      streams++;
      return route.fulfill({
        status: 200,
        headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" },
        body: `retry: 100\nevent: results\ndata: ${JSON.stringify(real)}\n\n`,
      });
    });
    await page.goto(`${session.server.url}/voting/results?electionId=${ELECTION}`);
    await page.waitForFunction(() => document.getElementById("conn").dataset.state === "polling", null, { timeout: 30_000 });
    assert.match(await page.textContent("#conn"), /Not live \(the live connection keeps dropping\)/);
    assert.ok(streams >= 3, `opened ${streams} streams`);
    assert.deepEqual(errors, []);
  });
});

test("the results page says it is not live once the server stops, and the server stops within the drain", { timeout: TEST_MS_MAX }, async (t) => {
  const own = await startThrong({ extraArgs: ["--voting-mix-ballots-min", "1", "--drain-ms", "1000"] });
  const browser = await launchBrowser();
  t.after(async () => {
    await browser.close();
    await own.stop();
  });
  const { page, errors } = browser;
  await withShot(t, page, async () => {
    await page.goto(`${own.url}/voting/results`);
    await page.waitForFunction(() => document.getElementById("conn").dataset.state === "live");
    assert.equal(await page.getAttribute("#conn", "data-state"), "live");

    const exited = new Promise((res) => own.process.once("exit", (code, signal) => res({ code, signal })));
    const stoppedAt = Date.now();
    own.process.kill("SIGTERM");
    // The stream ends at once: the page stops saying "Live".
    await page.waitForFunction(() => document.getElementById("conn").dataset.state !== "live", null, { timeout: 5_000 });
    const { code, signal } = await exited;
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, `throng exited by itself\n${own.log()}`);
    assert.ok(Date.now() - stoppedAt < 1000 + 3000, `exited ${Date.now() - stoppedAt} ms after SIGTERM (drain 1000 ms)`);
    // Then the polls fail too: offline.
    await page.waitForFunction(() => document.getElementById("conn").dataset.state === "offline", null, { timeout: 20_000 });
    assert.match(await page.textContent("#conn"), /Offline/);
    assert.notEqual(await page.textContent("#summary"), "", "the last figures stay on the page");
    assert.ok(errors.every((e) => /Failed to load resource|ERR_CONNECTION_REFUSED|net::/.test(e)), errors.join("\n"));
  });
});

test("a 390 px phone scrolls no page sideways", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await page.setViewportSize(PHONE);
  await withShot(t, page, async () => {
    await openVoting(page);
    assert.ok((await overflowX(page)) <= 0, `/voting/ overflows by ${await overflowX(page)} px`);
    await page.goto(`${session.server.url}/voting/results?electionId=${ELECTION}&districtId=${(await districtIds())[0]}`);
    await page.waitForFunction(() => document.getElementById("turnout").dataset.turnout);
    assert.ok((await overflowX(page)) <= 0, `/voting/results overflows by ${await overflowX(page)} px`);
    await page.goto(`${session.server.url}/voting/receipt?electionId=${ELECTION}&receiptId=00000000-0000-4000-8000-000000000000`);
    await page.waitForFunction(() => document.getElementById("answer").dataset.state === "not_found");
    assert.ok((await overflowX(page)) <= 0, `/voting/receipt overflows by ${await overflowX(page)} px`);
    assert.deepEqual(unexpected(errors, 404), []);
  });
});
