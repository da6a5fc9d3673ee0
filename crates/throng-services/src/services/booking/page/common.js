// Shared by the booking pages (/booking/ and /booking/manage): the client
// (Throng, /assets/throng.js) telling the person while it waits out a crowd,
// the person's field rules (the server's, with its bounds from
// /booking/limits.js), field errors beside their fields, the month calendar
// of free days, the .ics download, and how a failed request is shown (what
// to do, and a Try again button; never a blank page). Every word comes
// from the language catalogue (I18n.t, /assets/i18n.js).
"use strict";

const Booking = (() => {
  const $ = (id) => document.getElementById(id);
  const t = I18n.t;

  function setStatus(text, kind) {
    const s = $("status");
    // Now the script's words, not the page's first one.
    s.removeAttribute("data-i18n");
    s.textContent = text;
    s.className = kind || "";
    s.setAttribute("aria-busy", String(kind === "loading"));
  }

  const onWait = ({ waitMs, attempt }) => setStatus(t("booking.wait", { s: Math.ceil(waitMs / 1000), attempt }), "waiting");
  // Writes wait out a crowd for long (a person who pressed Register keeps
  // their place in the queue); reads give up sooner and offer Try again.
  const api = Throng.client({ onWait });
  const reads = Throng.client({ onWait, retriesMax: 4 });

  // What went wrong, in words that say what to do: the server unreachable
  // (fetch threw), busy (429/503 after the waits), failing (5xx), else the
  // server's own sentence.
  function failureText(e) {
    if (!e || typeof e.status !== "number") return Throng.UNREACHABLE;
    if (e.status === 429 || e.status === 503) return t("booking.busy");
    if (e.status >= 500) return t("booking.serverError", { status: String(e.status) });
    return e.message;
  }

  // Runs `load` (which throws on a failed answer) with `loadingText` shown;
  // a failure is shown with what to do and a Try again button that runs it
  // again. Resolves true once `load` succeeded.
  async function attempt(loadingText, load) {
    setStatus(loadingText, "loading");
    try {
      await load();
      if ($("status").className === "loading" || $("status").className === "waiting") setStatus("");
      return true;
    } catch (e) {
      if (e && e.stale) return false;
      showFailure(failureText(e), () => attempt(loadingText, load));
      return false;
    }
  }

  // `text` in the status line as an error, with a Try again button.
  function showFailure(text, retry) {
    setStatus(text, "error");
    const b = document.createElement("button");
    b.type = "button";
    b.id = "retry";
    b.textContent = t("common.tryAgain");
    b.addEventListener("click", () => { b.disabled = true; retry(); });
    $("status").append(" ", b);
  }

  // Thrown by a load whose answer came after a newer request: not a failure.
  const STALE = Object.freeze({ stale: true });

  // Copies `text`, then says so on `button` for two seconds (a page over
  // plain http on another host has no clipboard API: the code is then
  // selected for the person to copy).
  async function copyText(text, button, selectable) {
    const label = button.textContent;
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = t("common.copied");
    } catch (_) {
      const range = document.createRange();
      range.selectNodeContents(selectable);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      button.textContent = t("common.selected");
    }
    setTimeout(() => { button.textContent = label; }, 2000);
  }
  const L = BOOKING_LIMITS;
  Throng.applyMaxLengths(L);

  // The person's rules, as the server checks them (model.rs), in plain words.
  const NATIONAL_ID = new RegExp(`^[A-Za-z0-9/-]{1,${L.nationalIdCharsMax}}$`);
  const PERSON_RULES = {
    name: {
      ok: (v) => { const n = [...v.trim()].length; return n >= 1 && n <= L.nameCharsMax && !/[\u0000-\u001f\u007f-\u009f]/.test(v); },
      get text() { return t("booking.rule.name", { max: L.nameCharsMax }); },
    },
    nationalId: {
      ok: (v) => NATIONAL_ID.test(v.trim()),
      get text() { return t("booking.rule.nationalId", { max: L.nationalIdCharsMax }); },
    },
    phone: {
      ok: (v) => { const t = v.trim(); const d = (t.match(/[0-9]/g) || []).length; return /^\+?[0-9 ]*$/.test(t) && d >= L.phoneDigitsMin && d <= L.phoneDigitsMax; },
      get text() { return t("booking.rule.phone", { min: L.phoneDigitsMin, max: L.phoneDigitsMax }); },
    },
    email: {
      ok: (v) => { const t = v.trim(); return [...t].length <= L.emailCharsMax && /^[^@\s]+@[^@.\s]+(\.[^@.\s]+)+$/.test(t); },
      get text() { return t("booking.rule.email"); },
    },
  };

  // Which field a server 422 names ("person.phone: ..." -> "phone").
  const SERVER_FIELDS = { "person.name": "name", "person.nationalId": "nationalId", "person.phone": "phone", "person.email": "email", day: "day", timeSlot: "slots", placeId: "place" };

  function fieldOfMessage(message) {
    const i = message.indexOf(":");
    return i > 0 ? SERVER_FIELDS[message.slice(0, i)] : undefined;
  }

  // The words to show beside a field for a server 422: the field's own plain
  // rule for personal data, else the catalogue's words for the error's code,
  // else the server's sentence without its prefix.
  function plainMessage(field, message, code) {
    if (PERSON_RULES[field]) return PERSON_RULES[field].text;
    if (code && I18n.has(`error.${code}`)) return t(`error.${code}`);
    const rest = message.slice(message.indexOf(":") + 1).trim();
    return rest.charAt(0).toUpperCase() + rest.slice(1) + (rest.endsWith(".") ? "" : ".");
  }

  // Shows `text` beside the field `field` (an element #<field>-error).
  function setFieldError(field, text) {
    const box = $(`${field}-error`);
    const input = $(field);
    if (box) { box.textContent = text || ""; box.hidden = !text; }
    if (input) {
      if (text) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid");
    }
  }

  function clearFieldErrors(fields) {
    for (const f of fields) setFieldError(f, "");
  }

  // Month calendar: one request per month shown, the days with free slots
  // marked, the days before today not selectable; month and weekday names
  // in the page's language (Intl).

  function calendar(box, { onPick }) {
    const cal = { place: null, month: null, today: null, selected: null, request: 0, body: null };
    // Another language: the month shown again in its words.
    I18n.onChange(() => { if (cal.body) render(cal.body); });
    cal.show = async (place, month) => {
      const request = ++cal.request;
      cal.place = place; cal.month = month;
      box.setAttribute("aria-busy", "true");
      let body;
      try {
        body = await reads.getJson(`/api/booking/places/${encodeURIComponent(place)}/calendar?month=${encodeURIComponent(month)}`);
      } finally {
        if (request === cal.request) box.setAttribute("aria-busy", "false");
      }
      if (request !== cal.request) throw STALE;
      cal.today = body.today;
      cal.body = body;
      render(body);
      return body;
    };
    cal.select = (day) => {
      cal.selected = day;
      for (const b of box.querySelectorAll("button[data-day]")) b.setAttribute("aria-pressed", String(b.dataset.day === day));
    };
    function shift(month, by) {
      const [y, m] = month.split("-").map(Number);
      const d = new Date(Date.UTC(y, m - 1 + by, 1));
      return d.toISOString().slice(0, 7);
    }
    function render(body) {
      box.innerHTML = "";
      const [y, m] = body.month.split("-").map(Number);
      const head = document.createElement("div");
      head.className = "cal-head";
      const prev = document.createElement("button");
      prev.type = "button"; prev.textContent = "‹"; prev.className = "cal-prev";
      prev.setAttribute("aria-label", t("booking.calendar.prev"));
      prev.disabled = body.month <= body.today.slice(0, 7);
      prev.addEventListener("click", () => attempt(t("booking.calendar.loading"), () => cal.show(cal.place, shift(cal.month, -1))));
      const next = document.createElement("button");
      next.type = "button"; next.textContent = "›"; next.className = "cal-next";
      next.setAttribute("aria-label", t("booking.calendar.next"));
      next.addEventListener("click", () => attempt(t("booking.calendar.loading"), () => cal.show(cal.place, shift(cal.month, 1))));
      const title = document.createElement("span");
      title.className = "cal-title";
      title.textContent = I18n.month(y, m);
      head.append(prev, title, next);
      box.appendChild(head);
      const grid = document.createElement("div");
      grid.className = "cal-grid";
      for (const w of I18n.weekdaysShort()) {
        const h = document.createElement("span");
        h.className = "cal-dow"; h.textContent = w;
        grid.appendChild(h);
      }
      const firstDow = (new Date(Date.UTC(y, m - 1, 1)).getUTCDay() + 6) % 7;
      for (let i = 0; i < firstDow; i++) grid.appendChild(document.createElement("span"));
      for (const d of body.days) {
        const b = document.createElement("button");
        b.type = "button";
        b.dataset.day = d.day;
        b.textContent = String(Number(d.day.slice(8)));
        const past = d.day < body.today;
        b.disabled = past || d.free === 0;
        if (d.free > 0 && !past) b.classList.add("has-free");
        b.setAttribute("aria-label", `${I18n.date(d.day, { day: "numeric", month: "long" })}: ${past ? t("booking.calendar.past") : t("booking.calendar.free", { count: d.free })}`);
        b.setAttribute("aria-pressed", String(d.day === cal.selected));
        b.addEventListener("click", () => { cal.select(d.day); onPick(d.day); });
        grid.appendChild(b);
      }
      box.appendChild(grid);
    }
    return cal;
  }

  // Saves the registration's calendar file (the code goes in a header, so
  // the download is fetched and handed to the browser as a file).
  async function downloadIcs(id, code) {
    let res;
    try {
      res = await reads.fetch(`/api/booking/registrations/${encodeURIComponent(id)}/calendar.ics`, { headers: { "X-Access-Code": code } });
    } catch (_) {
      showFailure(Throng.UNREACHABLE, () => downloadIcs(id, code));
      return;
    }
    if (!res.ok) { showFailure(failureText(await reads.errorOf(res)), () => downloadIcs(id, code)); return; }
    const url = URL.createObjectURL(await res.blob());
    const a = document.createElement("a");
    a.href = url;
    a.download = "appointment.ics";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }

  // The manage page's link for a registration; the id and code ride in the
  // fragment, which browsers never send to a server.
  const manageLink = (id, code) => `/booking/manage#id=${encodeURIComponent(id)}&code=${encodeURIComponent(code)}`;

  // One button per slot of a day (taken ones disabled) into `box`; a click
  // marks it chosen (aria-pressed), clears `errorField` and calls onChoose.
  function slotButtons(box, slots, errorField, onChoose) {
    if (!slots.length) { box.textContent = t("booking.slots.none"); return; }
    for (const s of slots) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = s.start;
      b.dataset.slot = s.timeSlot;
      b.disabled = !s.free;
      b.setAttribute("aria-pressed", "false");
      b.addEventListener("click", () => {
        for (const other of box.querySelectorAll("button")) other.setAttribute("aria-pressed", "false");
        b.setAttribute("aria-pressed", "true");
        setFieldError(errorField, "");
        onChoose(s.timeSlot);
      });
      box.appendChild(b);
    }
  }

  return { $, setStatus, api, reads, attempt, showFailure, failureText, copyText, STALE, PERSON_RULES, fieldOfMessage, plainMessage, setFieldError, clearFieldErrors, calendar, downloadIcs, manageLink, slotButtons };
})();
