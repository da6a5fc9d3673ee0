// The booking page. Under a crowd the server answers 429 with Retry-After;
// the page then waits that long plus random jitter (so a crowd does not come
// back in one wave), tells the person it is waiting, and retries.
"use strict";

const RETRIES_MAX = 20;
const JITTER_MS_MAX = 1000;
const $ = (id) => document.getElementById(id);
let chosenSlot = null;
let slotStarts = {};
// Counts loadSlots calls: an answer for an earlier choice of place or day can
// arrive after the answer for the latest one and must then be dropped.
let slotsRequest = 0;

function setStatus(text, kind) {
  const s = $("status");
  s.textContent = text;
  s.className = kind || "";
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// fetch that honours 429 + Retry-After (and 503) with jitter.
async function politeFetch(url, options) {
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(url, options);
    if ((res.status !== 429 && res.status !== 503) || attempt >= RETRIES_MAX) {
      return res;
    }
    const retryAfterS = Number(res.headers.get("Retry-After")) || 1;
    const waitMs = retryAfterS * 1000 + Math.floor(Math.random() * JITTER_MS_MAX);
    setStatus(`Many people are booking right now. Waiting ${Math.ceil(waitMs / 1000)} s, then trying again (attempt ${attempt + 2})…`, "waiting");
    await sleep(waitMs);
  }
}

async function errorMessage(res) {
  try {
    const body = await res.json();
    return body.error ? body.error.message : `HTTP ${res.status}`;
  } catch (_) {
    return `HTTP ${res.status}`;
  }
}

async function loadPlaces() {
  const res = await politeFetch("/api/booking/places?size=100");
  if (!res.ok) { setStatus(await errorMessage(res), "error"); return; }
  const body = await res.json();
  const sel = $("place");
  sel.innerHTML = "";
  for (const p of body.places) {
    const o = document.createElement("option");
    o.value = p.id;
    o.textContent = `${p.name} — ${p.address}`;
    sel.appendChild(o);
  }
  setStatus("");
}

async function loadSlots() {
  const request = ++slotsRequest;
  const place = $("place").value, day = $("day").value;
  const box = $("slots");
  box.innerHTML = "";
  chosenSlot = null;
  if (!place || !day) return;
  const res = await politeFetch(`/api/booking/places/${encodeURIComponent(place)}/slots?from=${encodeURIComponent(day)}&days=1`);
  if (request !== slotsRequest) return;
  if (!res.ok) { setStatus(await errorMessage(res), "error"); return; }
  setStatus("");
  const body = await res.json();
  if (request !== slotsRequest) return;
  const slots = body.days.length ? body.days[0].slots : [];
  slotStarts = {};
  if (!slots.length) { box.textContent = "No time slots on this day."; return; }
  for (const s of slots) {
    slotStarts[s.timeSlot] = s.start;
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = s.start;
    b.dataset.slot = s.timeSlot;
    b.disabled = !s.free;
    b.setAttribute("aria-pressed", "false");
    b.addEventListener("click", () => {
      for (const other of box.querySelectorAll("button")) other.setAttribute("aria-pressed", "false");
      b.setAttribute("aria-pressed", "true");
      chosenSlot = s.timeSlot;
    });
    box.appendChild(b);
  }
}

async function register(ev) {
  ev.preventDefault();
  if (chosenSlot === null) { setStatus("Choose a time first.", "error"); return; }
  const submit = $("submit");
  submit.disabled = true;
  setStatus("Registering…");
  try {
    const payload = {
      placeId: Number($("place").value),
      day: $("day").value,
      timeSlot: chosenSlot,
      person: { name: $("name").value, nationalId: $("nationalId").value, phone: $("phone").value, email: $("email").value },
    };
    const res = await politeFetch("/api/booking/registrations", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(payload),
    });
    if (res.status === 201) {
      const r = await res.json();
      $("conf-place").textContent = $("place").selectedOptions[0].textContent;
      $("conf-day").textContent = r.day;
      $("conf-time").textContent = slotStarts[r.timeSlot] || `slot ${r.timeSlot}`;
      $("conf-id").textContent = r.registrationId;
      $("conf-code").textContent = r.accessCode;
      $("confirmation").hidden = false;
      $("booking").hidden = true;
      setStatus("");
      return;
    }
    const message = await errorMessage(res);
    // Reload first: loadSlots clears the status, and the person must still
    // read why the slot they chose is gone.
    if (res.status === 409) await loadSlots();
    setStatus(message, "error");
  } catch (e) {
    setStatus("Cannot reach the server; check your connection and try again.", "error");
  } finally {
    submit.disabled = false;
  }
}

$("place").addEventListener("change", loadSlots);
$("day").addEventListener("change", loadSlots);
$("booking").addEventListener("submit", register);
// Today in the person's own time zone (toISOString alone would give the UTC date).
const now = new Date();
$("day").value = new Date(now.getTime() - now.getTimezoneOffset() * 60000).toISOString().slice(0, 10);
loadPlaces().then(loadSlots);
