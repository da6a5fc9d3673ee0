// The demo host page's own behaviour, to show the invitation never breaks it,
// and the choice of demo site (?site=1..4: one way of asking each), whose
// script tag is added here as a customer's page would carry it.
document.getElementById("page-button").addEventListener("click", function () {
  var out = document.getElementById("page-output");
  out.textContent = "clicked " + (Number(out.dataset.n || 0) + 1) + " times";
  out.dataset.n = String(Number(out.dataset.n || 0) + 1);
});
(function () {
  var site = new URLSearchParams(location.search).get("site") || "1";
  if (!/^[1-4]$/.test(site)) site = "1";
  document.querySelectorAll("#ways a").forEach(function (a) {
    if (a.getAttribute("href") === "?site=" + site) a.setAttribute("aria-current", "page");
  });
  document.getElementById("snippet").textContent =
    '<script src="' + location.origin + '/invite.js" data-site="' + site + '" async></script>';
  var s = document.createElement("script");
  s.src = "/invite.js";
  s.async = true;
  s.dataset.site = site;
  document.body.append(s);
})();
