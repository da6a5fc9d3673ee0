// The election authority's page at /voting/admin: draft an election from
// its definition, import its roll (and download the credentials, once),
// take the lifecycle's steps, extend the closing time, read the log. Every
// failed answer is shown as a sentence; a 5xx as a server error.
"use strict";

const API = "/api/voting";
const $ = (id) => document.getElementById(id);
const TIME_FORMAT = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const fmtTime = (iso) => {
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : TIME_FORMAT.format(d);
};

const MESSAGES = {
  missing_token: () => "Enter an admin token first.",
  invalid_token: () => "The admin token is not valid; make a new one with throng token --role admin.",
  token_expired: () => "The admin token has expired; make a new one.",
  forbidden: () => "This token is not an admin's.",
  internal: () => "The server had an error (it was logged); nothing was changed. Try again in a moment.",
  http_500: () => "The server had an error; try again in a moment.",
};
const api = Throng.client({ sentences: MESSAGES });

let credentialsUrl = null;
// Signed in to the admin console: its session signs the calls in.
let bySession = false;

function setStatus(text, kind, code) {
  const s = $("status");
  s.textContent = text;
  s.className = kind || "";
  if (code) s.dataset.code = code;
  else delete s.dataset.code;
}

function headers(extra) {
  const h = { ...extra };
  const t = $("admin-token").value.trim();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

const electionId = () => $("election").value;

// An answer's error as a sentence (multi-problem messages one per line).
async function showFailure(res) {
  const e = await api.errorOf(res);
  setStatus(e.message.split("; ").join("\n"), "error", e.code);
}

async function send(method, path, body, contentType) {
  try {
    const res = await api.fetch(`${API}${path}`, {
      method,
      headers: headers(contentType ? { "Content-Type": contentType } : {}),
      body,
    });
    if (!res.ok) {
      await showFailure(res);
      return null;
    }
    return res;
  } catch (_) {
    setStatus(Throng.UNREACHABLE, "error", "network");
    return null;
  }
}

async function loadElections(select) {
  const body = await api.getJson(`${API}/elections`);
  const sel = $("election");
  const keep = select != null ? String(select) : sel.value;
  sel.replaceChildren();
  for (const e of body.elections) {
    const o = document.createElement("option");
    o.value = e.electionId;
    o.textContent = `${e.electionId}: ${e.name} (${e.state})`;
    sel.appendChild(o);
  }
  if (keep && body.elections.some((e) => String(e.electionId) === keep)) sel.value = keep;
  await showElection();
}

async function showElection() {
  if (!electionId()) {
    $("election-state").textContent = "No election yet: draft one above.";
    return;
  }
  const e = await api.getJson(`${API}/elections/${encodeURIComponent(electionId())}`);
  const voters = e.districts.reduce((n, d) => n + d.voters, 0);
  $("election-state").textContent = `${e.name}: ${e.state}; ${voters.toLocaleString("en-US")} voters on the roll; open from ${fmtTime(e.opensAt)} to ${fmtTime(e.closesAt)}.`;
  $("election-state").dataset.state = e.state;
  $("election-state").dataset.voters = String(voters);
  for (const b of document.querySelectorAll("#steps button")) {
    const allowed = {
      open: e.state === "draft",
      suspend: e.state === "open",
      resume: e.state === "suspended",
      close: e.state === "open" || e.state === "suspended",
      publish: e.state === "tallied",
    }[b.dataset.step];
    b.disabled = !allowed;
  }
  $("import").disabled = e.state !== "draft";
  $("set-key").disabled = e.state !== "draft";
  $("export-box").disabled = !["closed", "tallied", "published"].includes(e.state);
  $("import-results").disabled = e.state !== "closed";
  $("election-state").dataset.hasKey = String(Boolean(e.publicKey));
  if (!e.publicKey && e.state === "draft") $("election-state").textContent += " No public key yet: give it before opening.";
  await showLog();
}

async function showLog() {
  const list = $("admin-log");
  if ((!$("admin-token").value.trim() && !bySession) || !electionId()) {
    list.replaceChildren();
    return;
  }
  const res = await api.fetch(`${API}/elections/${encodeURIComponent(electionId())}/audit/log`, { headers: headers() });
  if (!res.ok) return;
  const body = await res.json();
  list.replaceChildren(...body.entries.map((e) => {
    const li = document.createElement("li");
    li.textContent = `${fmtTime(e.at)}: ${e.eventType.replace(/^voting\./, "")} by ${e.actor}`;
    li.dataset.eventType = e.eventType;
    return li;
  }));
}

async function create() {
  const file = $("definition-file").files[0];
  if (!file) {
    setStatus("Choose the definition's file first.", "error", "missing_file");
    return;
  }
  setStatus("Drafting…");
  const res = await send("POST", "/elections", await file.text(), "application/json");
  if (!res) return;
  const body = await res.json();
  setStatus(`Drafted election ${body.electionId}. Import its roll next.`);
  await loadElections(body.electionId);
}

async function importRoll() {
  const file = $("roll-file").files[0];
  if (!file) {
    setStatus("Choose the roll's file first.", "error", "missing_file");
    return;
  }
  setStatus("Importing the roll…");
  const res = await send("PUT", `/elections/${encodeURIComponent(electionId())}/roll`, file, "text/csv");
  if (!res) return;
  const blob = await res.blob();
  if (credentialsUrl) URL.revokeObjectURL(credentialsUrl);
  credentialsUrl = URL.createObjectURL(blob);
  const link = $("credentials-link");
  link.href = credentialsUrl;
  link.download = `election-${electionId()}-credentials.csv`;
  $("credentials-box").hidden = false;
  const lines = (await blob.text()).split("\n").filter(Boolean).length - 1;
  setStatus(`Imported ${lines.toLocaleString("en-US")} voters. Download their credentials now: they are not kept.`);
  link.dataset.voters = String(lines);
  await showElection();
}

async function putJsonFile(input, what, done) {
  const file = $(input).files[0];
  if (!file) {
    setStatus(`Choose the ${what} file first.`, "error", "missing_file");
    return;
  }
  setStatus(`Sending the ${what}…`);
  const res = await send("PUT", `/elections/${encodeURIComponent(electionId())}/${what === "key" ? "key" : "results"}`, await file.text(), "application/json");
  if (!res) return;
  const body = await res.json();
  setStatus(done(body));
  await loadElections();
}

let boxUrl = null;

async function exportBox() {
  setStatus("Exporting the ballot box…");
  const res = await send("GET", `/elections/${encodeURIComponent(electionId())}/box`);
  if (!res) return;
  const blob = await res.blob();
  const box = JSON.parse(await blob.text());
  if (boxUrl) URL.revokeObjectURL(boxUrl);
  boxUrl = URL.createObjectURL(blob);
  const link = $("box-link");
  link.href = boxUrl;
  link.download = `election-${electionId()}-box.json`;
  link.hidden = false;
  link.textContent = link.download;
  const ballots = box.districts.reduce((n, d) => n + d.ballots.length, 0);
  link.dataset.ballots = String(ballots);
  setStatus(`The box holds ${ballots.toLocaleString("en-US")} sealed ballots; its digest ${box.digest} is the public board's. Save it and hand it to the trustees.`);
}

async function step(action) {
  setStatus(`${action}…`);
  const res = await send("POST", `/elections/${encodeURIComponent(electionId())}/${action}`);
  if (!res) return;
  const body = await res.json();
  setStatus(`The election is ${body.state}.`);
  await loadElections();
}

async function extend() {
  const v = $("closes-at").value;
  if (!v) {
    setStatus("Choose the new closing time first.", "error", "missing_time");
    return;
  }
  const closesAt = new Date(v).toISOString();
  const res = await send("PATCH", `/elections/${encodeURIComponent(electionId())}`, JSON.stringify({ closesAt }), "application/json");
  if (!res) return;
  const body = await res.json();
  setStatus(`The election now closes at ${fmtTime(body.closesAt)}.`);
  await showElection();
}

async function guarded(f) {
  try {
    await f();
  } catch (e) {
    setStatus(e.code ? e.message : Throng.UNREACHABLE, "error", e.code || "network");
  }
}

$("create").addEventListener("click", () => guarded(create));
$("import").addEventListener("click", () => guarded(importRoll));
$("reload").addEventListener("click", () => guarded(() => loadElections()));
$("extend").addEventListener("click", () => guarded(extend));
$("set-key").addEventListener("click", () => guarded(() => putJsonFile("key-file", "key", (b) => `The key is set; the election is ${b.state}. Open it when ready.`)));
$("export-box").addEventListener("click", () => guarded(exportBox));
$("import-results").addEventListener("click", () => guarded(() => putJsonFile("results-file", "results", (b) => `The results are imported; the election is ${b.state}. Check them, then publish.`)));
$("election").addEventListener("change", () => guarded(showElection));
$("admin-token").addEventListener("change", () => guarded(showLog));
for (const b of document.querySelectorAll("#steps button")) {
  b.addEventListener("click", () => guarded(() => step(b.dataset.step)));
}
Throng.consoleSession().then((who) => {
  if (who && !$("admin-token").value.trim()) {
    bySession = true;
    Throng.showConsoleSession($("admin-token").closest("fieldset"), who);
  }
  guarded(() => loadElections());
});
