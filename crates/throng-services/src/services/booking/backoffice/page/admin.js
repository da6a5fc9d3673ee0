// The places admin page: find places (the search API), define and change a
// place (its hours, seats, days), import a CSV of places, make the new days
// of the horizon. An admin token, kept in this tab's sessionStorage only,
// goes in Authorization. A refused field is shown beside that field; a
// failed request says what to do and offers Try again.
"use strict";

const $ = (id) => document.getElementById(id);
const t = I18n.t;
const TOKEN_KEY = "throng.admin.token";
const api = Throng.client({
  retriesMax: 4,
  onWait: ({ waitMs, attempt }) => setStatus(t("staff.wait", { s: Math.ceil(waitMs / 1000), attempt }), "waiting"),
});
const PAGE_SIZE = 20;
let search = null; // { params, cursor }
let editing = null; // { id, place } or null for a new place
let found = []; // the places listed, written again in another language
let days = null; // the place's days shown, likewise

function setStatus(text, kind) {
  const s = $("status");
  s.textContent = text || "";
  s.className = kind || "";
}

function setFieldError(id, text) {
  const input = $(id), err = $(`${id}-error`);
  if (!err) return false;
  err.textContent = text || "";
  err.hidden = !text;
  if (input) { if (text) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid"); }
  return true;
}

function clearErrors(root) {
  for (const e of root.querySelectorAll(".field-error")) setFieldError(e.id.replace(/-error$/, ""), "");
}

// A failure in the status line with what to do and a Try again button.
function showFailure(text, retry) {
  setStatus(text, "error");
  const b = document.createElement("button");
  b.type = "button";
  b.id = "retry";
  b.textContent = t("common.tryAgain");
  b.addEventListener("click", () => { b.disabled = true; setStatus(""); retry(); });
  $("status").append(" ", b);
}

// Signed in to the admin console: its session signs the calls in.
let bySession = false;

function auth() {
  const token = $("a-token").value.trim();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

// Sends a request with the token; resolves to the answer, or to null when
// it was not answered (the failure is shown with a Try again that runs
// `retry`). A token the server refuses is shown beside the token field.
// Reading places needs no token (`init.open`); changing them does.
async function call(url, init, retry) {
  const token = $("a-token").value.trim();
  const open = Boolean(init && init.open);
  if (!token && !open && !bySession) { setFieldError("a-token", t("placesAdmin.rule.token")); $("a-token").focus(); setStatus(""); return null; }
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  let res;
  try {
    res = await api.fetch(url, { ...init, headers: { ...(open ? {} : auth()), ...(init && init.headers) } });
  } catch (_) {
    showFailure(Throng.UNREACHABLE, retry);
    return null;
  }
  if (res.status === 401 || res.status === 403) {
    const e = await api.errorOf(res);
    setStatus("");
    setFieldError("a-token", res.status === 401
      ? t("placesAdmin.error.invalidToken")
      : t("placesAdmin.error.notAdmin", { message: e.message }));
    $("a-token").focus();
    return null;
  }
  if (!open) setFieldError("a-token", "");
  if (res.status === 429 || res.status === 503 || res.status >= 500) {
    showFailure(res.status >= 500 && res.status !== 503
      ? t("placesAdmin.error.server", { status: String(res.status) })
      : t("placesAdmin.error.busy"), retry);
    return null;
  }
  return res;
}

// The input a server message names ("slotMinutes: ...", "slot_minutes: ...",
// "line 3: hours: ..."): `fields[name]`, else null.
function fieldOf(message, fields) {
  const m = /^(?:line \d+: )?([A-Za-z_.]+): /.exec(message);
  if (!m) return null;
  const camel = m[1].replace(/_([a-z])/g, (_, c) => c.toUpperCase());
  return fields[camel] || fields[m[1]] || null;
}

function rest(message) {
  const m = /^(?:line \d+: )?[A-Za-z_.]+: (.*)$/.exec(message);
  const t = m ? m[1] : message;
  return t.charAt(0).toUpperCase() + t.slice(1) + (t.endsWith(".") ? "" : ".");
}

// ---------------------------------------------------------------- finding

function placeLine(p) {
  const where = [p.address, [p.postcode, p.city].filter(Boolean).join(" "), p.region].filter(Boolean).join(", ");
  const what = t("placesAdmin.place.seats", { count: p.seats, minutes: p.slotMinutes, hours: p.hours || t("placesAdmin.place.noHours") });
  return { where, what };
}

function showPlace(li, p) {
  li.replaceChildren();
  li.dataset.id = p.id;
  const title = document.createElement("strong");
  title.textContent = `${p.name} `;
  const code = document.createElement("span");
  code.className = "muted";
  code.textContent = `(${p.code || `#${p.id}`})`;
  const { where, what } = placeLine(p);
  const l1 = document.createElement("div"); l1.textContent = where;
  const l2 = document.createElement("div"); l2.className = "muted"; l2.textContent = what + (p.services && p.services.length ? ` · ${p.services.join(", ")}` : "");
  const actions = document.createElement("div");
  actions.className = "actions";
  const edit = document.createElement("button");
  edit.type = "button";
  edit.textContent = t("placesAdmin.edit");
  edit.setAttribute("aria-label", t("placesAdmin.editLabel", { name: p.name }));
  edit.addEventListener("click", () => openPlace(p.id));
  const day = document.createElement("a");
  day.href = `/booking/staff/#place=${p.id}`;
  day.textContent = t("placesAdmin.dayList");
  day.setAttribute("aria-label", t("placesAdmin.dayListLabel", { name: p.name }));
  actions.append(edit, day);
  li.append(title, code, l1, l2, actions);
}

async function find(event, more) {
  if (event) event.preventDefault();
  clearErrors($("find"));
  if (!more) {
    const params = new URLSearchParams({ size: String(PAGE_SIZE) });
    for (const [id, key] of [["q", "q"], ["q-region", "region"], ["q-service", "service"]]) {
      const v = $(id).value.trim();
      if (v) params.set(key, v);
    }
    search = { params, cursor: null };
  }
  const params = new URLSearchParams(search.params);
  if (more && search.cursor) params.set("cursor", String(search.cursor));
  setStatus(t("placesAdmin.searching"), "loading");
  $("search").disabled = true;
  const res = await call(`/api/booking/places?${params}`, { open: true }, () => find(null, more));
  $("search").disabled = false;
  if (!res) return;
  if (!res.ok) {
    const e = await api.errorOf(res);
    const field = fieldOf(e.message, { q: "q", region: "q-region", service: "q-service" });
    if (!(field && setFieldError(field, rest(e.message)))) setStatus(e.message, "error"); else setStatus("");
    return;
  }
  const page = await res.json();
  setStatus("");
  const list = $("found");
  if (!more) list.replaceChildren();
  if (!more) found = [];
  for (const p of page.places) {
    const li = document.createElement("li");
    showPlace(li, p);
    list.appendChild(li);
    found.push(p);
  }
  search.cursor = page.nextCursor || null;
  search.total = page.total;
  $("more").hidden = !page.nextCursor;
  showCount();
}

function showCount() {
  $("found-count").textContent = search.total === 0
    ? t("placesAdmin.found.none")
    : t("placesAdmin.found.count", { count: search.total, shown: $("found").children.length });
}

// ---------------------------------------------------------------- a place

const FORM_FIELDS = ["code", "name", "address", "city", "postcode", "region", "timeZone", "services", "hours", "slotMinutes", "seats", "bookAheadDays", "noticeMinutes", "latitude", "longitude"];
const PLACE_FIELDS = Object.fromEntries(FORM_FIELDS.map((f) => [f, `f-${f}`]));

function fillForm(p) {
  for (const f of FORM_FIELDS) {
    const v = p ? p[f] : undefined;
    $(`f-${f}`).value = v === undefined || v === null ? "" : Array.isArray(v) ? v.join(" ") : String(v);
  }
  if (!p) { $("f-seats").value = "1"; $("f-bookAheadDays").value = "60"; $("f-noticeMinutes").value = "0"; $("f-slotMinutes").value = "15"; }
}

function newPlace() {
  editing = null;
  clearErrors($("place-form"));
  fillForm(null);
  $("edit-title").textContent = t("placesAdmin.newPlace");
  $("save-summary").hidden = true;
  $("days-section").hidden = true;
  $("edit-section").hidden = false;
  $("f-code").focus();
}

async function openPlace(id) {
  setStatus(t("placesAdmin.loadingPlace"), "loading");
  const res = await call(`/api/booking/places/${id}`, { open: true }, () => openPlace(id));
  if (!res) return;
  if (!res.ok) { setStatus((await api.errorOf(res)).message, "error"); return; }
  const detail = await res.json();
  setStatus("");
  editing = { id, place: detail.place };
  clearErrors($("place-form"));
  fillForm(detail.place);
  $("edit-title").textContent = `${detail.place.name} (${detail.place.code || `#${id}`})`;
  $("save-summary").hidden = true;
  showDays(detail.days);
  $("days-section").hidden = false;
  $("edit-section").hidden = false;
  $("edit-section").scrollIntoView();
}

// The form as the API's body; null (errors shown) when a number is not one.
function formBody() {
  const body = {};
  let ok = true;
  for (const f of ["code", "name", "address", "city", "postcode", "region", "timeZone", "hours"]) body[f] = $(`f-${f}`).value.trim();
  body.services = $("f-services").value.split(/[\s,]+/).filter(Boolean);
  for (const f of ["slotMinutes", "seats", "bookAheadDays", "noticeMinutes"]) {
    const v = $(`f-${f}`).value.trim();
    if (!/^[0-9]{1,6}$/.test(v)) { setFieldError(`f-${f}`, t("placesAdmin.rule.number")); ok = false; } else body[f] = Number(v);
  }
  for (const f of ["latitude", "longitude"]) {
    const v = $(`f-${f}`).value.trim();
    if (v === "") continue;
    if (!/^-?[0-9]{1,3}(\.[0-9]+)?$/.test(v)) { setFieldError(`f-${f}`, t("placesAdmin.rule.coordinate")); ok = false; } else body[f] = Number(v);
  }
  for (const f of ["code", "name", "address", "city", "postcode", "region", "timeZone", "hours"]) {
    if (!body[f]) { setFieldError(`f-${f}`, t("placesAdmin.rule.fill")); ok = false; }
  }
  return ok ? body : null;
}

function summaryText(s, what) {
  let text = t("placesAdmin.summary.slots", { what, count: s.slotsAdded, removed: s.slotsRemoved });
  if (s.slotsChanged) text += t("placesAdmin.summary.changed", { count: s.slotsChanged });
  text += ".";
  if (s.registrationsOnRemovedSlots) text += " " + t("placesAdmin.summary.onRemoved", { count: s.registrationsOnRemovedSlots });
  if (s.registrationsOverSeats) text += " " + t("placesAdmin.summary.overSeats", { count: s.registrationsOverSeats });
  return text;
}

async function save(event) {
  if (event) event.preventDefault();
  clearErrors($("place-form"));
  const body = formBody();
  if (!body) { focusFirstError($("place-form")); return; }
  $("save").disabled = true;
  setStatus(t("staff.saving"), "loading");
  const url = editing ? `/api/booking/places/${editing.id}` : "/api/booking/places";
  const res = await call(url, { method: editing ? "PUT" : "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) }, save);
  $("save").disabled = false;
  if (!res) return;
  if (!res.ok) {
    const e = await api.errorOf(res);
    setStatus("");
    const field = e.code === "code_taken" ? "f-code" : fieldOf(e.message, PLACE_FIELDS);
    if (field && setFieldError(field, rest(e.message))) { focusFirstError($("place-form")); setStatus(t("placesAdmin.correctField"), "error"); }
    else setStatus(e.message, "error");
    return;
  }
  const changed = await res.json();
  const created = res.status === 201;
  editing = { id: changed.place.id, place: changed.place };
  $("edit-title").textContent = `${changed.place.name} (${changed.place.code})`;
  $("save-summary").textContent = summaryText(changed.summary, created ? t("placesAdmin.created") : t("placesAdmin.saved"));
  $("save-summary").hidden = false;
  setStatus(created ? t("placesAdmin.createdPlace", { id: String(changed.place.id) }) : t("placesAdmin.savedStatus"));
  await loadDays();
}

function focusFirstError(root) {
  const err = [...root.querySelectorAll(".field-error")].find((e) => !e.hidden);
  if (err) { const input = $(err.id.replace(/-error$/, "")); if (input) input.focus(); }
}

// ---------------------------------------------------------------- days

async function loadDays() {
  if (!editing) return;
  const res = await call(`/api/booking/places/${editing.id}`, { open: true }, loadDays);
  if (!res || !res.ok) return;
  showDays((await res.json()).days);
  $("days-section").hidden = false;
}

function showDays(shown) {
  days = shown;
  const list = $("days");
  list.replaceChildren();
  for (const d of days) {
    const li = document.createElement("li");
    li.dataset.day = d.day;
    const text = document.createElement("span");
    text.textContent = `${I18n.date(d.day)}: ${d.hours ? d.hours : t("placesAdmin.days.closed")}`;
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = t("placesAdmin.days.back");
    remove.setAttribute("aria-label", t("placesAdmin.days.backLabel", { day: I18n.date(d.day) }));
    remove.addEventListener("click", () => removeDay(d.day));
    li.append(text, " ", remove);
    list.appendChild(li);
  }
  $("days-empty").hidden = days.length > 0;
}

async function setDay(event) {
  if (event) event.preventDefault();
  clearErrors($("day-form"));
  const day = $("d-day").value;
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) { setFieldError("d-day", t("placesAdmin.rule.day")); $("d-day").focus(); return; }
  setStatus(t("placesAdmin.savingDay"), "loading");
  const res = await call(`/api/booking/places/${editing.id}/days/${day}`, { method: "PUT", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ hours: $("d-hours").value.trim() }) }, setDay);
  if (!res) return;
  if (!res.ok) {
    const e = await api.errorOf(res);
    setStatus("");
    const field = fieldOf(e.message, { day: "d-day", hours: "d-hours" });
    if (!(field && setFieldError(field, rest(e.message)))) setStatus(e.message, "error");
    return;
  }
  setStatus(summaryText(await res.json(), t("placesAdmin.daySet", { day: I18n.date(day) })));
  $("d-hours").value = "";
  await loadDays();
}

async function removeDay(day) {
  setStatus(t("placesAdmin.savingDay"), "loading");
  const res = await call(`/api/booking/places/${editing.id}/days/${day}`, { method: "DELETE" }, () => removeDay(day));
  if (!res) return;
  if (!res.ok) { setStatus((await api.errorOf(res)).message, "error"); return; }
  setStatus(summaryText(await res.json(), t("placesAdmin.dayReset", { day: I18n.date(day) })));
  await loadDays();
}

// ---------------------------------------------------------------- import, horizon

async function importCsv(event) {
  if (event) event.preventDefault();
  clearErrors($("import"));
  const file = $("i-file").files[0];
  const text = file ? await file.text() : $("i-csv").value;
  if (!text.trim()) { setFieldError("i-csv", t("placesAdmin.rule.csv")); return; }
  $("import-go").disabled = true;
  setStatus(t("placesAdmin.importing"), "loading");
  const res = await call("/api/booking/places/import", { method: "POST", headers: { "Content-Type": "text/csv" }, body: text }, importCsv);
  $("import-go").disabled = false;
  if (!res) return;
  if (!res.ok) {
    const e = await api.errorOf(res);
    setStatus(t("placesAdmin.importRefused"), "error");
    setFieldError("i-csv", e.message.charAt(0).toUpperCase() + e.message.slice(1));
    return;
  }
  const s = await res.json();
  setStatus("");
  $("import-summary").textContent = t("placesAdmin.imported", { count: s.created, updated: s.updated }) + " " + summaryText(s, t("placesAdmin.slots"));
  $("import-summary").hidden = false;
  if (search) find(null, false);
}

async function extend() {
  $("extend").disabled = true;
  setStatus(t("placesAdmin.making"), "loading");
  const res = await call("/api/booking/places/extend", { method: "POST" }, extend);
  $("extend").disabled = false;
  if (!res) return;
  if (!res.ok) { setStatus((await api.errorOf(res)).message, "error"); return; }
  setStatus("");
  $("extend-summary").textContent = summaryText(await res.json(), t("placesAdmin.horizon"));
  $("extend-summary").hidden = false;
}

$("auth").addEventListener("submit", (e) => { e.preventDefault(); find(); });
$("find").addEventListener("submit", find);
$("more").addEventListener("click", () => find(null, true));
$("new-place").addEventListener("click", newPlace);
$("place-form").addEventListener("submit", save);
$("cancel-edit").addEventListener("click", () => { $("edit-section").hidden = true; editing = null; $("find-section").scrollIntoView(); });
$("day-form").addEventListener("submit", setDay);
$("import").addEventListener("submit", importCsv);
$("extend").addEventListener("click", extend);
$("a-token").value = sessionStorage.getItem(TOKEN_KEY) || "";
I18n.ready.then(() => {
  if ($("a-token").value) find();
  else {
    Throng.consoleSession().then((who) => {
      if (who) {
        bySession = true;
        Throng.showConsoleSession($("a-token").closest(".field"), who);
      }
      find();
    });
  }
});
// Another language: what the script wrote, written again in its words.
I18n.onChange(() => {
  const list = $("found");
  [...list.children].forEach((li, i) => { if (found[i]) showPlace(li, found[i]); });
  if (search && search.total !== undefined) showCount();
  if (editing) $("edit-title").textContent = `${editing.place.name} (${editing.place.code || `#${editing.id}`})`;
  else $("edit-title").textContent = t("placesAdmin.newPlace");
  if (days) showDays(days);
});
