//! A single self-contained HTML report: the JSON report embedded in the page and drawn as
//! inline SVG by a small script. No network fetches, so it opens offline and can be mailed.
//!
//! Charts carry stable ids for browser tests: `#chart-rate` (request rate over time),
//! `#chart-latency` (p50/p95/p99 over time), `#chart-codes` (status codes), and the table
//! `#phases` (per-phase virtual users held; shown only when the report lists phases), `#setup`
//! and `#plan` (target, model, rate, connections, duration; a script's phases as written),
//! `#thresholds` (each `ensure` check, what it measured, pass / fail / warn), `#verdict` (the
//! pass/fail banner with the exit code, reasons and notes), `#endpoints` (per endpoint: count,
//! p50/p95/p99, codes and errors). Axis ticks (`tick-x`, `tick-y`) fall on round numbers
//! (`nice_ticks`). On a phone (under 640 px) the page narrows its margins and each table
//! scrolls sideways in its own box instead of widening the page.

use std::path::Path;

use super::Report;

/// Ticks a value axis aims for; `nice_ticks` gives 4 to 10 of them.
const VALUE_TICKS: usize = 5;
/// Ticks the time axis aims for.
const TIME_TICKS: usize = 8;

/// Renders the report page.
pub fn render(report: &Report, title: &str) -> String {
    let data = serde_json::to_string(report).unwrap_or_else(|_| "{}".into());
    let axes = serde_json::to_string(&axes(report)).unwrap_or_else(|_| "{}".into());
    // Keep the JSON from closing the <script> element early.
    let safe = |json: String| json.replace("</", "<\\/").replace("<!--", "<\\!--");
    TEMPLATE
        .replace("__TITLE__", &escape(title))
        .replace("__AXES__", &safe(axes))
        .replace("__DATA__", &safe(data))
}

/// Axis ticks on round numbers, from 0 to at least `max`: a step of 1, 2 or 5 times a power
/// of ten giving about `target` intervals (so 0, 10, 20, 30, 40, 50 for 42.1, never
/// 14.0 / 28.1 / 42.1). The last tick is the axis end. An empty axis (`max` 0 or not a
/// number) gets 0 and 1.
pub fn nice_ticks(max: f64, target: usize) -> Vec<f64> {
    if !(max.is_finite() && max > 0.0) {
        return vec![0.0, 1.0];
    }
    let raw = max / target.max(1) as f64;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * power);
    // Decimals the step needs, so 0.1 * 3 prints as 0.3.
    let decimals = (-step.log10().floor()).max(0.0) as i32;
    let round = |v: f64| {
        let f = 10f64.powi(decimals);
        (v * f).round() / f
    };
    let mut ticks = vec![0.0];
    let mut i = 1.0;
    while ticks.last().copied().unwrap_or(0.0) < max * (1.0 - 1e-9) {
        ticks.push(round(step * i));
        i += 1.0;
    }
    ticks
}

/// The charts' axes, computed from the report's data: each a list of ticks.
#[derive(serde::Serialize)]
struct Axes {
    time: Vec<f64>,
    rate: Vec<f64>,
    latency: Vec<f64>,
    codes: Vec<f64>,
}

fn axes(report: &Report) -> Axes {
    let periods = &report.intermediate;
    let t0 = periods
        .first()
        .map_or(report.aggregate.period, |p| p.period);
    let end_s = periods
        .iter()
        .map(|p| (p.period + p.width_ms).saturating_sub(t0) as f64 / 1000.0)
        .fold(0.0, f64::max);
    let rate = periods
        .iter()
        .filter_map(|p| p.rates.get("http.request_rate").copied())
        .fold(0.0, f64::max);
    let latency = periods
        .iter()
        .filter_map(|p| p.summaries.get("http.response_time"))
        .flat_map(|s| [s.p50, s.p95, s.p99])
        .fold(0.0, f64::max);
    let codes = report
        .aggregate
        .counters
        .iter()
        .filter(|(k, _)| k.starts_with("http.codes.") || k.starts_with("errors."))
        .map(|(_, v)| *v as f64)
        .fold(0.0, f64::max);
    Axes {
        time: nice_ticks(end_s, TIME_TICKS),
        rate: nice_ticks(rate, VALUE_TICKS),
        latency: nice_ticks(latency, VALUE_TICKS),
        codes: nice_ticks(codes, VALUE_TICKS),
    }
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
  .legend > span { margin-right: 1rem; } .muted { color: #666; }
  .pass { color: #237032; font-weight: 600; } .fail { color: #c92a2a; font-weight: 600; } .warn { color: #a64b00; font-weight: 600; }
  td { overflow-wrap: anywhere; } #setup td:last-child { text-align: left; }
  .scroll { overflow-x: auto; max-width: 100%; }
  #endpoints td:first-child { max-width: 22rem; } #endpoints td:last-child { text-align: left; }
  .banner { padding: .6rem 1rem; border-radius: 4px; margin: 1rem 0; }
  .banner.pass { background: #ebfbee; border: 1px solid #2b8a3e; }
  .banner.fail { background: #fff5f5; border: 1px solid #c92a2a; }
  .banner strong { font-size: 1.1rem; } .banner p { margin: .3rem 0 0; }
  h1 { overflow-wrap: anywhere; font-family: ui-monospace, monospace; font-size: 1.1rem; }
  @media (max-width: 640px) {
    body { margin: .5rem auto; padding: 0 .5rem; font-size: 13px; }
    td, th { padding: .2rem .4rem; }
    .chart { padding: 0; }
    #endpoints td:first-child { max-width: 10rem; }
  }
</style>
</head>
<body>
<main>
<h1>__TITLE__</h1>
<div class="banner" id="verdict" hidden></div>
<p class="muted" id="meta"></p>
<section id="setup-section" hidden>
<h2>Setup</h2>
<div class="scroll"><table id="setup"><tbody></tbody></table></div>
<div class="scroll"><table id="plan" hidden><thead><tr><th>phase</th><th>kind</th><th>seconds</th><th>load</th></tr></thead><tbody></tbody></table></div>
</section>
<section id="thresholds-section" hidden>
<h2>Thresholds <span id="thresholds-verdict"></span></h2>
<div class="scroll"><table id="thresholds"><thead><tr><th>check</th><th>measured</th><th>result</th></tr></thead><tbody></tbody></table></div>
</section>
<section id="endpoints-section" hidden>
<h2>Endpoints</h2>
<div class="scroll"><table id="endpoints"><thead><tr><th>endpoint</th><th>count</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>codes and errors</th></tr></thead><tbody></tbody></table></div>
</section>
<h2>Request rate (req/s)</h2>
<div class="chart" id="chart-rate"></div>
<h2>Latency (ms)</h2>
<div class="legend" id="latency-legend"></div>
<div class="chart" id="chart-latency"></div>
<h2>Status codes and errors</h2>
<div class="chart" id="chart-codes"></div>
<section id="phases-section" hidden>
<h2>Phases (virtual users running)</h2>
<div class="scroll"><table id="phases"><thead><tr><th>phase</th><th>kind</th><th>seconds</th><th>vusers</th><th>max</th><th>mean</th><th>created</th></tr></thead><tbody></tbody></table></div>
</section>
<h2>Summary</h2>
<div class="scroll"><table id="summary"><thead><tr><th>metric</th><th>value</th></tr></thead><tbody></tbody></table></div>
</main>
<script type="application/json" id="report-data">__DATA__</script>
<script type="application/json" id="report-axes">__AXES__</script>
<script>
(function () {
  "use strict";
  var report = JSON.parse(document.getElementById("report-data").textContent);
  // Ticks on round numbers, computed with the report (`nice_ticks`): the last is the axis end.
  var AXES = JSON.parse(document.getElementById("report-axes").textContent);
  var periods = report.intermediate || [];
  var agg = report.aggregate || { counters: {}, rates: {}, summaries: {} };
  var W = 900, H = 260, L = 60, R = 20, T = 15, B = 35;
  var COLORS = { p50: "#2b8a3e", p95: "#e67700", p99: "#c92a2a", rate: "#1971c2" };

  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }
  function last(ticks) { return ticks[ticks.length - 1] || 1; }
  // Horizontal grid lines and labels at `yTicks`; with `xTicks`, vertical ones and a time
  // label under each (the tick values are already round).
  function axes(xTicks, yTicks) {
    var s = "", maxY = last(yTicks);
    yTicks.forEach(function (v) {
      var y = T + (H - T - B) * (1 - v / maxY);
      s += '<line x1="' + L + '" x2="' + (W - R) + '" y1="' + y + '" y2="' + y + '" stroke="#eee"/>';
      s += '<text class="tick-y" x="' + (L - 6) + '" y="' + (y + 4) + '" font-size="11" text-anchor="end">' + v + "</text>";
    });
    if (xTicks) {
      var maxX = last(xTicks);
      xTicks.forEach(function (v) {
        var x = L + (W - L - R) * (v / maxX);
        s += '<line x1="' + x + '" x2="' + x + '" y1="' + T + '" y2="' + (H - B) + '" stroke="#f3f3f3"/>';
        s += '<text class="tick-x" x="' + x + '" y="' + (H - 8) + '" font-size="11" text-anchor="middle">' + v + " s</text>";
      });
    }
    return s;
  }
  // A chart's text alternative: its name on the image, and its figures in a
  // table under it (folded away; screen readers and keyboards reach it).
  function figures(caption, head, rows) {
    var t = '<details class="figures"><summary>' + esc(caption) + ' as a table</summary><div class="scroll"><table><thead><tr>';
    head.forEach(function (h) { t += "<th scope=\"col\">" + esc(h) + "</th>"; });
    t += "</tr></thead><tbody>";
    rows.forEach(function (r) {
      t += "<tr>" + r.map(function (c) { return "<td>" + esc(c) + "</td>"; }).join("") + "</tr>";
    });
    if (!rows.length) { t += '<tr><td colspan="' + head.length + '">no figures</td></tr>'; }
    return t + "</tbody></table></div></details>";
  }
  function chartLabel(id) {
    var h = document.getElementById(id).previousElementSibling;
    while (h && !/^H[1-6]$/.test(h.tagName)) { h = h.previousElementSibling; }
    return h ? h.textContent : id;
  }
  function lineChart(id, series, yTicks) {
    var maxY = last(yTicks), maxX = last(AXES.time);
    var label = chartLabel(id);
    var svg = '<svg viewBox="0 0 ' + W + " " + H + '" role="img" aria-label="' + esc(label + " over time, " +
      series.map(function (s) { return s.name; }).join(", ") + "; the figures are in the table below") + '">' + axes(AXES.time, yTicks);
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
    var times = [];
    series.forEach(function (s) { s.points.forEach(function (p) { if (times.indexOf(p[0]) < 0) { times.push(p[0]); } }); });
    times.sort(function (a, b) { return a - b; });
    var rows = times.map(function (t) {
      return [t + " s"].concat(series.map(function (s) {
        var p = s.points.filter(function (q) { return q[0] === t; })[0];
        return p ? String(Math.round(p[1] * 100) / 100) : "";
      }));
    });
    document.getElementById(id).innerHTML = svg + "</svg>" + figures(label, ["time"].concat(series.map(function (s) { return s.name; })), rows);
  }
  function barChart(id, bars, yTicks) {
    var max = last(yTicks);
    var label = chartLabel(id);
    var svg = '<svg viewBox="0 0 ' + W + " " + H + '" role="img" aria-label="' + esc(label + ": " +
      (bars.length ? bars.map(function (b) { return b.label + " " + b.value; }).join(", ") : "no responses")) + '">' + axes(null, yTicks);
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
    document.getElementById(id).innerHTML = svg + "</svg>" +
      figures(label, ["code or error", "count"], bars.map(function (b) { return [b.label, String(b.value)]; }));
  }

  var t0 = periods.length ? periods[0].period : (agg.period || 0);
  function at(p) { return (p.period + (p.widthMs || 0) - t0) / 1000; }
  var rate = periods.map(function (p) { return [at(p), (p.rates || {})["http.request_rate"] || 0]; });
  lineChart("chart-rate", [{ name: "http.request_rate", color: COLORS.rate, points: rate, dots: true }], AXES.rate);

  var latency = ["p50", "p95", "p99"].map(function (q) {
    var pts = [];
    periods.forEach(function (p) {
      var s = (p.summaries || {})["http.response_time"];
      if (s) { pts.push([at(p), s[q]]); }
    });
    return { name: q, color: COLORS[q], points: pts, dots: true };
  });
  lineChart("chart-latency", latency, AXES.latency);
  document.getElementById("latency-legend").innerHTML = latency.map(function (s) {
    return '<span><span style="color:' + s.color + '" aria-hidden="true">&#9632;</span> ' + s.name + "</span>";
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
  barChart("chart-codes", bars, AXES.codes);

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
  function cells(tbody, values, classes) {
    var tr = document.createElement("tr");
    values.forEach(function (v, i) {
      var td = document.createElement("td");
      td.textContent = v;
      if (classes && classes[i]) td.className = classes[i];
      tr.appendChild(td);
    });
    tbody.appendChild(tr);
  }
  var setup = report.setup;
  if (setup) {
    var sbody = document.querySelector("#setup tbody");
    var models = { open: "open (requests started at a constant rate)", closed: "closed (each connection sends when answered)", script: "script phases" };
    cells(sbody, ["command", setup.commandLine || "throng load " + setup.command]);
    cells(sbody, ["target", (setup.method ? setup.method + " " : "") + setup.target]);
    cells(sbody, ["model", models[setup.model] || setup.model]);
    if (setup.ratePerS != null) cells(sbody, ["rate", setup.ratePerS + " req/s"]);
    if (setup.connections != null) {
      cells(sbody, [setup.model === "open" ? "connections (at most)" : "connections", String(setup.connections)]);
    }
    cells(sbody, ["duration", setup.durationS + " s"]);
    var plan = setup.phases || [];
    if (plan.length) {
      var planBody = document.querySelector("#plan tbody");
      plan.forEach(function (p, i) {
        var load = "";
        if (p.kind === "arrivals") {
          load = p.arrivalCount != null ? p.arrivalCount + " arrivals"
            : p.arrivalRate === p.rampTo ? p.arrivalRate + " arrivals/s"
            : p.arrivalRate + " to " + p.rampTo + " arrivals/s";
          if (p.maxVusers != null) load += ", at most " + p.maxVusers + " vusers";
        } else if (p.kind === "closed") {
          load = p.vusers + " vusers" + (p.rampUpS ? " (ramp-up " + p.rampUpS + " s)" : "");
        } else {
          load = "none";
        }
        cells(planBody, [p.name || "#" + i, p.kind, p.durationS, load]);
      });
      document.getElementById("plan").hidden = false;
    }
    document.getElementById("setup-section").hidden = false;
  }
  var thresholds = report.thresholds || [];
  if (thresholds.length) {
    var tbody = document.querySelector("#thresholds tbody");
    var failed = 0;
    thresholds.forEach(function (c) {
      var measured = Object.keys(c.measured || {}).map(function (k) {
        var v = c.measured[k];
        return k + " = " + (v == null ? "not measured" : +v.toFixed(3));
      }).join("; ");
      var result = c.ok ? "pass" : c.strict ? "fail" : "warn";
      if (!c.ok && c.strict) failed++;
      cells(tbody, [c.check, measured, result], ["", "", result]);
    });
    var verdict = document.getElementById("thresholds-verdict");
    verdict.textContent = failed ? "(" + failed + " failed)" : "(all passed)";
    verdict.className = failed ? "fail" : "pass";
    document.getElementById("thresholds-section").hidden = false;
  }
  var endpoints = report.endpoints || [];
  if (endpoints.length) {
    var ebody = document.querySelector("#endpoints tbody");
    function ms(v) { return v == null ? "-" : v; }
    endpoints.forEach(function (e) {
      var codes = Object.keys(e.codes || {}).map(function (k) { return k + ": " + e.codes[k]; })
        .concat(Object.keys(e.errors || {}).map(function (k) { return k + ": " + e.errors[k]; }));
      cells(ebody, [e.name, e.count, ms(e.p50), ms(e.p95), ms(e.p99), codes.join(", ")]);
    });
    document.getElementById("endpoints-section").hidden = false;
  }
  var v = report.verdict;
  if (v) {
    var box = document.getElementById("verdict");
    var strong = document.createElement("strong");
    strong.textContent = (v.passed ? "PASSED" : "FAILED") + " (exit code " + v.exitCode + ")";
    box.appendChild(strong);
    (v.reasons || []).concat(v.notes || []).forEach(function (line) {
      var p = document.createElement("p"); p.textContent = line; box.appendChild(p);
    });
    box.className = "banner " + (v.passed ? "pass" : "fail");
    box.hidden = false;
  }
  document.getElementById("meta").textContent = periods.length + " periods" +
    (agg.firstMetricAt ? ", from " + new Date(agg.firstMetricAt).toISOString() : "");
})();
</script>
</body>
</html>
"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fall_on_round_numbers() {
        assert_eq!(nice_ticks(42.1, 5), vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
        assert_eq!(nice_ticks(50.0, 5), vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
        assert_eq!(
            nice_ticks(30.0, 8),
            vec![0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0]
        );
        assert_eq!(
            nice_ticks(2400.0, 5),
            vec![0.0, 500.0, 1000.0, 1500.0, 2000.0, 2500.0]
        );
        assert_eq!(nice_ticks(0.7, 5), vec![0.0, 0.2, 0.4, 0.6, 0.8]);
        assert_eq!(nice_ticks(0.0, 5), vec![0.0, 1.0]);
        assert_eq!(nice_ticks(f64::NAN, 5), vec![0.0, 1.0]);
    }

    #[test]
    fn every_step_is_one_two_or_five_times_a_power_of_ten() {
        for max in [
            0.013, 0.9, 1.0, 3.3, 14.0, 28.1, 42.1, 99.9, 101.0, 777.0, 12_345.0, 1e7,
        ] {
            for target in [3, 5, 8] {
                let t = nice_ticks(max, target);
                assert_eq!(t[0], 0.0);
                assert!(
                    *t.last().unwrap() >= max,
                    "{max}: {t:?} reaches the maximum"
                );
                assert!(
                    (3..=2 * target + 2).contains(&t.len()),
                    "{max}/{target}: {t:?}"
                );
                let step = t[1];
                let mantissa = step / 10f64.powf(step.log10().floor());
                assert!(
                    [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6),
                    "{max}: step {step}"
                );
                for (i, v) in t.iter().enumerate() {
                    assert!((v - step * i as f64).abs() <= step * 1e-9, "{max}: {t:?}");
                }
            }
        }
    }

    #[test]
    fn the_page_carries_the_setup_thresholds_and_axes() {
        let mut report = Report::default();
        report.setup = Some(crate::report::RunSetup {
            command: "url".into(),
            target: "http://127.0.0.1:1/x".into(),
            model: "open".into(),
            duration_s: 30.0,
            rate_per_s: Some(250.0),
            connections: Some(64),
            ..Default::default()
        });
        let page = render(&report, "t");
        assert!(page.contains("\"ratePerS\":250.0"), "{page}");
        assert!(
            page.contains("id=\"report-axes\">{\"time\":[0.0,1.0]"),
            "{page}"
        );
        assert!(!page.contains("__AXES__") && !page.contains("__DATA__"));
    }
}
