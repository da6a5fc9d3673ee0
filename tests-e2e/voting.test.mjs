// The voting pages, /voting/, /voting/results and /voting/receipt ("Find my
// ballot"), in headless Chromium against a real throng server (demo data:
// election 1, 3 districts, 4 parties of 6 candidates, at most 4 candidates
// per vote, open now). Every ballot is sealed in the browser to the
// election's key (the vote page's own sealing, or the same HPKE sealing done
// in a loaded /voting/ page with /voting/hpke.js): no plaintext vote is ever
// sent. The public board takes new trackers every second (--demo), and the
// results show turnout only (ballots on the board) until the trustees'
// results are published. Every voter comes from the demo endpoint, so the
// tests never share a voter.

import { test } from "node:test";
import assert from "node:assert/strict";

import { createHash } from "node:crypto";
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
const DESKTOP = { width: 1000, height: 900 };
// The board publishes every second here: a tracker is found well within this.
const BOARD_WAIT_MS_MAX = 15_000;
// A sealed ballot: 32 bytes of HPKE encapsulated key, the sealed choice and
// its 16-byte tag, 80 or 81 bytes in base64url without padding.
const SEALED = /^[A-Za-z0-9_-]{107,108}$/;
const TRACKER = /^[A-Za-z0-9_-]{43}$/;
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

/** The tracker of a sealed ballot: SHA-256 of its bytes, base64url. */
const trackerOf = (sealed) => createHash("sha256").update(Buffer.from(sealed, "base64url")).digest("base64url");

/**
 * A vote through the API, sealed in a browser tab on /voting/ exactly as a
 * voter's browser seals it (HPKE to the ballot's `sealTo`, with the page's
 * vendored /voting/hpke.js): the party by id and candidates by id. Resolves
 * { status, body, sealed, tracker }, the tracker computed here from the
 * sealed bytes.
 */
async function voteByApi(voter, partyId, candidateIds) {
  const tab = await session.browser.context.newPage();
  try {
    await tab.goto(`${session.server.url}/voting/?electionId=${ELECTION}&districtId=${voter.districtId}`);
    const out = await tab.evaluate(
      async ({ api, election, voter, partyId, candidateIds }) => {
        const b64d = (t) => Uint8Array.from(atob(t.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
        const b64e = (bytes) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
        const b = await (await fetch(`${api}/elections/${election}/districts/${voter.districtId}/ballot`)).json();
        const party = b.parties.find((p) => p.partyId === partyId);
        const plain = new Uint8Array(b.sealTo.plainBytes);
        plain[0] = 1;
        plain[1] = b.parties.indexOf(party) + 1;
        for (const id of candidateIds) {
          const j = party.candidates.findIndex((c) => c.candidateId === id);
          plain[2 + (j >> 3)] |= 1 << (j & 7);
        }
        const hpke = await import("/voting/hpke.js");
        const suite = new hpke.CipherSuite({ kem: new hpke.DhkemX25519HkdfSha256(), kdf: new hpke.HkdfSha256(), aead: new hpke.Aes128Gcm() });
        const recipientPublicKey = await suite.kem.deserializePublicKey(b64d(b.sealTo.publicKey));
        const sender = await suite.createSenderContext({ recipientPublicKey, info: b64d(b.sealTo.info) });
        const ct = new Uint8Array(await sender.seal(plain));
        const enc = new Uint8Array(sender.enc);
        const sealed = b64e(new Uint8Array([...enc, ...ct]));
        const res = await fetch(`${api}/elections/${election}/votes`, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            "voter-id": String(voter.voterId),
            "election-district-id": String(voter.districtId),
            Authorization: `Bearer ${voter.token}`,
          },
          body: JSON.stringify({ sealed }),
        });
        return { status: res.status, text: await res.text(), sealed };
      },
      { api: API, election: ELECTION, voter, partyId, candidateIds },
    );
    assert.match(out.sealed, SEALED);
    return { status: out.status, body: out.status < 300 ? JSON.parse(out.text) : out.text, sealed: out.sealed, tracker: trackerOf(out.sealed) };
  } finally {
    await tab.close();
  }
}

/** Waits (bounded) until `tracker` is on its district's board; its entry. */
async function onBoard(district, tracker) {
  const until = Date.now() + BOARD_WAIT_MS_MAX;
  for (;;) {
    const res = await api(`/elections/${ELECTION}/districts/${district}/board/${tracker}`);
    if (res.status === 200) return res.json();
    assert.equal(res.status, 404, await res.clone().text());
    assert.equal((await res.json()).error.code, "tracker_not_on_board");
    assert.ok(Date.now() < until, `tracker ${tracker} not on district ${district}'s board within ${BOARD_WAIT_MS_MAX} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Casts the vote under review on the vote page (clicks #confirm) and returns
 * the POST as sent and answered: { res, sent (its JSON body) }.
 */
async function confirmVote(page) {
  const answer = page.waitForResponse((r) => r.url().endsWith(`${API}/elections/${ELECTION}/votes`) && r.request().method() === "POST");
  await page.click("#confirm");
  const res = await answer;
  return { res, sent: JSON.parse(res.request().postData()) };
}

/**
 * On "Find my ballot": presses Find until the answer is no longer "waiting"
 * (the board publishes every period), within BOARD_WAIT_MS_MAX.
 */
async function findUntilCounted(page) {
  const answer = page.locator("#answer");
  await page.waitForFunction(() => ["counted", "waiting"].includes(document.getElementById("answer").dataset.state));
  const until = Date.now() + BOARD_WAIT_MS_MAX;
  while ((await answer.getAttribute("data-state")) === "waiting" && Date.now() < until) {
    await page.waitForTimeout(300);
    await page.click("#check-button");
    await page.waitForFunction(() => document.getElementById("answer").dataset.state !== "checking");
  }
  assert.equal(await answer.getAttribute("data-state"), "counted", await answer.textContent());
}

/** Opens /voting/ and waits until the ballot of the selected district is shown. */
async function openVoting(page, query = "") {
  await page.goto(`${session.server.url}/voting/${query}`);
  await page.locator('#parties input[name="party"]').first().waitFor({ state: "attached" });
}

const partyRadios = (page) => page.locator('#parties input[name="party"]');
const candidateBoxes = (page) => page.locator('#candidates input[name="candidate"]');

test("vote through the page: demo voter, one party, at most N candidates, sealed, its tracker on the board", { timeout: TEST_MS_MAX }, async (t) => {
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

  await page.click("#vote");
  const { res, sent } = await confirmVote(page);
  assert.equal(res.status(), 201);
  // Sealed in the browser: the body is the sealed ballot alone, nothing of the choice.
  assert.deepEqual(Object.keys(sent), ["sealed"]);
  assert.match(sent.sealed, SEALED);
  assert.equal(res.request().headers()["voter-id"], voterId);
  assert.equal(res.request().headers()["election-district-id"], district);
  const tracker = trackerOf(sent.sealed);
  const cast = await res.json();
  assert.deepEqual(Object.keys(cast).sort(), ["boardUrl", "districtId", "electionId", "tracker"]);
  assert.deepEqual([cast.tracker, cast.electionId, cast.districtId], [tracker, ELECTION, Number(district)]);
  assert.match(cast.boardUrl, new RegExp(`/elections/${ELECTION}/districts/${district}/board/${tracker}$`));

  await page.locator("#receipt").waitFor({ state: "visible" });
  assert.equal(await page.locator("#vote-form").isHidden(), true, "the form is hidden after voting");
  assert.equal((await page.textContent("#receipt-id")).trim(), tracker, "the tracker shown is SHA-256 of the sealed bytes sent");
  assert.equal(await page.locator("#tracker-mismatch").isHidden(), true);
  assert.ok(Number(await page.getAttribute("body", "data-seal-ms")) > 0);
  const entry = await onBoard(district, tracker);
  assert.equal(entry.tracker, tracker);
  assert.ok(entry.period >= 1);
  assert.match(await page.getAttribute("#receipt-link", "href"), new RegExp(`^/voting/receipt\\?.*tracker=${tracker}`));
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

test("turnout updates over SSE once a vote is on the board, without reload; no party figures before publication", { timeout: TEST_MS_MAX }, async (t) => {
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
  const onRoll = (await (await api(`/elections/${ELECTION}/results?districtId=${district}`)).json()).votersOnRoll;
  const b = await ballot(district);
  const party = b.parties[b.parties.length - 1];

  const voter = await demoVoter(district);
  const cast = await voteByApi(voter, party.partyId, [party.candidates[0].candidateId]);
  assert.equal(cast.status, 201, String(cast.body));
  assert.equal(cast.body.tracker, cast.tracker);

  // Once the board's next period publishes it, the stream brings the new turnout.
  await page.waitForFunction((n) => Number(document.getElementById("summary").dataset.ballots) === n, before + 1, { timeout: BOARD_WAIT_MS_MAX });
  await onBoard(district, cast.tracker);
  const turnout = ((100 * (before + 1)) / onRoll).toFixed(1);
  await page.waitForFunction((t) => document.getElementById("turnout").dataset.turnout === t, turnout);
  assert.match(await page.textContent("#turnout"), new RegExp(`Turnout: ${turnout}% \\(${before + 1} of ${onRoll} voters on the roll\\)`));
  assert.equal(await page.evaluate(() => window.__notReloaded), true, "the page was not reloaded");
  assert.match(await summary.textContent(), /ballots? counted/);
  // Sealed ballots: no party or candidate figure until the trustees' results are published.
  assert.equal(await page.getAttribute("body", "data-results-shown"), "false");
  assert.equal(await page.isVisible("#hidden-note"), true);
  assert.equal(await page.locator("#tally li").count(), 0);
  assert.equal(await page.locator(`#party-${party.partyId}-votes`).count(), 0);

  // A vote in another district does not move this district's figures; the whole election's do.
  await page.selectOption("#district", "");
  await page.waitForFunction(() => document.getElementById("summary").textContent.includes("all districts"));
  const allBefore = Number(await summary.getAttribute("data-ballots"));
  const elsewhere = await demoVoter(ids[0]);
  assert.equal((await voteByApi(elsewhere, b.parties[0].partyId, [])).status, 201);
  await page.waitForFunction((n) => Number(document.getElementById("summary").dataset.ballots) === n, allBefore + 1, { timeout: BOARD_WAIT_MS_MAX });
  assert.equal(await page.locator("#tally li").count(), 0);
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

test("find it on the board opens a page with a human answer: on the board, not yet, not a tracker", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await withShot(t, page, async () => {
    await openVoting(page);
    await page.click("#demo-voter");
    await page.waitForFunction(() => document.getElementById("voter-id").value !== "");
    const district = await page.inputValue("#district");
    await partyRadios(page).nth(0).check();
    await page.click("#vote");
    const { res, sent } = await confirmVote(page);
    assert.equal(res.status(), 201);
    await page.locator("#receipt").waitFor({ state: "visible" });
    const tracker = (await page.textContent("#receipt-id")).trim();
    assert.equal(tracker, trackerOf(sent.sealed));
    assert.match(await page.getAttribute("#receipt-link", "href"), /^\/voting\/receipt\?/, "a page, not the API");

    await page.click("#receipt-link");
    await page.waitForURL(/\/voting\/receipt\?/);
    const params = new URL(page.url()).searchParams;
    assert.deepEqual([params.get("electionId"), params.get("districtId"), params.get("tracker")], [String(ELECTION), district, tracker]);
    assert.equal(await page.inputValue("#receipt-id"), tracker);
    // The districts come with the election's answer, after the page loaded.
    await page.waitForFunction((d) => document.getElementById("district").value === d, district);
    // The board publishes every second here: on it within a bounded wait.
    await findUntilCounted(page);
    const answer = page.locator("#answer");
    const text = await answer.textContent();
    assert.match(text, /On the board/);
    assert.match(text, /published it in period \d+/);
    assert.match(text, /not how you voted/);
    assert.doesNotMatch(text, /[{}"]|tracker_|true|false/, "words, not JSON");
    assert.match(await page.textContent("#board-text"), /\d+ ballots? on the board/);
    assert.match(await page.textContent("#board-digest"), /^[0-9a-f]{64}$/i);

    // A well-formed tracker no ballot has: not on the board yet, and when to look again.
    const unknown = trackerOf(Buffer.alloc(80, 7).toString("base64url"));
    await page.fill("#receipt-id", unknown);
    await page.click("#check-button");
    await page.waitForFunction(() => document.getElementById("answer").dataset.state === "waiting");
    assert.match(await answer.textContent(), /Not on the board yet/);
    assert.match(await answer.textContent(), /adds new ballots every 1 s/);
    assert.match(await answer.textContent(), /look again in a moment/);

    // Garbage: not a tracker, and what one looks like.
    await page.fill("#receipt-id", "00000000-0000-4000-8000-000000000000");
    await page.click("#check-button");
    await page.waitForFunction(() => document.getElementById("answer").dataset.state === "not_found");
    assert.match(await answer.textContent(), /Not a tracker/);
    assert.match(await answer.textContent(), /43 characters/);

    // Nothing typed: asks for the tracker.
    await page.fill("#receipt-id", " ");
    await page.evaluate(() => document.getElementById("check").requestSubmit());
    await page.waitForFunction(() => document.getElementById("answer").dataset.state === "invalid");
    assert.match(await answer.textContent(), /Enter your tracker/);
    assert.deepEqual(unexpected(unexpected(errors, 404), 400), []);
  });
});

test("a tracker from the address that is not on the board says not yet, and why", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await withShot(t, page, async () => {
    const district = (await districtIds())[1];
    const period = (await (await api(`/elections/${ELECTION}`)).json()).boardPeriodMs;
    assert.equal(period, 1000, "--demo: the board publishes every second");
    const unknown = trackerOf(Buffer.alloc(81, 9).toString("base64url"));
    await page.goto(`${session.server.url}/voting/receipt?electionId=${ELECTION}&districtId=${district}&tracker=${unknown}`);
    await page.waitForFunction(() => document.getElementById("answer").dataset.state === "waiting");
    const text = await page.textContent("#answer");
    assert.match(text, /Not on the board yet/);
    assert.match(text, new RegExp(`not on the board of ${(await (await api(`/elections/${ELECTION}`)).json()).districts.find((d) => String(d.districtId) === String(district)).name}`));
    assert.match(text, /The board adds new ballots every 1 s; look again in a moment/, "says why and when to look again");
    assert.match(text, /check the district and that the whole tracker was copied/);
    assert.deepEqual(unexpected(errors, 404), []);
  });
});

test("the results show turnout of the ballots on the board, the last update, and no party figure before publication", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await withShot(t, page, async () => {
    const ids = await districtIds();
    const district = ids[1];
    const voter = await demoVoter(district);
    const b = await ballot(district);
    const cast = await voteByApi(voter, b.parties[0].partyId, []);
    assert.equal(cast.status, 201);
    await onBoard(district, cast.tracker);
    // `ballots` is the board's count, as the results' worker last read it (a moment after the board).
    let expected;
    let onTheBoard;
    for (const until = Date.now() + BOARD_WAIT_MS_MAX; ; ) {
      expected = await (await api(`/elections/${ELECTION}/results?districtId=${district}`)).json();
      const board = await (await api(`/elections/${ELECTION}/board`)).json();
      onTheBoard = board.districts.find((d) => d.districtId === district).ballots;
      if ((expected.ballots >= 1 && expected.ballots === onTheBoard) || Date.now() > until) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(expected.ballots, onTheBoard, "the results' ballots are the board's");
    assert.ok(expected.votersOnRoll > 0 && expected.updatedAt && expected.ballots >= 1, JSON.stringify(expected));
    assert.equal(expected.resultsShown, false);
    assert.deepEqual(expected.parties, [], "no party figure in the API before publication");

    await page.goto(`${session.server.url}/voting/results?electionId=${ELECTION}&districtId=${district}`);
    await page.waitForFunction(() => document.getElementById("conn").dataset.state === "live");
    await page.waitForFunction(() => document.getElementById("turnout").dataset.turnout);
    const counted = Number(await page.getAttribute("#summary", "data-ballots"));
    assert.ok(counted >= expected.ballots);
    const turnout = (100 * counted) / expected.votersOnRoll;
    assert.equal(await page.getAttribute("#turnout", "data-turnout"), turnout.toFixed(1));
    assert.match(await page.textContent("#turnout"), new RegExp(`Turnout: ${turnout.toFixed(1)}% \\(${counted} of ${expected.votersOnRoll} voters on the roll\\)`));
    assert.match(await page.textContent("#updated"), /^Last update: /);
    assert.ok(await page.getAttribute("#updated", "data-updated-at"));
    assert.equal(await page.getAttribute("body", "data-results-shown"), "false");
    assert.equal(await page.isVisible("#hidden-note"), true);
    assert.match(await page.textContent("#hidden-note"), /once the election authority publishes them/);
    assert.equal(await page.locator("#tally li").count(), 0);
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
    await page.goto(`${session.server.url}/voting/receipt?electionId=${ELECTION}&districtId=${(await districtIds())[0]}&tracker=not-a-tracker`);
    await page.waitForFunction(() => document.getElementById("answer").dataset.state === "not_found");
    assert.ok((await overflowX(page)) <= 0, `/voting/receipt overflows by ${await overflowX(page)} px`);
    assert.deepEqual(unexpected(errors, 400), []);
  });
});

for (const [label, viewport] of [["desktop", DESKTOP], ["390 px phone", PHONE]]) {
  test(`${label}: the vote page seals the ballot, shows its tracker and finds it on the board`, { timeout: TEST_MS_MAX }, async (t) => {
    const { page, errors } = await newPage(t);
    await page.setViewportSize(viewport);
    await withShot(t, page, async () => {
      await openVoting(page);
      await page.click("#demo-voter");
      await page.waitForFunction(() => document.getElementById("voter-id").value !== "");
      const district = await page.inputValue("#district");
      await partyRadios(page).nth(2).check();
      await candidateBoxes(page).nth(0).check();
      await candidateBoxes(page).nth(3).check();
      await page.click("#vote");
      await page.locator("#review").waitFor({ state: "visible" });
      const { res, sent } = await confirmVote(page);
      assert.equal(res.status(), 201);
      // Encrypted here: the body holds the sealed ballot and no choice.
      assert.deepEqual(Object.keys(sent), ["sealed"]);
      assert.match(sent.sealed, SEALED);
      assert.equal(sent.partyId, undefined);
      assert.equal(sent.candidateIds, undefined);

      await page.locator("#receipt").waitFor({ state: "visible" });
      const tracker = (await page.textContent("#receipt-id")).trim();
      assert.match(tracker, TRACKER);
      assert.equal(tracker, trackerOf(sent.sealed), "the tracker is SHA-256 of the sealed bytes sent");
      assert.equal((await res.json()).tracker, tracker);
      await page.locator("#receipt-id").scrollIntoViewIfNeeded();
      assert.ok(await page.locator("#receipt-id").isVisible());
      const sealMs = await page.evaluate(() => document.body.dataset.sealMs);
      assert.match(sealMs, /^\d+(\.\d+)?$/);
      console.log(`FIGURE voting seal ms: ${sealMs} (${label})`);
      if (viewport === PHONE) assert.ok((await overflowX(page)) <= 0, `the tracker overflows by ${await overflowX(page)} px`);

      await page.click("#receipt-link");
      await page.waitForURL(/\/voting\/receipt\?/);
      assert.equal(new URL(page.url()).searchParams.get("districtId"), district);
      await findUntilCounted(page);
      assert.match(await page.textContent("#answer"), /On the board/);
      if (viewport === PHONE) assert.ok((await overflowX(page)) <= 0, `/voting/receipt overflows by ${await overflowX(page)} px`);
      assert.deepEqual(unexpected(errors, 404), []);
    });
  });
}
