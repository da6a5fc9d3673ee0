// The election authority's page at /voting/admin: draft an election from
// its definition, import its roll (and download the credentials, once),
// take the lifecycle's steps, extend the closing time, read the log. Every
// failed answer is shown as a sentence; a 5xx as a server error.
"use strict";

const API = "/api/voting";
const $ = (id) => document.getElementById(id);
const t = I18n.t;
// Times in the page's language, in the reader's time zone.
const fmtTime = (iso) => {
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : I18n.dateTime(d, { dateStyle: "medium", timeStyle: "short" });
};
// An election's state in words ("draft", "návrh"); an unknown one as sent.
const stateName = (state) => (I18n.has(`votingAdmin.stateName.${state}`) ? I18n.t(`votingAdmin.stateName.${state}`) : state);

const MESSAGES = {
  missing_token: () => t("votingAdmin.error.missing_token"),
  invalid_token: () => t("votingAdmin.error.invalid_token"),
  token_expired: () => t("votingAdmin.error.token_expired"),
  forbidden: () => t("votingAdmin.error.forbidden"),
  internal: () => t("votingAdmin.error.internal"),
  http_500: () => t("votingAdmin.error.http_500"),
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

// Loads of the election list in flight: only the latest one's answer is
// shown (an older answer, arriving late, would list a moment ago's
// elections), and an election asked for by any of them stays selected.
let electionsLoads = 0;
let electionWanted = null;

async function loadElections(select) {
  const load = ++electionsLoads;
  if (select != null) electionWanted = String(select);
  const body = await api.getJson(`${API}/elections`);
  if (load !== electionsLoads) return;
  const sel = $("election");
  const keep = electionWanted ?? sel.value;
  electionWanted = null;
  sel.replaceChildren();
  for (const e of body.elections) {
    const o = document.createElement("option");
    o.value = e.electionId;
    o.textContent = `${e.electionId}: ${e.name} (${stateName(e.state)})`;
    sel.appendChild(o);
  }
  if (keep && body.elections.some((e) => String(e.electionId) === keep)) sel.value = keep;
  await showElection();
}

async function showElection() {
  if (!electionId()) {
    $("election-state").textContent = t("votingAdmin.noElection");
    return;
  }
  const e = await api.getJson(`${API}/elections/${encodeURIComponent(electionId())}`);
  const voters = e.districts.reduce((n, d) => n + d.voters, 0);
  $("election-state").textContent = t("votingAdmin.electionState", { name: e.name, state: stateName(e.state), count: voters, opens: fmtTime(e.opensAt), closes: fmtTime(e.closesAt) });
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
  if (!e.publicKey && e.state === "draft") $("election-state").textContent += ` ${t("votingAdmin.noKey")}`;
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
    li.textContent = t("votingAdmin.log.entry", { at: fmtTime(e.at), event: e.eventType.replace(/^voting\./, ""), actor: e.actor });
    li.dataset.eventType = e.eventType;
    return li;
  }));
}

async function create() {
  const file = $("definition-file").files[0];
  if (!file) {
    setStatus(t("votingAdmin.rule.definition"), "error", "missing_file");
    return;
  }
  setStatus(t("votingAdmin.drafting"));
  const res = await send("POST", "/elections", await file.text(), "application/json");
  if (!res) return;
  const body = await res.json();
  // Said once the list shows it selected.
  await loadElections(body.electionId);
  setStatus(t("votingAdmin.drafted", { id: String(body.electionId) }));
}

async function importRoll() {
  const file = $("roll-file").files[0];
  if (!file) {
    setStatus(t("votingAdmin.rule.roll"), "error", "missing_file");
    return;
  }
  setStatus(t("votingAdmin.importingRoll"));
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
  setStatus(t("votingAdmin.imported", { count: lines }));
  link.dataset.voters = String(lines);
  await showElection();
}

async function putJsonFile(input, what, done) {
  const file = $(input).files[0];
  if (!file) {
    setStatus(t(what === "key" ? "votingAdmin.rule.key" : "votingAdmin.rule.results"), "error", "missing_file");
    return;
  }
  setStatus(t(what === "key" ? "votingAdmin.sendingKey" : "votingAdmin.sendingResults"));
  const res = await send("PUT", `/elections/${encodeURIComponent(electionId())}/${what === "key" ? "key" : "results"}`, await file.text(), "application/json");
  if (!res) return;
  const body = await res.json();
  setStatus(done(body));
  await loadElections();
}

let boxUrl = null;

async function exportBox() {
  setStatus(t("votingAdmin.exporting"));
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
  setStatus(t("votingAdmin.exported", { count: ballots, digest: box.digest }));
}

async function step(action) {
  setStatus(t(`votingAdmin.doing.${action}`));
  const res = await send("POST", `/elections/${encodeURIComponent(electionId())}/${action}`);
  if (!res) return;
  const body = await res.json();
  setStatus(t("votingAdmin.stateNow", { state: stateName(body.state) }));
  await loadElections();
}

async function extend() {
  const v = $("closes-at").value;
  if (!v) {
    setStatus(t("votingAdmin.rule.time"), "error", "missing_time");
    return;
  }
  const closesAt = new Date(v).toISOString();
  const res = await send("PATCH", `/elections/${encodeURIComponent(electionId())}`, JSON.stringify({ closesAt }), "application/json");
  if (!res) return;
  const body = await res.json();
  setStatus(t("votingAdmin.extended", { closes: fmtTime(body.closesAt) }));
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
$("set-key").addEventListener("click", () => guarded(() => putJsonFile("key-file", "key", (b) => t("votingAdmin.keySet", { state: stateName(b.state) }))));
$("export-box").addEventListener("click", () => guarded(exportBox));
$("import-results").addEventListener("click", () => guarded(() => putJsonFile("results-file", "results", (b) => t("votingAdmin.resultsImported", { state: stateName(b.state) }))));
$("election").addEventListener("change", () => guarded(showElection));
$("admin-token").addEventListener("change", () => guarded(showLog));
for (const b of document.querySelectorAll("#steps button")) {
  b.addEventListener("click", () => guarded(() => step(b.dataset.step)));
}
I18n.ready.then(() => Throng.consoleSession()).then((who) => {
  if (who && !$("admin-token").value.trim()) {
    bySession = true;
    Throng.showConsoleSession($("admin-token").closest("fieldset"), who);
  }
  guarded(() => loadElections());
});
// Another language: the election, its log and its states written again.
I18n.onChange(() => guarded(() => loadElections()));
