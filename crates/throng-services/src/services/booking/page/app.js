// The booking page. Under a crowd the server answers 429 with Retry-After;
// the page then waits that long plus random jitter (so a crowd does not come
// back in one wave), tells the person it is waiting, and retries
// (`Booking.api`, common.js, over the shared client /assets/throng.js).
"use strict";

const { $, setStatus, api, reads, attempt, failureText, STALE, PERSON_RULES, fieldOfMessage, plainMessage, setFieldError, clearFieldErrors } = Booking;
const t = I18n.t;
const FIELDS = ["place", "day", "slots", "name", "nationalId", "phone", "email"];
let chosenSlot = null;
let slotStarts = {};
// Counts loadSlots calls: an answer for an earlier choice of place or day can
// arrive after the answer for the latest one and must then be dropped.
let slotsRequest = 0;
let registered = null;

const cal = Booking.calendar($("calendar"), {
  onPick: (day) => { $("day").value = day; setFieldError("day", ""); attempt(t("booking.slots.loading"), loadSlots); },
});

// Every load throws on a failed answer (Booking.attempt shows it with a Try
// again button) and throws STALE when a newer choice overtook it.

// The places: a page of the search's matches at a time (by name, city or
// postcode, region and service), so 2,000 places are never one list.
const PLACES_PAGE = 20;
let placesRequest = 0;
let placesCursor = null;

function placesSearch() {
  const params = new URLSearchParams({ size: String(PLACES_PAGE) });
  const q = $("place-q").value.trim();
  if (q) params.set("q", q);
  if ($("place-region").value) params.set("region", $("place-region").value);
  if ($("place-service").value) params.set("service", $("place-service").value);
  return params;
}

// The first page of matches (or, with `more`, the next one appended).
async function loadPlaces(more) {
  const request = ++placesRequest;
  const params = placesSearch();
  if (more && placesCursor) params.set("cursor", String(placesCursor));
  const sel = $("place");
  sel.setAttribute("aria-busy", "true");
  let body;
  try {
    body = await reads.getJson(`/api/booking/places?${params}`);
  } catch (e) {
    if (request === placesRequest && sel.options.length === 1 && !sel.options[0].value) { sel.options[0].removeAttribute("data-i18n"); sel.options[0].textContent = t("booking.places.failed"); }
    throw e;
  } finally {
    if (request === placesRequest) sel.setAttribute("aria-busy", "false");
  }
  if (request !== placesRequest) throw STALE;
  const chosen = sel.value;
  if (!more) sel.innerHTML = "";
  for (const p of body.places) {
    const o = document.createElement("option");
    o.value = p.id;
    o.textContent = p.city && !p.address.includes(p.city) ? `${p.name} — ${p.address}, ${p.city}` : `${p.name} — ${p.address}`;
    sel.appendChild(o);
  }
  if (more) sel.value = chosen;
  const shown = sel.options.length;
  placesCursor = shown < body.total ? body.nextCursor || null : null;
  $("place-more").hidden = !placesCursor;
  placesCount = { total: body.total, shown };
  showPlacesCount();
  sel.disabled = shown === 0;
  if (shown === 0) {
    slotsRequest++;
    chosenSlot = null;
    $("slots").innerHTML = "";
    $("calendar").innerHTML = "";
  }
}

// How many places match, and how many are listed.
let placesCount = null;
function showPlacesCount() {
  if (!placesCount) return;
  const { total, shown } = placesCount;
  $("place-count").textContent = total === 0
    ? t("booking.places.none")
    : shown < total
      ? t("booking.places.some", { count: total, shown })
      : t("booking.places.all", { count: total });
}

// The regions and services a search can be narrowed by.
async function loadFilters() {
  const body = await reads.getJson("/api/booking/places/filters");
  for (const [id, values] of [["place-region", body.regions], ["place-service", body.services]]) {
    const sel = $(id);
    for (const o of [...sel.options]) if (o.value) o.remove();
    for (const v of values) {
      const o = document.createElement("option");
      o.value = v.value;
      o.textContent = `${v.value} (${v.places})`;
      sel.appendChild(o);
    }
    sel.closest("label").hidden = values.length === 0;
  }
}

// A new search: its first page, and the days and times of its first place
// when that changed.
async function findPlaces() {
  const before = $("place").value;
  await loadPlaces(false);
  if ($("place").value && $("place").value !== before) {
    await loadCalendar();
    await loadSlots();
  }
}

// The month of the chosen day (or of today), with its free days marked; the
// server's today (slot times are the server's) is the picker's minimum.
async function loadCalendar() {
  const place = $("place").value;
  if (!place) return;
  const month = ($("day").value || cal.today || new Date().toISOString()).slice(0, 7);
  const body = await cal.show(place, month);
  $("day").min = body.today;
  if (!$("day").value || $("day").value < body.today) {
    const first = body.days.find((d) => d.day >= body.today && d.free > 0);
    $("day").value = first ? first.day : body.today;
    if (first && first.day.slice(0, 7) !== body.month) await cal.show(place, first.day.slice(0, 7));
  }
  cal.select($("day").value);
}

async function loadSlots() {
  const request = ++slotsRequest;
  const place = $("place").value, day = $("day").value;
  const box = $("slots");
  box.innerHTML = "";
  chosenSlot = null;
  if (!place || !day) return;
  box.textContent = t("booking.slots.loading");
  box.setAttribute("aria-busy", "true");
  let body;
  try {
    body = await reads.getJson(`/api/booking/places/${encodeURIComponent(place)}/slots?from=${encodeURIComponent(day)}&days=1`);
  } catch (e) {
    if (request === slotsRequest) box.textContent = "";
    throw e;
  } finally {
    if (request === slotsRequest) box.setAttribute("aria-busy", "false");
  }
  if (request !== slotsRequest) throw STALE;
  box.textContent = "";
  const slots = body.days.length ? body.days[0].slots : [];
  slotStarts = {};
  for (const s of slots) slotStarts[s.timeSlot] = s.start;
  Booking.slotButtons(box, slots, "slots", (slot) => { chosenSlot = slot; });
}

// Every rule at once, each message beside its field; true when all pass.
function checkForm() {
  clearFieldErrors(FIELDS);
  let ok = true;
  const fail = (field, text) => { setFieldError(field, text); ok = false; };
  const day = $("day").value;
  if (!day) fail("day", t("booking.rule.day"));
  else if ($("day").min && day < $("day").min) fail("day", t("booking.rule.dayPassed"));
  if (chosenSlot === null) fail("slots", t("booking.rule.time"));
  for (const f of ["name", "nationalId", "phone", "email"]) {
    if (!PERSON_RULES[f].ok($(f).value)) fail(f, PERSON_RULES[f].text);
  }
  return ok;
}

async function register(ev) {
  ev.preventDefault();
  if (!checkForm()) {
    setStatus(t("common.correctFields"), "error");
    const first = FIELDS.find((f) => !$(`${f}-error`).hidden);
    if (first && $(first)) $(first).focus();
    return;
  }
  const submit = $("submit");
  submit.disabled = true;
  setStatus(t("booking.book.registering"));
  try {
    const payload = {
      placeId: Number($("place").value),
      day: $("day").value,
      timeSlot: chosenSlot,
      person: { name: $("name").value, nationalId: $("nationalId").value, phone: $("phone").value, email: $("email").value },
    };
    const res = await api.fetch("/api/booking/registrations", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(payload),
    });
    if (res.status === 201) {
      const r = await res.json();
      registered = r;
      $("conf-place").textContent = $("place").selectedOptions[0].textContent;
      $("conf-day").dateTime = r.day;
      $("conf-day").textContent = I18n.date(r.day);
      $("conf-time").textContent = slotStarts[r.timeSlot] || t("booking.slot", { slot: r.timeSlot });
      $("conf-id").textContent = r.registrationId;
      $("conf-code").textContent = r.accessCode;
      $("conf-manage").href = Booking.manageLink(r.registrationId, r.accessCode);
      $("confirmation").hidden = false;
      $("booking").hidden = true;
      setStatus("");
      // A screen reader and the keyboard continue from the confirmation.
      $("confirmation").focus();
      return;
    }
    const error = await api.errorOf(res);
    if (res.status === 422) {
      const field = fieldOfMessage(error.message);
      if (field) {
        setFieldError(field, plainMessage(field, error.message, error.code));
        setStatus(t("common.correctFields"), "error");
        if (error.code === "slot_passed" || error.code === "day_passed" || error.code === "notice_too_short") {
          if (await attempt(t("booking.slots.loading"), async () => { await loadCalendar(); await loadSlots(); })) {
            setFieldError(field, plainMessage(field, error.message, error.code));
            setStatus(t("common.correctFields"), "error");
          }
        }
        return;
      }
    }
    if (res.status === 409) {
      // Reload first: loading clears the status, and the person must
      // still read why the slot they chose is gone.
      await attempt(t("booking.slots.loading"), async () => { await loadSlots(); await loadCalendar(); });
      if ($("status").className === "error") return;
    }
    if (error.code === "already_registered") {
      setStatus(t("booking.book.already_registered"), "error");
      const a = document.createElement("a");
      a.href = "/booking/manage";
      a.textContent = t("booking.book.already_registered_link");
      $("status").appendChild(a);
      return;
    }
    if (res.status >= 500 || res.status === 429 || res.status === 503) {
      // The registration may or may not have been made: pressing Register
      // again is safe (a second one for the person is refused).
      setStatus(`${failureText(error)} ${t("booking.book.pressAgain")}`, "error");
      return;
    }
    setStatus(error.message, "error");
  } catch (e) {
    setStatus(t("booking.book.unreachable"), "error");
  } finally {
    submit.disabled = false;
  }
}

$("place").addEventListener("change", () => attempt(t("booking.days.loading"), async () => { await loadCalendar(); await loadSlots(); }));
let typing = null;
$("place-q").addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(() => attempt(t("booking.places.finding"), findPlaces), 250);
});
$("place-q").addEventListener("keydown", (e) => {
  if (e.key !== "Enter") return;
  e.preventDefault();
  clearTimeout(typing);
  attempt(t("booking.places.finding"), findPlaces);
});
for (const id of ["place-region", "place-service"]) $(id).addEventListener("change", () => attempt(t("booking.places.finding"), findPlaces));
$("place-more").addEventListener("click", () => attempt(t("booking.places.loadingMore"), () => loadPlaces(true)));
$("day").addEventListener("change", async () => {
  setFieldError("day", "");
  if ($("day").min && $("day").value && $("day").value < $("day").min) {
    setFieldError("day", t("booking.rule.dayPassed"));
    slotsRequest++;
    $("slots").innerHTML = "";
    chosenSlot = null;
    return;
  }
  attempt(t("booking.slots.loading"), async () => {
    if ($("day").value && $("day").value.slice(0, 7) !== cal.month) await cal.show($("place").value, $("day").value.slice(0, 7));
    cal.select($("day").value);
    await loadSlots();
  });
});
for (const f of ["name", "nationalId", "phone", "email"]) {
  // A field's message goes as soon as it is right (while typing: going on
  // blur would shift the page under a click on Register); none is shown
  // while typing.
  $(f).addEventListener("input", () => { if (!$(`${f}-error`).hidden && PERSON_RULES[f].ok($(f).value)) setFieldError(f, ""); });
}
$("booking").addEventListener("submit", register);
$("conf-ics").addEventListener("click", () => registered && Booking.downloadIcs(registered.registrationId, registered.accessCode));
$("conf-copy").addEventListener("click", () => registered && Booking.copyText(registered.accessCode, $("conf-copy"), $("conf-code")));
// Another language: the words the script wrote, written again.
I18n.onChange(() => {
  showPlacesCount();
  if (registered) $("conf-day").textContent = I18n.date(registered.day);
});
I18n.ready.then(() => attempt(t("booking.places.loading"), async () => { await Promise.all([loadFilters(), loadPlaces(false)]); await loadCalendar(); await loadSlots(); }));
