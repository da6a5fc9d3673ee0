// The pages' languages, served at /assets/i18n.js after THRONG_I18N (the
// catalogues' hashed addresses and the English catalogue, written by the
// server). A page loads it in its <head>; it picks the language (the
// person's choice kept in localStorage, else the browser's languages, else
// English), sets <html lang>, fills every element marked data-i18n with its
// message, offers a language switcher, and gives scripts
// I18n.t(key, params) with plural forms (Intl.PluralRules) and Intl dates
// and numbers. The server sends the same page to everyone (no Vary): the
// choice is made here.
//
//   <h1 data-i18n="booking.book.title">Book…</h1> text; an element's child
//                                                elements stay, at {0}, {1}…
//                                                in the message, else after it
//   data-i18n-attr="aria-label:booking.slots.label;title:common.language"
//   I18n.t("booking.places.all", { count: 3 })  {"one": "…", "few": …,
//                                                "other": "…"}; "zero" for 0
//   I18n.ready.then(start)     the catalogue is in (or English after a failure)
//   I18n.onChange(render)      the person chose another language
"use strict";

const I18n = (() => {
  const C = THRONG_I18N;
  const STORE_KEY = "throng.lang";
  // How long a page stays hidden while its catalogue loads; after that it
  // shows in English rather than not at all.
  const WAIT_MS_MAX = 3000;
  const codes = C.languages.map((l) => l.code);
  const catalogues = C.catalogues ? { ...C.catalogues } : { en: C.en };
  // Dates and numbers: English pages write days the European way
  // (28 November 2026), never the US way.
  const FORMAT_LOCALE = { en: "en-GB" };
  const embedded = Boolean(C.embedded);

  // A language tag's supported language ("sk-SK" -> "sk"), or null.
  function supported(tag) {
    const base = String(tag || "").trim().toLowerCase().split(/[-_]/)[0];
    return codes.includes(base) ? base : null;
  }

  function storedChoice() {
    try {
      return supported(localStorage.getItem(STORE_KEY));
    } catch (_) {
      return null;
    }
  }

  // The person's choice, else (for a widget on another site) the host
  // page's language, else the browser's languages in order, else English.
  function pick() {
    const candidates = [embedded ? null : storedChoice()];
    if (embedded) candidates.push(document.documentElement.lang);
    candidates.push(...(navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language]));
    for (const c of candidates) {
      const s = supported(c);
      if (s) return s;
    }
    return "en";
  }

  let lang = "en";
  const listeners = [];

  // A page's <html lang>; a widget leaves its host page's alone.
  function setHtmlLang(code) {
    if (!embedded) document.documentElement.lang = code;
  }

  async function load(code) {
    if (catalogues[code]) return catalogues[code];
    const controller = typeof AbortController === "function" ? new AbortController() : null;
    const timer = setTimeout(() => controller && controller.abort(), WAIT_MS_MAX);
    try {
      const res = await fetch(C.urls[code], controller ? { signal: controller.signal } : {});
      if (!res.ok) throw new Error(`catalogue ${code}: ${res.status}`);
      catalogues[code] = await res.json();
      return catalogues[code];
    } finally {
      clearTimeout(timer);
    }
  }

  function message(key) {
    const own = catalogues[lang] && catalogues[lang][key];
    return own !== undefined ? own : C.en[key];
  }

  function has(key) {
    return message(key) !== undefined;
  }

  const plurals = {};
  function pluralOf(n) {
    plurals[lang] = plurals[lang] || new Intl.PluralRules(lang);
    return plurals[lang].select(n);
  }

  // The message `key` with {name} replaced by params.name (a number is
  // written the language's way); a message with plural forms picks the one
  // for params.count. An unknown key is shown as itself.
  function t(key, params) {
    let m = message(key);
    if (m === undefined) return key;
    if (m && typeof m === "object") {
      const count = params && typeof params.count === "number" ? params.count : 0;
      const form = count === 0 && m.zero !== undefined ? "zero" : pluralOf(count);
      m = m[form] !== undefined ? m[form] : m.other;
    }
    if (!params) return m;
    return m.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (all, name) => {
      if (!Object.prototype.hasOwnProperty.call(params, name)) return all;
      const v = params[name];
      return typeof v === "number" ? number(v) : String(v);
    });
  }

  const formatLocale = () => FORMAT_LOCALE[lang] || lang;

  function number(n, options) {
    return new Intl.NumberFormat(formatLocale(), options).format(n);
  }

  // A calendar day (YYYY-MM-DD) with its weekday: "Saturday 28 November
  // 2026", "sobota 28. novembra 2026", "sobota 28. listopadu 2026".
  function date(day, options) {
    const [y, m, d] = String(day).split("-").map(Number);
    if (!y || !m || !d) return String(day);
    const opts = options || { weekday: "long", day: "numeric", month: "long", year: "numeric" };
    return new Intl.DateTimeFormat(formatLocale(), { ...opts, timeZone: "UTC" }).format(new Date(Date.UTC(y, m - 1, d)));
  }

  // A moment (a Date or milliseconds) in the reader's time zone.
  function dateTime(at, options) {
    const opts = options || { day: "numeric", month: "long", year: "numeric", hour: "2-digit", minute: "2-digit" };
    return new Intl.DateTimeFormat(formatLocale(), opts).format(at instanceof Date ? at : new Date(at));
  }

  // "November 2026", "november 2026", "listopad 2026".
  function month(y, m) {
    return new Intl.DateTimeFormat(formatLocale(), { month: "long", year: "numeric", timeZone: "UTC" }).format(new Date(Date.UTC(y, m - 1, 15)));
  }

  // Monday first: the short weekday names ("Mo", "po", "po").
  function weekdaysShort() {
    const f = new Intl.DateTimeFormat(formatLocale(), { weekday: "short", timeZone: "UTC" });
    // 2024-01-01 was a Monday.
    return [0, 1, 2, 3, 4, 5, 6].map((i) => f.format(new Date(Date.UTC(2024, 0, 1 + i))));
  }

  // Fills `el` with `text`, its element children kept at {0}, {1}… (or
  // after the text when the message has no such mark).
  function fill(el, text) {
    if (!el.i18nKids) el.i18nKids = [...el.children];
    const kids = el.i18nKids;
    if (!kids.length) {
      el.textContent = text;
      return;
    }
    const parts = text.split(/\{(\d+)\}/);
    const nodes = [];
    const placed = new Set();
    parts.forEach((p, i) => {
      if (i % 2 === 0) {
        if (p) nodes.push(document.createTextNode(p));
      } else if (kids[Number(p)]) {
        nodes.push(kids[Number(p)]);
        placed.add(Number(p));
      }
    });
    kids.forEach((k, i) => {
      if (!placed.has(i)) nodes.push(document.createTextNode(" "), k);
    });
    el.replaceChildren(...nodes);
  }

  // Every marked element under `root` in the current language.
  function apply(root) {
    const r = root || document;
    for (const el of r.querySelectorAll("[data-i18n]")) {
      if (has(el.dataset.i18n)) fill(el, t(el.dataset.i18n));
    }
    for (const el of r.querySelectorAll("[data-i18n-attr]")) {
      for (const pair of el.dataset.i18nAttr.split(";")) {
        const [attr, key] = pair.split(":").map((s) => s.trim());
        if (attr && key && has(key)) el.setAttribute(attr, t(key));
      }
    }
    if (!embedded) renderSwitcher();
  }

  // The switcher: a labelled <select> of the languages, each named in its
  // own language, at the top of the page (or in #lang-switch when the page
  // has one).
  function renderSwitcher() {
    if (!document.body) return;
    let box = document.getElementById("lang-switch");
    if (!box) {
      box = document.createElement("div");
      box.id = "lang-switch";
      document.body.prepend(box);
    }
    if (!box.dataset.built) {
      box.dataset.built = "1";
      box.style.cssText = "display:flex;justify-content:flex-end;margin:.25rem 0";
      box.style.cssText += ";align-items:center;gap:.5rem";
      const text = document.createElement("label");
      text.id = "lang-switch-label";
      text.htmlFor = "lang-select";
      text.style.cssText = "display:inline;margin:0";
      const select = document.createElement("select");
      select.id = "lang-select";
      select.style.cssText = "min-height:44px;min-width:44px;font:inherit;width:auto";
      for (const l of C.languages) {
        const o = document.createElement("option");
        o.value = l.code;
        o.lang = l.code;
        o.textContent = l.name;
        select.appendChild(o);
      }
      select.addEventListener("change", () => choose(select.value));
      box.append(text, select);
    }
    document.getElementById("lang-switch-label").textContent = t("common.language");
    document.getElementById("lang-select").value = lang;
  }

  // Switches to `code`, remembered in this browser.
  async function choose(code) {
    const s = supported(code);
    if (!s) return;
    try {
      localStorage.setItem(STORE_KEY, s);
    } catch (_) {
      // A browser without storage keeps the choice for this page only.
    }
    await use(s);
  }

  async function use(code) {
    try {
      await load(code);
      lang = code;
    } catch (_) {
      lang = "en";
    }
    setHtmlLang(lang);
    apply();
    for (const f of listeners) {
      try {
        f(lang);
      } catch (e) {
        setTimeout(() => { throw e; });
      }
    }
  }

  function onChange(f) {
    listeners.push(f);
  }

  const wanted = pick();
  // A catalogue already here (English, or each one inside a widget) is
  // used at once: a widget's first words are in its language.
  if (catalogues[wanted]) lang = wanted;
  // Until the catalogue is in, the page is hidden (at most WAIT_MS_MAX),
  // so nobody reads the English text flash by.
  let veil = null;
  if (!embedded && wanted !== "en" && document.head) {
    veil = document.createElement("style");
    veil.textContent = "body{visibility:hidden}";
    document.head.appendChild(veil);
  }
  setHtmlLang(wanted);
  const domReady = document.readyState === "loading"
    ? new Promise((r) => document.addEventListener("DOMContentLoaded", r, { once: true }))
    : Promise.resolve();
  const ready = Promise.all([load(wanted).catch(() => null), domReady]).then(([cat]) => {
    lang = cat ? wanted : "en";
    setHtmlLang(lang);
    if (!embedded) apply();
    if (veil) veil.remove();
    return lang;
  });

  return {
    ready,
    t,
    has,
    apply,
    choose,
    onChange,
    number,
    date,
    dateTime,
    month,
    weekdaysShort,
    get lang() { return lang; },
    get languages() { return codes.slice(); },
  };
})();
