// The staff page: a place's day read with a staff (or admin) token, kept in
// this tab's sessionStorage only; check-in and no-show per person, print,
// CSV, closing the day. The token goes in Authorization, never in a URL.
"use strict";

const $ = (id) => document.getElementById(id);
const t = I18n.t;
const api = Throng.client({
  onWait: ({ waitMs, attempt }) => setStatus(t("staff.wait", { s: Math.ceil(waitMs / 1000), attempt }), "waiting"),
});
const TOKEN_KEY = "throng.staff.token";
let current = null; // { place, day, list }

function setStatus(text, kind) {
  const s = $("status");
  s.textContent = text || "";
  s.classList.remove("error", "waiting");
  if (kind) s.classList.add(kind);
}

function setFieldError(id, text) {
  const input = $(id), err = $(`${id}-error`);
  err.textContent = text || "";
  err.hidden = !text;
  if (text) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid");
}

// Signed in to the admin console: its session signs the calls in.
let bySession = false;

function auth() {
  const token = $("s-token").value.trim();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

function sentence(error) {
  switch (error.code) {
    case "missing_token": case "invalid_token": return t("staff.error.invalid_token");
    case "token_expired": return t("staff.error.token_expired");
    case "not_your_place": case "no_places": case "forbidden": return error.message;
    case "place_not_found": return t("staff.error.place_not_found", { place: $("s-place").value.trim() });
    default: return error.message;
  }
}

async function load(event) {
  if (event) event.preventDefault();
  ["s-token", "s-place", "s-day"].forEach((id) => setFieldError(id, ""));
  const token = $("s-token").value.trim(), place = $("s-place").value.trim(), day = $("s-day").value;
  let ok = true;
  if (!token && !bySession) { setFieldError("s-token", t("staff.rule.token")); ok = false; }
  if (!/^[1-9][0-9]{0,9}$/.test(place)) { setFieldError("s-place", t("staff.rule.place")); ok = false; }
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) { setFieldError("s-day", t("booking.rule.day")); ok = false; }
  if (!ok) return;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  setStatus(t("common.loading"));
  const res = await api.fetch(`/api/booking/places/${place}/days/${day}/registrations`, { headers: auth() });
  if (!res.ok) { $("day").hidden = true; setStatus(sentence(await api.errorOf(res)), "error"); return; }
  current = { place, day, list: await res.json() };
  show(current.list);
  setStatus("");
}

function cell(row, label, text, className) {
  const td = document.createElement("td");
  td.dataset.label = label;
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

const attendance = (status) => (status === "checked_in" ? t("staff.checkedIn") : status === "no_show" ? t("staff.noShow") : t("staff.expected"));

function show(list) {
  $("d-title").textContent = `${list.placeName}, ${I18n.date(list.day)}`;
  const came = list.registrations.filter((r) => r.attendance === "checked_in").length;
  $("d-summary").textContent = list.closed
    ? t("staff.closedSummary", { address: list.address })
    : `${t("staff.summary", { count: list.count, came, address: list.address })}${list.truncated ? t("staff.truncated") : ""}`;
  const rows = $("d-rows");
  rows.replaceChildren();
  for (const r of list.registrations) {
    const tr = document.createElement("tr");
    tr.dataset.id = r.registrationId;
    if (r.attendance) tr.className = r.attendance;
    cell(tr, t("staff.col.time"), r.start);
    cell(tr, t("booking.field.name"), r.person.name);
    cell(tr, t("booking.field.nationalId"), r.person.nationalId);
    cell(tr, t("booking.field.phone"), r.person.phone);
    cell(tr, t("staff.col.attendance"), attendance(r.attendance), "att");
    const mark = cell(tr, "", "", "mark no-print");
    for (const [status, label] of [["checked_in", t("staff.checkIn")], ["no_show", t("staff.noShow")]]) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.dataset.status = status;
      b.setAttribute("aria-label", t("staff.markLabel", { action: label, name: r.person.name, time: r.start }));
      b.addEventListener("click", () => markAttendance(r, status, tr));
      mark.appendChild(b);
    }
    rows.appendChild(tr);
  }
  $("d-empty").hidden = list.registrations.length > 0;
  $("d-table").hidden = list.registrations.length === 0;
  $("d-close").disabled = list.closed;
  $("day").hidden = false;
}

async function markAttendance(r, status, tr) {
  setStatus(t("staff.saving"));
  const res = await api.fetch(`/api/booking/staff/registrations/${encodeURIComponent(r.registrationId)}/attendance`, {
    method: "POST", headers: { ...auth(), "Content-Type": "application/json" }, body: JSON.stringify({ status }),
  });
  if (!res.ok) { setStatus(sentence(await api.errorOf(res)), "error"); return; }
  r.attendance = status;
  tr.className = status;
  tr.querySelector("td.att").textContent = attendance(status);
  show(current.list);
  setStatus(t("staff.marked", { name: r.person.name, status: attendance(status).toLocaleLowerCase(I18n.lang) }));
}

async function downloadCsv() {
  if (!current) return;
  const res = await api.fetch(`/api/booking/places/${current.place}/days/${current.day}/registrations`, {
    headers: { ...auth(), Accept: "text/csv" },
  });
  if (!res.ok) { setStatus(sentence(await api.errorOf(res)), "error"); return; }
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = `place-${current.place}-${current.day}.csv`;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

async function closeDay() {
  $("d-close-confirm").hidden = true;
  setStatus(t("staff.closing"));
  const res = await api.fetch(`/api/booking/places/${current.place}/days/${current.day}/close`, { method: "POST", headers: auth() });
  if (!res.ok) { setStatus(sentence(await api.errorOf(res)), "error"); return; }
  const closed = await res.json();
  await load();
  setStatus(closed.alreadyClosed ? t("staff.closedAlready") : t("staff.closedNow", { count: closed.cancelled }));
}

$("pick").addEventListener("submit", load);
$("d-print").addEventListener("click", () => window.print());
$("d-csv").addEventListener("click", downloadCsv);
$("d-close").addEventListener("click", () => { $("d-close-confirm").hidden = false; });
$("d-close-no").addEventListener("click", () => { $("d-close-confirm").hidden = true; });
$("d-close-yes").addEventListener("click", closeDay);
$("s-token").value = sessionStorage.getItem(TOKEN_KEY) || "";
if (!$("s-day").value) $("s-day").value = new Date().toISOString().slice(0, 10);
const params = new URLSearchParams(location.hash.slice(1));
if (params.get("place")) $("s-place").value = params.get("place");
if (params.get("day")) $("s-day").value = params.get("day");
// Opened from the admin console: its session signs the calls in, and a
// staff member of one place has it filled in.
if (!$("s-token").value) {
  Throng.consoleSession().then((who) => {
    if (!who) return;
    bySession = true;
    Throng.showConsoleSession($("s-token").closest("label"), who);
    const places = String(who.claims.places ?? "");
    if (!$("s-place").value && /^[1-9][0-9]*$/.test(places)) $("s-place").value = places;
  });
}
// Another language: the day's list written again in its words.
I18n.onChange(() => { if (current) show(current.list); });
