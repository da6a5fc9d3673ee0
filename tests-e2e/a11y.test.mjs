// Accessibility of every page, with axe-core (npm `axe-core`, injected into
// each page by playwright): the index, the 404, the API reference, each
// service's citizen and admin pages (admin pages also once signed in with a
// token) and the load report when the load generator is built, on a desktop
// and on a 390 px phone. Any serious or critical violation fails, listed by
// rule, target and page. On the phone every control is a tap target of at
// least 44 x 44 px. And focus: after a failed submit it moves to the error,
// after a success to the confirmation.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

import { binPath, run, sharedSession, tempDir, todayUtc } from "./lib/server.mjs";

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const TEST_MS_MAX = 170_000;
const SETTLE_MS = 400;
const TAP_PX_MIN = 44;
const VIEWPORTS = [
  { name: "desktop", width: 1280, height: 900 },
  { name: "phone", width: 390, height: 844 },
];

const session = sharedSession();
let adminToken = "";

async function token(role, ...claims) {
  const out = await run(binPath("throng"), [
    "token", "--data-dir", session.server.dataDir, "--sub", `a11y-${role}`, "--role", role, ...claims,
  ]);
  assert.equal(out.code, 0, out.stderr);
  return out.stdout.trim();
}

/**
 * The pages, each with what readies it: a path, and for an admin page the
 * steps that sign in with a token.
 */
function pages() {
  const signIn = (field, submit) => async (page) => {
    await page.fill(field, adminToken);
    if (submit) await page.click(submit);
  };
  return [
    { name: "index", path: "/" },
    { name: "404", path: "/no/such/page" },
    { name: "API reference", path: "/docs/", ready: (p) => p.locator("body[data-ready='1']").waitFor({ state: "attached" }) },
    { name: "booking", path: "/booking/" },
    { name: "booking: manage", path: "/booking/manage" },
    { name: "booking: staff", path: "/booking/staff/" },
    { name: "booking: places admin", path: "/booking/admin/" },
    { name: "booking: places admin, signed in", path: "/booking/admin/", ready: signIn("#a-token") },
    { name: "comments", path: "/comments/" },
    { name: "comments: moderation", path: "/comments/moderate" },
    { name: "invites: demo page", path: "/invites/demo" },
    { name: "invites: demo survey", path: "/invites/demo/survey" },
    { name: "invites: admin", path: "/invites/admin" },
    { name: "invites: admin, signed in", path: "/invites/admin", ready: async (p) => {
      await signIn("#token", "#token-form button[type=submit]")(p);
      await p.locator("#sites li").first().waitFor().catch(() => {});
    } },
    { name: "voting", path: "/voting/" },
    { name: "voting: results", path: "/voting/results" },
    { name: "voting: find my ballot", path: "/voting/receipt" },
    { name: "voting: authority", path: "/voting/admin" },
    { name: "voting: authority, signed in", path: "/voting/admin", ready: signIn("#admin-token") },
    { name: "console: sign-in", path: "/admin/" },
    { name: "console: provider sign-in refused", path: "/admin/oidc/login" },
  ];
}

/** Runs axe in `page`; the serious and critical violations as lines. */
async function axeViolations(page, where) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) {
    await page.evaluate(AXE_SOURCE);
  }
  const violations = await page.evaluate(async () => {
    const r = await window.axe.run(document, {
      resultTypes: ["violations"],
      runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"] },
    });
    return r.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help,
      targets: v.nodes.filter((n) => n.impact === "serious" || n.impact === "critical").map((n) => n.target.join(" ")),
    }));
  });
  return violations
    .filter((v) => v.targets.length && (v.impact === "serious" || v.impact === "critical"))
    .map((v) => `${where}: ${v.id} (${v.impact}: ${v.help}) at ${v.targets.slice(0, 6).join(", ")}${v.targets.length > 6 ? ` and ${v.targets.length - 6} more` : ""}`);
}

/**
 * Controls smaller than 44 x 44 px on screen: buttons, fields, selects,
 * summaries, and links that stand alone (a link inside a sentence is
 * exempt, as WCAG 2.5.5 allows). A radio or checkbox counts by its label.
 */
async function smallTargets(page, where) {
  const small = await page.evaluate((min) => {
    const out = [];
    const sel = "button, input:not([type=hidden]), select, textarea, summary, [role=button], a[href]";
    for (const e of document.querySelectorAll(sel)) {
      const style = getComputedStyle(e);
      if (style.visibility === "hidden" || style.display === "none" || e.closest("[hidden], [aria-hidden=true]")) continue;
      let box = e.getBoundingClientRect();
      if (!box.width || !box.height) continue;
      // Off screen until focused (a skip link).
      if (box.right <= 0 || box.left >= innerWidth) continue;
      if (e.tagName === "A" && style.display === "inline") {
        const parent = e.parentElement;
        const text = parent ? parent.textContent.trim() : "";
        // A link in running text.
        if (text.length > e.textContent.trim().length + 1 && !["LI", "NAV"].includes(parent.tagName)) continue;
      }
      if (e.type === "checkbox" || e.type === "radio") {
        const label = e.closest("label") || (e.id && document.querySelector(`label[for="${CSS.escape(e.id)}"]`));
        if (label) box = label.getBoundingClientRect();
      }
      if (box.height + 0.5 < min || box.width + 0.5 < min) {
        const name = e.id ? `#${e.id}` : e.tagName.toLowerCase() + (e.className ? "." + String(e.className).split(/\s+/).join(".") : "");
        out.push(`${name} "${(e.textContent || e.value || e.getAttribute("aria-label") || "").trim().slice(0, 30)}" ${Math.round(box.width)}x${Math.round(box.height)}`);
      }
    }
    return out;
  }, TAP_PX_MIN);
  return small.length ? [`${where}: tap targets under ${TAP_PX_MIN} px: ${small.slice(0, 12).join("; ")}${small.length > 12 ? ` and ${small.length - 12} more` : ""}`] : [];
}

async function settle(page) {
  await page.waitForLoadState("load");
  await page.waitForTimeout(SETTLE_MS);
}

test("axe reports what these tests fail on (a button without a name, a field without a label)", { timeout: TEST_MS_MAX }, async (t) => {
  const { page } = await session.newPage(t);
  await page.setContent('<!doctype html><html lang="en"><title>t</title><body><main><h1>t</h1><button></button><input></main></body></html>');
  const found = (await axeViolations(page, "a broken page")).join("\n");
  assert.match(found, /button-name \(critical/);
  assert.match(found, /label \(critical/);
});

for (const vp of VIEWPORTS) {
  test(`no serious or critical axe violation on any page (${vp.name})`, { timeout: TEST_MS_MAX }, async (t) => {
    adminToken ||= await token("admin");
    const { page } = await session.newPage(t);
    await page.setViewportSize({ width: vp.width, height: vp.height });
    const problems = [];
    for (const p of pages()) {
      const where = `${p.name} (${p.path}, ${vp.name})`;
      await page.goto(`${session.server.url}${p.path}`);
      await settle(page);
      if (p.ready) {
        await p.ready(page);
        await settle(page);
      }
      problems.push(...(await axeViolations(page, where)));
      if (vp.name === "phone") problems.push(...(await smallTargets(page, where)));
    }
    assert.deepEqual(problems, [], `\n${problems.join("\n")}`);
  });
}

test("the load report has no serious or critical axe violation", { timeout: TEST_MS_MAX }, async (t) => {
  const help = await run(binPath("throng"), ["load", "--help"], { timeoutMs: 10_000 });
  if (help.code !== 0) {
    t.skip("the load generator is not built (throng load --help fails)");
    return;
  }
  const dir = tempDir("a11y-report");
  const html = join(dir, "report.html");
  const res = await run(binPath("throng"), ["load", "url", `${session.server.url}/health`, "--rate", "20", "--connections", "2", "--duration", "2s", "--report", html], { cwd: dir, timeoutMs: 60_000 });
  assert.equal(res.code, 0, `load url failed:\n${res.stdout}\n${res.stderr}`);
  const { page } = await session.newPage(t);
  const problems = [];
  for (const vp of VIEWPORTS) {
    await page.setViewportSize({ width: vp.width, height: vp.height });
    await page.goto(pathToFileURL(html).href);
    await settle(page);
    problems.push(...(await axeViolations(page, `load report (${vp.name})`)));
  }
  // Each chart has a text alternative: a table, or a description.
  const charts = await page.evaluate(() => [...document.querySelectorAll("svg, canvas")].filter((c) => c.getBoundingClientRect().width > 100).map((c) => ({
    id: c.id || c.parentElement.id,
    named: Boolean(c.getAttribute("aria-label") || c.getAttribute("aria-labelledby") || c.getAttribute("aria-describedby") || c.querySelector("title, desc")),
    hidden: c.getAttribute("aria-hidden") === "true",
  })));
  for (const c of charts) {
    assert.ok(c.named || c.hidden, `chart ${c.id} has a text alternative`);
  }
  assert.deepEqual(problems, [], `\n${problems.join("\n")}`);
});

/** Tomorrow at UTC, YYYY-MM-DD. */
function tomorrowUtc() {
  const d = new Date(`${todayUtc()}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString().slice(0, 10);
}

test("focus moves to the error after a failed submit, and to the confirmation after a success (booking)", { timeout: TEST_MS_MAX }, async (t) => {
  const { page } = await session.newPage(t);
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${session.server.url}/booking/`);
  await page.locator("#slots button").first().waitFor({ state: "attached" });
  // Submit the empty form: focus goes to the first error (or its field,
  // which names the error with aria-describedby).
  await page.click("#submit");
  const focusedError = await page.waitForFunction(() => {
    const a = document.activeElement;
    if (!a || a === document.body) return false;
    const described = (a.getAttribute("aria-describedby") || "").split(/\s+/).map((id) => document.getElementById(id)).filter(Boolean);
    const isError = (e) => e && e.textContent.trim() && (e.getAttribute("role") === "alert" || /error/.test(e.id + " " + e.className));
    return isError(a) || described.some(isError) ? a.id || a.tagName : false;
  }, null, { timeout: 5_000 }).then((h) => h.jsonValue()).catch(() => null);
  assert.ok(focusedError, "after a failed submit, focus is on the error or the field it describes");

  // Filled in and sent: focus is on the confirmation.
  await page.fill("#day", tomorrowUtc());
  await page.locator("#slots button:not([disabled])").first().waitFor();
  await page.locator("#slots button:not([disabled])").first().click();
  await page.fill("#name", "Ada Example");
  await page.fill("#nationalId", "850101-4321");
  await page.fill("#phone", "+420 601 222 333");
  await page.fill("#email", "ada@example.org");
  await page.click("#submit");
  await page.locator("#confirmation").waitFor({ state: "visible" });
  await page.waitForFunction(() => document.getElementById("confirmation").contains(document.activeElement), null, { timeout: 5_000 });
});

test("focus moves to the error after a failed submit (invites admin sign-in)", { timeout: TEST_MS_MAX }, async (t) => {
  const { page } = await session.newPage(t);
  await page.goto(`${session.server.url}/invites/admin`);
  await settle(page);
  await page.fill("#token", "not-a-token");
  await page.click("#token-form button[type=submit]");
  const focused = await page.waitForFunction(() => {
    const a = document.activeElement;
    if (!a || a === document.body) return false;
    const described = (a.getAttribute("aria-describedby") || "").split(/\s+/).map((id) => document.getElementById(id)).filter(Boolean);
    const isError = (e) => e && e.textContent.trim() && (e.getAttribute("role") === "alert" || /error/.test(e.id + " " + e.className));
    return isError(a) || described.some(isError) ? a.id || a.tagName : false;
  }, null, { timeout: 5_000 }).then((h) => h.jsonValue()).catch(() => null);
  assert.ok(focused, "after a refused token, focus is on the error or the field it describes");
});
