// throng comments widget: a course's rating and its comments with the
// provider's replies, paging, and a form for a signed-in user, who can edit
// and delete their own reviews (a provider: reply, edit and delete replies).
//
//   <script src="https://HOST/widget/comments.js" data-course="123"
//           data-token="(optional bearer token)" data-page-size="5"></script>
//
// Signing in is the host page's job: the widget has no login of its own.
// The host hands it its signed-in user's bearer token (a `user` token whose
// `sub` is the user's id, or a `provider` token for the course's provider),
// made by the host's server with the same keys as throng (`throng token` shows
// the format):
//   - in the tag: data-token="eyJ...", or
//   - later, from the host's own script:
//       window.throngComments.setToken("eyJ...")   // null signs out
//     (the widget's script defines window.throngComments when it runs, and
//     dispatches a "throng-comments:ready" event on document).
// setCourse(id) shows another course. Text is always set with textContent.
//
// Served with the shared client (Throng, /assets/throng.js) and the comment
// bounds (COMMENTS_LIMITS, from the server's constants) before it, all in
// one function scope: the host page gets one file and no globals but
// window.throngComments.
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
  let token = script.dataset.token || null;
  let skip = 0;

  const root = document.createElement("div");
  root.className = "throng-comments";
  script.after(root);
  const style = document.createElement("style");
  style.textContent = `
    .throng-comments { font: 15px/1.4 system-ui, sans-serif; color: #222; border: 1px solid #ddd;
      border-radius: 8px; padding: 1rem; max-width: 44rem; }
    .throng-comments h3 { margin: 0 0 .5rem; font-size: 1.1rem; }
    .tc-stars { color: #e6a100; letter-spacing: 1px; }
    .tc-hist { display: grid; grid-template-columns: 3rem 1fr 3rem; gap: 2px 6px; font-size: .8rem; max-width: 20rem; }
    .tc-bar { background: #eee; border-radius: 3px; } .tc-bar > div { background: #e6a100; height: 100%; border-radius: 3px; }
    .tc-block { border-top: 1px solid #eee; padding: .6rem 0; }
    .tc-name { font-weight: 600; } .tc-date { color: #777; font-size: .8rem; margin-left: .4rem; }
    .tc-comment { margin: .4rem 0 .2rem; } .tc-title { font-weight: 600; }
    .tc-remarks { white-space: pre-wrap; margin: .2rem 0; }
    .tc-reply { margin: .3rem 0 .3rem 1.2rem; padding-left: .6rem; border-left: 3px solid #cde; }
    .tc-nav { display: flex; gap: .5rem; align-items: center; margin-top: .6rem; }
    .tc-form { border-top: 1px solid #eee; margin-top: .8rem; padding-top: .6rem; display: grid; gap: .4rem; }
    .tc-form input, .tc-form textarea, .tc-form select { font: inherit; padding: .3rem; }
    .tc-error { color: #b00020; } .tc-note { color: #555; font-size: .85rem; }
    .tc-actions { margin: .2rem 0; font-size: .85rem; }
    .throng-comments { box-sizing: border-box; overflow-wrap: anywhere; }
    .throng-comments textarea, .throng-comments input { box-sizing: border-box; max-width: 100%; }
    .tc-reply textarea { width: 100%; }`;
  root.before(style);

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
  // The ratings a review may give, best first, as <option>s.
  const ratingOptions = () => {
    const out = [];
    for (let n = L.ratingMax; n >= L.ratingMin; n--) out.push(el("option", { value: String(n), text: `${n} ★` }));
    return out;
  };
  const when = (iso) => new Date(iso).toLocaleString();

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
  // seen whichever node of a cluster answers.
  async function call(method, path, body, fresh) {
    const headers = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (token) headers.authorization = `Bearer ${token}`;
    const r = await api.fetch(origin + path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: fresh ? "no-cache" : "default",
    });
    return { status: r.status, ok: r.ok, json: await Throng.readJson(r), headers: r.headers };
  }

  const errorText = (res) => Throng.errorFromBody(res.status, res.json).message;

  async function render(message, afterWrite) {
    const q = `ratingType=${encodeURIComponent(opts.type)}&courseId=${opts.course}` +
      `&skip=${skip}&size=${opts.size}&skipThread=0&sizeThread=${opts.sizeThread}`;
    const me = claims();
    // A signed-in user's own reviews on this course (listing blocks carry no
    // user id): their comments get Edit and Delete.
    const mine = me && me.role === "user" && /^[0-9]+$/.test(String(me.sub))
      ? call("GET", `/api/comments?ratingType=${encodeURIComponent(opts.type)}&courseId=${opts.course}` +
        `&userId=${me.sub}&size=1&sizeThread=${L.pageSizeMax}`, undefined, afterWrite)
      : Promise.resolve(null);
    const [rating, list, own] = await Promise.all([
      call("GET", `/api/courses/${opts.course}/rating?ratingType=${encodeURIComponent(opts.type)}`, undefined, afterWrite),
      call("GET", `/api/comments?${q}`, undefined, afterWrite),
      mine,
    ]);
    const myIds = new Set(own && own.ok ? own.json.flatMap((b) => b.thread.map((c) => c.commentId)) : []);
    root.replaceChildren();
    if (!rating.ok) {
      root.append(el("p", { class: "tc-error", text: errorText(rating) }));
      return;
    }
    const r = rating.json;
    root.append(el("h3", { "data-testid": "course-title", text: `Reviews · ${r.courseTitle || `course ${opts.course}`}` }));
    root.append(el("div", {},
      el("span", { class: "tc-stars", text: stars(r.average), "data-testid": "average-stars" }),
      el("span", { text: ` ${r.average.toFixed(2)} from ${r.count} rating${r.count === 1 ? "" : "s"}`, "data-testid": "rating-summary" })));
    const hist = el("div", { class: "tc-hist" });
    for (let s = L.ratingMax; s >= L.ratingMin; s--) {
      const n = r.stars[s - L.ratingMin];
      const bar = el("div", { class: "tc-bar" }, el("div"));
      bar.firstChild.style.width = r.count ? `${(100 * n) / r.count}%` : "0";
      hist.append(el("span", { text: `${s} ★` }), bar, el("span", { text: String(n) }));
    }
    root.append(hist);
    if (message) root.append(el("p", { class: "tc-note", text: message, "data-testid": "message" }));
    if (!list.ok) {
      root.append(el("p", { class: "tc-error", text: errorText(list) }));
      return;
    }
    const list_el = el("div", { "data-testid": "blocks" });
    for (const block of list.json) list_el.append(renderBlock(block, me, myIds));
    if (list.json.length === 0) list_el.append(el("p", { class: "tc-note", text: skip ? "No more comments." : "No comments yet." }));
    root.append(list_el);
    const more = list.headers.get("x-next-cursor") !== null;
    root.append(el("div", { class: "tc-nav" },
      el("button", { type: "button", text: "‹ Newer", "data-testid": "newer", ...(skip ? {} : { disabled: "" }),
        onclick: () => { skip = Math.max(0, skip - opts.size); render(); } }),
      el("span", { class: "tc-note", text: `page ${Math.floor(skip / opts.size) + 1}` }),
      el("button", { type: "button", text: "Older ›", "data-testid": "older", ...(more ? {} : { disabled: "" }),
        onclick: () => { skip += opts.size; render(); } })));
    root.append(renderForm(me));
  }

  // The block's header names the user; each comment carries its own stars
  // and date (shown once).
  function renderBlock(b, me, myIds) {
    const block = el("div", { class: "tc-block", "data-testid": "block" },
      el("div", {}, el("span", { class: "tc-name", text: b.displayName })));
    for (const c of b.thread) {
      const item = el("div", { class: "tc-comment", "data-testid": "comment", "data-comment-id": String(c.commentId) });
      const view = el("div", {},
        el("div", {}, el("span", { class: "tc-stars", text: stars(c.rating), "data-testid": "comment-stars",
          "aria-label": `${c.rating} of ${L.ratingMax} stars` }), " ",
          el("span", { class: "tc-title", text: c.title }), el("span", { class: "tc-date", text: when(c.createdDate) })),
        el("div", { class: "tc-remarks", text: c.remarks }));
      item.append(view);
      if (myIds.has(c.commentId)) item.append(ownControls(c, item, view));
      for (const rp of c.reply) {
        const reply = el("div", { class: "tc-reply", "data-testid": "reply" },
          el("div", {}, el("span", { class: "tc-name", text: rp.displayName }),
            el("span", { class: "tc-date", text: `replied ${when(rp.createdDate)}` })),
          rp.title ? el("div", { class: "tc-title", text: rp.title }) : null,
          el("div", { class: "tc-remarks", text: rp.remarks }));
        item.append(reply);
      }
      if (me && me.role === "provider") item.append(replyControls(c));
      block.append(item);
    }
    return block;
  }

  // Edit and Delete of the signed-in user's own review.
  function ownControls(c, item, view) {
    const status = el("span", { class: "tc-error", "data-testid": "own-error" });
    const bar = el("div", { class: "tc-actions" },
      el("button", { type: "button", text: "Edit", "data-testid": "own-edit", onclick: () => {
        const rating = el("select", { "data-testid": "edit-rating", "aria-label": "Rating" },
          ...ratingOptions());
        rating.value = String(c.rating);
        const title = el("input", { maxlength: String(L.titleCharsMax), "data-testid": "edit-title", "aria-label": "Title" });
        title.value = c.title;
        const remarks = el("textarea", { rows: "3", maxlength: String(L.remarksCharsMax), "data-testid": "edit-remarks", "aria-label": "Review" });
        remarks.value = c.remarks;
        const err = el("span", { class: "tc-error", "data-testid": "edit-error" });
        const form = el("form", { class: "tc-form", "data-testid": "edit-form" }, rating, title, remarks,
          el("div", {}, el("button", { type: "submit", text: "Save", "data-testid": "edit-save" }), " ",
            el("button", { type: "button", text: "Cancel", onclick: () => { form.replaceWith(view); bar.hidden = false; } }),
            " ", err));
        form.addEventListener("submit", async (ev) => {
          ev.preventDefault();
          const res = await call("PATCH", `/api/comments/${c.commentId}`,
            { rating: Number(rating.value), title: title.value, remarks: remarks.value });
          if (res.ok) render("Your review is updated.", true);
          else err.textContent = errorText(res);
        });
        view.replaceWith(form);
        bar.hidden = true;
      } }), " ",
      el("button", { type: "button", text: "Delete", "data-testid": "own-delete", onclick: () => {
        const ask = el("span", { "data-testid": "own-delete-ask" }, el("span", { text: "Delete this review? " }),
          el("button", { type: "button", text: "Yes, delete", "data-testid": "own-delete-confirm", onclick: async () => {
            const res = await call("DELETE", `/api/comments/${c.commentId}`);
            if (res.ok) render("Your review is deleted.", true);
            else status.textContent = errorText(res);
          } }), " ",
          el("button", { type: "button", text: "Keep", onclick: () => ask.remove() }));
        bar.append(ask);
      } }), " ", status);
    return bar;
  }

  // The provider's reply: a form to write one when there is none; Edit
  // (the form prefilled) and Delete when there is.
  function replyControls(c) {
    const existing = c.reply[0];
    const status = el("span", { class: "tc-note", "data-testid": "reply-status" });
    const box = el("div", { class: "tc-reply" });
    const editor = (value, label) => {
      const remarks = el("textarea", { rows: "2", placeholder: "Your reply", maxlength: String(L.remarksCharsMax),
        "data-testid": "reply-remarks", "aria-label": "Your reply" });
      remarks.value = value;
      box.replaceChildren(remarks,
        el("button", { type: "button", text: label, "data-testid": "reply-send", onclick: async () => {
          const res = await call("PUT", `/api/comments/${c.commentId}/reply`, { remarks: remarks.value });
          if (res.ok) render(res.status === 201 ? "Reply posted." : "Reply edited.", true);
          else status.textContent = errorText(res);
        } }), " ", status);
    };
    if (!existing) {
      editor("", "Reply");
      return box;
    }
    box.append(
      el("button", { type: "button", text: "Edit reply", "data-testid": "reply-edit",
        onclick: () => editor(existing.remarks, "Save reply") }), " ",
      el("button", { type: "button", text: "Delete reply", "data-testid": "reply-delete", onclick: async () => {
        const res = await call("DELETE", `/api/comments/${existing.commentId}`);
        if (res.ok) render("Reply deleted.", true);
        else status.textContent = errorText(res);
      } }), " ", status);
    return box;
  }

  function renderForm(me) {
    if (!me) return el("p", { class: "tc-note", text: "Sign in to write a review.", "data-testid": "signed-out" });
    // (The host page signs its user in: data-token or throngComments.setToken.)
    if (me.role !== "user") return el("p", { class: "tc-note", text: `Signed in as ${me.role} ${me.sub}.` });
    const rating = el("select", { "data-testid": "form-rating", "aria-label": "Rating" },
      ...ratingOptions());
    const title = el("input", { placeholder: "Title", maxlength: String(L.titleCharsMax), "data-testid": "form-title", "aria-label": "Title" });
    const remarks = el("textarea", { rows: "3", placeholder: "Your review", maxlength: String(L.remarksCharsMax), "data-testid": "form-remarks", "aria-label": "Review" });
    const status = el("span", { class: "tc-error", "data-testid": "form-error" });
    const form = el("form", { class: "tc-form", "data-testid": "form" },
      el("strong", { text: "Write a review" }),
      el("span", { class: "tc-note", text: "Your latest review's stars are your rating of this course." }),
      rating, title, remarks,
      el("div", {}, el("button", { type: "submit", text: "Post", "data-testid": "form-send" }), " ", status));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const res = await call("POST", `/api/courses/${opts.course}/comments`, {
        rating: Number(rating.value), title: title.value, remarks: remarks.value, commentType: opts.type,
      });
      if (res.ok) { skip = 0; render("Thanks! Your review is posted.", true); }
      else status.textContent = errorText(res);
    });
    return form;
  }

  window.throngComments = {
    setToken(t) { token = t || null; render(); },
    setCourse(id) { opts.course = Number(id) || 1; skip = 0; render(); },
    reload() { return render(); },
  };
  document.dispatchEvent(new CustomEvent("throng-comments:ready"));
  render();
})();
