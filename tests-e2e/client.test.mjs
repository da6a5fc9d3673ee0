// The pages' shared client (crates/throng-platform/src/platform/assets/throng.js),
// run in Node against scripted answers: a 429/503 is retried after the wait
// its Retry-After asks for (seconds or a date, capped, at least a second),
// a bounded number of times; answers decode to JSON; the error envelope, or
// its absence, becomes one sentence for people; limits set maxLength.
// No server and no browser: waits are recorded, not slept.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import vm from "node:vm";

const SOURCE = readFileSync(
  fileURLToPath(new URL("../crates/throng-platform/src/platform/assets/throng.js", import.meta.url)),
  "utf8",
);

/** The client in a fresh context whose fetch answers from `answers` in order. */
function load(answers, { nowMs = Date.UTC(2030, 0, 1) } = {}) {
  const requests = [];
  const waitsMs = [];
  const context = {
    fetch: async (url, init) => {
      requests.push({ url, init });
      const next = answers.shift();
      assert.ok(next, `no answer scripted for request ${requests.length}`);
      return next();
    },
    setTimeout: (f, ms) => {
      waitsMs.push(ms);
      queueMicrotask(f);
    },
  };
  vm.createContext(context);
  vm.runInContext(`${SOURCE}\nglobalThis.Throng = Throng;`, context);
  // The context's clock, for Retry-After dates.
  vm.runInContext(`Date.now = () => ${nowMs};`, context);
  return { Throng: context.Throng, requests, waitsMs };
}

const answer = (status, body, headers = {}) => () =>
  new Response(body === undefined ? null : typeof body === "string" ? body : JSON.stringify(body), { status, headers });
const envelope = (code, message) => ({ error: { code, message } });

test("a 429 is retried after its Retry-After plus jitter, and the person is told", async () => {
  const { Throng, requests, waitsMs } = load([
    answer(429, envelope("too_many_requests", "over capacity"), { "Retry-After": "3" }),
    answer(200, { ok: true }),
  ]);
  const told = [];
  const res = await Throng.client({ onWait: (w) => told.push(w) }).fetch("/api/x", { method: "POST", body: "{}" });
  assert.equal(res.status, 200);
  assert.equal(requests.length, 2);
  assert.equal(requests[1].init.body, "{}", "the retry sends the same request");
  assert.equal(waitsMs.length, 1);
  assert.ok(waitsMs[0] >= 3000 && waitsMs[0] < 3000 + Throng.RETRY_POLICY.jitterMsMax, `waited ${waitsMs[0]} ms`);
  assert.equal(told.length, 1);
  assert.equal(told[0].attempt, 2);
  assert.equal(told[0].waitMs, waitsMs[0]);
});

test("retries are bounded: the last refusal is returned", async () => {
  const retriesMax = 4;
  const { Throng, requests, waitsMs } = load(
    Array.from({ length: retriesMax + 1 }, () => answer(503, envelope("store_unavailable", "busy"), { "Retry-After": "1" })),
  );
  const res = await Throng.client({ retriesMax, jitterMsMax: 0 }).fetch("/api/x");
  assert.equal(res.status, 503);
  assert.equal(requests.length, retriesMax + 1);
  assert.deepEqual(waitsMs, Array(retriesMax).fill(1000));
  assert.equal(Throng.RETRY_POLICY.retriesMax, 20, "the pages' default");
});

test("retriesMax 0 asks once; other failures are never retried", async () => {
  for (const status of [429, 500, 404]) {
    const { Throng, requests } = load([answer(status, envelope("x", "y"), { "Retry-After": "1" })]);
    const res = await Throng.client({ retriesMax: status === 429 ? 0 : 20 }).fetch("/api/x");
    assert.equal(res.status, status);
    assert.equal(requests.length, 1, `status ${status}`);
  }
});

test("Retry-After as a date, too long, missing or zero", async () => {
  const nowMs = Date.UTC(2030, 0, 1, 12, 0, 0);
  const at = (s) => new Date(nowMs + s * 1000).toUTCString();
  const cases = [
    [{ "Retry-After": at(7) }, 7000],
    [{ "Retry-After": "3600" }, 60_000], // capped at retryAfterSMax
    [{ "Retry-After": at(3600) }, 60_000],
    [{}, 1000],
    [{ "Retry-After": "0" }, 1000],
    [{ "Retry-After": "soon" }, 1000],
    [{ "Retry-After": at(-30) }, 1000],
  ];
  for (const [headers, expectMs] of cases) {
    const { Throng, waitsMs } = load([answer(429, undefined, headers), answer(204)], { nowMs });
    await Throng.client({ jitterMsMax: 0 }).fetch("/api/x");
    assert.deepEqual(waitsMs, [expectMs], JSON.stringify(headers));
  }
});

test("the error envelope, or its absence, becomes one sentence for people", async () => {
  const { Throng } = load([]);
  const e = (status, body, sentences) => Throng.errorFromBody(status, body, sentences);
  assert.deepEqual({ ...e(422, envelope("invalid_field", "person.phone: 6 to 15 digits")) },
    { status: 422, code: "invalid_field", message: "person.phone: 6 to 15 digits" });
  assert.deepEqual({ ...e(500, null) },
    { status: 500, code: "http_500", message: "The server answered 500; try again in a moment." });
  assert.equal(e(502, { error: "bad gateway" }).code, "http_502", "not an envelope");
  for (const status of [429, 503]) {
    const busy = e(status, envelope("too_many_requests", "over capacity; retry later"));
    assert.equal(busy.code, "too_many_requests");
    assert.equal(busy.message, Throng.BUSY);
  }
  const sentences = { already_voted: () => "Already voted.", invalid_field: (m) => `Not valid: ${m}`, http_401: () => "Token." };
  assert.equal(e(409, envelope("already_voted", "x"), sentences).message, "Already voted.");
  assert.equal(e(422, envelope("invalid_field", "partyId"), sentences).message, "Not valid: partyId");
  assert.equal(e(401, null, sentences).message, "Token.");
  assert.equal(e(404, envelope("toString", "no such thing"), sentences).message, "no such thing", "own keys only");
});

test("getJson decodes a success and throws an ApiError for a failure", async () => {
  const { Throng, requests } = load([
    answer(200, { elections: [1] }),
    answer(404, envelope("election_not_found", "no election 9")),
    answer(500, "<html>proxy error</html>", { "Content-Type": "text/html" }),
  ]);
  const api = Throng.client({ sentences: { election_not_found: () => "This election does not exist." } });
  assert.deepEqual({ ...(await api.getJson("/a", { headers: { Accept: "application/json" } })) }, { elections: [1] });
  assert.deepEqual(requests[0].init, { headers: { Accept: "application/json" } });
  await assert.rejects(api.getJson("/b"), (err) => {
    assert.ok(err instanceof Throng.ApiError);
    assert.equal(err.status, 404);
    assert.equal(err.code, "election_not_found");
    assert.equal(err.message, "This election does not exist.");
    return true;
  });
  await assert.rejects(api.getJson("/c"), (err) => err.code === "http_500" && /answered 500/.test(err.message));
});

test("readJson is null for an empty or non-JSON body", async () => {
  const { Throng } = load([]);
  assert.equal(await Throng.readJson(new Response(null, { status: 204 })), null);
  assert.equal(await Throng.readJson(new Response("<html>")), null);
  assert.deepEqual({ ...(await Throng.readJson(new Response('{"a":1}'))) }, { a: 1 });
});

test("applyMaxLengths sets each field's bound by name and refuses an unknown name", async () => {
  const { Throng } = load([]);
  const field = (key) => ({ dataset: { maxlength: key }, maxLength: -1 });
  const name = field("nameCharsMax");
  const root = (fields) => ({ querySelectorAll: (sel) => (assert.equal(sel, "[data-maxlength]"), fields) });
  Throng.applyMaxLengths({ nameCharsMax: 200 }, root([name]));
  assert.equal(name.maxLength, 200);
  assert.throws(() => Throng.applyMaxLengths({ nameCharsMax: 200 }, root([field("nameCharMax")])), /no limit named nameCharMax/);
});
