// The moderation page's script (a file: the pages' CSP allows no inline
// script), over the shared client (/assets/throng.js): works the queue of
// held and reported comments with a moderator's token or the admin
// console's session.
(() => {
  const $ = (id) => document.getElementById(id);
  const SENTENCES = {
    forbidden: () => "This token is not a moderator's: ask for a moderator token.",
    missing_token: () => "Sign in with a moderator's token first.",
    invalid_token: () => "This token is not valid here; paste a new one.",
    token_expired: () => "The token has expired; paste a new one.",
    already_so: (m) => `Nothing to do: ${m.replace(/^the comment is /, "it is ")}.`,
    comment_not_found: () => "This comment is gone already (removed or deleted by its author).",
    user_not_found: () => "This user has never signed in here.",
  };
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

  function signedIn(t, label) {
    token = t;
    if (t) sessionStorage.setItem("throng-moderator-token", t);
    else sessionStorage.removeItem("throng-moderator-token");
    $("who").textContent = t ? label : "not signed in";
    load();
  }

  async function load(message) {
    const queue = $("queue");
    if (!token && !bySession) {
      queue.replaceChildren(el("p", { class: "note", text: "Sign in to see the queue." }));
      return;
    }
    $("status").textContent = "Loading…";
    const res = await call("GET", "/api/comments/moderation/queue?limit=100");
    if (!res.ok) {
      $("status").textContent = "";
      queue.replaceChildren(el("p", { class: "error", text: problem(res), "data-testid": "queue-error" }));
      return;
    }
    $("status").textContent = message || `${res.json.length} item${res.json.length === 1 ? "" : "s"} to look at.`;
    queue.replaceChildren(...res.json.map(item));
    if (res.json.length === 0) queue.append(el("p", { class: "note", text: "Nothing waits for a moderator.", "data-testid": "queue-empty" }));
  }

  function item(c) {
    const reasonId = `reason-${++ids}`;
    const reason = el("input", { id: reasonId, type: "text", maxlength: String(COMMENTS_LIMITS.reasonCharsMax), "data-testid": "mod-reason",
      "aria-describedby": `${reasonId}-err` });
    const err = el("span", { class: "error", id: `${reasonId}-err`, "data-testid": "mod-error" });
    const act = (action, path, method = "POST") => async () => {
      if (!reason.value.trim()) {
        err.textContent = "Give a reason first: it is recorded with the action.";
        reason.focus();
        return;
      }
      err.textContent = "";
      const body = path ? { reason: reason.value } : { action, reason: reason.value };
      const res = await call(method, path || `/api/comments/${c.commentId}/moderation`, body);
      if (res.ok) load(`Done: ${action} on comment ${c.commentId}.`);
      else err.textContent = problem(res);
    };
    const held = c.status === "held";
    const kind = c.parentId ? "Reply" : "Review";
    const box = el("article", { class: "item", "data-testid": "queue-item", "data-comment-id": String(c.commentId) },
      el("h2", {}, el("span", { text: `${kind} ${c.commentId} · course ${c.courseId} · ${c.displayName} (user ${c.userId})` })),
      el("div", { class: "meta" },
        held ? el("span", { class: "badge", text: "Held" }) : null, " ",
        c.reportsOpen ? el("span", { class: "badge reported", text: `${c.reportsOpen} report${c.reportsOpen === 1 ? "" : "s"}` }) : null, " ",
        c.status === "hidden" ? el("span", { class: "badge", text: "Hidden" }) : null, " ",
        c.authorBanned ? el("span", { class: "badge reported", text: "Author banned" }) : null, " ",
        el("span", { text: new Date(c.createdDate).toLocaleString() })),
      c.note ? el("p", { class: "note", text: c.note }) : null,
      c.rating ? el("div", { text: `${"★".repeat(c.rating)}${"☆".repeat(5 - c.rating)} ${c.title}` }) : el("div", { text: c.title }),
      el("div", { class: "remarks", text: c.remarks }),
      c.reportReasons.length ? el("ul", { "aria-label": "Report reasons" }, ...c.reportReasons.map((r) => el("li", { text: r }))) : null,
      el("div", { class: "reason" }, el("label", { for: reasonId, text: "Reason (recorded with the action)" }), reason, err),
      el("div", { class: "row" },
        el("button", { type: "button", text: held ? "Approve" : "Keep and close reports", "data-testid": held ? "mod-approve" : "mod-dismiss",
          onclick: held ? act("restore") : act("dismiss") }),
        c.status === "hidden" ? el("button", { type: "button", text: "Restore", "data-testid": "mod-restore", onclick: act("restore") }) : null,
        c.status !== "hidden" ? el("button", { type: "button", text: "Hide", "data-testid": "mod-hide", onclick: act("hide") }) : null,
        el("button", { type: "button", text: "Remove for good", "data-testid": "mod-remove", onclick: act("remove") }),
        c.authorBanned
          ? el("button", { type: "button", text: "Lift the author's ban", "data-testid": "mod-unban",
            onclick: act("unban", `/api/comments/users/${c.userId}/ban`, "DELETE") })
          : el("button", { type: "button", text: "Ban the author", "data-testid": "mod-ban",
            onclick: act("ban", `/api/comments/users/${c.userId}/ban`, "PUT") })));
    return box;
  }

  $("use-token").onclick = () => {
    const t = $("token").value.trim();
    signedIn(t || null, "signed in with a pasted token");
  };
  $("demo-moderator").onclick = async () => {
    const r = await call("GET", "/api/comments/demo-token?role=moderator");
    if (!r.ok) {
      $("who").textContent = `${problem(r)} (paste a token above)`;
      return;
    }
    signedIn(r.json.token, `signed in as moderator ${r.json.sub}`);
  };
  $("refresh").onclick = () => load();
  if (token) {
    $("who").textContent = "signed in";
    load();
  } else {
    Throng.consoleSession().then((who) => {
      if (who) {
        bySession = true;
        Throng.showConsoleSession($("token").closest("fieldset"), who);
      }
      load();
    });
  }
})();
