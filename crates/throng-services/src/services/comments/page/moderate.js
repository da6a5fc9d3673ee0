// The moderation page's script (a file: the pages' CSP allows no inline
// script), over the shared client (/assets/throng.js): works the queue of
// held and reported comments with a moderator's token or the admin
// console's session.
(() => {
  const $ = (id) => document.getElementById(id);
  const t = I18n.t;
  const SENTENCES = {
    forbidden: () => t("moderate.error.forbidden"),
    missing_token: () => t("moderate.error.missing_token"),
    invalid_token: () => t("moderate.error.invalid_token"),
    token_expired: () => t("moderate.error.token_expired"),
    // The server says which state the comment is in already (English);
    // another language says so in its own words.
    already_so: (m) => (I18n.lang === "en" ? `Nothing to do: ${m.replace(/^the comment is /, "it is ")}.` : t("moderate.error.already_so")),
    comment_not_found: () => t("moderate.error.comment_not_found"),
    user_not_found: () => t("moderate.error.user_not_found"),
  };
  // Who is signed in, as a catalogue key and its parameters (written again
  // in another language).
  let whoSaid = ["moderate.notSignedIn", null];
  const showWho = (key, params) => { whoSaid = [key, params]; $("who").textContent = t(key, params); };
  // The queue's last answer and the status line's message, likewise.
  let shown = null;
  let said = null;
  const api = Throng.client({ sentences: SENTENCES });
  let token = sessionStorage.getItem("throng-moderator-token");
  // Signed in to the admin console: its session signs the calls in.
  let bySession = false;
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
  let ids = 0;

  async function call(method, path, body) {
    const headers = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    try {
      const r = await api.fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
      return { ok: r.ok, status: r.status, json: await Throng.readJson(r) };
    } catch {
      return { ok: false, status: 0, offline: true, json: null };
    }
  }
  const problem = (res) => (res.offline ? Throng.UNREACHABLE : Throng.errorFromBody(res.status, res.json, SENTENCES).message);

  function signedIn(value, key, params) {
    token = value;
    if (value) sessionStorage.setItem("throng-moderator-token", value);
    else sessionStorage.removeItem("throng-moderator-token");
    if (value) showWho(key, params); else showWho("moderate.notSignedIn");
    load();
  }

  async function load(message) {
    const queue = $("queue");
    shown = null;
    if (!token && !bySession) {
      queue.replaceChildren(el("p", { class: "note", text: t("moderate.signInFirst") }));
      return;
    }
    $("status").textContent = t("common.loading");
    const res = await call("GET", "/api/comments/moderation/queue?limit=100");
    if (!res.ok) {
      $("status").textContent = "";
      queue.replaceChildren(el("p", { class: "error", text: problem(res), "data-testid": "queue-error" }));
      return;
    }
    said = message || ["moderate.count", { count: res.json.length }];
    shown = res.json;
    render();
  }

  // The queue as last answered, in the page's language.
  function render() {
    $("status").textContent = t(said[0], said[1]);
    const queue = $("queue");
    queue.replaceChildren(...shown.map(item));
    if (shown.length === 0) queue.append(el("p", { class: "note", text: t("moderate.empty"), "data-testid": "queue-empty" }));
  }

  function item(c) {
    const reasonId = `reason-${++ids}`;
    const reason = el("input", { id: reasonId, type: "text", maxlength: String(COMMENTS_LIMITS.reasonCharsMax), "data-testid": "mod-reason",
      "aria-describedby": `${reasonId}-err` });
    const err = el("span", { class: "error", id: `${reasonId}-err`, "data-testid": "mod-error" });
    const act = (action, path, method = "POST") => async () => {
      if (!reason.value.trim()) {
        err.textContent = t("moderate.rule.reason");
        reason.focus();
        return;
      }
      err.textContent = "";
      const body = path ? { reason: reason.value } : { action, reason: reason.value };
      const res = await call(method, path || `/api/comments/${c.commentId}/moderation`, body);
      if (res.ok) load(["moderate.done", { action: t(`moderate.action.${action}`), id: String(c.commentId) }]);
      else err.textContent = problem(res);
    };
    const held = c.status === "held";
    const kind = c.parentId ? "moderate.reply" : "moderate.review";
    const box = el("article", { class: "item", "data-testid": "queue-item", "data-comment-id": String(c.commentId) },
      el("h2", {}, el("span", { text: t(kind, { id: String(c.commentId), course: String(c.courseId), name: c.displayName, user: String(c.userId) }) })),
      el("div", { class: "meta" },
        held ? el("span", { class: "badge", text: t("moderate.held") }) : null, " ",
        c.reportsOpen ? el("span", { class: "badge reported", text: t("moderate.reports", { count: c.reportsOpen }) }) : null, " ",
        c.status === "hidden" ? el("span", { class: "badge", text: t("moderate.hidden") }) : null, " ",
        c.authorBanned ? el("span", { class: "badge reported", text: t("moderate.authorBanned") }) : null, " ",
        el("span", { class: "when", text: I18n.dateTime(new Date(c.createdDate)) })),
      c.note ? el("p", { class: "note", text: c.note }) : null,
      c.rating ? el("div", { text: `${"★".repeat(c.rating)}${"☆".repeat(5 - c.rating)} ${c.title}` }) : el("div", { text: c.title }),
      el("div", { class: "remarks", text: c.remarks }),
      c.reportReasons.length ? el("ul", { "aria-label": t("moderate.reportReasons") }, ...c.reportReasons.map((r) => el("li", { text: r }))) : null,
      el("div", { class: "reason" }, el("label", { for: reasonId, text: t("moderate.reason") }), reason, err),
      el("div", { class: "row" },
        el("button", { type: "button", text: held ? t("moderate.approve") : t("moderate.dismiss"), "data-testid": held ? "mod-approve" : "mod-dismiss",
          onclick: held ? act("restore") : act("dismiss") }),
        c.status === "hidden" ? el("button", { type: "button", text: t("moderate.restore"), "data-testid": "mod-restore", onclick: act("restore") }) : null,
        c.status !== "hidden" ? el("button", { type: "button", text: t("moderate.hide"), "data-testid": "mod-hide", onclick: act("hide") }) : null,
        el("button", { type: "button", text: t("moderate.remove"), "data-testid": "mod-remove", onclick: act("remove") }),
        c.authorBanned
          ? el("button", { type: "button", text: t("moderate.unban"), "data-testid": "mod-unban",
            onclick: act("unban", `/api/comments/users/${c.userId}/ban`, "DELETE") })
          : el("button", { type: "button", text: t("moderate.ban"), "data-testid": "mod-ban",
            onclick: act("ban", `/api/comments/users/${c.userId}/ban`, "PUT") })));
    return box;
  }

  $("use-token").onclick = () => {
    const value = $("token").value.trim();
    signedIn(value || null, "moderate.pasted");
  };
  $("demo-moderator").onclick = async () => {
    const r = await call("GET", "/api/comments/demo-token?role=moderator");
    if (!r.ok) {
      showWho("moderate.demoFailed", { problem: problem(r) });
      return;
    }
    signedIn(r.json.token, "moderate.signedInAs", { sub: r.json.sub });
  };
  $("refresh").onclick = () => load();
  I18n.ready.then(() => {
    if (token) {
      showWho("moderate.signedIn");
      load();
    } else {
      showWho("moderate.notSignedIn");
      Throng.consoleSession().then((who) => {
        if (who) {
          bySession = true;
          Throng.showConsoleSession($("token").closest("fieldset"), who);
        }
        load();
      });
    }
  });
  // Another language: what the script wrote, written again (a reason being
  // typed is lost with its item, so the queue is kept while one is).
  I18n.onChange(() => {
    $("who").textContent = t(whoSaid[0], whoSaid[1]);
    const typing = [...document.querySelectorAll("[data-testid=mod-reason]")].some((r) => r.value);
    if (shown && !typing) render();
    else if (!shown && !token && !bySession) load();
  });
})();
