// The one-time link's landing page: the secret is in the fragment (never
// sent to a server by the browser, never in a log); it is posted once and
// the fragment cleared, then the console opens.
"use strict";
(() => {
  const api = Throng.client();
  const $ = (id) => document.getElementById(id);
  const link = location.hash.replace(/^#/, "");
  history.replaceState(null, "", location.pathname);
  (async () => {
    if (!link) {
      $("state").textContent = "This address has no sign-in link in it.";
      $("err").textContent = "Open the whole link that throng admin link printed (with the part after #).";
      return;
    }
    try {
      await api.getJson("/api/admin/session", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ link }),
      });
      $("state").textContent = "Signed in.";
      location.replace("/admin/");
    } catch (e) {
      $("state").textContent = "Not signed in.";
      $("err").textContent = e instanceof Throng.ApiError ? e.message : Throng.UNREACHABLE;
    }
  })();
})();
