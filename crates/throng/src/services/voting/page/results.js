// The live results at /voting/results: tallies as bars, per party with its
// candidates, for the whole election or one district, updated over
// Server-Sent Events without reloading. The stream sends the results at once
// and on every change; if it drops, EventSource reconnects by itself, and if
// it gives up (an error answer), the page opens a new stream after a pause
// growing to 10 s.
"use strict";

const API = "/api/voting";
const RETRY_MS_MIN = 500;
const RETRY_MS_MAX = 10_000;
const $ = (id) => document.getElementById(id);

let source = null;
let retryMs = RETRY_MS_MIN;
let retryTimer = null;
// Counts streams opened; events of a replaced stream are ignored.
let generation = 0;
let updates = 0;

function setConn(text, down) {
  $("conn").textContent = text;
  $("conn").className = down ? "down" : "";
}

function setError(text) {
  $("error").textContent = text || "";
}

function option(value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

async function errorText(res) {
  try {
    const body = await res.json();
    if (body && body.error && body.error.message) return body.error.message;
  } catch (_) {
    // not JSON
  }
  return `The server answered ${res.status}.`;
}

async function getJson(url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(await errorText(res));
  return res.json();
}

const fmt = (n) => Number(n).toLocaleString("en-US");
const pct = (part, whole) => (whole > 0 ? (100 * part) / whole : 0);

function bar(share) {
  const outer = document.createElement("div");
  outer.className = "bar";
  outer.setAttribute("aria-hidden", "true"); // the numbers are in the text beside it
  const inner = document.createElement("span");
  inner.style.width = `${Math.min(100, share).toFixed(2)}%`;
  outer.appendChild(inner);
  return outer;
}

function labelRow(name, votes, share, testId) {
  const row = document.createElement("div");
  row.className = "bar-label";
  const n = document.createElement("span");
  n.textContent = name;
  const v = document.createElement("span");
  v.className = "votes";
  v.dataset.votes = String(votes);
  if (testId) v.id = testId;
  v.textContent = `${fmt(votes)} (${share.toFixed(1)}%)`;
  row.append(n, v);
  return row;
}

function render(r) {
  updates++;
  const where = r.districtId == null ? "all districts" : $("district").selectedOptions[0]?.textContent || `district ${r.districtId}`;
  $("summary").textContent = `${fmt(r.ballots)} ballots counted in ${where}; ${fmt(r.ballotsPending)} cast and not yet published.`;
  $("summary").dataset.ballots = String(r.ballots);
  $("summary").dataset.pending = String(r.ballotsPending);
  $("summary").dataset.updates = String(updates);
  const list = $("tally");
  const items = [];
  const parties = [...r.parties].sort((a, b) => b.votes - a.votes || a.partyId - b.partyId);
  for (const p of parties) {
    const li = document.createElement("li");
    li.dataset.partyId = p.partyId;
    const share = pct(p.votes, r.ballots);
    li.append(labelRow(`${p.name} (${p.shortName})`, p.votes, share, `party-${p.partyId}-votes`), bar(share));
    // Candidates stand in one district: the whole election's results list parties only.
    const candidates = p.candidates || [];
    const cands = document.createElement("ol");
    cands.className = "candidates";
    cands.setAttribute("aria-label", `Candidates of ${p.name}`);
    for (const c of candidates) {
      const ci = document.createElement("li");
      ci.dataset.candidateId = c.candidateId;
      ci.append(labelRow(c.name, c.votes, pct(c.votes, p.votes), `candidate-${c.candidateId}-votes`), bar(pct(c.votes, p.votes)));
      cands.appendChild(ci);
    }
    if (candidates.length) li.appendChild(cands);
    items.push(li);
  }
  list.replaceChildren(...items);
  $("candidates-hint").hidden = r.districtId != null;
}

function streamUrl() {
  const q = new URLSearchParams();
  if ($("district").value) q.set("districtId", $("district").value);
  const qs = q.toString();
  return `${API}/elections/${encodeURIComponent($("election").value)}/results/stream${qs ? "?" + qs : ""}`;
}

function connect() {
  clearTimeout(retryTimer);
  if (source) source.close();
  const mine = ++generation;
  setConn("Connecting…");
  const es = new EventSource(streamUrl());
  source = es;
  es.onopen = () => {
    if (mine !== generation) return;
    retryMs = RETRY_MS_MIN;
    setConn("Live: updates as ballots are counted.");
  };
  es.addEventListener("results", (ev) => {
    if (mine !== generation) return;
    try {
      render(JSON.parse(ev.data));
      setError("");
    } catch (_) {
      setError("An update could not be read; waiting for the next one.");
    }
  });
  es.onerror = () => {
    if (mine !== generation) return;
    if (es.readyState === EventSource.CLOSED) {
      // EventSource gave up (an error answer): open a new stream ourselves.
      es.close();
      setConn(`Connection lost; reconnecting in ${Math.ceil(retryMs / 1000)} s…`, true);
      retryTimer = setTimeout(connect, retryMs);
      retryMs = Math.min(RETRY_MS_MAX, retryMs * 2);
    } else {
      setConn("Connection lost; reconnecting…", true);
    }
  };
}

function syncUrl() {
  const q = new URLSearchParams({ electionId: $("election").value });
  if ($("district").value) q.set("districtId", $("district").value);
  history.replaceState(null, "", `/voting/results?${q}`);
  $("vote-nav").href = `/voting/?${q}`;
}

async function loadElection() {
  const e = await getJson(`${API}/elections/${encodeURIComponent($("election").value)}`);
  $("title").textContent = `Live results: ${e.name}`;
  const sel = $("district");
  const wanted = sel.value || new URLSearchParams(location.search).get("districtId") || "";
  sel.replaceChildren(option("", "All districts"));
  for (const d of e.districts) sel.appendChild(option(d.districtId, d.name));
  sel.value = e.districts.some((d) => String(d.districtId) === wanted) ? wanted : "";
}

async function start() {
  try {
    const body = await getJson(`${API}/elections`);
    const sel = $("election");
    for (const e of body.elections) sel.appendChild(option(e.electionId, e.name));
    if (!body.elections.length) {
      setConn("There is no election yet.", true);
      return;
    }
    const wanted = new URLSearchParams(location.search).get("electionId");
    if (wanted && body.elections.some((e) => String(e.electionId) === wanted)) sel.value = wanted;
    await loadElection();
  } catch (e) {
    setConn("", true);
    setError(e instanceof TypeError ? "Cannot reach the server; reload to try again." : e.message);
    return;
  }
  syncUrl();
  connect();
}

$("election").addEventListener("change", async () => {
  $("district").value = "";
  try {
    await loadElection();
  } catch (e) {
    setError(e.message);
  }
  syncUrl();
  connect();
});
$("district").addEventListener("change", () => {
  syncUrl();
  connect();
});
start();
