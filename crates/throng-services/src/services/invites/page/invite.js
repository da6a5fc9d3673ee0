// throng survey invitation: <script src="https://THRONG/invite.js" data-site="ID" async></script>
// Asks throng whether to invite this visitor and, if so, shows an
// accessible dialog (Yes opens the survey in a new tab, No never asks
// again, close asks again next time). Small, dependency-free, and fails
// closed: if throng is slow or down, nothing is shown and nothing breaks.
// When and how it shows is the site's setting (trigger: load, delay,
// scroll, exit_intent; style: modal or slide_in). A page whose origin the
// site does not allow gets a console warning saying so.
// The check sends the page's path (never its query) and its device kind,
// for the site's page and device rules and its results by page.
// Optional attributes: data-api (throng's URL; default: where this script
// was loaded from), data-timeout-ms (default 2000).
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || !window.fetch || !document.body || !script.dataset) return;
  var site = script.dataset.site;
  if (!site || !/^[0-9]{1,18}$/.test(site)) return;
  var api, apiOrigin;
  try {
    // throng's URL, a path prefix behind a proxy included.
    var u = new URL(script.dataset.api || script.src.replace(/\/invite\.js([?#].*)?$/, "") || location.href, location.href);
    apiOrigin = u.origin;
    api = (u.origin + u.pathname).replace(/\/+$/, "");
  } catch (e) {
    return;
  }
  var timeoutMs = Number(script.dataset.timeoutMs) || 2000;
  // The default texts in each language (written by the server from its
  // catalogues). A site that kept the defaults invites in its page's
  // language (<html lang>, else the browser's); a site's own texts are
  // shown as the site wrote them.
  var DEFAULT_TEXTS = /*DEFAULT_TEXTS*/ { en: null };
  function language() {
    var tags = [document.documentElement.lang].concat(navigator.languages || [navigator.language]);
    for (var i = 0; i < tags.length; i++) {
      var code = String(tags[i] || "").toLowerCase().split(/[-_]/)[0];
      if (code && DEFAULT_TEXTS[code]) return code;
    }
    return "en";
  }
  function textsOf(popup) {
    var en = DEFAULT_TEXTS.en;
    if (!en) return { texts: popup, lang: "" };
    for (var k in en) if (en[k] !== popup[k]) return { texts: popup, lang: "" };
    var lang = language();
    return { texts: DEFAULT_TEXTS[lang], lang: lang };
  }
  var base = api + "/api/invites/sites/" + site;
  // The signed visitor id lives in the site's own storage (third-party
  // cookies are blocked by browsers); same-origin deployments also get a
  // first-party cookie from the server.
  var key = "throng-invites-visitor-" + site;
  function load() {
    try { return localStorage.getItem(key); } catch (e) { return null; }
  }
  function save(v) {
    try { if (v) localStorage.setItem(key, v); } catch (e) { /* storage blocked: the cookie may still work */ }
  }
  // The days of this browser's recent invitations, signed by throng, for
  // the owner's cap on invitations per visitor (one per throng server).
  var pacingKey = "throng-invites-pacing";
  function pacing() {
    try { return localStorage.getItem(pacingKey); } catch (e) { return null; }
  }
  // The page's path only: a query string may hold what is not throng's.
  var page = location.pathname;
  // What the site's device rule sees: a coarse pointer is a phone below
  // 600 CSS px on its short side, a tablet from it; else a desktop.
  function device() {
    var coarse = window.matchMedia && window.matchMedia("(pointer: coarse)").matches;
    if (!coarse) return "desktop";
    return Math.min(screen.width, screen.height) < 600 ? "phone" : "tablet";
  }
  var sameOrigin = apiOrigin === location.origin;
  function call(method, path, body) {
    var headers = {};
    var visitor = load();
    if (visitor) headers["X-Invites-Visitor"] = visitor;
    var paced = pacing();
    if (paced && method === "GET") headers["X-Invites-Pacing"] = paced;
    if (body) headers["Content-Type"] = "application/json";
    var ctrl = window.AbortController ? new AbortController() : null;
    var timer = ctrl && setTimeout(function () { ctrl.abort(); }, timeoutMs);
    return fetch(base + path, {
      method: method,
      headers: headers,
      body: body ? JSON.stringify(body) : undefined,
      credentials: sameOrigin ? "same-origin" : "omit",
      keepalive: method === "POST",
      signal: ctrl ? ctrl.signal : undefined,
      cache: "no-store",
    }).then(function (res) {
      if (timer) clearTimeout(timer);
      if (!res.ok) {
        return res.json().catch(function () { return {}; }).then(function (body) {
          var err = (body && body.error) || {};
          if (err.code === "origin_not_allowed") {
            console.warn("throng invites: this page's origin (" + location.origin + ") is not in the allowedOrigins of site " +
              site + ", so no invitation is shown; an admin adds it (PATCH /api/invites/sites/" + site + "). " + (err.message || ""));
          }
          throw new Error("throng invites: " + res.status);
        });
      }
      return res.json();
    });
  }

  var CSS =
    ":host{all:initial}" +
    ".back{position:fixed;inset:0;background:rgba(0,0,0,.35);display:flex;align-items:center;justify-content:center;z-index:2147483647;font:16px/1.4 system-ui,sans-serif}" +
    ".box{position:relative;box-sizing:border-box;background:#fff;color:#111;max-width:26rem;max-height:calc(100vh - 2rem);overflow:auto;margin:1rem;padding:1.5rem;border-radius:.5rem;box-shadow:0 .5rem 2rem rgba(0,0,0,.3)}" +
    ".slide{position:fixed;right:1rem;bottom:1rem;z-index:2147483647;font:16px/1.4 system-ui,sans-serif;animation:in .3s ease-out}" +
    ".slide .box{margin:0;width:22rem;max-width:calc(100vw - 2rem)}" +
    "@keyframes in{from{transform:translateY(2rem);opacity:0}to{transform:none;opacity:1}}" +
    "@media (prefers-reduced-motion:reduce){.slide{animation:none}}" +
    "h2{font-size:1.2rem;margin:0 2rem .5rem 0}p{margin:0 0 1rem}" +
    "button{font:inherit;padding:.5rem 1rem;margin:.25rem .5rem 0 0;border-radius:.3rem;border:1px solid #555;background:#f4f4f4;color:#111;cursor:pointer}" +
    "button.yes{background:#1a5fb4;border-color:#1a5fb4;color:#fff}" +
    "button.x{position:absolute;top:.5rem;right:.5rem;margin:0;padding:.1rem .5rem;border:0;background:none;font-size:1.4rem}" +
    "button:focus-visible{outline:3px solid #e5a50a;outline-offset:2px}";

  function show(state) {
    var chosen = textsOf(state.popup);
    var texts = chosen.texts;
    var host = document.createElement("div");
    host.setAttribute("data-throng-invite", site);
    var root = host.attachShadow ? host.attachShadow({ mode: "open" }) : host;
    var style = document.createElement("style");
    style.textContent = CSS;
    var modal = state.style !== "slide_in";
    var back = document.createElement("div");
    back.className = modal ? "back" : "slide";
    var box = document.createElement("div");
    box.className = "box";
    box.setAttribute("role", "dialog");
    if (chosen.lang) box.setAttribute("lang", chosen.lang);
    // A slide-in leaves the page usable: not modal, focus not held.
    box.setAttribute("aria-modal", modal ? "true" : "false");
    box.setAttribute("aria-labelledby", "throng-invite-title");
    box.setAttribute("aria-describedby", "throng-invite-body");
    var h = document.createElement("h2");
    h.id = "throng-invite-title";
    h.textContent = texts.title;
    var p = document.createElement("p");
    p.id = "throng-invite-body";
    p.textContent = texts.body;
    function button(cls, label, aria) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = cls;
      b.textContent = label;
      if (aria) b.setAttribute("aria-label", aria);
      return b;
    }
    var yes = button("yes", texts.yes);
    var no = button("no", texts.no);
    var x = button("x", "\u00d7", texts.close);
    box.append(x, h, p, yes, no);
    back.append(box);
    root.append(style, back);
    var before = document.activeElement;
    var done = false;
    function finish(answer) {
      if (done) return;
      done = true;
      document.removeEventListener("keydown", onKey, true);
      host.remove();
      if (before && before.focus) try { before.focus(); } catch (e) { /* gone */ }
      call("POST", "/answers", { answer: answer, displayId: state.displayId, page: page }).catch(function () {
        /* an answer lost in transit: the popup may show again */
      });
    }
    function onKey(e) {
      if (e.key === "Escape") {
        e.preventDefault();
        finish("close");
      } else if (e.key === "Tab" && modal) {
        // Keep focus inside the dialog while it is open.
        var order = [x, yes, no];
        var i = order.indexOf(root.activeElement);
        e.preventDefault();
        order[(i + (e.shiftKey ? order.length - 1 : 1)) % order.length].focus();
      }
    }
    yes.addEventListener("click", function () {
      // Opened in the click itself, so popup blockers allow it.
      window.open(new URL(state.surveyUrl, api).href, "_blank", "noopener");
      finish("yes");
    });
    no.addEventListener("click", function () { finish("no"); });
    x.addEventListener("click", function () { finish("close"); });
    back.addEventListener("click", function (e) { if (e.target === back) finish("close"); });
    document.addEventListener("keydown", onKey, true);
    document.body.append(host);
    yes.focus({ preventScroll: true });
  }

  // Shows the popup when the site's trigger fires (once).
  function when(state, go) {
    var fired = false;
    var undo = [];
    function fire() {
      if (fired) return;
      fired = true;
      undo.forEach(function (f) { f(); });
      go();
    }
    function on(target, type, f, opts) {
      target.addEventListener(type, f, opts);
      undo.push(function () { target.removeEventListener(type, f, opts); });
    }
    function after(seconds) {
      var t = setTimeout(fire, Math.max(0, Number(seconds) || 0) * 1000);
      undo.push(function () { clearTimeout(t); });
    }
    var trigger = state.trigger || "load";
    if (trigger === "delay") {
      after(state.delaySeconds);
    } else if (trigger === "scroll") {
      var share = Math.min(100, Math.max(1, Number(state.scrollPercent) || 50)) / 100;
      var check = function () {
        var doc = document.documentElement;
        var room = doc.scrollHeight - window.innerHeight;
        if (room <= 0 || (window.scrollY || doc.scrollTop) >= room * share) fire();
      };
      on(window, "scroll", check, { passive: true });
      check();
    } else if (trigger === "exit_intent") {
      // The mouse leaving through the top edge (towards the tabs or the
      // address bar). A touch screen has no such move: the delay instead.
      var touch = window.matchMedia && window.matchMedia("(hover: none)").matches;
      if (touch) {
        after(state.delaySeconds);
      } else {
        on(document, "mouseout", function (e) {
          if (!e.relatedTarget && e.clientY <= 0) fire();
        });
      }
    } else {
      fire();
    }
  }

  call("GET", "/state?page=" + encodeURIComponent(page) + "&device=" + device())
    .then(function (state) {
      save(state.visitor);
      if (state.pacing) try { localStorage.setItem(pacingKey, state.pacing); } catch (e) { /* no cap kept */ }
      if (state.show && state.popup && state.displayId) when(state, function () { show(state); });
    })
    .catch(function () { /* fail closed: no popup */ });
})();
