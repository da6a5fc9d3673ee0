// The receipt check at /voting/receipt?electionId=E&receiptId=R: asks
// /api/voting/elections/E/receipts/R and says in words what the answer
// means: counted, received and waiting to be counted (and why), or not
// found. The receipt id comes from the address (the vote page links here)
// or is typed in.
"use strict";

const API = "/api/voting";
// The shared client (/assets/throng.js): it waits out a crowd and decodes answers.
const api = Throng.client();
const $ = (id) => document.getElementById(id);
let mixBallotsMin = null;

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

async function loadElection() {
  mixBallotsMin = null;
  try {
    mixBallotsMin = (await api.getJson(`${API}/elections/${encodeURIComponent($("election").value)}`)).mixBallotsMin ?? null;
  } catch (_) {
    // the rule's figure is a nicety; the answer does without it
  }
}

async function check() {
  const id = $("receipt-id").value.trim();
  const electionName = $("election").selectedOptions[0]?.textContent || "this election";
  if (!id) {
    show("invalid", "Enter a receipt id", "Copy the receipt id you were shown after voting into the box above.");
    return;
  }
  const q = new URLSearchParams({ electionId: $("election").value, receiptId: id });
  history.replaceState(null, "", `/voting/receipt?${q}`);
  show("checking", "Checking…", "");
  let res;
  try {
    res = await api.fetch(`${API}/elections/${encodeURIComponent($("election").value)}/receipts/${encodeURIComponent(id)}`);
  } catch (_) {
    show("error", "The server cannot be reached", "Check your connection and try again.");
    return;
  }
  if (res.status === 404) {
    show(
      "not_found",
      "Not found",
      `No ballot with this receipt id was cast in ${electionName}.`,
      "Check that the whole id was copied (36 characters: letters a-f, digits and four dashes) and that the election is the one you voted in.",
    );
    return;
  }
  if (!res.ok) {
    show("error", "The receipt could not be checked", (await api.errorOf(res)).message);
    return;
  }
  const r = await res.json();
  if (r.counted) {
    show(
      "counted",
      "Counted",
      `This ballot is counted: it is in the published results of ${electionName}.`,
      "The receipt proves that your ballot was counted, not how you voted: nobody can learn your choice from it.",
    );
  } else {
    show(
      "waiting",
      "Received, waiting to be counted",
      `This ballot is in the ballot box of ${electionName} and will be counted.`,
      (mixBallotsMin
        ? `A district's ballots are published to the results together, once its box holds at least ${mixBallotsMin} ${mixBallotsMin === 1 ? "ballot" : "ballots"}, `
        : "A district's ballots are published to the results together, once its box holds enough of them, ") +
        "so that no ballot can be told apart from the others (every waiting ballot is published when the election closes). Check again later.",
    );
  }
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
  $("receipt-id").value = params.get("receiptId") || "";
  await loadElection();
  if ($("receipt-id").value) await check();
}

$("check").addEventListener("submit", (ev) => {
  ev.preventDefault();
  check();
});
$("election").addEventListener("change", loadElection);
start();
