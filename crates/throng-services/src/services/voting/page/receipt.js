// Finding a ballot on the public board at
// /voting/receipt?electionId=E&districtId=D&tracker=T: asks
// /api/voting/elections/E/districts/D/board/T and says in words what the
// answer means: on the board (in the box the trustees open), not yet (the
// board publishes every period), or not there. The tracker comes from the
// address (the vote page links here) or is typed in.
"use strict";

const API = "/api/voting";
// The shared client (/assets/throng.js): it waits out a crowd and decodes answers.
const api = Throng.client();
const $ = (id) => document.getElementById(id);
const t = I18n.t;
let periodMs = null;
// The last answer shown, as a function, to write it again in another language.
let shown = null;

function option(value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

function show(state, title, text, more) {
  shown = () => show(state, title, text, more);
  if (typeof title === "function") [title, text, more] = [title(), text(), more && more()];
  $("answer").hidden = false;
  $("answer").dataset.state = state;
  $("answer-title").textContent = title;
  $("answer-text").textContent = text;
  $("answer-more").textContent = more || "";
}

async function loadElection(wantedDistrict) {
  periodMs = null;
  const id = $("election").value;
  $("district").replaceChildren();
  try {
    const e = await api.getJson(`${API}/elections/${encodeURIComponent(id)}`);
    periodMs = e.boardPeriodMs ?? null;
    for (const d of e.districts) $("district").appendChild(option(d.districtId, d.name));
    if (wantedDistrict && [...$("district").options].some((o) => o.value === wantedDistrict)) $("district").value = wantedDistrict;
    const board = await api.getJson(`${API}/elections/${encodeURIComponent(id)}/board`);
    const ballots = board.districts.reduce((n, d) => n + d.ballots, 0);
    boardWords = () => board.complete
      ? t("voting.board.complete", { count: ballots })
      : t("voting.board.open", { count: ballots, s: Math.round(board.periodMs / 1000) });
    $("board-text").textContent = boardWords();
    $("board-digest").textContent = board.digest;
    $("board-summary").hidden = false;
  } catch (_) {
    $("board-summary").hidden = true;
  }
}

let boardWords = null;

async function check() {
  const tracker = $("receipt-id").value.trim();
  const electionName = () => $("election").selectedOptions[0]?.textContent || t("voting.find.thisElection");
  if (!tracker) {
    show("invalid", () => t("voting.find.enter"), () => t("voting.find.enterHow"));
    return;
  }
  const q = new URLSearchParams({ electionId: $("election").value, districtId: $("district").value, tracker });
  history.replaceState(null, "", `/voting/receipt?${q}`);
  show("checking", () => t("voting.find.looking"), () => "");
  let res;
  try {
    res = await api.fetch(`${API}/elections/${encodeURIComponent($("election").value)}/districts/${encodeURIComponent($("district").value)}/board/${encodeURIComponent(tracker)}`);
  } catch (_) {
    show("error", () => t("voting.find.unreachable"), () => t("voting.find.checkConnection"));
    return;
  }
  if (res.status === 404 || res.status === 400) {
    const e = await api.errorOf(res);
    if (e.code === "tracker_not_on_board") {
      const district = $("district").selectedOptions[0]?.textContent;
      show(
        "waiting",
        () => t("voting.find.notYet"),
        () => t("voting.find.notYetText", { district: district || t("voting.find.thisDistrict"), election: electionName() }),
        () => (periodMs ? t("voting.find.addsEvery", { s: Math.round(periodMs / 1000) }) : t("voting.find.addsPeriodically")) + t("voting.find.lookAgain"),
      );
    } else {
      show("not_found", () => t("voting.find.notTracker"), () => e.message, () => t("voting.find.trackerIs"));
    }
    return;
  }
  if (!res.ok) {
    const message = (await api.errorOf(res)).message;
    show("error", () => t("voting.find.unreadable"), () => message);
    return;
  }
  const r = await res.json();
  show(
    "counted",
    () => t("voting.find.onBoard"),
    () => t("voting.find.onBoardText", { election: electionName(), period: String(r.period) }),
    () => t("voting.find.onBoardMore"),
  );
}

async function start() {
  const params = new URLSearchParams(location.search);
  try {
    for (const e of (await api.getJson(`${API}/elections`)).elections) $("election").appendChild(option(e.electionId, e.name));
  } catch (_) {
    show("error", () => t("voting.find.unreachable"), () => t("voting.find.reload"));
    return;
  }
  const wanted = params.get("electionId");
  if (wanted && [...$("election").options].some((o) => o.value === wanted)) $("election").value = wanted;
  $("receipt-id").value = params.get("tracker") || "";
  await loadElection(params.get("districtId"));
  if ($("receipt-id").value) await check();
}

$("check").addEventListener("submit", (ev) => {
  ev.preventDefault();
  check();
});
$("election").addEventListener("change", () => loadElection(null));
// Another language, or the catalogue come in after the first answer: the
// answer and the board's line written again. The page starts at once (the
// words are functions, written when they are shown).
function rewrite() {
  if (shown) shown();
  if (boardWords) $("board-text").textContent = boardWords();
}
I18n.onChange(rewrite);
I18n.ready.then(rewrite);
start();
