// The survey invitation (/invite.js) in headless Chromium against a real
// throng server: on the demo host page (/invites/demo, site 1, same origin)
// and on a customer's page served from another site (a small server of the
// test's own on http://localhost:PORT while throng is http://127.0.0.1:PORT)
// in a browser that blocks third-party cookies: the snippet an admin is
// given pasted verbatim there, each trigger (delay, scroll, exit intent) and
// style (modal, slide-in), the console warning of a page whose origin is not
// allowed, and a 390 px phone. Each test has a browser of its own, so each
// starts as a new visitor; a failing test saves a screenshot
// ($THRONG_E2E_SHOTS, default the temp folder's throng-e2e-shots).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { binPath, launchBrowser, run, startThrong, fetchWithin } from "./lib/server.mjs";

const DIALOG = '[data-throng-invite] >> role=dialog';
let server;

before(async () => {
  server = await startThrong();
});
after(async () => {
  await server?.stop();
});

async function withBrowser(t, options = {}) {
  const b = await launchBrowser(options);
  t.after(() => b.close());
  return b;
}

/** Loads `url` and waits until the script has asked throng (the state call answered). */
async function visit(page, url) {
  const state = page.waitForResponse((r) => r.url().includes("/api/invites/sites/") && new URL(r.url()).pathname.endsWith("/state"));
  await page.goto(url);
  const res = await state;
  assert.equal(res.status(), 200);
  return res.json();
}

async function dialogShown(page) {
  await page.locator(DIALOG).waitFor({ state: "visible" });
}

async function noDialog(page) {
  // The state answer arrived; the popup would be in the DOM right after it.
  await page.waitForTimeout(200);
  assert.equal(await page.locator("[data-throng-invite]").count(), 0, "no popup");
}

async function answerSent(page, click) {
  const answered = page.waitForResponse((r) => r.url().endsWith("/answers"));
  await click();
  const res = await answered;
  assert.equal(res.status(), 200, await res.text());
  return res.json();
}

const demo = () => `${server.url}/invites/demo`;

test("first visit shows an accessible dialog; close asks again; the third close never again", async (t) => {
  const { page, errors } = await withBrowser(t);
  const first = await visit(page, demo());
  assert.equal(first.show, true);
  await dialogShown(page);
  const dialog = page.locator(DIALOG);
  assert.equal(await dialog.getAttribute("aria-modal"), "true");
  assert.match(await page.locator("[data-throng-invite] >> #throng-invite-title").textContent(), /Help us improve/);
  // Focus moved into the dialog, on Yes.
  const focused = await page.evaluate(() => document.querySelector("[data-throng-invite]").shadowRoot.activeElement?.className);
  assert.equal(focused, "yes");

  // Close 1: the × button; focus goes back to the page.
  let a = await answerSent(page, () => page.locator("[data-throng-invite] >> button.x").click());
  assert.deepEqual([a.state, a.closes], ["asking", 1]);
  await noDialog(page);
  // Close 2: Esc after a reload.
  await visit(page, demo());
  await dialogShown(page);
  a = await answerSent(page, () => page.keyboard.press("Escape"));
  assert.deepEqual([a.state, a.closes], ["asking", 2]);
  // Close 3.
  await visit(page, demo());
  await dialogShown(page);
  a = await answerSent(page, () => page.locator("[data-throng-invite] >> button.x").click());
  assert.deepEqual([a.state, a.closes], ["closed_out", 3]);
  // Never again.
  const later = await visit(page, demo());
  assert.deepEqual([later.show, later.reason], [false, "closed_out"]);
  await noDialog(page);
  assert.deepEqual(errors, []);
});

test("No is never asked again", async (t) => {
  const { page, errors } = await withBrowser(t);
  await visit(page, demo());
  await dialogShown(page);
  const a = await answerSent(page, () => page.locator("[data-throng-invite] >> button.no").click());
  assert.equal(a.state, "no");
  await noDialog(page);
  const later = await visit(page, demo());
  assert.equal(later.reason, "answered_no");
  await noDialog(page);
  assert.deepEqual(errors, []);
});

test("Yes opens the survey in a new tab and is never asked again", async (t) => {
  const { context, page, errors } = await withBrowser(t);
  await visit(page, demo());
  await dialogShown(page);
  const tab = context.waitForEvent("page");
  const a = await answerSent(page, () => page.locator("[data-throng-invite] >> button.yes").click());
  assert.equal(a.state, "yes");
  const survey = await tab;
  await survey.waitForLoadState();
  assert.equal(new URL(survey.url()).pathname, "/invites/demo/survey");
  assert.match(await survey.textContent("h1"), /Demo survey/);
  await noDialog(page);
  const later = await visit(page, demo());
  assert.equal(later.reason, "answered_yes");
  await noDialog(page);
  assert.deepEqual(errors, []);
});

test("the first-party cookie keeps the visitor when script storage is wiped", async (t) => {
  // Safari deletes storage written by scripts after seven days without a
  // visit; a cookie the server set (same origin) is not capped that way.
  const { page } = await withBrowser(t);
  await visit(page, demo());
  await dialogShown(page);
  await answerSent(page, () => page.locator("[data-throng-invite] >> button.x").click());
  await page.evaluate(() => localStorage.clear());
  const again = await visit(page, demo());
  assert.equal(again.closes, 1, "the same visitor, found by its cookie");
});

/** A customer's page on another site, loading the script from throng. */
async function customerSite(t, opts) {
  const html = () => `<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>Customer</title></head>
<body><h1>Customer shop</h1><button id="b" type="button">Page button</button><output id="o"></output>
<script>document.getElementById("b").onclick = () => { document.getElementById("o").textContent = "works"; };</script>
<script src="${server.url}/invite.js" data-site="${opts.site}" ${opts.api ? `data-api="${opts.api}"` : ""} ${opts.timeoutMs ? `data-timeout-ms="${opts.timeoutMs}"` : ""} async></script>
</body></html>`;
  const http = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(html());
  });
  await new Promise((r) => http.listen(0, "127.0.0.1", r));
  t.after(() => {
    http.closeAllConnections(); // the browser's keep-alive connections
    return new Promise((r) => http.close(r));
  });
  // localhost and 127.0.0.1 are different sites: throng is third-party here.
  return `http://localhost:${http.address().port}/`;
}

async function adminToken() {
  const out = await run(binPath("throng"), ["token", "--sub", "e2e", "--role", "admin", "--data-dir", server.dataDir]);
  assert.equal(out.code, 0, out.stderr);
  return out.stdout.trim();
}

async function createSite(origin) {
  const res = await fetchWithin(`${server.url}/api/invites/sites`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${await adminToken()}` },
    body: JSON.stringify({ surveyUrl: `${server.url}/invites/demo/survey`, allowedOrigins: [origin] }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()).siteId;
}

test("on a customer's site with third-party cookies blocked, the visitor is kept in the site's storage", async (t) => {
  // Reserve the customer's origin first, then allow it on a new site.
  let siteId;
  const url = await customerSite(t, { get site() { return siteId; } });
  siteId = await createSite(new URL(url).origin);
  const { context, page, errors } = await withBrowser(t, { extraArgs: ["--test-third-party-cookie-phaseout"] });
  for (let close = 1; close <= 3; close++) {
    const s = await visit(page, url);
    assert.equal(s.show, true, JSON.stringify(s));
    assert.equal(s.closes, close - 1, "the same visitor each visit");
    await dialogShown(page);
    await answerSent(page, () => page.keyboard.press("Escape"));
  }
  const last = await visit(page, url);
  assert.equal(last.reason, "closed_out");
  await noDialog(page);
  const throngCookies = await context.cookies(server.url);
  assert.deepEqual(throngCookies, [], "no third-party cookie was stored, none was needed");
  await page.click("#b");
  assert.equal(await page.textContent("#o"), "works");
  assert.deepEqual(errors, []);
});

test("an unreachable API shows nothing and breaks nothing", async (t) => {
  const url = await customerSite(t, { site: 1, api: "http://127.0.0.1:9" });
  const { page, errors } = await withBrowser(t);
  await page.goto(url);
  await page.waitForTimeout(2500);
  assert.equal(await page.locator("[data-throng-invite]").count(), 0);
  await page.click("#b");
  assert.equal(await page.textContent("#o"), "works");
  const unexpected = errors.filter((e) => !e.includes("ERR_CONNECTION_REFUSED") && !e.includes("Failed to load resource"));
  assert.deepEqual(unexpected, []);
});

test("a slow API shows nothing: the script gives up after data-timeout-ms", async (t) => {
  // An API that answers "show the popup", but only after 1.5 s.
  const popup = { title: "Slow", body: "b", yes: "y", no: "n", close: "c" };
  const slow = createServer((req, res) => {
    setTimeout(() => {
      res.writeHead(200, { "content-type": "application/json", "access-control-allow-origin": "*" });
      res.end(JSON.stringify({ show: true, visitor: "v", displayId: "d", surveyUrl: "/", popup }));
    }, 1500);
  });
  await new Promise((r) => slow.listen(0, "127.0.0.1", r));
  t.after(() => {
    slow.closeAllConnections();
    return new Promise((r) => slow.close(r));
  });
  const api = `http://127.0.0.1:${slow.address().port}`;
  const { page, errors } = await withBrowser(t);
  // Given 0.5 s, the script gives up: no popup, the page works.
  await page.goto(await customerSite(t, { site: 1, api, timeoutMs: 500 }));
  await page.waitForTimeout(2500);
  assert.equal(await page.locator("[data-throng-invite]").count(), 0);
  await page.click("#b");
  assert.equal(await page.textContent("#o"), "works");
  assert.deepEqual(errors, []);
  // Given 5 s, the same answer shows the popup (the check above can fail).
  await page.goto(await customerSite(t, { site: 1, api, timeoutMs: 5000 }));
  await dialogShown(page);
});

// ---- the snippet an admin is given, on another site -----------------------

const SHOTS = process.env.THRONG_E2E_SHOTS || join(tmpdir(), "throng-e2e-shots");

/** Runs `body`; on failure saves a screenshot of `page` (path in the test's diagnostics). */
async function shotOnFailure(t, page, body) {
  try {
    await body();
  } catch (e) {
    mkdirSync(SHOTS, { recursive: true });
    const path = join(SHOTS, `invites-${t.name.replace(/[^a-z0-9]+/gi, "-").slice(0, 80)}.png`);
    await page.screenshot({ path, fullPage: true }).catch(() => {});
    t.diagnostic(`screenshot: ${path}`);
    throw e;
  }
}

/** Makes a site through the API as an admin would; returns its JSON (snippet included). */
async function adminSite(settings) {
  const res = await fetchWithin(`${server.url}/api/invites/sites`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${await adminToken()}` },
    body: JSON.stringify({ surveyUrl: "/invites/demo/survey", ...settings }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  return res.json();
}

/**
 * A customer's page on another site (http://localhost:PORT, throng being
 * http://127.0.0.1:PORT) with `snippet()` pasted verbatim, long enough to
 * scroll. Returns its URL.
 */
async function pageWithSnippet(t, snippet) {
  const html = () => `<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Customer</title></head>
<body style="margin:0;font:16px system-ui"><h1>Customer shop</h1><button id="b" type="button">Page button</button><output id="o"></output>
<div style="height:3000px">A long page.</div><p>End.</p>
<script>document.getElementById("b").onclick = () => { document.getElementById("o").textContent = "works"; };</script>
${snippet()}
</body></html>`;
  const http = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(html());
  });
  await new Promise((r) => http.listen(0, "127.0.0.1", r));
  t.after(() => {
    http.closeAllConnections();
    return new Promise((r) => http.close(r));
  });
  return `http://localhost:${http.address().port}/`;
}

/** The popup's box (dialog) position and the viewport. */
async function dialogBox(page) {
  // Measured where it comes to rest: the slide-in moves up 2rem as it appears.
  return page.evaluate(async () => {
    const root = document.querySelector("[data-throng-invite]").shadowRoot;
    await Promise.all(root.getAnimations().map((a) => a.finished));
    const r = root.querySelector("[role=dialog]").getBoundingClientRect();
    return {
      left: r.left, right: r.right, top: r.top, bottom: r.bottom,
      vw: window.innerWidth, vh: window.innerHeight,
      dimmed: !!root.querySelector(".back"),
      pageWidth: document.documentElement.scrollWidth,
    };
  });
}

const blockThirdPartyCookies = { extraArgs: ["--test-third-party-cookie-phaseout"] };

test("the admin's snippet pasted on another site shows a slide-in after the site's delay", async (t) => {
  let site;
  const url = await pageWithSnippet(t, () => site.snippet);
  site = await adminSite({ allowedOrigins: [new URL(url).origin], trigger: "delay", delaySeconds: 2, style: "slide_in" });
  assert.match(site.snippet, /^<script src="http:\/\/127\.0\.0\.1:\d+\/invite\.js" data-site="\d+" async><\/script>$/);
  const { context, page, errors } = await withBrowser(t, blockThirdPartyCookies);
  await shotOnFailure(t, page, async () => {
    const loaded = Date.now();
    const state = await visit(page, url);
    assert.deepEqual([state.show, state.trigger, state.style], [true, "delay", "slide_in"]);
    // Not before the delay...
    await page.waitForTimeout(800);
    assert.equal(await page.locator("[data-throng-invite]").count(), 0, "no popup before 2 s");
    // ...then a slide-in: not modal, the page still usable.
    await dialogShown(page);
    assert.ok(Date.now() - loaded >= 1900, "shown after the delay");
    assert.equal(await page.locator(DIALOG).getAttribute("aria-modal"), "false");
    const box = await dialogBox(page);
    assert.equal(box.dimmed, false, "no dimmed backdrop");
    assert.ok(box.bottom <= box.vh && box.bottom > box.vh - 100 && box.right <= box.vw, JSON.stringify(box));
    await page.click("#b");
    assert.equal(await page.textContent("#o"), "works");
    // Yes opens the survey on throng (an absolute URL), not on the shop.
    const tab = context.waitForEvent("page");
    const a = await answerSent(page, () => page.locator("[data-throng-invite] >> button.yes").click());
    assert.equal(a.state, "yes");
    const survey = await tab;
    await survey.waitForLoadState();
    assert.equal(new URL(survey.url()).origin, server.url);
    assert.match(await survey.textContent("h1"), /Demo survey/);
    assert.deepEqual(await context.cookies(server.url), [], "no third-party cookie");
    assert.deepEqual(errors, []);
  });
});

test("a scroll trigger shows the modal once the share of the page is scrolled; Escape closes", async (t) => {
  let site;
  const url = await pageWithSnippet(t, () => site.snippet);
  site = await adminSite({ allowedOrigins: [new URL(url).origin], trigger: "scroll", scrollPercent: 50 });
  const { page, errors } = await withBrowser(t, blockThirdPartyCookies);
  await shotOnFailure(t, page, async () => {
    const state = await visit(page, url);
    assert.deepEqual([state.trigger, state.style], ["scroll", "modal"]);
    await page.evaluate(() => window.scrollTo(0, (document.documentElement.scrollHeight - innerHeight) * 0.3));
    await page.waitForTimeout(500);
    assert.equal(await page.locator("[data-throng-invite]").count(), 0, "not at 30 %");
    await page.evaluate(() => window.scrollTo(0, (document.documentElement.scrollHeight - innerHeight) * 0.6));
    await dialogShown(page);
    assert.equal(await page.locator(DIALOG).getAttribute("aria-modal"), "true");
    assert.equal((await dialogBox(page)).dimmed, true, "a modal dims the page");
    const a = await answerSent(page, () => page.keyboard.press("Escape"));
    assert.deepEqual([a.state, a.closes], ["asking", 1]);
    await noDialog(page);
    assert.deepEqual(errors, []);
  });
});

test("a page whose origin the site does not allow logs a readable console warning", async (t) => {
  let site;
  const url = await pageWithSnippet(t, () => site.snippet);
  site = await adminSite({ allowedOrigins: ["https://shop.example"] });
  const { page } = await withBrowser(t, blockThirdPartyCookies);
  const warnings = [];
  page.on("console", (m) => {
    if (m.type() === "warning") warnings.push(m.text());
  });
  await shotOnFailure(t, page, async () => {
    const refused = page.waitForResponse((r) => new URL(r.url()).pathname.endsWith("/state"));
    await page.goto(url);
    assert.equal((await refused).status(), 403);
    const deadline = Date.now() + 5000;
    while (!warnings.some((w) => w.includes("is not in the allowedOrigins")) && Date.now() < deadline) {
      await page.waitForTimeout(100);
    }
    const w = warnings.find((x) => x.includes("is not in the allowedOrigins"));
    assert.ok(w, `a readable warning; got ${JSON.stringify(warnings)}`);
    assert.ok(w.startsWith("throng invites: this page's origin (" + new URL(url).origin + ")"), w);
    assert.ok(w.includes(`site ${site.siteId}`), w);
    assert.equal(await page.locator("[data-throng-invite]").count(), 0);
  });
});

test("on a 390 px phone the modal and the slide-in fit the screen", async (t) => {
  for (const [demoSite, dimmed] of [["1", true], ["2", false]]) {
    const { page, errors } = await withBrowser(t, { viewport: { width: 390, height: 844 } });
    await shotOnFailure(t, page, async () => {
      await visit(page, `${demo()}?site=${demoSite}`);
      await dialogShown(page);
      const box = await dialogBox(page);
      assert.equal(box.dimmed, dimmed, `site ${demoSite}`);
      assert.ok(box.left >= 0 && box.right <= 390 && box.top >= 0 && box.bottom <= 844, `site ${demoSite}: ${JSON.stringify(box)}`);
      assert.ok(box.pageWidth <= 390, `the page does not scroll sideways: ${box.pageWidth}`);
      for (const b of ["yes", "no", "x"]) {
        const r = await page.locator(`[data-throng-invite] >> button.${b}`).boundingBox();
        assert.ok(r.x >= 0 && r.x + r.width <= 390, `${b} on screen: ${JSON.stringify(r)}`);
      }
      const a = await answerSent(page, () => page.keyboard.press("Escape"));
      assert.equal(a.closes, 1);
      assert.deepEqual(errors, []);
    });
  }
});

test("exit intent: the demo's slide-in waits for the mouse to leave through the top", async (t) => {
  const { page, errors } = await withBrowser(t);
  await shotOnFailure(t, page, async () => {
    const state = await visit(page, `${demo()}?site=4`);
    assert.deepEqual([state.trigger, state.style], ["exit_intent", "slide_in"]);
    await page.mouse.move(400, 400);
    await page.mouse.move(400, 200);
    await page.waitForTimeout(500);
    assert.equal(await page.locator("[data-throng-invite]").count(), 0, "not while the mouse is on the page");
    // The mouse leaving the page through its top edge (towards the tabs).
    await page.evaluate(() =>
      document.documentElement.dispatchEvent(new MouseEvent("mouseout", { bubbles: true, clientX: 400, clientY: -2, relatedTarget: null })),
    );
    await dialogShown(page);
    assert.equal(await page.locator(DIALOG).getAttribute("aria-modal"), "false");
    const a = await answerSent(page, () => page.locator("[data-throng-invite] >> button.no").click());
    assert.equal(a.state, "no");
    assert.deepEqual(errors, []);
  });
});
