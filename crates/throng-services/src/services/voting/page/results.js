// The results at /voting/results: tallies as bars in each party's colour,
// per party with its candidates, for the whole election or one district,
// with turnout and the time the counts last changed.
//
// Live over Server-Sent Events while a stream is to be had: the stream sends
// the results at once and on every change, and ends itself after a while
// (`event: end`, reason "lifetime": the page opens a new one at once) or
// when the server stops (reason "stopping"). When a stream is refused (429
// per client, 503) or drops DROPS_MAX times within DROPS_WINDOW_MS (even if
// it delivers between drops), the page polls
// /results every POLL_MS and tries a stream again after a pause growing to
// STREAM_RETRY_MS_MAX; when polls fail too, it says it is offline. The
// line #conn always tells which (data-state: live, polling, offline).
"use strict";

const API = "/api/voting";
const POLL_MS = 5_000;
const OFFLINE_POLL_MS_MAX = 30_000;
const STREAM_RETRY_MS_MIN = 2_000;
const STREAM_RETRY_MS_MAX = 60_000;
const DROPS_MAX = 3;
const DROPS_WINDOW_MS = 60_000;
const $ = (id) => document.getElementById(id);

let source = null;
let streamRetryMs = STREAM_RETRY_MS_MIN;
let streamTimer = null;
let pollTimer = null;
let pollMs = POLL_MS;
// When the recent streams dropped (ms timestamps).
let drops = [];
// Counts streams opened and polls started; answers for a replaced view are ignored.
let generation = 0;
let updates = 0;
const t = I18n.t;
// What #conn and #error say, kept to be written again in another language.
let conn = null;
let errorWords = null;
let lastResults = null;

// `key` in the catalogue; `why` (a key too) is the reason a page polls.
function setConn(state, key, why) {
  conn = { state, key, why };
  const c = $("conn");
  c.removeAttribute("data-i18n");
  c.textContent = t(key, { why: why ? t(why) : "", s: POLL_MS / 1000 });
  c.dataset.state = state;
  c.className = state === "live" ? "" : "down";
}

// `text`: a catalogue key (`key` true) or the server's words.
function setError(text, key) {
  errorWords = text ? { text, key } : null;
  $("error").textContent = text ? (key ? t(text) : text) : "";
}

function option(value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

// The page has its own back-off (polling, offline), so the shared client
// (/assets/throng.js) retries nothing here; it decodes the answers.
const api = Throng.client({ retriesMax: 0 });

const fmt = (n) => I18n.number(Number(n));
const pct = (part, whole) => (whole > 0 ? (100 * part) / whole : 0);
// A share in percent (0-100) the language's way: 12.5%, 12,5 %.
const percent = (share) => I18n.number(share / 100, { style: "percent", minimumFractionDigits: 1, maximumFractionDigits: 1 });
const COLOR = /^#[0-9a-f]{6}$/i;

function bar(share, color, light) {
  const outer = document.createElement("div");
  outer.className = "bar";
  outer.setAttribute("aria-hidden", "true"); // the numbers are in the text beside it
  const inner = document.createElement("span");
  inner.style.width = `${Math.min(100, share).toFixed(2)}%`;
  if (color && COLOR.test(color)) {
    inner.style.background = color;
    if (light) inner.style.opacity = "0.6";
  }
  outer.appendChild(inner);
  return outer;
}

function labelRow(name, votes, share, testId, color) {
  const row = document.createElement("div");
  row.className = "bar-label";
  const n = document.createElement("span");
  n.className = "name";
  if (color && COLOR.test(color)) {
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = color;
    swatch.setAttribute("aria-hidden", "true");
    n.appendChild(swatch);
  }
  n.append(name);
  const v = document.createElement("span");
  v.className = "votes";
  v.dataset.votes = String(votes);
  if (testId) v.id = testId;
  v.textContent = `${fmt(votes)} (${percent(share)})`;
  row.append(n, v);
  return row;
}

// `again`: the same results written in another language (not an update).
function render(r, again) {
  lastResults = r;
  if (!again) updates++;
  const where = r.districtId == null
    ? t("voting.results.allDistrictsIn")
    : t("voting.results.inDistrict", { name: $("district").selectedOptions[0]?.textContent || t("voting.districtNumber", { id: String(r.districtId) }) });
  $("summary").textContent = t("voting.results.summary", { count: r.ballots, where });
  $("summary").dataset.ballots = String(r.ballots);
  $("summary").dataset.updates = String(updates);
  if (r.votersOnRoll != null) {
    const turnout = pct(r.ballots, r.votersOnRoll);
    $("turnout").textContent = t("voting.results.turnoutLine", { pct: percent(turnout), ballots: r.ballots, count: r.votersOnRoll });
    $("turnout").dataset.turnout = turnout.toFixed(1);
  }
  if (r.updatedAt) {
    const at = new Date(r.updatedAt);
    $("updated").textContent = t("voting.results.updated", { at: I18n.dateTime(at, { dateStyle: "medium", timeStyle: "short" }) });
    $("updated").dataset.updatedAt = r.updatedAt;
  } else {
    $("updated").textContent = t("voting.results.none");
    delete $("updated").dataset.updatedAt;
  }
  renderDistricts(r);
  $("hidden-note").hidden = r.resultsShown !== false;
  document.body.dataset.resultsShown = String(r.resultsShown !== false);
  const list = $("tally");
  const items = [];
  const parties = [...r.parties].sort((a, b) => b.votes - a.votes || a.partyId - b.partyId);
  for (const p of parties) {
    const li = document.createElement("li");
    li.dataset.partyId = p.partyId;
    if (p.color) li.dataset.color = p.color;
    const share = pct(p.votes, r.ballots);
    li.append(labelRow(`${p.name} (${p.shortName})`, p.votes, share, `party-${p.partyId}-votes`, p.color), bar(share, p.color));
    // Candidates stand in one district: the whole election's results list parties only.
    const candidates = p.candidates || [];
    const cands = document.createElement("ol");
    cands.className = "candidates";
    cands.setAttribute("aria-label", t("voting.results.candidatesOf", { name: p.name }));
    for (const c of candidates) {
      const ci = document.createElement("li");
      ci.dataset.candidateId = c.candidateId;
      ci.append(labelRow(c.name, c.votes, pct(c.votes, p.votes), `candidate-${c.candidateId}-votes`), bar(pct(c.votes, p.votes), p.color, true));
      cands.appendChild(ci);
    }
    if (candidates.length) li.appendChild(cands);
    items.push(li);
  }
  list.replaceChildren(...items);
  $("candidates-hint").hidden = r.districtId != null;
}

// Districts reporting, and each district's turnout (whole-election results).
function renderDistricts(r) {
  if (r.districtsTotal != null) {
    $("reporting").textContent = t("voting.results.reporting", { reporting: r.districtsReporting, count: r.districtsTotal });
    $("reporting").dataset.reporting = String(r.districtsReporting);
  }
  const rows = (r.districts || []).map((d) => {
    const tr = document.createElement("tr");
    tr.dataset.districtId = d.districtId;
    const cell = (text, num) => {
      const td = document.createElement("td");
      td.textContent = text;
      if (num) td.className = "num";
      return td;
    };
    tr.append(cell(d.name), cell(fmt(d.ballots), true), cell(fmt(d.votersOnRoll), true),
      cell(percent(pct(d.ballots, d.votersOnRoll)), true));
    return tr;
  });
  $("districts").replaceChildren(...rows);
  $("districts-box").hidden = rows.length === 0;
}

function query() {
  const q = new URLSearchParams();
  if ($("district").value) q.set("districtId", $("district").value);
  const qs = q.toString();
  return qs ? "?" + qs : "";
}

const electionPath = () => `${API}/elections/${encodeURIComponent($("election").value)}`;

function stopAll() {
  clearTimeout(streamTimer);
  clearTimeout(pollTimer);
  if (source) source.close();
  source = null;
}

// ------------------------------------------------------------------ polling

function startPolling(why) {
  if (source) source.close();
  source = null;
  const mine = generation;
  setConn("polling", "voting.conn.polling", why);
  clearTimeout(pollTimer);
  pollMs = POLL_MS;
  const poll = async () => {
    if (mine !== generation) return;
    try {
      const r = await api.getJson(`${electionPath()}/results${query()}`);
      if (mine !== generation) return;
      render(r);
      setError("");
      pollMs = POLL_MS;
      if ($("conn").dataset.state !== "polling") {
        setConn("polling", "voting.conn.polling", why);
      }
    } catch (e) {
      if (mine !== generation) return;
      setConn("offline", "voting.conn.offlineRetrying");
      pollMs = Math.min(OFFLINE_POLL_MS_MAX, pollMs * 2);
    }
    pollTimer = setTimeout(poll, pollMs);
  };
  poll();
  // Try a stream again later; it replaces the polling once it delivers.
  clearTimeout(streamTimer);
  streamTimer = setTimeout(() => {
    if (mine === generation) connect(true);
  }, streamRetryMs);
  streamRetryMs = Math.min(STREAM_RETRY_MS_MAX, streamRetryMs * 2);
}

// ------------------------------------------------------------------ streams

// `retrying`: a stream tried while polling; polling goes on until it delivers.
function connect(retrying = false) {
  clearTimeout(streamTimer);
  if (source) source.close();
  const mine = retrying ? generation : ++generation;
  if (!retrying) {
    clearTimeout(pollTimer);
    setConn("connecting", "voting.conn.connecting");
  }
  const es = new EventSource(`${electionPath()}/results/stream${query()}`);
  source = es;
  es.addEventListener("results", (ev) => {
    if (mine !== generation || source !== es) return;
    let r;
    try {
      r = JSON.parse(ev.data);
    } catch (_) {
      setError("voting.results.unreadable", true);
      return;
    }
    if (retrying) {
      // The stream is back: polling stops.
      clearTimeout(pollTimer);
      retrying = false;
    }
    streamRetryMs = STREAM_RETRY_MS_MIN;
    render(r);
    setError("");
    setConn("live", "voting.conn.live");
  });
  es.addEventListener("end", (ev) => {
    if (mine !== generation || source !== es) return;
    let reason = "";
    try {
      reason = JSON.parse(ev.data).reason;
    } catch (_) {
      // an unknown end: treat as stopping
    }
    es.close();
    if (reason === "lifetime") {
      connect();
    } else {
      startPolling("voting.conn.whyStopping");
    }
  });
  es.onerror = () => {
    if (mine !== generation || source !== es) return;
    if (retrying) {
      // Still no stream: polling goes on, the next try comes later.
      es.close();
      source = null;
      clearTimeout(streamTimer);
      streamTimer = setTimeout(() => {
        if (mine === generation) connect(true);
      }, streamRetryMs);
      streamRetryMs = Math.min(STREAM_RETRY_MS_MAX, streamRetryMs * 2);
      return;
    }
    if (es.readyState === EventSource.CLOSED) {
      // Refused (429 for this address, 503 while busy or stopping): poll instead.
      startPolling("voting.conn.whyRefused");
      return;
    }
    const now = Date.now();
    drops = [...drops.filter((at) => now - at < DROPS_WINDOW_MS), now];
    if (drops.length >= DROPS_MAX) {
      drops = [];
      startPolling("voting.conn.whyDropping");
    } else {
      setConn("connecting", "voting.conn.lost");
    }
  };
}

function syncUrl() {
  const q = new URLSearchParams({ electionId: $("election").value });
  if ($("district").value) q.set("districtId", $("district").value);
  history.replaceState(null, "", `/voting/results?${q}`);
  $("vote-nav").href = `/voting/?${q}`;
}

let electionName = null;

async function loadElection() {
  const e = await api.getJson(electionPath());
  electionName = e.name;
  $("title").removeAttribute("data-i18n");
  $("title").textContent = t("voting.results.titleOf", { name: e.name });
  const sel = $("district");
  const wanted = sel.value || new URLSearchParams(location.search).get("districtId") || "";
  sel.replaceChildren(option("", t("voting.results.allDistricts")));
  for (const d of e.districts) sel.appendChild(option(d.districtId, d.name));
  sel.value = e.districts.some((d) => String(d.districtId) === wanted) ? wanted : "";
}

function restart() {
  stopAll();
  drops = [];
  streamRetryMs = STREAM_RETRY_MS_MIN;
  syncUrl();
  connect();
}

async function start() {
  try {
    const body = await api.getJson(`${API}/elections`);
    const sel = $("election");
    for (const e of body.elections) sel.appendChild(option(e.electionId, e.name));
    if (!body.elections.length) {
      setConn("offline", "voting.noElection");
      return;
    }
    const wanted = new URLSearchParams(location.search).get("electionId");
    if (wanted && body.elections.some((e) => String(e.electionId) === wanted)) sel.value = wanted;
    await loadElection();
  } catch (e) {
    setConn("offline", "voting.conn.offlineReload");
    setError(e instanceof TypeError ? "" : e.message);
    return;
  }
  restart();
}

$("election").addEventListener("change", async () => {
  $("district").value = "";
  try {
    await loadElection();
  } catch (e) {
    setError(e.message);
  }
  restart();
});
$("district").addEventListener("change", restart);
// Another language: every line this script wrote, written again.
I18n.onChange(() => {
  if (conn) setConn(conn.state, conn.key, conn.why);
  if (errorWords) setError(errorWords.text, errorWords.key);
  if (electionName !== null) $("title").textContent = t("voting.results.titleOf", { name: electionName });
  const all = $("district").querySelector('option[value=""]');
  if (all) all.textContent = t("voting.results.allDistricts");
  if (lastResults) render(lastResults, true);
});
I18n.ready.then(start);
