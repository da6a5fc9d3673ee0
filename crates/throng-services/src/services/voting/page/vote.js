// The voting page at /voting/: pick the district, load its ballot, choose one
// party and up to N of its candidates, seal the choice here, in the browser,
// to the election's public key (HPKE, RFC 9180, with @hpke/core: the server
// never sees the choice), vote, see the ballot's tracker. Every answer
// that is not a success is shown as a readable sentence (never a stack);
// under a crowd the server answers 429 with Retry-After, and the page waits
// that long plus jitter and tries again.
"use strict";

const API = "/api/voting";
const $ = (id) => document.getElementById(id);

let election = null; // the election's details (districts, candidatesPerVoteMax)
let ballot = null; // the chosen district's ballot
// Counts ballot loads: an answer for an earlier district can arrive after the
// answer for the latest one and must then be dropped.
let ballotRequest = 0;
// The checked choice awaiting confirmation.
let pending = null;

const t = I18n.t;
const tokenNeeded = () => t("voting.error.token_needed");

// Readable sentences for the API's error codes (http_401: a 401 without the
// envelope), in the page's language; the server's own message is kept for
// the ones whose detail matters (which field, which candidate).
const MESSAGES = {
  already_voted: () => t("voting.error.already_voted"),
  election_closed: () => t("voting.error.election_closed"),
  not_on_roll: () => t("voting.error.not_on_roll"),
  identity_mismatch: () => t("voting.error.identity_mismatch"),
  voter_not_found: () => t("voting.error.voter_not_found"),
  election_not_found: () => t("voting.error.election_not_found"),
  district_not_found: () => t("voting.error.district_not_found"),
  invalid_header: (m) => t("voting.error.invalid_header", { detail: m }),
  invalid_sealed_ballot: () => t("voting.error.invalid_sealed_ballot"),
  ballot_copied: () => t("voting.error.ballot_copied"),
  invalid_field: (m) => t("voting.error.invalid_field", { detail: m }),
  election_suspended: () => t("voting.error.election_suspended"),
  invalid_credentials: () => t("voting.error.invalid_credentials"),
  too_many_attempts: (m) => t("voting.error.too_many_attempts", { detail: m }),
  internal: () => t("voting.error.internal"),
  http_500: () => t("voting.error.http_500"),
  missing_token: tokenNeeded,
  invalid_token: tokenNeeded,
  http_401: tokenNeeded,
};

function setStatus(text, kind) {
  const s = $("status");
  s.textContent = text;
  s.className = kind || "";
}

// Shows an error: the readable sentence, the code kept for tests and support.
function showError(text, code) {
  setStatus(text, "error");
  $("status").dataset.code = code || "";
}

function clearStatus() {
  setStatus("");
  delete $("status").dataset.code;
}

// The shared client (/assets/throng.js): it waits out a crowd, saying so,
// and turns failed answers into MESSAGES' sentences.
const api = Throng.client({
  onWait: ({ waitMs, attempt }) => setStatus(t("voting.wait", { s: Math.ceil(waitMs / 1000), attempt }), "waiting"),
  sentences: MESSAGES,
});

function electionId() {
  return $("election").value;
}

function districtId() {
  return $("district").value;
}

function option(value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

// Local date and time, without seconds, in the page's language.
function fmtTime(iso) {
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : I18n.dateTime(d, { dateStyle: "medium", timeStyle: "short" });
}

async function loadElections() {
  const body = await api.getJson(`${API}/elections`);
  const sel = $("election");
  sel.replaceChildren();
  for (const e of body.elections) {
    sel.appendChild(option(e.electionId, e.open ? e.name : t("voting.vote.electionNotOpen", { name: e.name })));
  }
  if (!body.elections.length) {
    showError(t("voting.noElection"), "no_election");
    return false;
  }
  const wanted = new URLSearchParams(location.search).get("electionId");
  const open = body.elections.find((e) => e.open);
  if (wanted && body.elections.some((e) => String(e.electionId) === wanted)) sel.value = wanted;
  else if (open) sel.value = String(open.electionId);
  return true;
}

async function loadElection() {
  election = await api.getJson(`${API}/elections/${encodeURIComponent(electionId())}`);
  showElectionWords();
  $("election-info").dataset.state = election.state || "";
  $("max").textContent = $("max2").textContent = String(election.candidatesPerVoteMax);
  const sel = $("district");
  const previous = sel.value || new URLSearchParams(location.search).get("districtId");
  sel.replaceChildren();
  for (const d of election.districts) sel.appendChild(option(d.districtId, d.name));
  if (previous && election.districts.some((d) => String(d.districtId) === String(previous))) sel.value = String(previous);
  updateResultsNav();
}

// The election's heading and times in the page's language.
function showElectionWords() {
  if (!election) return;
  const title = $("title");
  title.removeAttribute("data-i18n");
  title.textContent = t("voting.vote.titleOf", { name: election.name });
  const state = election.state === "suspended" ? t("voting.state.suspended") : election.open ? t("voting.state.open") : t("voting.state.notOpen");
  $("election-info").textContent = t("voting.vote.info", { state, from: fmtTime(election.opensAt), to: fmtTime(election.closesAt) });
}

function updateResultsNav() {
  const q = new URLSearchParams({ electionId: electionId() });
  $("results-nav").href = `/voting/results?${q}`;
}

async function loadBallot() {
  const request = ++ballotRequest;
  ballot = null;
  $("parties").replaceChildren();
  renderCandidates(null);
  if (!electionId() || !districtId()) return;
  let body;
  try {
    body = await api.getJson(`${API}/elections/${encodeURIComponent(electionId())}/districts/${encodeURIComponent(districtId())}/ballot`);
  } catch (e) {
    if (request === ballotRequest) showError(e.code ? e.message : Throng.UNREACHABLE, e.code);
    return;
  }
  if (request !== ballotRequest) return;
  ballot = body;
  const box = $("parties");
  for (const p of body.parties) {
    const label = document.createElement("label");
    const radio = document.createElement("input");
    radio.type = "radio";
    radio.name = "party";
    radio.value = p.partyId;
    radio.dataset.partyId = p.partyId;
    radio.addEventListener("change", () => renderCandidates(p));
    label.append(radio, `${p.name} (${p.shortName})`);
    box.appendChild(label);
  }
}

function chosenParty() {
  const r = document.querySelector('#parties input[name="party"]:checked');
  return r && ballot ? ballot.parties.find((p) => String(p.partyId) === r.value) : null;
}

// The chosen party's candidates as checkboxes; switching party starts over.
function renderCandidates(party) {
  const box = $("candidates");
  box.replaceChildren();
  $("candidates-party").textContent = party ? party.name : t("voting.vote.chosenParty");
  if (!party) {
    const p = document.createElement("p");
    p.className = "hint";
    p.textContent = t("voting.vote.partyFirst");
    box.appendChild(p);
    updateLimit();
    return;
  }
  const candidates = [...party.candidates].sort((a, b) => a.listPosition - b.listPosition);
  for (const c of candidates) {
    const label = document.createElement("label");
    const box2 = document.createElement("input");
    box2.type = "checkbox";
    box2.name = "candidate";
    box2.value = c.candidateId;
    box2.dataset.candidateId = c.candidateId;
    box2.addEventListener("change", updateLimit);
    label.append(box2, `${c.listPosition}. ${c.name}`);
    box.appendChild(label);
  }
  updateLimit();
}

// Once N candidates are chosen the others are disabled (and say why).
function updateLimit() {
  const max = election ? election.candidatesPerVoteMax : 0;
  const boxes = [...document.querySelectorAll('#candidates input[name="candidate"]')];
  const chosen = boxes.filter((b) => b.checked).length;
  $("chosen-count").textContent = String(chosen);
  for (const b of boxes) {
    const full = !b.checked && chosen >= max;
    b.disabled = full;
    b.parentElement.classList.toggle("disabled", full);
    if (full) b.parentElement.title = t("voting.vote.atMost", { count: max });
    else b.parentElement.removeAttribute("title");
  }
}

async function demoVoter() {
  const button = $("demo-voter");
  button.disabled = true;
  clearStatus();
  try {
    const q = new URLSearchParams({ electionId: electionId() });
    if (districtId()) q.set("districtId", districtId());
    const res = await api.fetch(`${API}/demo/voter?${q}`, { method: "POST" });
    if (!res.ok) {
      const e = await api.errorOf(res);
      if (res.status === 404 || res.status === 403) {
        // Not a demo server: enter a real voter id instead.
        $("demo-box").hidden = true;
        showError(t("voting.vote.noDemo"), e.code);
      } else {
        showError(e.message, e.code);
      }
      return;
    }
    const v = await res.json();
    $("voter-id").value = String(v.voterId);
    $("token").value = v.token || "";
    if (String(v.districtId) !== districtId()) {
      $("district").value = String(v.districtId);
      await loadBallot();
    }
    setStatus(t("voting.vote.demoReady", { voter: String(v.voterId), district: $("district").selectedOptions[0]?.textContent || t("voting.districtNumber", { id: String(v.districtId) }) }));
  } catch (_) {
    showError(Throng.UNREACHABLE, "network");
  } finally {
    button.disabled = false;
  }
}

// The choice as the form holds it, checked; null (with the reason shown)
// when something is missing.
function choice() {
  const voter = $("voter-id").value.trim();
  const party = chosenParty();
  if (!voter) {
    showError(t("voting.vote.signInFirst"), "missing_voter");
    $("login-voter").focus();
    return null;
  }
  if (!party) {
    showError(t("voting.vote.partyFirst"), "missing_party");
    const first = document.querySelector('#parties input[name="party"]');
    if (first) first.focus();
    return null;
  }
  const candidateIds = [...document.querySelectorAll('#candidates input[name="candidate"]:checked')].map((b) => Number(b.value));
  return { voter, party, candidateIds };
}

// The review before the irreversible step: what the ballot will say.
function review(ev) {
  ev.preventDefault();
  clearStatus();
  const c = choice();
  if (!c) return;
  pending = c;
  $("review-district").textContent = $("district").selectedOptions[0]?.textContent || districtId();
  $("review-party").textContent = `${c.party.name} (${c.party.shortName})`;
  const names = c.candidateIds.map((id) => c.party.candidates.find((x) => x.candidateId === id)?.name || String(id));
  $("review-candidates").textContent = names.length ? new Intl.ListFormat(I18n.lang, { type: "unit" }).format(names) : t("voting.review.none");
  $("vote-form").hidden = true;
  $("review").hidden = false;
  $("review").focus();
}

function change() {
  pending = null;
  $("review").hidden = true;
  $("vote-form").hidden = false;
  $("vote").focus();
}

// base64url without padding, both ways.
function b64e(bytes) {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
function b64d(text) {
  const s = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

// Seals the choice as the ballot's sealTo says: byte 0 the encoding's
// version, byte 1 the list's position on the ballot (1-based), then a bit
// per candidate of that list by position; HPKE base mode to the election's
// key with the ballot's info. Returns the sealed bytes (base64url), the
// tracker (SHA-256 of them, computed here) and how long it took.
async function seal(b, party, candidateIds) {
  if (!b.sealTo) throw new Error("no_key");
  if (!window.isSecureContext || !crypto.subtle) throw new Error("insecure");
  const started = performance.now();
  const hpke = await import("/voting/hpke.js");
  const suite = new hpke.CipherSuite({
    kem: new hpke.DhkemX25519HkdfSha256(),
    kdf: new hpke.HkdfSha256(),
    aead: new hpke.Aes128Gcm(),
  });
  const plain = new Uint8Array(b.sealTo.plainBytes);
  plain[0] = 1;
  plain[1] = b.parties.findIndex((p) => p.partyId === party.partyId) + 1;
  for (const id of candidateIds) {
    const j = party.candidates.findIndex((c) => c.candidateId === id);
    plain[2 + (j >> 3)] |= 1 << (j & 7);
  }
  const recipientPublicKey = await suite.kem.deserializePublicKey(b64d(b.sealTo.publicKey));
  const sender = await suite.createSenderContext({ recipientPublicKey, info: b64d(b.sealTo.info) });
  const ct = new Uint8Array(await sender.seal(plain));
  plain.fill(0);
  const enc = new Uint8Array(sender.enc);
  const sealed = new Uint8Array(enc.length + ct.length);
  sealed.set(enc, 0);
  sealed.set(ct, enc.length);
  const tracker = b64e(new Uint8Array(await crypto.subtle.digest("SHA-256", sealed)));
  return { sealed: b64e(sealed), tracker, ms: performance.now() - started };
}

async function castVote() {
  const c = pending;
  if (!c) return;
  clearStatus();
  const { voter, party, candidateIds } = c;
  const headers = {
    "Content-Type": "application/json",
    "voter-id": voter,
    "election-district-id": districtId(),
  };
  const token = $("token").value.trim();
  if (token) headers.Authorization = `Bearer ${token}`;
  const submit = $("confirm");
  submit.disabled = true;
  setStatus(t("voting.sealing"));
  let sealed;
  try {
    sealed = await seal(ballot, party, candidateIds);
  } catch (e) {
    submit.disabled = false;
    showError(
      e.message === "insecure"
        ? t("voting.seal.insecure")
        : e.message === "no_key"
          ? t("voting.seal.noKey")
          : t("voting.seal.failed"),
      "seal",
    );
    return;
  }
  document.body.dataset.sealMs = sealed.ms.toFixed(1);
  setStatus(t("voting.casting"));
  try {
    const res = await api.fetch(`${API}/elections/${encodeURIComponent(electionId())}/votes`, {
      method: "POST",
      headers,
      body: JSON.stringify({ sealed: sealed.sealed }),
    });
    if (res.status === 201) {
      const r = await res.json();
      pending = null;
      showReceipt(r, sealed.tracker);
      return;
    }
    const e = await api.errorOf(res);
    showError(e.message, e.code);
    if (res.status >= 400 && res.status < 500) change();
  } catch (_) {
    showError(Throng.UNREACHABLE, "network");
  } finally {
    submit.disabled = false;
  }
}

// The tracker this page computed is the one shown: the server's answer
// must agree, or the voter is told.
function showReceipt(r, tracker) {
  clearStatus();
  $("review").hidden = true;
  $("receipt-id").textContent = tracker;
  $("tracker-mismatch").hidden = r.tracker === tracker;
  $("receipt-link").href = `/voting/receipt?${new URLSearchParams({ electionId: r.electionId, districtId: r.districtId, tracker })}`;
  const q = new URLSearchParams({ electionId: r.electionId, districtId: r.districtId });
  $("results-link").href = `/voting/results?${q}`;
  $("vote-form").hidden = true;
  $("receipt").hidden = false;
  $("receipt").focus();
}

// Back to the form for another voter (a shared demo machine): the ballot is
// cleared, the identity emptied.
function again() {
  $("receipt").hidden = true;
  $("vote-form").hidden = false;
  $("voter-id").value = "";
  $("token").value = "";
  $("login-voter").value = "";
  $("login-credential").value = "";
  $("signed-in").hidden = true;
  for (const r of document.querySelectorAll('#parties input[name="party"]')) r.checked = false;
  renderCandidates(null);
  clearStatus();
  $("voter-id").focus();
}

// Signs the voter in with the roll's voter id and credential: the answer
// names the voter's number, district and token for the vote.
async function signIn() {
  clearStatus();
  const voter = $("login-voter").value.trim();
  const credential = $("login-credential").value.trim();
  if (!voter || !credential) {
    showError(t("voting.vote.enterCredentials"), "missing_credentials");
    (voter ? $("login-credential") : $("login-voter")).focus();
    return;
  }
  const button = $("login-button");
  button.disabled = true;
  try {
    const res = await api.fetch(`${API}/elections/${encodeURIComponent(electionId())}/login`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ voterId: voter, credential }),
    });
    if (!res.ok) {
      const e = await api.errorOf(res);
      showError(e.message, e.code);
      return;
    }
    const s = await res.json();
    $("voter-id").value = String(s.voterNumber);
    $("token").value = s.token;
    $("login-credential").value = "";
    if (String(s.districtId) !== districtId()) {
      $("district").value = String(s.districtId);
      await loadBallot();
    }
    $("signed-in").textContent = t("voting.vote.signedInAs", { voter, district: s.districtName });
    $("signed-in").hidden = false;
    setStatus(t("voting.vote.signedIn", { voter }));
  } catch (_) {
    showError(Throng.UNREACHABLE, "network");
  } finally {
    button.disabled = false;
  }
}

async function start() {
  try {
    if (!(await loadElections())) return;
    await loadElection();
    await loadBallot();
  } catch (e) {
    showError(e.code ? e.message : Throng.UNREACHABLE, e.code || "network");
  }
}

$("election").addEventListener("change", async () => {
  clearStatus();
  try {
    await loadElection();
    await loadBallot();
  } catch (e) {
    showError(e.code ? e.message : Throng.UNREACHABLE, e.code || "network");
  }
});
$("district").addEventListener("change", () => {
  clearStatus();
  loadBallot();
});
$("demo-voter").addEventListener("click", demoVoter);
$("vote-form").addEventListener("submit", review);
$("confirm").addEventListener("click", castVote);
$("change").addEventListener("click", change);
$("login-button").addEventListener("click", signIn);
$("again").addEventListener("click", again);
// Another language: the words this script wrote, written again.
I18n.onChange(() => {
  showElectionWords();
  const party = chosenParty();
  $("candidates-party").textContent = party ? party.name : t("voting.vote.chosenParty");
  const hint = document.querySelector("#candidates > p.hint");
  if (hint) hint.textContent = t("voting.vote.partyFirst");
  updateLimit();
});
I18n.ready.then(start);
