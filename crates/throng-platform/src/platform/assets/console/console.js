// The admin console: who is signed in (the session cookie, read through
// /api/admin/session), the services' administrative pages, and for an
// admin the audit log, a page at a time.
"use strict";
(() => {
  const api = Throng.client();
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const time = (iso) => new Date(iso).toLocaleString();
  let next = null;

  async function loadAudit(append) {
    $("audit-err").textContent = "";
    const params = new URLSearchParams({ limit: "50" });
    const service = $("audit-service").value;
    if (service) params.set("service", service);
    if (append && next !== null) params.set("before", String(next));
    try {
      const page = await api.getJson(`/api/admin/audit?${params}`);
      if (!append) $("audit").replaceChildren();
      for (const e of page.events) {
        const li = el("li");
        li.append(
          el("span", "at", time(e.at)),
          el("span", "service", e.service),
          el("span", "path", `${e.sub} (${e.role}, ${e.via}): ${e.method} ${e.path}`),
          el("span", `status ${e.status < 400 ? "ok" : "refused"}`, `${e.status} ${e.status < 400 ? "done" : "refused"}`),
        );
        $("audit").append(li);
      }
      next = page.next;
      $("audit-more").hidden = next === null;
      $("audit-empty").hidden = $("audit").children.length > 0;
    } catch (e) {
      $("audit-err").textContent = e instanceof Throng.ApiError ? e.message : Throng.UNREACHABLE;
    }
  }

  // Signing in with the organisation's identity provider, when set up.
  async function offerProvider() {
    try {
      const status = await api.getJson("/api/admin/oidc");
      if (status.enabled) {
        $("oidc").hidden = false;
        $("link-intro").textContent = "An operator prints a one-time link on the server:";
      }
    } catch (_) {
      // The one-time link stays offered.
    }
  }

  async function start() {
    let res;
    try {
      res = await api.fetch("/api/admin/session");
    } catch (_) {
      $("who").textContent = Throng.UNREACHABLE;
      return;
    }
    if (res.status !== 200) {
      $("who").textContent = res.status === 204 ? "Not signed in." : (await api.errorOf(res)).message;
      $("signed-out").hidden = false;
      await offerProvider();
      return;
    }
    const who = await res.json();
    $("who").textContent = `Signed in as ${who.sub} (${who.role}) until ${time(who.expiresAt)}`;
    $("sign-out").hidden = false;
    const listed = await api.getJson("/api/admin/pages");
    const list = $("pages");
    for (const p of listed.pages) {
      const a = el("a", null, p.title);
      a.href = p.href;
      a.append(el("span", "about", p.about));
      const li = el("li");
      li.append(a);
      list.append(li);
    }
    $("pages-empty").hidden = listed.pages.length > 0;
    $("pages-section").hidden = false;
    if (who.role === "admin") {
      for (const s of ["console", ...listed.services]) {
        const o = el("option", null, s);
        o.value = s;
        $("audit-service").append(o);
      }
      $("audit-section").hidden = false;
      await loadAudit(false);
    }
  }

  $("sign-out").addEventListener("click", async () => {
    const res = await api.fetch("/api/admin/session", { method: "DELETE" });
    if (res.ok || res.status === 401) location.reload();
    else $("who").textContent = (await api.errorOf(res)).message;
  });
  $("audit-service").addEventListener("change", () => loadAudit(false));
  $("audit-refresh").addEventListener("click", () => loadAudit(false));
  $("audit-more").addEventListener("click", () => loadAudit(true));
  start();
})();
