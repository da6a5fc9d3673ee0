// throng comments widget: a course's rating and its reviews with the
// provider's replies, in the order the reader picks, and what the signed-in
// person may do there: a user enrolled on the course writes, edits and
// deletes their reviews (held ones shown to them as waiting for approval),
// and reports others' reviews or finds them helpful; the course's provider
// replies. Nobody sees a control they may not use: the server says what the
// caller may do (GET /api/comments/me).
//
//   <script src="https://HOST/widget/comments.js" data-course="123"
//           data-token="(optional bearer token)" data-page-size="5"></script>
//
// Signing in is the host page's job: the widget has no login of its own.
// The host hands it its signed-in user's bearer token, made by the host's
// server with the same keys as throng (`throng token` shows the format: a
// `user` token with `sub` = the user's id and a `name` claim, the name shown
// with their reviews; a `provider` token for a course's provider):
//   - in the tag: data-token="eyJ...", or
//   - later, from the host's own script:
//       window.throngComments.setToken("eyJ...")   // null signs out
//     (the widget's script defines window.throngComments when it runs, and
//     dispatches a "throng-comments:ready" event on document).
// setCourse(id) shows another course. Text is always set with textContent.
//
// The widget lives in a shadow root, so the host page's CSS cannot restyle
// it (and its own styles stay inside). Served with the shared client
// (Throng, /assets/throng.js) and the comment bounds (COMMENTS_LIMITS, from
// the server's constants) before it, all in one function scope: the host
// page gets one file and no globals but window.throngComments.
(() => {
  "use strict";
  const L = COMMENTS_LIMITS;
  // A refused request (429/503) is tried again a little: nothing on the
  // host's page says the widget is waiting.
  const api = Throng.client({ retriesMax: 2, retryAfterSMax: 10 });
  const script = document.currentScript;
  const origin = new URL(script.src, location.href).origin;
  const opts = {
    course: Number(script.dataset.course || 1),
    type: script.dataset.ratingType || "Course",
    size: Math.min(L.pageSizeMax, Math.max(1, Number(script.dataset.pageSize || 5))),
    sizeThread: 5,
  };
  // Every word in the host page's language (I18n, carried inside).
  const t = I18n.t;
  const SORTS = [
    ["newest", () => t("comments.sort.newest")], ["oldest", () => t("comments.sort.oldest")], ["highest", () => t("comments.sort.highest")],
    ["lowest", () => t("comments.sort.lowest")], ["helpful", () => t("comments.sort.helpful")],
  ];
  let token = script.dataset.token || null;
  let skip = 0;
  let sort = "newest";
  // Renders in flight: only the latest one paints.
  let generation = 0;

  // An element of its own name: the host page's selectors for div, p,
  // button, ... never match the widget's box.
  const host = document.createElement("throng-comments");
  host.setAttribute("data-throng-comments", "");
  script.after(host);
  const shadow = host.attachShadow({ mode: "open" });
  const style = document.createElement("style");
  // The host page's selectors never match inside the shadow root; what it
  // sets on the host element (a \`* { ... }\` rule) would be inherited, so
  // the widget's root resets every property (\`all: initial\`) and sets its
  // own.
  style.textContent = `
    :host { all: initial; display: block; }
    .throng-comments { all: initial; display: block; font: 15px/1.45 system-ui, sans-serif; color: #222; background: #fff; border: 1px solid #ddd;
      border-radius: 8px; padding: 1rem; max-width: 44rem; box-sizing: border-box; overflow-wrap: anywhere; text-align: left; }
    .throng-comments *, .throng-comments *::before { box-sizing: border-box; }
    h2 { margin: 0 0 .5rem; font: 600 1.1rem/1.3 system-ui, sans-serif; color: #222; text-transform: none; letter-spacing: 0; }
    h3 { margin: 0; font: 600 1rem/1.3 system-ui, sans-serif; }
    button { font: 14px/1.2 system-ui, sans-serif; padding: .35rem .7rem; border: 1px solid #999; border-radius: 5px;
      background: #f6f6f6; color: #222; cursor: pointer; text-transform: none; margin: 0; }
    button[disabled] { opacity: .5; cursor: default; }
    button.tc-primary { background: #1a5fb4; border-color: #1a5fb4; color: #fff; }
    button.tc-link { border: none; background: none; color: #1a5fb4; padding: .2rem .3rem; text-decoration: underline; }
    div, p, span, label { color: inherit; font: inherit; }
    .tc-stars { color: #8a5d00; letter-spacing: 1px; }
    .tc-hist { display: grid; grid-template-columns: 3rem 1fr 3rem; gap: 2px 6px; font-size: .8rem; max-width: 20rem; margin: .3rem 0; }
    .tc-bar { background: #eee; border-radius: 3px; } .tc-bar > div { background: #e6a100; height: 100%; border-radius: 3px; }
    .tc-toolbar { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; margin: .5rem 0; }
    .tc-toolbar select { font: inherit; padding: .2rem; }
    .tc-block { border-top: 1px solid #eee; padding: .6rem 0; }
    .tc-name { font-weight: 600; } .tc-date { color: #666; font-size: .8rem; margin-left: .4rem; }
    .tc-comment { margin: .4rem 0 .2rem; } .tc-title { font-weight: 600; }
    .tc-comment:focus { outline: 2px solid #1a5fb4; outline-offset: 2px; }
    .tc-remarks { white-space: pre-wrap; margin: .2rem 0; }
    .tc-reply { margin: .3rem 0 .3rem 1.2rem; padding-left: .6rem; border-left: 3px solid #cde; }
    .tc-nav { display: flex; gap: .5rem; align-items: center; margin-top: .6rem; flex-wrap: wrap; }
    .tc-form { border-top: 1px solid #eee; margin-top: .8rem; padding-top: .6rem; display: grid; gap: .6rem; }
    .tc-field { display: grid; gap: .2rem; }
    .tc-field > span:first-child, legend { font-weight: 600; font-size: .9rem; padding: 0; }
    .tc-form input[type=text], .tc-form textarea, .tc-reply textarea { font: inherit; padding: .35rem; width: 100%; max-width: 100%;
      border: 1px solid #999; border-radius: 4px; background: #fff; color: #222; }
    fieldset { border: none; margin: 0; padding: 0; min-width: 0; }
    .tc-picker { display: flex; gap: .15rem; }
    .tc-picker input { position: absolute; opacity: 0; width: 1px; height: 1px; margin: 0; }
    .tc-picker label { font-size: 1.6rem; line-height: 1; color: #767676; cursor: pointer; padding: 0 .1rem; }
    .tc-picker label.tc-on { color: #8a5d00; }
    .tc-picker input:focus-visible + label { outline: 2px solid #1a5fb4; }
    .tc-error { color: #b00020; font-size: .9rem; } .tc-error:empty { display: none; }
    .tc-note { color: #555; font-size: .9rem; }
    .tc-badge { display: inline-block; background: #fff3cd; color: #664d03; border-radius: 4px; padding: 0 .4rem; font-size: .8rem; margin-left: .4rem; }
    .tc-actions { margin: .2rem 0; font-size: .85rem; display: flex; gap: .3rem; flex-wrap: wrap; align-items: center; }
    .tc-status { padding: .6rem; border-radius: 6px; background: #f4f6f8; }
    .tc-sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }`;
  shadow.append(style);
  const root = document.createElement("div");
  root.className = "throng-comments";
  root.setAttribute("role", "region");
  root.setAttribute("aria-label", t("comments.region"));
  root.setAttribute("lang", I18n.lang);
  shadow.append(root);
  // Announcements for screen readers (posted, held, deleted, ...).
  const live = document.createElement("div");
  live.className = "tc-sr";
  live.setAttribute("aria-live", "polite");
  live.setAttribute("data-testid", "announce");
  shadow.append(live);
  const announce = (text) => { live.textContent = ""; setTimeout(() => { live.textContent = text; }, 50); };

  const el = (tag, props = {}, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const kid of kids) if (kid) e.append(kid);
    return e;
  };
  const stars = (n) => "★".repeat(Math.round(n)) + "☆".repeat(L.ratingMax - Math.round(n));
  const when = (iso) => I18n.dateTime(new Date(iso));
  let ids = 0;
  const uid = (name) => `tc-${name}-${++ids}`;

  function claims() {
    if (!token) return null;
    try {
      const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      return JSON.parse(atob(part));
    } catch {
      return null;
    }
  }

  // `fresh`: after this page's own write, ask past every cache (the
  // browser's and the server's: Cache-Control: no-cache), so the write is
  // seen whichever node of a cluster answers. A request that cannot reach
  // the server answers { offline: true }.
  async function call(method, path, body, fresh) {
    const headers = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (token) headers.authorization = `Bearer ${token}`;
    try {
      const r = await api.fetch(origin + path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        cache: fresh ? "no-cache" : "default",
      });
      return { status: r.status, ok: r.ok, json: await Throng.readJson(r), headers: r.headers };
    } catch {
      return { status: 0, ok: false, offline: true, json: null, headers: new Headers() };
    }
  }

  // What people read when something is refused: the widget's own words
  // for the codes it knows, never the API's field names.
  const SENTENCES = {
    not_enrolled: () => t("comments.error.not_enrolled"),
    banned: () => t("comments.error.banned"),
    unknown_user: () => t("comments.error.unknown_user"),
    token_expired: () => t("comments.error.token_expired"),
    invalid_token: () => t("comments.error.unknown_user"),
    missing_token: () => t("comments.error.missing_token"),
    forbidden: () => t("comments.error.forbidden"),
    not_the_author: () => t("comments.error.not_the_author"),
    not_the_provider: () => t("comments.error.not_the_provider"),
    not_votable: (m) => (m.includes("own") ? t("comments.error.own_vote") : t("comments.error.not_votable")),
    comment_not_found: () => t("comments.error.comment_not_found"),
    course_not_found: () => t("comments.error.course_not_found"),
    too_many_requests: () => Throng.BUSY,
    store_unavailable: () => Throng.BUSY,
  };
  function errorText(res) {
    if (res.offline) return t("comments.offline");
    const e = Throng.errorFromBody(res.status, res.json, SENTENCES);
    if (e.code === "invalid_field") return t("comments.invalidField");
    return e.message;
  }
  // A field error from the server ("title: 1 to 200 characters ...") in
  // the widget's own words, keyed by the field it names.
  function fieldError(res) {
    const e = Throng.errorFromBody(res.status, res.json);
    if (e.code !== "invalid_field") return null;
    const field = e.message.split(":")[0].trim();
    const words = {
      rating: t("comments.rule.rating", { min: L.ratingMin, max: L.ratingMax }),
      title: t("comments.rule.title", { max: L.titleCharsMax }),
      remarks: t("comments.rule.remarks", { max: L.remarksCharsMax }),
      reason: t("comments.rule.reason"),
    };
    return words[field] ? { field, text: words[field] } : null;
  }

  function status(text, testid, retry) {
    const box = el("div", { class: "tc-status", "data-testid": testid, role: "status" }, el("p", { text }));
    if (retry) box.append(el("button", { type: "button", text: t("common.tryAgain"), "data-testid": "retry", onclick: retry }));
    return box;
  }

  // `message`: announced after the render; `focusId`: a comment to scroll
  // to and focus (a new review).
  async function render(message, afterWrite, focusId) {
    const mineGen = ++generation;
    root.setAttribute("aria-busy", "true");
    if (!root.firstChild || root.querySelector("[data-testid=offline]")) {
      root.replaceChildren(status(t("comments.loading"), "loading"));
    }
    const q = `ratingType=${encodeURIComponent(opts.type)}&courseId=${opts.course}&sort=${sort}` +
      `&skip=${skip}&size=${opts.size}&skipThread=0&sizeThread=${opts.sizeThread}`;
    const me = claims();
    const signedIn = token ? call("GET", `/api/comments/me?courseId=${opts.course}`, undefined, true) : null;
    const mine = me && me.role === "user"
      ? call("GET", `/api/comments/mine?courseId=${opts.course}`, undefined, true)
      : null;
    const [rating, list, who, own] = await Promise.all([
      call("GET", `/api/courses/${opts.course}/rating?ratingType=${encodeURIComponent(opts.type)}`, undefined, afterWrite),
      call("GET", `/api/comments?${q}`, undefined, afterWrite),
      signedIn,
      mine,
    ]);
    if (mineGen !== generation) return;
    root.removeAttribute("aria-busy");
    root.replaceChildren();
    if (rating.offline || list.offline) {
      root.append(status(t("comments.offlineList"),
        "offline", () => render()));
      return;
    }
    if (!rating.ok) {
      root.append(el("p", { class: "tc-error", text: errorText(rating) }));
      return;
    }
    const can = who && who.ok ? who.json : null;
    const ownItems = own && own.ok ? own.json : [];
    const ownIds = new Set(ownItems.map((c) => c.commentId));
    const r = rating.json;
    root.append(el("h2", { "data-testid": "course-title", text: t("comments.title", { course: r.courseTitle || t("comments.courseNumber", { id: String(opts.course) }) }) }));
    root.append(el("div", {},
      el("span", { class: "tc-stars", text: stars(r.average), "aria-hidden": "true", "data-testid": "average-stars" }),
      el("span", { text: ` ${t("comments.summary", { average: I18n.number(r.average, { minimumFractionDigits: 2, maximumFractionDigits: 2 }), max: L.ratingMax, count: r.count })}`,
        "data-testid": "rating-summary" })));
    const hist = el("div", { class: "tc-hist", "aria-hidden": "true" });
    for (let s = L.ratingMax; s >= L.ratingMin; s--) {
      const n = r.stars[s - L.ratingMin];
      const bar = el("div", { class: "tc-bar" }, el("div"));
      bar.firstChild.style.width = r.count ? `${(100 * n) / r.count}%` : "0";
      hist.append(el("span", { text: `${s} ★` }), bar, el("span", { text: String(n) }));
    }
    root.append(hist);
    if (message) root.append(el("p", { class: "tc-note", text: message, "data-testid": "message" }));
    if (who && !who.ok) root.append(el("p", { class: "tc-error", text: errorText(who), "data-testid": "signin-error" }));
    const held = ownItems.filter((c) => c.status !== "visible");
    if (held.length) root.append(renderHeld(held));
    const sortId = uid("sort");
    const picker = el("select", { id: sortId, "data-testid": "sort" },
      ...SORTS.map(([v, label]) => el("option", { value: v, text: label() })));
    picker.value = sort;
    picker.addEventListener("change", () => { sort = picker.value; skip = 0; render(); });
    root.append(el("div", { class: "tc-toolbar" }, el("label", { for: sortId, text: t("comments.sortBy") }), picker));
    if (!list.ok) {
      root.append(el("p", { class: "tc-error", text: errorText(list) }));
      return;
    }
    const blocks = el("div", { "data-testid": "blocks" });
    for (const block of list.json) blocks.append(renderBlock(block, can, ownIds));
    if (list.json.length === 0) blocks.append(el("p", { class: "tc-note", text: skip ? t("comments.noMore") : t("comments.none") }));
    root.append(blocks);
    const more = list.headers.get("x-next-cursor") !== null;
    root.append(el("div", { class: "tc-nav" },
      el("button", { type: "button", text: t("comments.previous"), "data-testid": "newer", ...(skip ? {} : { disabled: "" }),
        onclick: () => { skip = Math.max(0, skip - opts.size); render(); } }),
      el("span", { class: "tc-note", text: t("comments.page", { n: Math.floor(skip / opts.size) + 1 }) }),
      el("button", { type: "button", text: t("comments.next"), "data-testid": "older", ...(more ? {} : { disabled: "" }),
        onclick: () => { skip += opts.size; render(); } })));
    root.append(renderForm(me, can));
    if (message) announce(message);
    if (focusId) {
      const target = root.querySelector(`[data-comment-id="${focusId}"]`);
      if (target) {
        target.setAttribute("tabindex", "-1");
        target.scrollIntoView({ block: "center" });
        target.focus({ preventScroll: true });
      }
    }
  }

  // The signed-in user's reviews that wait for a moderator (or were
  // hidden): only they see them.
  function renderHeld(items) {
    const box = el("div", { class: "tc-status", "data-testid": "held" },
      el("h3", { text: t("comments.held.title") }));
    for (const c of items) {
      const waiting = c.status === "held";
      box.append(el("div", { class: "tc-comment", "data-testid": "held-comment", "data-comment-id": String(c.commentId) },
        el("span", { class: "tc-stars", text: stars(c.rating), "aria-label": t("comments.stars", { n: c.rating, count: L.ratingMax }) }), " ",
        el("span", { class: "tc-title", text: c.title }),
        el("span", { class: "tc-badge", text: waiting ? t("comments.held.waiting") : t("comments.held.hidden") }),
        el("div", { class: "tc-remarks", text: c.remarks })));
    }
    return box;
  }

  // The block's header names the user; each review carries its own stars
  // and date (shown once).
  function renderBlock(b, can, ownIds) {
    const block = el("article", { class: "tc-block", "data-testid": "block" },
      el("h3", {}, el("span", { class: "tc-name", text: b.displayName })));
    for (const c of b.thread) {
      const item = el("div", { class: "tc-comment", "data-testid": "comment", "data-comment-id": String(c.commentId) });
      const view = el("div", {},
        el("div", {}, el("span", { class: "tc-stars", text: stars(c.rating), "data-testid": "comment-stars",
          role: "img", "aria-label": t("comments.stars", { n: c.rating, count: L.ratingMax }) }), " ",
          el("span", { class: "tc-title", text: c.title }), el("span", { class: "tc-date", text: when(c.createdDate) })),
        el("div", { class: "tc-remarks", text: c.remarks }),
        c.helpful ? el("div", { class: "tc-note", "data-testid": "helpful-count",
          text: t("comments.helpfulCount", { count: c.helpful }) }) : null);
      item.append(view);
      const own = ownIds.has(c.commentId);
      if (own) item.append(ownControls(c, item, view));
      else if (can && can.canReact) item.append(readerControls(c));
      for (const rp of c.reply) {
        item.append(el("div", { class: "tc-reply", "data-testid": "reply" },
          el("div", {}, el("span", { class: "tc-name", text: rp.displayName }),
            el("span", { class: "tc-date", text: t("comments.replied", { when: when(rp.createdDate) }) })),
          rp.title ? el("div", { class: "tc-title", text: rp.title }) : null,
          el("div", { class: "tc-remarks", text: rp.remarks })));
      }
      if (can && can.canReply) item.append(replyControls(c));
      block.append(item);
    }
    return block;
  }

  // A star picker: radio buttons, none chosen until the person picks.
  function starPicker(name, testid, value) {
    const legendId = uid("legend");
    const box = el("div", { class: "tc-picker" });
    const labels = [];
    const paint = (n) => labels.forEach((l, i) => l.classList.toggle("tc-on", i < n));
    for (let n = L.ratingMin; n <= L.ratingMax; n++) {
      const id = uid("star");
      const input = el("input", { type: "radio", name, id, value: String(n), "data-testid": `${testid}-${n}` });
      if (value === n) input.checked = true;
      input.addEventListener("change", () => paint(n));
      const label = el("label", { for: id, "data-stars": String(n), title: t("comments.stars", { n, count: L.ratingMax }), text: "★" },
        el("span", { class: "tc-sr", text: t("comments.starCount", { count: n }) }));
      labels.push(label);
      box.append(input, label);
    }
    const err = el("span", { class: "tc-error", "data-testid": `${testid}-error`, id: uid("err") });
    const set = el("fieldset", { "data-testid": testid, "aria-describedby": err.id },
      el("legend", { id: legendId, text: t("comments.yourRating") }), box, err);
    paint(value || 0);
    return {
      el: set, err,
      value: () => {
        const checked = set.querySelector("input:checked");
        return checked ? Number(checked.value) : null;
      },
    };
  }

  // A labelled text field with its error beside it.
  function field(label, input, testid) {
    const err = el("span", { class: "tc-error", "data-testid": `${testid}-error`, id: uid("err") });
    input.setAttribute("aria-describedby", err.id);
    const id = uid(testid);
    input.id = id;
    return { el: el("div", { class: "tc-field" }, el("label", { for: id, text: label }), input, err), err };
  }

  // Checks a review's fields in people's words; true when all are fine.
  function checkReview(fields, values) {
    let ok = true;
    const say = (f, text) => { f.err.textContent = text; if (text) ok = false; };
    say(fields.rating, values.rating ? "" : t("comments.rule.rating", { min: L.ratingMin, max: L.ratingMax }));
    say(fields.title, values.title.trim() ? "" : t("comments.rule.titleEmpty"));
    say(fields.remarks, values.remarks.trim() ? "" : t("comments.rule.remarksEmpty"));
    return ok;
  }

  // Puts the server's answer beside the field it names, or under the form.
  function showRefusal(res, fields, formErr) {
    const f = fieldError(res);
    if (f && fields[f.field]) fields[f.field].err.textContent = f.text;
    else formErr.textContent = errorText(res);
  }

  // Edit and Delete of the signed-in user's own review.
  function ownControls(c, item, view) {
    const problem = el("span", { class: "tc-error", "data-testid": "own-error" });
    const bar = el("div", { class: "tc-actions" },
      el("button", { type: "button", class: "tc-link", text: t("comments.edit"), "data-testid": "own-edit", onclick: () => {
        const rating = starPicker(uid("edit-rating"), "edit-rating", c.rating);
        const title = field(t("comments.field.title"), el("input", { type: "text", maxlength: String(L.titleCharsMax), "data-testid": "edit-title" }), "edit-title");
        title.el.querySelector("input").value = c.title;
        const remarks = field(t("comments.field.remarks"), el("textarea", { rows: "3", maxlength: String(L.remarksCharsMax), "data-testid": "edit-remarks" }), "edit-remarks");
        remarks.el.querySelector("textarea").value = c.remarks;
        const err = el("span", { class: "tc-error", "data-testid": "edit-error" });
        const fields = { rating, title, remarks };
        const form = el("form", { class: "tc-form", "data-testid": "edit-form", novalidate: "" },
          rating.el, title.el, remarks.el,
          el("div", { class: "tc-actions" }, el("button", { type: "submit", class: "tc-primary", text: t("comments.save"), "data-testid": "edit-save" }),
            el("button", { type: "button", text: t("comments.cancel"), onclick: () => { form.replaceWith(view); bar.hidden = false; } }), err));
        form.addEventListener("submit", async (ev) => {
          ev.preventDefault();
          const values = { rating: rating.value(), title: title.el.querySelector("input").value, remarks: remarks.el.querySelector("textarea").value };
          if (!checkReview(fields, values)) return;
          const res = await call("PATCH", `/api/comments/${c.commentId}`, values);
          if (res.ok) {
            const held = res.json && res.json.status === "held";
            render(held ? t("comments.updatedHeld") : t("comments.updated"),
              true, held ? null : c.commentId);
          } else showRefusal(res, fields, err);
        });
        view.replaceWith(form);
        bar.hidden = true;
      } }),
      el("button", { type: "button", class: "tc-link", text: t("comments.delete"), "data-testid": "own-delete", onclick: () => {
        const ask = el("span", { "data-testid": "own-delete-ask", role: "group", "aria-label": t("comments.confirmDeletion") },
          el("span", { text: `${t("comments.deleteAsk")} ` }),
          el("button", { type: "button", text: t("comments.deleteYes"), "data-testid": "own-delete-confirm", onclick: async () => {
            const res = await call("DELETE", `/api/comments/${c.commentId}`);
            if (res.ok) render(t("comments.deleted"), true);
            else problem.textContent = errorText(res);
          } }), " ",
          el("button", { type: "button", text: t("comments.keep"), onclick: () => ask.remove() }));
        bar.append(ask);
      } }), problem);
    return bar;
  }

  // Helpful and Report for a reader who is not the author.
  function readerControls(c) {
    const note = el("span", { class: "tc-note", "data-testid": "reader-note", role: "status" });
    const bar = el("div", { class: "tc-actions" });
    bar.append(
      el("button", { type: "button", class: "tc-link", text: t("comments.helpful"), "data-testid": "helpful", onclick: async () => {
        const res = await call("POST", `/api/comments/${c.commentId}/helpful`);
        if (res.ok) {
          note.textContent = res.json.counted ? t("comments.voted") : t("comments.votedAlready");
          announce(note.textContent);
        } else note.textContent = errorText(res);
      } }),
      el("button", { type: "button", class: "tc-link", text: t("comments.report"), "data-testid": "report", onclick: () => {
        const reason = field(t("comments.reportWhy"),
          el("input", { type: "text", maxlength: String(L.reasonCharsMax), "data-testid": "report-reason" }), "report-reason");
        const form = el("form", { class: "tc-form", "data-testid": "report-form", novalidate: "" }, reason.el,
          el("div", { class: "tc-actions" },
            el("button", { type: "submit", text: t("comments.reportSend"), "data-testid": "report-send" }),
            el("button", { type: "button", text: t("comments.cancel"), onclick: () => form.remove() })));
        form.addEventListener("submit", async (ev) => {
          ev.preventDefault();
          const text = reason.el.querySelector("input").value;
          if (!text.trim()) { reason.err.textContent = t("comments.rule.reason"); return; }
          const res = await call("POST", `/api/comments/${c.commentId}/reports`, { reason: text });
          if (res.ok) {
            form.remove();
            note.textContent = res.json.counted ? t("comments.reported") : t("comments.reportedAlready");
            announce(note.textContent);
          } else showRefusal(res, { reason }, note);
        });
        bar.after(form);
        reason.el.querySelector("input").focus();
      } }),
      note);
    return bar;
  }

  // The provider's reply: a form to write one when there is none; Edit
  // (the form prefilled) and Delete when there is.
  function replyControls(c) {
    const existing = c.reply[0];
    const problem = el("span", { class: "tc-error", "data-testid": "reply-status" });
    const box = el("div", { class: "tc-reply" });
    const editor = (value, label) => {
      const remarks = field(t("comments.field.reply"), el("textarea", { rows: "2", maxlength: String(L.remarksCharsMax),
        "data-testid": "reply-remarks" }), "reply-remarks");
      const area = remarks.el.querySelector("textarea");
      area.value = value;
      box.replaceChildren(remarks.el, el("div", { class: "tc-actions" },
        el("button", { type: "button", text: label, "data-testid": "reply-send", onclick: async () => {
          if (!area.value.trim()) { remarks.err.textContent = t("comments.rule.reply"); return; }
          const res = await call("PUT", `/api/comments/${c.commentId}/reply`, { remarks: area.value });
          if (res.ok) render(res.status === 201 ? t("comments.replyPosted") : t("comments.replyEdited"), true);
          else showRefusal(res, { remarks }, problem);
        } }), problem));
    };
    if (!existing) {
      editor("", t("comments.reply"));
      return box;
    }
    box.append(el("div", { class: "tc-actions" },
      el("button", { type: "button", text: t("comments.replyEdit"), "data-testid": "reply-edit",
        onclick: () => editor(existing.remarks, t("comments.replySave")) }),
      el("button", { type: "button", text: t("comments.replyDelete"), "data-testid": "reply-delete", onclick: async () => {
        const res = await call("DELETE", `/api/comments/${existing.commentId}`);
        if (res.ok) render(t("comments.replyDeleted"), true);
        else problem.textContent = errorText(res);
      } }), problem));
    return box;
  }

  function renderForm(me, can) {
    if (!me) return el("p", { class: "tc-note", text: t("comments.signInToWrite"), "data-testid": "signed-out" });
    // (The host page signs its user in: data-token or throngComments.setToken.)
    if (!can) return el("p", { class: "tc-note", "data-testid": "no-form", text: "" });
    if (me.role !== "user") return el("p", { class: "tc-note", "data-testid": "no-form", text: "" });
    if (can.banned) {
      return el("p", { class: "tc-note", "data-testid": "no-form", text: SENTENCES.banned() });
    }
    if (!can.canReview) {
      return el("p", { class: "tc-note", "data-testid": "no-form", text: SENTENCES.not_enrolled() });
    }
    const rating = starPicker(uid("form-rating"), "form-rating", null);
    const title = field(t("comments.field.title"), el("input", { type: "text", maxlength: String(L.titleCharsMax), "data-testid": "form-title" }), "form-title");
    const remarks = field(t("comments.field.remarks"), el("textarea", { rows: "3", maxlength: String(L.remarksCharsMax), "data-testid": "form-remarks" }), "form-remarks");
    const problem = el("span", { class: "tc-error", "data-testid": "form-error", role: "alert" });
    const fields = { rating, title, remarks };
    const form = el("form", { class: "tc-form", "data-testid": "form", novalidate: "" },
      el("h3", { text: t("comments.write") }),
      el("span", { class: "tc-note", text: t("comments.postingAs", { name: can.displayName }) }),
      rating.el, title.el, remarks.el,
      el("div", { class: "tc-actions" }, el("button", { type: "submit", class: "tc-primary", text: t("comments.post"), "data-testid": "form-send" }), problem));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      problem.textContent = "";
      const values = { rating: rating.value(), title: title.el.querySelector("input").value, remarks: remarks.el.querySelector("textarea").value };
      if (!checkReview(fields, values)) return;
      const send = form.querySelector("[data-testid=form-send]");
      send.disabled = true;
      const res = await call("POST", `/api/courses/${opts.course}/comments`, { ...values, commentType: opts.type });
      send.disabled = false;
      if (res.ok) {
        const held = res.json.status === "held";
        if (!held && sort !== "newest") sort = "newest";
        skip = 0;
        render(held ? t("comments.postedHeld") : t("comments.posted"),
          true, held ? null : res.json.commentId);
      } else showRefusal(res, fields, problem);
    });
    return form;
  }

  window.addEventListener("online", () => { if (root.querySelector("[data-testid=offline]")) render(); });
  window.throngComments = {
    setToken(t) { token = t || null; render(); },
    setCourse(id) { opts.course = Number(id) || 1; skip = 0; render(); },
    reload() { return render(); },
  };
  document.dispatchEvent(new CustomEvent("throng-comments:ready"));
  I18n.ready.then(() => render());
})();
