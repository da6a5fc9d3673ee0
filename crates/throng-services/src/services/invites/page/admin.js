// The invites admin page (/invites/admin): sites created and changed
// through the API with the admin console's session or an admin token (kept
// in this tab's sessionStorage),
// each field's error beside it (the API's invalid_field names the field),
// the snippet copied, a site paused and resumed, and its results by day
// (an inline SVG chart) and page, with the CSV the API gives.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const t = I18n.t;
  const TOKEN_KEY = "throng-invites-admin-token";
  const api = Throng.client({
    sentences: {
      missing_token: () => t("invitesAdmin.error.missing_token"),
      invalid_token: () => t("invitesAdmin.error.invalid_token"),
      token_expired: () => t("invitesAdmin.error.token_expired"),
      forbidden: () => t("invitesAdmin.error.forbidden"),
    },
  });
  const FIELDS = ["name", "owner", "surveyUrl", "allowedOrigins", "pagesInclude", "pagesExclude", "devices",
    "inviteShare", "closesMax", "retentionDays", "askAgainAfterNoDays", "askAgainAfterClosesDays",
    "capInvitations", "capDays", "trigger", "style"];
  const LISTS = new Set(["allowedOrigins", "pagesInclude", "pagesExclude"]);
  const NUMBERS = new Set(["inviteShare", "closesMax", "retentionDays", "askAgainAfterNoDays",
    "askAgainAfterClosesDays", "capInvitations", "capDays"]);
  let sites = [];
  let editing = null; // the site id being changed, or null for a new one
  let shown = null; // the site whose snippet and results are shown
  let results = null; // its results as last answered (drawn again in another language)

  const token = () => sessionStorage.getItem(TOKEN_KEY) || "";
  const status = (text, bad) => {
    $("status").textContent = text || "";
    $("status").className = bad ? "status bad" : "status";
  };

  async function call(method, path, body, accept) {
    const headers = token() ? { Authorization: `Bearer ${token()}` } : {};
    if (body) headers["Content-Type"] = "application/json";
    if (accept) headers.Accept = accept;
    const res = await api.fetch(path, { method, headers, body: body ? JSON.stringify(body) : undefined, cache: "no-store" });
    if (!res.ok) throw new Throng.ApiError(await api.errorOf(res));
    return accept === "text/csv" ? res.text() : res.json();
  }

  function failed(e) {
    if (e instanceof Throng.ApiError && ["missing_token", "invalid_token", "token_expired", "forbidden"].includes(e.code)) {
      $("token-err").textContent = e.message;
      $("token").setAttribute("aria-invalid", "true");
      $("token").focus();
      return;
    }
    status(e instanceof Throng.ApiError ? e.message : Throng.UNREACHABLE, true);
  }

  // ---- the token ----------------------------------------------------------
  $("token-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const pasted = $("token").value.trim();
    $("token-err").textContent = "";
    $("token").removeAttribute("aria-invalid");
    if (!pasted) {
      $("token-err").textContent = t("invitesAdmin.error.missing_token");
      $("token").setAttribute("aria-invalid", "true");
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, pasted);
    await loadSites();
  });

  // ---- the sites ----------------------------------------------------------
  async function loadSites() {
    try {
      sites = (await call("GET", "/api/invites/sites")).sites;
    } catch (e) {
      failed(e);
      return;
    }
    $("token-err").textContent = "";
    $("token").removeAttribute("aria-invalid");
    $("sites-section").hidden = false;
    renderSites();
  }

  function button(text, onClick, label) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    if (label) b.setAttribute("aria-label", label);
    b.addEventListener("click", onClick);
    return b;
  }

  function renderSites() {
    const ul = $("sites");
    ul.replaceChildren();
    $("no-sites").hidden = sites.length > 0;
    for (const s of sites) {
      const li = document.createElement("li");
      li.dataset.site = s.siteId;
      const name = document.createElement("div");
      const n = document.createElement("span");
      n.className = "site-name";
      n.textContent = t("invitesAdmin.siteName", { name: s.name, id: String(s.siteId) });
      const badge = document.createElement("span");
      badge.className = s.paused ? "badge paused" : "badge";
      badge.textContent = s.paused ? t("invitesAdmin.paused") : t("invitesAdmin.active");
      name.append(n, badge);
      const actions = document.createElement("div");
      actions.className = "row";
      actions.style.marginTop = "0";
      actions.append(
        button(t("invitesAdmin.edit"), () => openForm(s), t("invitesAdmin.editLabel", { name: s.name })),
        button(s.paused ? t("invitesAdmin.resume") : t("invitesAdmin.pause"), () => setPaused(s, !s.paused),
          t(s.paused ? "invitesAdmin.resumeLabel" : "invitesAdmin.pauseLabel", { name: s.name })),
        button(t("invitesAdmin.detail"), () => openDetail(s), t("invitesAdmin.detailLabel", { name: s.name })),
      );
      li.append(name, actions);
      ul.append(li);
    }
  }

  async function setPaused(s, paused) {
    try {
      const changed = await call("POST", `/api/invites/sites/${s.siteId}/${paused ? "pause" : "resume"}`);
      sites = sites.map((x) => (x.siteId === changed.siteId ? changed : x));
      renderSites();
      status(t(changed.paused ? "invitesAdmin.nowPaused" : "invitesAdmin.nowActive", { name: changed.name }));
    } catch (e) {
      failed(e);
    }
  }

  // ---- the form -----------------------------------------------------------
  const input = (name) => $(`f-${name}`);

  function clearErrors() {
    for (const f of FIELDS) {
      $(`e-${f}`).textContent = "";
      const el = input(f);
      if (el) el.removeAttribute("aria-invalid");
    }
    $("e-form").textContent = "";
  }

  function openForm(s) {
    editing = s ? s.siteId : null;
    clearErrors();
    $("form-h").textContent = s ? t("invitesAdmin.change", { name: s.name, id: String(s.siteId) }) : t("invitesAdmin.addSite");
    const v = s || { name: "", owner: "default", surveyUrl: "", allowedOrigins: [], pagesInclude: [], pagesExclude: [],
      devices: [], inviteShare: 1, closesMax: 3, retentionDays: 365, askAgainAfterNoDays: 0,
      askAgainAfterClosesDays: 0, capInvitations: 0, capDays: 30, trigger: "load", style: "modal" };
    for (const f of FIELDS) {
      if (f === "devices") continue;
      input(f).value = LISTS.has(f) ? v[f].join("\n") : String(v[f]);
    }
    for (const box of document.querySelectorAll("input[name=devices]")) box.checked = v.devices.includes(box.value);
    $("form-section").hidden = false;
    input("name").focus();
  }

  function formBody() {
    const body = {};
    for (const f of FIELDS) {
      if (f === "devices") continue;
      const raw = input(f).value;
      if (LISTS.has(f)) body[f] = raw.split("\n").map((x) => x.trim()).filter(Boolean);
      else if (NUMBERS.has(f)) body[f] = raw.trim() === "" ? null : Number(raw);
      else body[f] = raw.trim();
    }
    body.devices = [...document.querySelectorAll("input[name=devices]:checked")].map((b) => b.value);
    return body;
  }

  // The API's invalid_field message starts with the field's name
  // ("surveyUrl: ..."); the message goes beside that field.
  function showFieldError(e) {
    const field = FIELDS.find((f) => e.message.startsWith(`${f}:`) || e.message.startsWith(`${f} `));
    if (e.code === "invalid_field" && field) {
      $(`e-${field}`).textContent = e.message.slice(field.length + 1).trim() || e.message;
      const el = input(field) || document.querySelector(`input[name=${field}]`);
      if (el) {
        el.setAttribute("aria-invalid", "true");
        el.focus();
      }
      return;
    }
    $("e-form").textContent = e.message;
  }

  $("site-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors();
    const body = formBody();
    for (const f of NUMBERS) {
      if (body[f] !== null && !Number.isFinite(body[f])) {
        $(`e-${f}`).textContent = t("invitesAdmin.rule.number");
        input(f).setAttribute("aria-invalid", "true");
        input(f).focus();
        return;
      }
      if (body[f] === null) delete body[f];
    }
    try {
      const saved = editing === null
        ? await call("POST", "/api/invites/sites", body)
        : await call("PATCH", `/api/invites/sites/${editing}`, body);
      $("form-section").hidden = true;
      status(t("invitesAdmin.saved", { name: saved.name, id: String(saved.siteId) }));
      await loadSites();
      openDetail(saved);
    } catch (e) {
      if (e instanceof Throng.ApiError) showFieldError(e);
      else failed(e);
    }
  });
  $("cancel").addEventListener("click", () => {
    $("form-section").hidden = true;
  });
  $("new-site").addEventListener("click", () => openForm(null));

  // ---- snippet and results ------------------------------------------------
  const isoDay = (d) => d.toISOString().slice(0, 10);

  function openDetail(s) {
    shown = s;
    $("detail-h").textContent = t("invitesAdmin.siteName", { name: s.name, id: String(s.siteId) });
    $("snippet").textContent = s.snippet;
    $("copy-status").textContent = "";
    const today = new Date();
    if (!$("r-to").value) $("r-to").value = isoDay(today);
    if (!$("r-from").value) $("r-from").value = isoDay(new Date(today.getTime() - 29 * 86400000));
    $("detail-section").hidden = false;
    showResults();
  }

  $("copy").addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(shown.snippet);
      $("copy-status").textContent = t("invitesAdmin.copied");
    } catch (_) {
      // No clipboard (an insecure origin): select it to copy by hand.
      const range = document.createRange();
      range.selectNodeContents($("snippet"));
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      $("copy-status").textContent = t("invitesAdmin.selected");
    }
  });

  function range() {
    return `from=${encodeURIComponent($("r-from").value)}&to=${encodeURIComponent($("r-to").value)}`;
  }

  function resultsFailed(e) {
    $("e-from").textContent = "";
    $("e-to").textContent = "";
    if (e instanceof Throng.ApiError && e.code === "invalid_query") {
      const to = e.message.startsWith("to:");
      $(to ? "e-to" : "e-from").textContent = e.message;
      return;
    }
    failed(e);
  }

  async function showResults() {
    if (!shown) return;
    $("e-from").textContent = "";
    $("e-to").textContent = "";
    try {
      const r = await call("GET", `/api/invites/sites/${shown.siteId}/results?${range()}`);
      results = r;
      drawChart(r.days);
      const body = $("pages-table").tBodies[0];
      body.replaceChildren();
      for (const p of r.pages) {
        const tr = document.createElement("tr");
        for (const v of [p.page, p.shown, p.yes, p.no, p.closed]) {
          const td = document.createElement("td");
          td.textContent = typeof v === "number" ? I18n.number(v) : String(v);
          tr.append(td);
        }
        body.append(tr);
      }
      $("pages-table").hidden = r.pages.length === 0;
    } catch (e) {
      resultsFailed(e);
    }
  }
  $("show-results").addEventListener("click", showResults);

  $("csv").addEventListener("click", async () => {
    try {
      const text = await call("GET", `/api/invites/sites/${shown.siteId}/results?${range()}`, null, "text/csv");
      const a = document.createElement("a");
      a.href = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
      a.download = `invites-site-${shown.siteId}-${$("r-from").value}-${$("r-to").value}.csv`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    } catch (e) {
      resultsFailed(e);
    }
  });

  // A line per count over the days, in an inline SVG (no library).
  const SERIES = [["shown", "#1a5fb4"], ["yes", "#26a269"], ["no", "#c01c28"], ["closed", "#986a44"]];
  function drawChart(days) {
    const NS = "http://www.w3.org/2000/svg";
    const W = 640, H = 220, L = 40, R = 10, T = 10, B = 28;
    const max = Math.max(1, ...days.flatMap((d) => SERIES.map(([k]) => d[k])));
    const x = (i) => L + (days.length <= 1 ? 0 : (i * (W - L - R)) / (days.length - 1));
    const y = (v) => T + (H - T - B) * (1 - v / max);
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("class", "chart");
    svg.setAttribute("role", "img");
    const total = (k) => days.reduce((n, d) => n + d[k], 0);
    svg.setAttribute("aria-label", t("invitesAdmin.chart", { from: I18n.date(days[0].day), to: I18n.date(days[days.length - 1].day),
      counts: SERIES.map(([k]) => `${I18n.number(total(k))} ${t(`invitesAdmin.series.${k}`)}`).join(", ") }));
    const el = (name, attrs, text) => {
      const e = document.createElementNS(NS, name);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
      if (text !== undefined) e.textContent = text;
      svg.append(e);
      return e;
    };
    el("line", { x1: L, y1: y(0), x2: W - R, y2: y(0), stroke: "#999" });
    el("line", { x1: L, y1: T, x2: L, y2: y(0), stroke: "#999" });
    el("text", { x: L - 6, y: y(max) + 4, "text-anchor": "end", "font-size": 11, fill: "#555" }, I18n.number(max));
    el("text", { x: L - 6, y: y(0) + 4, "text-anchor": "end", "font-size": 11, fill: "#555" }, "0");
    const short = { day: "numeric", month: "short", year: "numeric" };
    el("text", { x: L, y: H - 8, "font-size": 11, fill: "#555", "data-day": days[0].day }, I18n.date(days[0].day, short));
    el("text", { x: W - R, y: H - 8, "text-anchor": "end", "font-size": 11, fill: "#555", "data-day": days[days.length - 1].day }, I18n.date(days[days.length - 1].day, short));
    for (const [k, color] of SERIES) {
      const points = days.map((d, i) => `${x(i).toFixed(1)},${y(d[k]).toFixed(1)}`).join(" ");
      el("polyline", { points, fill: "none", stroke: color, "stroke-width": 2, "data-series": k });
    }
    $("chart-box").replaceChildren(svg);
  }

  I18n.ready.then(() => {
    if (token()) {
      $("token").value = token();
      loadSites();
    } else {
      // Opened from the admin console: its session signs the calls in.
      Throng.consoleSession().then((who) => {
        if (!who) return;
        Throng.showConsoleSession($("token-form").closest("section"), who);
        loadSites();
      });
    }
  });
  // Another language: what the script wrote, written again in its words.
  I18n.onChange(() => {
    if (!$("sites-section").hidden) renderSites();
    if (shown) $("detail-h").textContent = t("invitesAdmin.siteName", { name: shown.name, id: String(shown.siteId) });
    if (!$("form-section").hidden) {
      const s = sites.find((x) => x.siteId === editing);
      $("form-h").textContent = s ? t("invitesAdmin.change", { name: s.name, id: String(s.siteId) }) : t("invitesAdmin.addSite");
    }
    if (results && results.days.length) drawChart(results.days);
  });
})();
