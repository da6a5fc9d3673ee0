// The voting pages, /voting/ and /voting/results, in headless Chromium
// against a real throng server (demo data: election 1, 3 districts, 4 parties
// of 6 candidates, at most 4 candidates per vote, open now). Ballots are
// published to the tallies in rounds of at least 1 here, so a vote shows in
// the results at once. Every voter comes from the demo endpoint, so the tests
// never share a voter.

import { test } from "node:test";
import assert from "node:assert/strict";

import { fetchWithin, sharedSession } from "./lib/server.mjs";

const TEST_MS_MAX = 60_000;
const ELECTION = 1;
const N = 4;
const API = "/api/voting";

const session = sharedSession({ extraArgs: ["--voting-mix-ballots-min", "1"] });
const newPage = session.newPage;

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
  const href = await page.getAttribute("#receipt-link", "href");
  assert.equal(href, `${API}/elections/${ELECTION}/receipts/${encodeURIComponent(receiptId)}`);
  const receipt = await fetchWithin(`${session.server.url}${href}`);
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
  await page.locator("#conn", { hasText: "Live" }).waitFor();
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
  assert.match(await summary.textContent(), /ballots counted/);

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

test("the results page reconnects when the stream fails", { timeout: TEST_MS_MAX }, async (t) => {
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
  await page.locator("#conn.down").waitFor();
  await page.waitForFunction(() => document.getElementById("summary").dataset.updates);
  await page.locator("#conn", { hasText: "Live" }).waitFor();
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
  const answer = page.waitForResponse((r) => r.url().endsWith(`${API}/elections/${ELECTION}/votes`));
  await page.keyboard.press("Enter");
  assert.equal((await answer).status(), 201);
  await page.locator("#receipt").waitFor({ state: "visible" });
  assert.equal(await page.evaluate(() => document.activeElement.id), "receipt", "the receipt gets the focus");
  assert.deepEqual(errors, []);
});
