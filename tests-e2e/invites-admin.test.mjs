// The invites admin page (/invites/admin) in headless Chromium against a
// real throng server: signing in with an admin token, a site created with
// page rules (an error shown beside its field first), its snippet copied and
// pasted on another origin (a small server of the test's own on
// http://localhost:PORT while throng is http://127.0.0.1:PORT) where the
// invitation shows on an included page and not on an excluded one, the
// answer counted in the results (chart and pages table), pausing and
// resuming; and the page on a 390 px phone.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";

import { binPath, launchBrowser, run, startThrong } from "./lib/server.mjs";

const DIALOG = "[data-throng-invite] >> role=dialog";
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

async function adminToken() {
  const out = await run(binPath("throng"), ["token", "--sub", "e2e", "--role", "admin", "--data-dir", server.dataDir]);
  assert.equal(out.code, 0, out.stderr);
  return out.stdout.trim();
}

/** A customer's pages on another origin: every path carries `snippet()`. */
async function customerSite(t, snippet) {
  const http = createServer((req, res) => {
    if (req.url === "/favicon.ico") {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">` +
      `<title>Shop</title></head><body><h1>Shop</h1>${snippet()}</body></html>`);
  });
  await new Promise((r) => http.listen(0, "127.0.0.1", r));
  t.after(() => {
    http.closeAllConnections();
    return new Promise((r) => http.close(r));
  });
  return `http://localhost:${http.address().port}`;
}

/** Loads `url` and answers the state call's JSON. */
async function visit(page, url) {
  const state = page.waitForResponse((r) => new URL(r.url()).pathname.endsWith("/state"));
  await page.goto(url);
  const res = await state;
  assert.equal(res.status(), 200);
  return res.json();
}

async function signIn(page) {
  await page.goto(`${server.url}/invites/admin`);
  await page.fill("#token", await adminToken());
  await page.click("#token-form button[type=submit]");
  await page.locator("#sites li").first().waitFor();
}

test("an admin creates a site with page rules, pastes its snippet elsewhere, sees the answer, pauses it", async (t) => {
  let snippet = "";
  const shop = await customerSite(t, () => snippet);
  const admin = await withBrowser(t);
  const { page, errors } = admin;
  await admin.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.url });
  await signIn(page);
  assert.ok((await page.locator("#sites li").count()) >= 1, "the demo's sites are listed");

  await page.click("#new-site");
  await page.fill("#f-name", "Shop checkout survey");
  await page.fill("#f-surveyUrl", "javascript:alert(1)");
  await page.fill("#f-allowedOrigins", shop);
  await page.fill("#f-pagesInclude", "/shop/*");
  await page.fill("#f-pagesExclude", "/shop/checkout/*");
  await page.click("#save");
  // The error beside its field, the field marked and focused.
  await page.locator("#e-surveyUrl:not(:empty)").waitFor();
  assert.match(await page.textContent("#e-surveyUrl"), /http/);
  assert.equal(await page.getAttribute("#f-surveyUrl", "aria-invalid"), "true");
  assert.equal(await page.evaluate(() => document.activeElement.id), "f-surveyUrl");
  assert.equal(await page.textContent("#e-name"), "", "no error beside the other fields");

  await page.fill("#f-surveyUrl", `${server.url}/invites/demo/survey?v={visitor}&p={page}`);
  await page.click("#save");
  await page.locator("#detail-section:not([hidden])").waitFor();
  snippet = await page.textContent("#snippet");
  assert.match(snippet, /^<script src="http:\/\/127\.0\.0\.1:\d+\/invite\.js" data-site="(\d+)" async><\/script>$/);
  const siteId = snippet.match(/data-site="(\d+)"/)[1];
  await page.click("#copy");
  await page.locator("#copy-status:not(:empty)").waitFor();
  if ((await page.textContent("#copy-status")) === "Copied.") {
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), snippet);
  }

  // The snippet on the other origin: an excluded page shows nothing, an
  // included one the invitation, whose Yes opens the survey with the visitor and the page.
  const shopper = await withBrowser(t, { viewport: { width: 390, height: 844 } });
  const excluded = await visit(shopper.page, `${shop}/shop/checkout/pay`);
  assert.deepEqual([excluded.show, excluded.reason], [false, "page_excluded"]);
  const shown = await visit(shopper.page, `${shop}/shop/shoes?size=42`);
  assert.equal(shown.show, true, JSON.stringify(shown));
  assert.match(shown.surveyUrl, /\?v=\d+&p=%2Fshop%2Fshoes$/, "the page's path, never its query");
  await shopper.page.locator(DIALOG).waitFor({ state: "visible" });
  const answered = shopper.page.waitForResponse((r) => r.url().endsWith("/answers"));
  const tab = shopper.context.waitForEvent("page");
  await shopper.page.locator("[data-throng-invite] >> button.yes").click();
  assert.equal((await answered).status(), 200);
  const survey = await tab;
  await survey.waitForLoadState();
  assert.match(survey.url(), /\/invites\/demo\/survey\?v=\d+&p=%2Fshop%2Fshoes$/);

  // The results: the chart's lines and the page's row.
  await page.click("#show-results");
  await page.waitForFunction(() => {
    const cells = [...document.querySelectorAll("#pages-table tbody tr td")].map((td) => td.textContent);
    return cells.includes("/shop/shoes");
  });
  const row = await page.$$eval("#pages-table tbody tr", (trs) =>
    trs.map((tr) => [...tr.children].map((td) => td.textContent)).find((c) => c[0] === "/shop/shoes"));
  assert.deepEqual(row, ["/shop/shoes", "1", "1", "0", "0"]);
  assert.equal(await page.locator("#chart-box svg polyline").count(), 4);
  assert.match(await page.getAttribute("#chart-box svg", "aria-label"), /1 shown, 1 yes, 0 no, 0 closed/);
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#csv")]);
  assert.match(download.suggestedFilename(), new RegExp(`^invites-site-${siteId}-.*\\.csv$`));

  // Pause: the shop shows nothing; resume: it shows again.
  const item = page.locator(`#sites li[data-site="${siteId}"]`);
  await item.getByRole("button", { name: /^Pause/ }).click();
  await item.locator(".badge.paused").waitFor();
  const fresh = await withBrowser(t);
  const paused = await visit(fresh.page, `${shop}/shop/hats`);
  assert.deepEqual([paused.show, paused.reason], [false, "site_paused"]);
  await item.getByRole("button", { name: /^Resume/ }).click();
  await item.locator(".badge:not(.paused)").waitFor();
  const resumed = await visit(fresh.page, `${shop}/shop/hats`);
  assert.equal(resumed.show, true);
  // The refused save (422) counts as a console error in Chromium
  // ("Failed to load resource"); nothing else may.
  assert.deepEqual(errors.filter((e) => !/status of 422/.test(e)), []);
});

test("on a 390 px phone the admin page fits and shows errors beside their fields", async (t) => {
  const { page, errors } = await withBrowser(t, { viewport: { width: 390, height: 844 } });
  await signIn(page);
  await page.click("#new-site");
  await page.fill("#f-surveyUrl", "https://survey.example/s");
  await page.fill("#f-allowedOrigins", "https://shop.example");
  await page.fill("#f-capInvitations", "11");
  await page.click("#save");
  await page.locator("#e-capInvitations:not(:empty)").waitFor();
  const fits = await page.evaluate(() => {
    const inside = (el) => {
      const r = el.getBoundingClientRect();
      return r.left >= 0 && r.right <= window.innerWidth;
    };
    const field = document.getElementById("f-capInvitations");
    const err = document.getElementById("e-capInvitations");
    const f = field.getBoundingClientRect();
    const e = err.getBoundingClientRect();
    return {
      pageWidth: document.documentElement.scrollWidth,
      allInside: [...document.querySelectorAll("input, textarea, select, button")].filter((el) => el.offsetParent).every(inside),
      errorBelowField: e.top >= f.bottom && e.top - f.bottom < 40 && Math.abs(e.left - f.left) < 40,
    };
  });
  assert.ok(fits.pageWidth <= 390, `no sideways scroll: ${fits.pageWidth}`);
  assert.ok(fits.allInside, "every control on screen");
  assert.ok(fits.errorBelowField, "the error right under its field");
  for (const b of await page.locator("#sites li button").all()) {
    const box = await b.boundingBox();
    assert.ok(box.height >= 44, `touch targets: ${box.height}`);
  }
  assert.deepEqual(errors.filter((e) => !/status of 422/.test(e)), []);
});
