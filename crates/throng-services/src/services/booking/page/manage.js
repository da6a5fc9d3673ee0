// The manage page: a registration opened with its id and access code (typed,
// or from the link the booking page gives: /booking/manage#id=..&code=..,
// the fragment never reaches a server), then viewed, moved or cancelled.
"use strict";

const { $, setStatus, api, reads, attempt, failureText, showFailure, STALE, fieldOfMessage, plainMessage, setFieldError } = Booking;
const t = I18n.t;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
let current = null; // { id, code, reg }
let chosenSlot = null;
let slotsRequest = 0;

const cal = Booking.calendar($("m-calendar"), {
  onPick: (day) => { $("m-day").value = day; setFieldError("m-day", ""); attempt(t("booking.slots.loading"), loadSlots); },
});

function fromFragment() {
  const p = new URLSearchParams(location.hash.slice(1));
  return { id: p.get("id") || "", code: p.get("code") || "" };
}

async function open(id, code) {
  setFieldError("m-id", ""); setFieldError("m-code", "");
  let ok = true;
  if (!UUID.test(id)) { setFieldError("m-id", t("booking.manage.idRule")); ok = false; }
  if (!code) { setFieldError("m-code", t("booking.manage.codeRule")); ok = false; }
  if (!ok) return;
  setStatus(t("booking.manage.opening"), "loading");
  let res;
  try {
    res = await reads.fetch(`/api/booking/registrations/${encodeURIComponent(id)}`, { headers: { "X-Access-Code": code } });
  } catch (_) {
    showFailure(Throng.UNREACHABLE, () => open(id, code));
    return;
  }
  if (res.status === 404) {
    $("registration").hidden = true;
    setStatus(t("error.registration_not_found"), "error");
    return;
  }
  if (!res.ok) { showFailure(failureText(await reads.errorOf(res)), () => open(id, code)); return; }
  const reg = await res.json();
  current = { id, code, reg };
  // Keeps the registration open across a reload, in the fragment only.
  history.replaceState(null, "", Booking.manageLink(id, code));
  show(reg);
  setStatus("");
}

function show(reg) {
  $("r-place").textContent = reg.placeName || t("booking.manage.place", { id: reg.placeId });
  $("r-address").textContent = reg.address || "";
  $("r-day").dateTime = reg.day;
  $("r-day").textContent = I18n.date(reg.day);
  $("r-time").textContent = reg.start || t("booking.slot", { slot: reg.timeSlot });
  $("r-name").textContent = reg.person ? reg.person.name : "";
  $("registration").hidden = false;
  $("cancelled").hidden = true;
  $("find").hidden = true;
}

async function openMove() {
  $("move").hidden = false;
  $("cancel-confirm").hidden = true;
  await attempt(t("booking.days.loading"), async () => {
    const body = await cal.show(current.reg.placeId, current.reg.day.slice(0, 7));
    $("m-day").min = body.today;
    $("m-day").value = current.reg.day >= body.today ? current.reg.day : body.today;
    cal.select($("m-day").value);
    await loadSlots();
  });
}

async function loadSlots() {
  const request = ++slotsRequest;
  const box = $("m-slots");
  box.innerHTML = "";
  chosenSlot = null;
  const day = $("m-day").value;
  if (!day) return;
  box.textContent = t("booking.slots.loading");
  let body;
  try {
    body = await reads.getJson(`/api/booking/places/${current.reg.placeId}/slots?from=${encodeURIComponent(day)}&days=1`);
  } finally {
    if (request === slotsRequest) box.textContent = "";
  }
  if (request !== slotsRequest) throw STALE;
  const slots = body.days.length ? body.days[0].slots : [];
  Booking.slotButtons(box, slots, "m-slots", (slot) => { chosenSlot = slot; });
}

async function move() {
  setFieldError("m-day", ""); setFieldError("m-slots", "");
  const day = $("m-day").value;
  let ok = true;
  if (!day) { setFieldError("m-day", t("booking.rule.day")); ok = false; }
  else if ($("m-day").min && day < $("m-day").min) { setFieldError("m-day", t("booking.rule.dayPassed")); ok = false; }
  if (chosenSlot === null) { setFieldError("m-slots", t("booking.rule.time")); ok = false; }
  if (!ok) return;
  $("m-move").disabled = true;
  setStatus(t("booking.manage.moving"));
  try {
    const res = await api.fetch(`/api/booking/registrations/${encodeURIComponent(current.id)}/move`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Access-Code": current.code },
      body: JSON.stringify({ placeId: current.reg.placeId, day, timeSlot: chosenSlot }),
    });
    if (res.ok) {
      const m = await res.json();
      await open(current.id, current.code);
      $("move").hidden = true;
      setStatus(t("booking.manage.moved", { day: I18n.date(m.day), time: m.start }));
      return;
    }
    const error = await api.errorOf(res);
    const field = res.status === 422 ? fieldOfMessage(error.message) : undefined;
    if (res.status === 409) await attempt(t("booking.slots.loading"), loadSlots);
    if (field === "day" || field === "slots") {
      setFieldError(field === "day" ? "m-day" : "m-slots", plainMessage(field, error.message, error.code));
      setStatus("");
    } else if (error.code === "slot_full" || error.code === "slot_taken") {
      setFieldError("m-slots", t("booking.manage.slotTaken"));
      setStatus("");
    } else if (res.status >= 500 || res.status === 429) {
      setStatus(`${failureText(error)} ${t("booking.manage.pressAgain")}`, "error");
    } else {
      setStatus(error.message, "error");
    }
  } catch (_) {
    setStatus(t("booking.manage.unreachable"), "error");
  } finally {
    $("m-move").disabled = false;
  }
}

async function cancel() {
  setStatus(t("booking.manage.cancelling"), "loading");
  let res;
  try {
    res = await api.fetch(`/api/booking/registrations/${encodeURIComponent(current.id)}`, { method: "DELETE", headers: { "X-Access-Code": current.code } });
  } catch (_) {
    showFailure(Throng.UNREACHABLE, cancel);
    return;
  }
  if (res.status === 204) {
    current = null;
    history.replaceState(null, "", "/booking/manage");
    $("registration").hidden = true;
    $("cancelled").hidden = false;
    setStatus("");
    return;
  }
  if (res.status === 404) { setStatus(t("booking.manage.gone"), "error"); return; }
  showFailure(failureText(await api.errorOf(res)), cancel);
}

$("find").addEventListener("submit", (ev) => { ev.preventDefault(); open($("m-id").value.trim(), $("m-code").value.trim()); });
$("r-ics").addEventListener("click", () => Booking.downloadIcs(current.id, current.code));
$("r-move-open").addEventListener("click", openMove);
$("m-day").addEventListener("change", async () => {
  setFieldError("m-day", "");
  if ($("m-day").min && $("m-day").value < $("m-day").min) {
    setFieldError("m-day", t("booking.rule.dayPassed"));
    $("m-slots").innerHTML = ""; chosenSlot = null;
    return;
  }
  attempt(t("booking.slots.loading"), async () => {
    if ($("m-day").value.slice(0, 7) !== cal.month) await cal.show(current.reg.placeId, $("m-day").value.slice(0, 7));
    cal.select($("m-day").value);
    await loadSlots();
  });
});
$("m-move").addEventListener("click", move);
$("r-cancel").addEventListener("click", () => { $("cancel-confirm").hidden = false; $("move").hidden = true; });
$("r-cancel-no").addEventListener("click", () => { $("cancel-confirm").hidden = true; });
$("r-cancel-yes").addEventListener("click", cancel);
window.addEventListener("hashchange", () => { const f = fromFragment(); if (f.id) open(f.id, f.code); });
// Another language: the day the script wrote, written again.
I18n.onChange(() => { if (current) $("r-day").textContent = I18n.date(current.reg.day); });
const initial = fromFragment();
if (initial.id) { $("m-id").value = initial.id; $("m-code").value = initial.code; I18n.ready.then(() => open(initial.id, initial.code)); }
