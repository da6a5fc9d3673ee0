// The pages' client, served at /assets/throng.js (and bundled into scripts
// that other sites embed): fetch that waits out an overloaded server as it
// asks (429/503 + Retry-After), JSON decoding, and the error envelope
// {"error":{"code","message"}} turned into a sentence for people.
"use strict";

const Throng = (() => {
  // Under a crowd the server refuses early and says when to come back; a
  // page waits that long plus random jitter (so a crowd refused together
  // does not come back in one wave), then tries again.
  const RETRY_POLICY = Object.freeze({
    retriesMax: 20,
    // A longer Retry-After is waited this long: a person is watching.
    retryAfterSMax: 60,
    jitterMsMax: 1000,
    // Called before each wait with { waitMs, attempt } (the attempt to come,
    // counting from 1), to tell the person why nothing happens yet.
    onWait: null,
  });
  const RETRY_STATUSES = new Set([429, 503]);
  const UNREACHABLE = "Cannot reach the server; check your connection and try again.";
  const BUSY = "The server is too busy right now. Please try again in a minute.";

  // The page's own words from its language catalogue (I18n,
  // /assets/i18n.js) when it has them, else `fallback`.
  function words(key, params, fallback) {
    return typeof I18n !== "undefined" && I18n.has(key) ? I18n.t(key, params) : fallback;
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  // The wait an answer asks for: Retry-After in seconds or as an HTTP date;
  // at least a second, so a missing or zero value never retries at once.
  function retryAfterS(res, nowMs) {
    const value = (res.headers.get("Retry-After") || "").trim();
    let s = 0;
    if (/^[0-9]+$/.test(value)) s = Number(value);
    else if (value) {
      const at = Date.parse(value);
      if (!Number.isNaN(at)) s = Math.ceil((at - nowMs) / 1000);
    }
    return Math.max(1, s);
  }

  // The header that marks a request as made by this server's own pages:
  // the server refuses a change made with the console's session cookie
  // without it (a form on another site cannot send it). Set on requests
  // to the page's own origin only (an embedded widget's cross-site calls
  // carry a bearer token instead).
  const REQUEST_HEADER = "X-Throng-Request";

  function sameOrigin(url) {
    try {
      return typeof location !== "undefined" && new URL(url, location.href).origin === location.origin;
    } catch (_) {
      return false;
    }
  }

  function marked(url, init) {
    if (!sameOrigin(url)) return init;
    const headers = new Headers((init && init.headers) || {});
    headers.set(REQUEST_HEADER, "1");
    return { ...(init || {}), headers, credentials: "same-origin" };
  }

  // fetch that retries a 429 or 503 after the wait it asks for, at most
  // policy.retriesMax times; the last answer is returned whatever it is.
  // Only requests whose body can be sent again (a string, not a stream).
  async function politeFetch(url, init, policy) {
    const p = { ...RETRY_POLICY, ...policy };
    init = marked(url, init);
    for (let attempt = 1; ; attempt++) {
      const res = await fetch(url, init);
      if (!RETRY_STATUSES.has(res.status) || attempt > p.retriesMax) return res;
      if (res.body) res.body.cancel().catch(() => {});
      const waitMs = Math.min(retryAfterS(res, Date.now()), p.retryAfterSMax) * 1000 + Math.floor(Math.random() * p.jitterMsMax);
      if (p.onWait) p.onWait({ waitMs, attempt: attempt + 1 });
      await sleep(waitMs);
    }
  }

  // The answer's JSON, or null when it is empty or not JSON (error answers
  // from a proxy are often HTML).
  async function readJson(res) {
    const text = await res.text();
    if (!text) return null;
    try {
      return JSON.parse(text);
    } catch (_) {
      return null;
    }
  }

  // { status, code, message } of a failed answer from its decoded body (or
  // null). `message` is for people: `sentences[code](serverMessage)` when
  // the page has its own words for the code, else the language catalogue's
  // `error.<code>`, a plea for patience when the server is overloaded, else
  // the server's message, else the status. Codes never change with the
  // language; only the words do.
  // `code` is the envelope's, or http_<status> without one.
  function errorFromBody(status, body, sentences) {
    const e = body && typeof body === "object" && body.error && typeof body.error === "object" ? body.error : {};
    const code = typeof e.code === "string" && e.code ? e.code : `http_${status}`;
    const serverMessage = typeof e.message === "string" ? e.message : "";
    let message;
    const catalogued = words(`error.${code}`, null, null);
    if (sentences && Object.prototype.hasOwnProperty.call(sentences, code)) message = sentences[code](serverMessage);
    else if (catalogued) message = catalogued;
    else if (RETRY_STATUSES.has(status)) message = words("client.busy", null, BUSY);
    else if (serverMessage) message = serverMessage;
    else message = words("client.status", { status }, `The server answered ${status}; try again in a moment.`);
    return { status, code, message };
  }

  // errorFromBody for an answer whose body is still unread.
  async function errorOf(res, sentences) {
    return errorFromBody(res.status, await readJson(res), sentences);
  }

  // A failed answer as an exception (getJson throws it).
  class ApiError extends Error {
    constructor({ status, code, message }) {
      super(message);
      this.name = "ApiError";
      this.status = status;
      this.code = code;
    }
  }

  // A page's way of asking: `options` overrides RETRY_POLICY's fields, and
  // `options.sentences` gives the page's own words for error codes.
  //   fetch(url, init): politeFetch;
  //   getJson(url, init): the JSON of a successful answer, an ApiError for a
  //     failed one (fetch's TypeError when the server cannot be reached);
  //   errorOf(res): the failed answer's { status, code, message }.
  function client(options) {
    const { sentences, ...policy } = options || {};
    return {
      fetch: (url, init) => politeFetch(url, init, policy),
      async getJson(url, init) {
        const res = await politeFetch(url, init, policy);
        if (!res.ok) throw new ApiError(await errorOf(res, sentences));
        return res.json();
      },
      errorOf: (res) => errorOf(res, sentences),
    };
  }

  // Sets maxLength on every element under `root` with data-maxlength="key"
  // to limits[key] (limits served from the server's own constants); an
  // unknown key throws, so a misspelt one cannot leave a field unbounded.
  function applyMaxLengths(limits, root) {
    for (const el of (root || document).querySelectorAll("[data-maxlength]")) {
      const n = limits[el.dataset.maxlength];
      if (!Number.isInteger(n)) throw new Error(`no limit named ${el.dataset.maxlength}`);
      el.maxLength = n;
    }
  }

  // The console session this browser is signed in with ({ sub, role,
  // claims, expiresAt, ... }), or null: an admin page opened from the
  // console works with it, no token pasted.
  async function consoleSession() {
    try {
      const res = await fetch("/api/admin/session", { credentials: "same-origin" });
      return res.status === 200 ? await res.json() : null;
    } catch (_) {
      return null;
    }
  }

  // On an admin page opened signed in to the console: hides `box` (the
  // page's token field, kept for API users) and says who is signed in,
  // with the way back to the console.
  function showConsoleSession(box, who) {
    const note = document.createElement("p");
    note.id = "console-session";
    note.setAttribute("role", "status");
    note.append(`Signed in to the console as ${who.sub} (${who.role}). `);
    const back = document.createElement("a");
    back.href = "/admin/";
    back.textContent = "Back to the console";
    note.append(back);
    box.style.display = "none";
    box.before(note);
  }

  return {
    RETRY_POLICY,
    get UNREACHABLE() { return words("client.unreachable", null, UNREACHABLE); },
    get BUSY() { return words("client.busy", null, BUSY); },
    words,
    REQUEST_HEADER, client, consoleSession, showConsoleSession, retryAfterS, readJson, errorFromBody, ApiError, applyMaxLengths };
})();
