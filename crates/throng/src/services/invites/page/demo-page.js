// The demo host page's own behaviour, to show the invitation never breaks it.
document.getElementById("page-button").addEventListener("click", function () {
  var out = document.getElementById("page-output");
  out.textContent = "clicked " + (Number(out.dataset.n || 0) + 1) + " times";
  out.dataset.n = String(Number(out.dataset.n || 0) + 1);
});
