// The demo page's controls (a file, not inline: the pages' CSP allows no inline script).
(() => {
  const $ = (id) => document.getElementById(id);
  const who = $("who");
  function signedIn(token, label) {
    window.throngComments.setToken(token);
    who.textContent = token ? label : "not signed in";
  }
  async function demoToken(role) {
    const course = $("course").value;
    const r = await fetch(`/api/comments/demo-token?role=${role}&courseId=${encodeURIComponent(course)}`);
    const body = await r.json();
    if (!r.ok) {
      who.textContent = body.error ? `${body.error.message} (paste a token below)` : `error ${r.status}`;
      return;
    }
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
