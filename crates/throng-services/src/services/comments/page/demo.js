// The demo page's controls (a file, not inline: the pages' CSP allows no
// inline script), over the shared client (/assets/throng.js).
(() => {
  const $ = (id) => document.getElementById(id);
  const api = Throng.client();
  const who = $("who");
  function signedIn(token, label) {
    window.throngComments.setToken(token);
    who.textContent = token ? label : "not signed in";
  }
  async function demoToken(role) {
    const course = $("course").value;
    const r = await api.fetch(`/api/comments/demo-token?role=${role}&courseId=${encodeURIComponent(course)}`);
    if (!r.ok) {
      who.textContent = `${(await api.errorOf(r)).message} (paste a token below)`;
      return;
    }
    const body = await r.json();
    signedIn(body.token, `signed in as ${body.role} ${body.sub}`);
  }
  $("show").onclick = () => window.throngComments.setCourse(Number($("course").value));
  $("demo-user").onclick = () => demoToken("user");
  $("demo-provider").onclick = () => demoToken("provider");
  $("sign-out").onclick = () => signedIn(null);
  $("use-token").onclick = () => {
    const t = $("token").value.trim();
    signedIn(t || null, "signed in with a pasted token");
  };
})();
