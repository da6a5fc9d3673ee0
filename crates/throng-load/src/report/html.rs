//! A single self-contained HTML report: the JSON report embedded in the page and drawn as
//! inline SVG by a small script. No network fetches, so it opens offline and can be mailed.
//!
//! Charts carry stable ids for browser tests: `#chart-rate` (request rate over time),
//! `#chart-latency` (p50/p95/p99 over time), `#chart-codes` (status codes), and the table
//! `#phases` (per-phase virtual users held; shown only when the report lists phases).

use std::path::Path;

use super::Report;

/// Renders the report page.
pub fn render(report: &Report, title: &str) -> String {
    let data = serde_json::to_string(report).unwrap_or_else(|_| "{}".into());
    // Keep the JSON from closing the <script> element early.
    let data = data.replace("</", "<\\/").replace("<!--", "<\\!--");
    TEMPLATE
        .replace("__TITLE__", &escape(title))
        .replace("__DATA__", &data)
}

/// Writes the report page to `path`.
pub fn write(report: &Report, title: &str, path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, render(report, title))
        .map_err(|e| anyhow::anyhow!("cannot write HTML report {}: {e}", path.display()))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const TEMPLATE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 2rem auto; max-width: 1000px; color: #222; padding: 0 1rem; }
  h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
  .chart { border: 1px solid #ddd; border-radius: 4px; padding: .5rem; }
  .chart svg { width: 100%; height: auto; display: block; }
  table { border-collapse: collapse; margin-top: 1rem; }
  td, th { border-bottom: 1px solid #eee; padding: .2rem .8rem; text-align: right; }
  td:first-child, th:first-child { text-align: left; }
  .legend span { margin-right: 1rem; } .muted { color: #777; }
</style>
</head>
<body>
<h1>__TITLE__</h1>
<p class="muted" id="meta"></p>
<h2>Request rate (req/s)</h2>
<div class="chart" id="chart-rate"></div>
<h2>Latency (ms)</h2>
<div class="legend" id="latency-legend"></div>
<div class="chart" id="chart-latency"></div>
<h2>Status codes and errors</h2>
<div class="chart" id="chart-codes"></div>
<section id="phases-section" hidden>
<h2>Phases (virtual users running)</h2>
<table id="phases"><thead><tr><th>phase</th><th>kind</th><th>seconds</th><th>vusers</th><th>max</th><th>mean</th><th>created</th></tr></thead><tbody></tbody></table>
</section>
<h2>Summary</h2>
<table id="summary"><thead><tr><th>metric</th><th>value</th></tr></thead><tbody></tbody></table>
<script type="application/json" id="report-data">__DATA__</script>
<script>
(function () {
  "use strict";
  var report = JSON.parse(document.getElementById("report-data").textContent);
  var periods = report.intermediate || [];
  var agg = report.aggregate || { counters: {}, rates: {}, summaries: {} };
  var W = 900, H = 260, L = 60, R = 20, T = 15, B = 35;
  var COLORS = { p50: "#2b8a3e", p95: "#e67700", p99: "#c92a2a", rate: "#1971c2" };

  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }
  function fmt(v) { return Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(1); }
  function axes(maxX, maxY, xLabel) {
    var s = "";
    for (var i = 0; i <= 4; i++) {
      var y = T + (H - T - B) * (1 - i / 4);
      s += '<line x1="' + L + '" x2="' + (W - R) + '" y1="' + y + '" y2="' + y + '" stroke="#eee"/>';
      s += '<text x="' + (L - 6) + '" y="' + (y + 4) + '" font-size="11" text-anchor="end">' + fmt(maxY * i / 4) + "</text>";
    }
    if (xLabel) {
      s += '<text x="' + (W - R) + '" y="' + (H - 8) + '" font-size="11" text-anchor="end">' + esc(xLabel) + "</text>";
      s += '<text x="' + L + '" y="' + (H - 8) + '" font-size="11">0 s</text>';
    }
    return s;
  }
  function lineChart(id, series, maxY) {
    var n = 0;
    series.forEach(function (s) { n = Math.max(n, s.points.length); });
    var last = 0;
    series.forEach(function (s) { s.points.forEach(function (p) { last = Math.max(last, p[0]); }); });
    maxY = maxY > 0 ? maxY * 1.1 : 1;
    var maxX = last > 0 ? last : 1;
    var svg = '<svg viewBox="0 0 ' + W + " " + H + '" role="img">' + axes(maxX, maxY, fmt(maxX) + " s");
    series.forEach(function (s) {
      var d = "";
      s.points.forEach(function (p, i) {
        var x = L + (W - L - R) * (p[0] / maxX);
        var y = T + (H - T - B) * (1 - p[1] / maxY);
        d += (i === 0 ? "M" : "L") + x.toFixed(1) + " " + y.toFixed(1) + " ";
        s.dots && (svg += '<circle cx="' + x.toFixed(1) + '" cy="' + y.toFixed(1) + '" r="2.5" fill="' + s.color + '"/>');
      });
      if (d === "") { d = "M" + L + " " + (H - B) + " L" + (W - R) + " " + (H - B); }
      svg += '<path d="' + d + '" fill="none" stroke="' + s.color + '" stroke-width="2" data-series="' + esc(s.name) + '"/>';
    });
    document.getElementById(id).innerHTML = svg + "</svg>";
  }
  function barChart(id, bars) {
    var max = 0;
    bars.forEach(function (b) { max = Math.max(max, b.value); });
    max = max > 0 ? max * 1.1 : 1;
    var svg = '<svg viewBox="0 0 ' + W + " " + H + '" role="img">' + axes(1, max, "");
    var slot = (W - L - R) / Math.max(bars.length, 1);
    bars.forEach(function (b, i) {
      var h = (H - T - B) * (b.value / max);
      var x = L + i * slot + slot * 0.15;
      svg += '<rect x="' + x.toFixed(1) + '" y="' + (H - B - h).toFixed(1) + '" width="' + (slot * 0.7).toFixed(1) +
        '" height="' + Math.max(h, 1).toFixed(1) + '" fill="' + b.color + '" data-label="' + esc(b.label) + '"/>';
      svg += '<text x="' + (x + slot * 0.35).toFixed(1) + '" y="' + (H - B + 14) + '" font-size="11" text-anchor="middle">' + esc(b.label) + "</text>";
      svg += '<text x="' + (x + slot * 0.35).toFixed(1) + '" y="' + (H - B - h - 4).toFixed(1) + '" font-size="11" text-anchor="middle">' + b.value + "</text>";
    });
    if (bars.length === 0) {
      svg += '<rect x="' + L + '" y="' + (H - B - 1) + '" width="' + (W - L - R) + '" height="1" fill="#ccc" data-label="none"/>';
      svg += '<text x="' + (W / 2) + '" y="' + (H / 2) + '" text-anchor="middle" class="muted">no responses</text>';
    }
    document.getElementById(id).innerHTML = svg + "</svg>";
  }

  var t0 = periods.length ? periods[0].period : (agg.period || 0);
  function at(p) { return (p.period + (p.widthMs || 0) - t0) / 1000; }
  var rate = periods.map(function (p) { return [at(p), (p.rates || {})["http.request_rate"] || 0]; });
  var maxRate = 0;
  rate.forEach(function (p) { maxRate = Math.max(maxRate, p[1]); });
  lineChart("chart-rate", [{ name: "http.request_rate", color: COLORS.rate, points: rate, dots: true }], maxRate);

  var latency = ["p50", "p95", "p99"].map(function (q) {
    var pts = [];
    periods.forEach(function (p) {
      var s = (p.summaries || {})["http.response_time"];
      if (s) { pts.push([at(p), s[q]]); }
    });
    return { name: q, color: COLORS[q], points: pts, dots: true };
  });
  var maxLat = 0;
  latency.forEach(function (s) { s.points.forEach(function (p) { maxLat = Math.max(maxLat, p[1]); }); });
  lineChart("chart-latency", latency, maxLat);
  document.getElementById("latency-legend").innerHTML = latency.map(function (s) {
    return '<span style="color:' + s.color + '">&#9632; ' + s.name + "</span>";
  }).join("");

  var bars = [];
  Object.keys(agg.counters || {}).sort().forEach(function (k) {
    var code = k.match(/^http\.codes\.(\d+)$/);
    if (code) {
      var c = +code[1];
      bars.push({ label: code[1], value: agg.counters[k], color: c < 300 ? "#2b8a3e" : c < 400 ? "#1971c2" : c < 500 ? "#e67700" : "#c92a2a" });
    } else if (k.indexOf("errors.") === 0) {
      bars.push({ label: k.slice(7), value: agg.counters[k], color: "#862e9c" });
    }
  });
  barChart("chart-codes", bars);

  var body = document.querySelector("#summary tbody");
  function row(name, value) {
    var tr = document.createElement("tr");
    var a = document.createElement("td"); a.textContent = name;
    var b = document.createElement("td"); b.textContent = value;
    tr.appendChild(a); tr.appendChild(b); body.appendChild(tr);
  }
  Object.keys(agg.counters || {}).sort().forEach(function (k) { row(k, agg.counters[k]); });
  Object.keys(agg.rates || {}).sort().forEach(function (k) { row(k, agg.rates[k] + "/sec"); });
  Object.keys(agg.summaries || {}).sort().forEach(function (k) {
    var s = agg.summaries[k];
    row(k, "min " + s.min + " / median " + s.median + " / p95 " + s.p95 + " / p99 " + s.p99 + " / max " + s.max);
  });
  var phases = report.phases || [];
  if (phases.length) {
    var pbody = document.querySelector("#phases tbody");
    phases.forEach(function (p) {
      var tr = document.createElement("tr");
      [p.name || "#" + p.index, p.kind, p.duration_s, p.vusers_target == null ? "" : p.vusers_target,
       p.vusers_concurrent_max, p.vusers_concurrent_mean, p.vusers_created].forEach(function (v) {
        var td = document.createElement("td"); td.textContent = v; tr.appendChild(td);
      });
      pbody.appendChild(tr);
    });
    document.getElementById("phases-section").hidden = false;
  }
  document.getElementById("meta").textContent = periods.length + " periods" +
    (agg.firstMetricAt ? ", from " + new Date(agg.firstMetricAt).toISOString() : "");
})();
</script>
</body>
</html>
"##;
