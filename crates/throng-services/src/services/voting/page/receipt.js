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
let periodMs = null;

function option(value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

function show(state, title, text, more) {
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
    $("board-text").textContent = `${ballots} ${ballots === 1 ? "ballot" : "ballots"} on the board` +
      (board.complete ? ", complete: the election is closed." : ", updated every " + Math.round(board.periodMs / 1000) + " s while the election is open.");
    $("board-digest").textContent = board.digest;
    $("board-summary").hidden = false;
  } catch (_) {
    $("board-summary").hidden = true;
  }
}

async function check() {
  const tracker = $("receipt-id").value.trim();
  const electionName = $("election").selectedOptions[0]?.textContent || "this election";
  if (!tracker) {
    show("invalid", "Enter your tracker", "Copy the tracker you were shown after voting into the box above.");
    return;
  }
  const q = new URLSearchParams({ electionId: $("election").value, districtId: $("district").value, tracker });
  history.replaceState(null, "", `/voting/receipt?${q}`);
  show("checking", "Looking…", "");
  let res;
  try {
    res = await api.fetch(`${API}/elections/${encodeURIComponent($("election").value)}/districts/${encodeURIComponent($("district").value)}/board/${encodeURIComponent(tracker)}`);
  } catch (_) {
    show("error", "The server cannot be reached", "Check your connection and try again.");
    return;
  }
  if (res.status === 404 || res.status === 400) {
    const e = await api.errorOf(res);
    if (e.code === "tracker_not_on_board") {
      show(
        "waiting",
        "Not on the board yet",
        `This tracker is not on the board of ${$("district").selectedOptions[0]?.textContent || "this district"} in ${electionName} yet.`,
        (periodMs ? `The board adds new ballots every ${Math.round(periodMs / 1000)} s; ` : "The board adds new ballots periodically; ") +
          "look again in a moment. If it is still missing after that, check the district and that the whole tracker was copied, then tell the election authority.",
      );
    } else {
      show("not_found", "Not a tracker", e.message, "A tracker is 43 characters: letters, digits, - and _.");
    }
    return;
  }
  if (!res.ok) {
    show("error", "The board could not be read", (await api.errorOf(res)).message);
    return;
  }
  const r = await res.json();
  show(
    "counted",
    "On the board",
    `Your sealed ballot is in the ballot box of ${electionName}: the board published it in period ${r.period}.`,
    "The trustees open the box after the close and count every ballot in it. The tracker shows that your ballot is there, not how you voted: nobody can learn your choice from it.",
  );
}

async function start() {
  const params = new URLSearchParams(location.search);
  try {
    for (const e of (await api.getJson(`${API}/elections`)).elections) $("election").appendChild(option(e.electionId, e.name));
  } catch (_) {
    show("error", "The server cannot be reached", "Reload the page to try again.");
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
start();
