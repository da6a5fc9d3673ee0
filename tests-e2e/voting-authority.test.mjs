// An election authority's election through the pages, in headless Chromium
// against a real throng server: /voting/admin drafts the shipped definition,
// imports the shipped roll and hands out the credentials, gives the public
// key of the trustees' ceremony (`throng voting keygen`, 2 of 3; opening
// without it is refused), opens the election; a voter signs in on /voting/
// with a voter id and credential, reviews the choice and confirms it, and
// the page seals it; the results show turnout by district and no party
// figure; the authority closes, downloads the box, the trustees open it with
// `throng voting open` and two shares, the authority imports their results
// and publishes, and the results page shows the parties' figures in their
// colours. Also: a server error reads as one (not "cannot reach the server"),
// local dates carry no seconds, and a 390 px phone scrolls none of these
// pages sideways.

import { test } from "node:test";
import assert from "node:assert/strict";

import { createHash } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { REPO_ROOT, binPath, fetchWithin, removeDir, run, sharedSession, tempDir, watchErrors } from "./lib/server.mjs";

const TEST_MS_MAX = 90_000;
const API = "/api/voting";
const PHONE = { width: 390, height: 844 };

const session = sharedSession({ extraArgs: ["--voting-mix-ballots-min", "1", "--voting-mix-interval-ms", "50"] });
const newPage = session.newPage;
const overflowX = (page) => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
const unexpected = (errors, ...statuses) => errors.filter((e) => !statuses.some((s) => e.includes(`status of ${s}`)));

async function adminToken(sub = "registrar") {
  const out = await run(binPath("throng"), ["token", "--sub", sub, "--role", "admin", "--data-dir", session.server.dataDir]);
  assert.equal(out.code, 0, out.stderr);
  return out.stdout.trim();
}

/** The shipped definition, open from an hour ago for two more hours, as a file to upload. */
function definitionFile(name) {
  const d = JSON.parse(readFileSync(join(REPO_ROOT, "examples/voting/election.json"), "utf8"));
  d.name = name;
  d.opensAt = new Date(Date.now() - 3_600_000).toISOString();
  d.closesAt = new Date(Date.now() + 2 * 3_600_000).toISOString();
  return { name: "election.json", mimeType: "application/json", buffer: Buffer.from(JSON.stringify(d)) };
}

const rollFile = () => ({
  name: "roll.csv",
  mimeType: "text/csv",
  buffer: readFileSync(join(REPO_ROOT, "examples/voting/roll.csv")),
});

/**
 * The trustees' key ceremony with the harness's own binary: 2 of 3 shares.
 * Returns the folder (removed after `t`) and its files.
 */
async function keygen(t) {
  const dir = tempDir("ceremony");
  t.after(() => removeDir(dir));
  // keygen wants a new or empty folder of its own.
  const out = join(dir, "keys");
  const r = await run(binPath("throng"), ["voting", "keygen", "--threshold", "2", "--trustees", "3", "--out", out]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(readdirSync(out).sort(), ["election-key.json", "share-1-of-3.json", "share-2-of-3.json", "share-3-of-3.json"]);
  return { dir, key: join(out, "election-key.json"), shares: [1, 2, 3].map((i) => join(out, `share-${i}-of-3.json`)) };
}

// The log of the whole path, in order.
const EXPECTED_LOG = [
  "voting.ElectionDrafted",
  "voting.RollImported",
  "voting.ElectionKeySet",
  "voting.ElectionOpened",
  "voting.ElectionClosed",
  "voting.ElectionTallied",
  "voting.ResultsPublished",
];

const jsonFile = (path, name) => ({ name, mimeType: "application/json", buffer: readFileSync(path) });

/**
 * Drafts, imports, gives the key of a fresh ceremony and opens an election
 * through /voting/admin; its id, credentials and the ceremony's files.
 * `keyFirst`: try to open before the key is given (refused, key_missing).
 */
async function setUp(t, page, name, { keyFirst = false } = {}) {
  const ceremony = await keygen(t);
  await page.goto(`${session.server.url}/voting/admin`);
  await page.fill("#admin-token", await adminToken());
  await page.setInputFiles("#definition-file", definitionFile(name));
  await page.click("#create");
  await page.waitForFunction(() => /Drafted election \d+/.test(document.getElementById("status").textContent));
  const id = (await page.textContent("#status")).match(/Drafted election (\d+)/)[1];
  assert.equal(await page.inputValue("#election"), id);
  await page.waitForFunction(() => document.getElementById("election-state").dataset.state === "draft");
  await page.setInputFiles("#roll-file", rollFile());
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    (async () => {
      await page.click("#import");
      await page.locator("#credentials-box").waitFor({ state: "visible" });
      await page.click("#credentials-link");
    })(),
  ]);
  const path = await download.path();
  const credentials = Object.fromEntries(
    readFileSync(path, "utf8").trim().split("\n").slice(1).map((l) => l.split(",")),
  );
  assert.equal(Object.keys(credentials).length, 40);
  assert.equal(await page.getAttribute("#election-state", "data-voters"), "40");
  assert.equal(await page.getAttribute("#election-state", "data-has-key"), "false");
  if (keyFirst) {
    // No key, no opening: ballots could not be sealed.
    assert.match(await page.textContent("#election-state"), /No public key yet/);
    await page.click('#steps button[data-step="open"]');
    await page.waitForFunction(() => document.getElementById("status").dataset.code === "key_missing");
    assert.equal(await page.getAttribute("#election-state", "data-state"), "draft");
  }
  await page.setInputFiles("#key-file", jsonFile(ceremony.key, "election-key.json"));
  await page.click("#set-key");
  await page.waitForFunction(() => document.getElementById("election-state").dataset.hasKey === "true");
  assert.match(await page.textContent("#status"), /The key is set/);
  // The ballot now names the key to seal to: the ceremony's.
  const key = JSON.parse(readFileSync(ceremony.key, "utf8"));
  const b = await (await fetchWithin(`${session.server.url}${API}/elections/${id}/districts/1/ballot`)).json();
  assert.ok(b.sealTo && b.sealTo.publicKey, JSON.stringify(b.sealTo));
  assert.ok(JSON.stringify(key).includes(b.sealTo.publicKey), "the ballot seals to the key given");
  await page.click('#steps button[data-step="open"]');
  await page.waitForFunction(() => document.getElementById("election-state").dataset.state === "open");
  return { id, credentials, ceremony };
}

test("an authority runs its election: key, open, a sealed vote, close, the trustees open the box, import and publish", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  const { id, credentials, ceremony } = await setUp(t, page, "Riverside council", { keyFirst: true });
  assert.equal(await page.isDisabled('#steps button[data-step="publish"]'), true, "publish waits for the trustees' results");

  // The voter: sign in with the roll's id and credential.
  const voter = await session.browser.context.newPage();
  const voterErrors = watchErrors(voter);
  t.after(() => voter.close());
  await voter.goto(`${session.server.url}/voting/?electionId=${id}`);
  await voter.locator('#parties input[name="party"]').first().waitFor({ state: "attached" });
  const info = await voter.textContent("#election-info");
  assert.match(info, /^Open: from /);
  assert.doesNotMatch(info, /\d{1,2}:\d{2}:\d{2}/, "local times without seconds");
  await voter.fill("#login-voter", "RV-00002");
  await voter.fill("#login-credential", "WRON-GWRO-NGWRO");
  await voter.click("#login-button");
  await voter.locator("#status.error").waitFor();
  assert.equal(await voter.getAttribute("#status", "data-code"), "invalid_credentials");
  await voter.fill("#login-credential", credentials["RV-00002"].toLowerCase());
  await voter.click("#login-button");
  await voter.locator("#signed-in").waitFor({ state: "visible" });
  assert.match(await voter.textContent("#signed-in"), /RV-00002, district South/);
  assert.equal(await voter.inputValue("#district"), "2", "the voter's own district's ballot");
  // Civic Alliance, Zuzana Polak: reviewed before anything is sent.
  let posts = 0;
  const sentCount = () => posts;
  voter.on("request", (r) => {
    if (r.url().endsWith(`${API}/elections/${id}/votes`)) posts++;
  });
  await voter.locator('#parties input[name="party"]').nth(1).check();
  await voter.locator('#candidates input[name="candidate"]').nth(0).check();
  await voter.click("#vote");
  await voter.locator("#review").waitFor({ state: "visible" });
  assert.equal(await voter.textContent("#review-party"), "Civic Alliance (CA)");
  assert.equal(await voter.textContent("#review-candidates"), "Zuzana Polak");
  assert.equal(await voter.textContent("#review-district"), "South");
  assert.equal(sentCount(), 0, "nothing is cast before the confirmation");
  await voter.click("#change");
  await voter.locator("#vote-form").waitFor({ state: "visible" });
  await voter.click("#vote");
  const answer = voter.waitForResponse((r) => r.url().endsWith(`${API}/elections/${id}/votes`));
  await voter.click("#confirm");
  const res = await answer;
  assert.equal(res.status(), 201);
  const sent = JSON.parse(res.request().postData());
  assert.deepEqual(Object.keys(sent), ["sealed"], "sealed in the browser: nothing of the choice is sent");
  assert.match(sent.sealed, /^[A-Za-z0-9_-]{107,108}$/);
  await voter.locator("#receipt").waitFor({ state: "visible" });
  const tracker = (await voter.textContent("#receipt-id")).trim();
  assert.equal(tracker, createHash("sha256").update(Buffer.from(sent.sealed, "base64url")).digest("base64url"));
  assert.equal(sentCount(), 1);

  // Results while open: turnout by district (the board's ballots), no party figure.
  const results = await session.browser.context.newPage();
  const resultsErrors = watchErrors(results);
  t.after(() => results.close());
  await results.goto(`${session.server.url}/voting/results?electionId=${id}`);
  await results.waitForFunction(() => document.getElementById("summary").dataset.ballots === "1");
  assert.equal(await results.getAttribute("body", "data-results-shown"), "false");
  assert.equal(await results.isVisible("#hidden-note"), true);
  assert.equal(await results.locator("#tally li").count(), 0);
  assert.match(await results.textContent("#reporting"), /^1 of 2 districts reporting/);
  assert.equal(await results.locator("#districts tr").count(), 2);
  assert.match(await results.textContent('#districts tr[data-district-id="2"]'), /South\s*1\s*20\s*5\.0%/);

  // Close: no tally on the server, which cannot read a ballot; publish waits for the trustees' results.
  await page.click('#steps button[data-step="close"]');
  await page.waitForFunction(() => document.getElementById("election-state").dataset.state === "closed");
  assert.equal(await page.isDisabled('#steps button[data-step="publish"]'), true, "publish waits for the trustees' results");
  assert.equal(await results.locator("#tally li").count(), 0);

  // The box: downloaded from the page, holding the one sealed ballot sent.
  await page.click("#export-box");
  await page.locator("#box-link").waitFor({ state: "visible" });
  assert.equal(await page.getAttribute("#box-link", "data-ballots"), "1");
  const [boxDownload] = await Promise.all([page.waitForEvent("download"), page.click("#box-link")]);
  const boxPath = join(ceremony.dir, "box.json");
  await boxDownload.saveAs(boxPath);
  const box = JSON.parse(readFileSync(boxPath, "utf8"));
  assert.deepEqual(box.districts.flatMap((d) => d.ballots.map((b) => b.sealed)), [sent.sealed]);
  assert.match(await page.textContent("#status"), new RegExp(`digest ${box.digest}`));

  // The trustees open it away from the server: 2 of the 3 shares.
  const resultsPath = join(ceremony.dir, "results.json");
  const opened = await run(binPath("throng"), [
    "voting", "open", "--box", boxPath, "--share", ceremony.shares[0], "--share", ceremony.shares[2], "--out", resultsPath,
  ]);
  assert.equal(opened.code, 0, `${opened.stdout}\n${opened.stderr}`);

  // Imported (tallied), checked, published: the results page shows the parties.
  await page.setInputFiles("#results-file", jsonFile(resultsPath, "results.json"));
  await page.click("#import-results");
  await page.waitForFunction(() => document.getElementById("election-state").dataset.state === "tallied");
  assert.match(await page.textContent("#status"), /The results are imported/);
  assert.equal(await page.isDisabled('#steps button[data-step="publish"]'), false);
  await page.click('#steps button[data-step="publish"]');
  await page.waitForFunction(() => document.getElementById("election-state").dataset.state === "published");
  await results.waitForFunction(() => document.body.dataset.resultsShown === "true", null, { timeout: 15_000 });
  assert.equal(await results.isVisible("#hidden-note"), false);
  assert.equal(await results.locator("#tally > li").count(), 3);
  // Civic Alliance's one vote, from the sealed ballot the trustees opened.
  assert.equal(await results.getAttribute("#tally > li:first-child", "data-party-id"), "2");
  assert.equal(await results.getAttribute("#party-2-votes", "data-votes"), "1");
  for (const other of ["1", "3"]) assert.equal(await results.getAttribute(`#party-${other}-votes`, "data-votes"), "0");
  // Each party's bar in its colour from the API, and the colours differ.
  const api = await (await fetchWithin(`${session.server.url}${API}/elections/${id}/results`)).json();
  assert.equal(api.resultsShown, true);
  const colors = new Set();
  for (const p of api.parties) {
    const bg = await results.locator(`#tally > li[data-party-id="${p.partyId}"] > .bar > span`).evaluate((e) => e.style.background || e.style.backgroundColor);
    const hex = p.color.match(/[0-9a-f]{2}/gi).map((h) => parseInt(h, 16));
    assert.equal(bg, `rgb(${hex.join(", ")})`, `party ${p.partyId}`);
    colors.add(p.color);
  }
  assert.equal(colors.size, api.parties.length);
  await page.click("#reload");
  await page.waitForFunction(() => document.querySelectorAll("#admin-log li").length >= 7);
  const log = await page.$$eval("#admin-log li", (lis) => lis.map((l) => l.dataset.eventType));
  assert.deepEqual(log, EXPECTED_LOG);
  assert.match(await page.textContent("#admin-log"), /Opened by registrar/);
  assert.deepEqual(unexpected(errors, 409), []);
  assert.deepEqual(unexpected(voterErrors, 401), []);
  assert.deepEqual(resultsErrors, []);
});

test("a definition with problems lists them; a server error reads as one", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await page.goto(`${session.server.url}/voting/admin`);
  await page.fill("#admin-token", await adminToken());
  const d = JSON.parse(readFileSync(join(REPO_ROOT, "examples/voting/election.json"), "utf8"));
  d.parties[0].colour = "green";
  d.districts[1].code = "N";
  await page.setInputFiles("#definition-file", { name: "bad.json", mimeType: "application/json", buffer: Buffer.from(JSON.stringify(d)) });
  await page.click("#create");
  await page.locator("#status.error").waitFor();
  assert.equal(await page.getAttribute("#status", "data-code"), "invalid_definition");
  const text = await page.textContent("#status");
  assert.match(text, /parties\[0\]\.colour: /);
  assert.match(text, /districts\[1\]\.code: /);

  // A 500 (from the network, as a broken server would answer): a server error, not "cannot reach".
  await page.route(`**${API}/elections`, (route) =>
    route.request().method() === "POST"
      ? route.fulfill({ status: 500, contentType: "application/json", body: JSON.stringify({ error: { code: "internal", message: "internal error; it was logged" } }) })
      : route.continue(),
  );
  await page.setInputFiles("#definition-file", definitionFile("Any"));
  await page.click("#create");
  await page.waitForFunction(() => document.getElementById("status").dataset.code === "internal");
  const msg = await page.textContent("#status");
  assert.match(msg, /server had an error/i);
  assert.doesNotMatch(msg, /Cannot reach/);
  await page.unroute(`**${API}/elections`);

  // The vote page too.
  const voter = await session.browser.context.newPage();
  t.after(() => voter.close());
  await voter.goto(`${session.server.url}/voting/`);
  await voter.locator('#parties input[name="party"]').first().waitFor({ state: "attached" });
  await voter.route(`**${API}/elections/*/login`, (route) =>
    route.fulfill({ status: 500, contentType: "text/html", body: "<h1>Internal Server Error</h1>" }),
  );
  await voter.fill("#login-voter", "A");
  await voter.fill("#login-credential", "B");
  await voter.click("#login-button");
  await voter.locator("#status.error").waitFor();
  assert.equal(await voter.getAttribute("#status", "data-code"), "http_500");
  assert.match(await voter.textContent("#status"), /server had an error/i);
  assert.deepEqual(unexpected(errors, 422, 500), []);
});

test("a 390 px phone scrolls neither the authority's page nor the vote's review sideways", { timeout: TEST_MS_MAX }, async (t) => {
  const { page } = await newPage(t);
  await page.setViewportSize(PHONE);
  const { id, credentials } = await setUp(t, page, "A district council with a rather long name, as councils have");
  assert.ok((await overflowX(page)) <= 0, `/voting/admin overflows by ${await overflowX(page)} px`);
  await page.goto(`${session.server.url}/voting/?electionId=${id}`);
  await page.locator('#parties input[name="party"]').first().waitFor({ state: "attached" });
  await page.fill("#login-voter", "RV-00001");
  await page.fill("#login-credential", credentials["RV-00001"]);
  await page.click("#login-button");
  await page.locator("#signed-in").waitFor({ state: "visible" });
  await page.locator('#parties input[name="party"]').nth(0).check();
  await page.click("#vote");
  await page.locator("#review").waitFor({ state: "visible" });
  assert.ok((await overflowX(page)) <= 0, `the review overflows by ${await overflowX(page)} px`);
  await page.goto(`${session.server.url}/voting/results?electionId=${id}`);
  await page.waitForFunction(() => document.getElementById("reporting").dataset.reporting !== undefined);
  assert.ok((await overflowX(page)) <= 0, `/voting/results overflows by ${await overflowX(page)} px`);
  const res = await fetchWithin(`${session.server.url}${API}/elections/${id}`);
  assert.equal(res.status, 200);
});
