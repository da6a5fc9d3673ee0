// The comments widget on a host's site and the moderation page, in
// headless Chromium against a real throng server (demo data; user 150 is
// enrolled on every demo course). The widget sits on a page of another
// origin whose CSS restyles h2, button and div; posting runs on a desktop
// and a 390 px phone; the moderation page works the queue. A failing test
// leaves a screenshot (its path in the error).

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { binPath, fetchWithin, run, sharedSession } from "./lib/server.mjs";

const TEST_MS_MAX = 60_000;
const DESKTOP = { name: "desktop", width: 1000, height: 900 };
const PHONE = { name: "390 px", width: 390, height: 844 };
const SHOTS_DIR = process.env.THRONG_E2E_SHOTS || join(tmpdir(), "throng-e2e-shots");
const DEMO_USER = 150;

const session = sharedSession();

function pageTest(name, fn, viewports = [DESKTOP, PHONE]) {
  for (const vp of viewports) {
    test(`${name} (${vp.name})`, { timeout: TEST_MS_MAX }, async (t) => {
      const { page, errors } = await session.newPage(t);
      await page.setViewportSize({ width: vp.width, height: vp.height });
      try {
        await fn({ page, errors, vp, t });
      } catch (e) {
        mkdirSync(SHOTS_DIR, { recursive: true });
        const shot = join(SHOTS_DIR, `comments-site-${name}-${vp.name}`.replace(/[^a-z0-9-]+/gi, "_") + ".png");
        await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
        e.message += `\nscreenshot: ${shot}` + (errors.length ? `\npage errors: ${errors.join("\n")}` : "");
        throw e;
      }
    });
  }
}

/** A token made by `throng token` with the server's keys. */
async function tokenFor(sub, role, claims = {}) {
  const args = ["token", "--sub", String(sub), "--role", role, "--data-dir", session.server.dataDir];
  for (const [k, v] of Object.entries(claims)) args.push("--claim", `${k}=${v}`);
  const out = await run(binPath("throng"), args);
  assert.equal(out.code, 0, out.stderr);
  return out.stdout.trim();
}

async function api(method, path, token, body) {
  const headers = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const r = await fetchWithin(`${session.server.url}${path}`, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null };
}

const HOSTILE_CSS = `<style>
  h2 { color: rgb(255, 0, 0) !important; font-size: 40px !important; text-transform: uppercase; font-family: serif; }
  button { background: rgb(255, 0, 0) !important; color: rgb(255, 255, 0); font-size: 30px; padding: 20px; border-radius: 0; }
  div { border: 5px solid rgb(0, 128, 0) !important; padding: 30px; font-family: serif; color: rgb(0, 0, 255); }
  * { letter-spacing: 3px; }
</style>`;

/**
 * A page of another origin (a second server on loopback, another port)
 * with `head` and the widget's tag for `course` (and `attrs`). Resolves
 * when the widget shows the course.
 */
async function hostPage(t, page, course, { head = "", attrs = "" } = {}) {
  const body = `<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1">${head}</head>
    <body><h2>A course site</h2><div class="content"><p>Course ${course}</p>
    <script src="${session.server.url}/widget/comments.js" data-course="${course}" ${attrs}></script></div></body></html>`;
  const host = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(body);
  });
  await new Promise((ok) => host.listen(0, "127.0.0.1", ok));
  t.after(() => new Promise((ok) => { host.closeAllConnections(); host.close(ok); }));
  await page.goto(`http://127.0.0.1:${host.address().port}/course/${course}`);
  await page.locator("[data-testid=course-title]").waitFor();
}

/** Computed styles of the widget's parts that host CSS would target. */
async function widgetLook(page) {
  return page.evaluate(() => {
    const shadow = document.querySelector("[data-throng-comments]").shadowRoot;
    const pick = (sel, props) => {
      const e = shadow.querySelector(sel);
      const s = getComputedStyle(e);
      return Object.fromEntries(props.map((p) => [p, s[p]]));
    };
    return {
      title: pick("[data-testid=course-title]", ["color", "fontSize", "textTransform", "fontFamily", "letterSpacing"]),
      button: pick("[data-testid=older]", ["backgroundColor", "color", "fontSize", "paddingTop", "borderRadius"]),
      block: pick("[data-testid=block]", ["borderTopWidth", "borderLeftWidth", "paddingLeft", "fontFamily", "color"]),
      remarks: pick(".tc-remarks", ["borderTopWidth", "paddingLeft", "color"]),
      root: pick(".throng-comments", ["fontFamily", "fontSize", "color", "letterSpacing"]),
    };
  });
}

pageTest("host CSS that restyles h2, button and div leaves the widget unchanged", async ({ page, errors, t }) => {
  await hostPage(t, page, 2);
  await page.locator("[data-testid=block]").first().waitFor();
  const plain = await widgetLook(page);
  await hostPage(t, page, 2, { head: HOSTILE_CSS });
  await page.locator("[data-testid=block]").first().waitFor();
  // The host's own heading did change: the CSS is live on the page.
  assert.equal(await page.evaluate(() => getComputedStyle(document.querySelector("body > h2")).color), "rgb(255, 0, 0)");
  const hostile = await widgetLook(page);
  assert.deepEqual(hostile, plain);
  assert.notEqual(hostile.title.color, "rgb(255, 0, 0)");
  assert.notEqual(hostile.button.backgroundColor, "rgb(255, 0, 0)");
  assert.equal(hostile.block.borderLeftWidth, "0px");
  const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  assert.ok(scroll <= inner, `page is ${scroll} px wide in a ${inner} px viewport`);
  assert.deepEqual(errors, []);
});

pageTest("a user posts from the host page; the review is scrolled into view and announced", async ({ page, errors, vp, t }) => {
  const course = vp === PHONE ? 13 : 12;
  const token = await tokenFor(DEMO_USER, "user", { name: "Demo Reader" });
  await hostPage(t, page, course, { head: HOSTILE_CSS, attrs: `data-token="${token}" data-page-size="20"` });
  await page.locator("[data-testid=form]").waitFor();
  // Visible labels; a star picker with nothing chosen.
  for (const label of ["Your rating", "Title", "Your review", "Sort by"]) {
    assert.ok(await page.getByText(label, { exact: true }).first().isVisible(), `label "${label}"`);
  }
  assert.equal(await page.locator("[data-testid=form-rating] input:checked").count(), 0);
  // Errors beside their fields, in people's words.
  await page.click("[data-testid=form-send]");
  await page.locator("[data-testid=form-rating-error]").filter({ hasText: "Choose a rating from 1 to 5 stars." }).waitFor();
  await page.locator("[data-testid=form-title-error]").filter({ hasText: "Give your review a title." }).waitFor();
  await page.locator("[data-testid=form-remarks-error]").filter({ hasText: "Write a few words" }).waitFor();
  await page.locator("[data-testid=form-rating] label[data-stars='3']").click();
  await page.fill("[data-testid=form-title]", `Phone-sized ${vp.name}`);
  await page.fill("[data-testid=form-remarks]", "Posted on a page that restyles everything.");
  await page.locator("[data-testid=form-rating-error]").filter({ hasText: "Choose" }).waitFor();
  await page.click("[data-testid=form-send]");
  await page.locator("[data-testid=announce]").filter({ hasText: "Your review is posted." }).waitFor();
  const mine = page.locator("[data-testid=comment]").filter({ hasText: `Phone-sized ${vp.name}` });
  await mine.waitFor();
  // Scrolled into view and focused.
  const box = await mine.boundingBox();
  assert.ok(box && box.y >= 0 && box.y < vp.height, `the new review is in view (y ${box && box.y})`);
  assert.equal(await mine.evaluate((e) => e.getRootNode().activeElement === e), true, "focused");
  assert.equal(await page.locator("[data-testid=announce]").getAttribute("aria-live"), "polite");
  const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  assert.ok(scroll <= inner, `page is ${scroll} px wide in a ${inner} px viewport`);
  assert.deepEqual(errors, []);
});

pageTest("no control the signed-in person may not use", async ({ page, errors, t }) => {
  // A provider of another course: no reply boxes here.
  const course = 5;
  const rating = await api("GET", `/api/courses/${course}/rating`);
  assert.equal(rating.status, 200);
  await hostPage(t, page, course, { attrs: `data-token="${await tokenFor(999_999, "provider")}"` });
  await page.locator("[data-testid=block]").first().waitFor();
  assert.equal(await page.locator("[data-testid=reply-send], [data-testid=reply-edit]").count(), 0);
  assert.equal(await page.locator("[data-testid=form]").count(), 0);
  // A user who is not enrolled: told so, no form; may still react.
  const outsider = await tokenFor(880_001, "user", { name: "Not Enrolled" });
  await page.evaluate((tk) => window.throngComments.setToken(tk), outsider);
  await page.locator("[data-testid=no-form]").filter({ hasText: "Only people enrolled on this course can review it." }).waitFor();
  assert.equal(await page.locator("[data-testid=form]").count(), 0);
  assert.ok(await page.locator("[data-testid=helpful]").count() > 0, "readers may vote");
  assert.equal(await page.locator("[data-testid=own-edit]").count(), 0);
  // Signed out: nothing but reading.
  await page.evaluate(() => window.throngComments.setToken(null));
  await page.locator("[data-testid=signed-out]").waitFor();
  assert.equal(await page.locator("[data-testid=helpful], [data-testid=report], [data-testid=reply-send]").count(), 0);
  assert.deepEqual(errors, []);
}, [DESKTOP]);

pageTest("loading and offline states, then the reviews once back", async ({ page, errors, t }) => {
  // Hold the listing: the loading state shows.
  let release;
  const held = new Promise((ok) => { release = ok; });
  const listing = (url) => url.pathname === "/api/comments";
  await page.route(listing, async (route) => { await held; await route.continue(); });
  const body = `<!doctype html><html><body><script src="${session.server.url}/widget/comments.js" data-course="3"></script></body></html>`;
  const host = createServer((req, res) => { res.writeHead(200, { "content-type": "text/html" }); res.end(body); });
  await new Promise((ok) => host.listen(0, "127.0.0.1", ok));
  t.after(() => new Promise((ok) => { host.closeAllConnections(); host.close(ok); }));
  await page.goto(`http://127.0.0.1:${host.address().port}/`);
  await page.locator("[data-testid=loading]").filter({ hasText: "Loading reviews" }).waitFor();
  release();
  await page.locator("[data-testid=block]").first().waitFor();
  await page.unroute(listing);
  // Offline: the requests fail; the widget says so and offers to retry.
  const throngApi = (url) => url.origin === session.server.url && url.pathname.startsWith("/api/");
  await page.route(throngApi, (route) => route.abort("internetdisconnected"));
  await page.evaluate(() => window.throngComments.reload());
  await page.locator("[data-testid=offline]").filter({ hasText: "offline" }).waitFor();
  await page.unroute(throngApi);
  await page.click("[data-testid=retry]");
  await page.locator("[data-testid=block]").first().waitFor();
  // The aborted requests are the only errors the browser logged.
  assert.deepEqual(errors.filter((e) => !/ERR_INTERNET_DISCONNECTED|Failed to load resource/.test(e)), []);
}, [DESKTOP]);

pageTest("a held review shows to its author as waiting, then listed once approved", async ({ page, errors, t }) => {
  const admin = await tokenFor("e2e", "admin");
  const course = 14;
  const now = await api("GET", `/api/courses/${course}/rating`);
  const provider = (await api("GET", `/api/comments/demo-token?role=provider&courseId=${course}`)).json.sub;
  const put = await api("PUT", `/api/comments/host/courses/${course}`, admin,
    { providerId: provider, title: now.json.courseTitle, premoderate: true });
  assert.equal(put.status, 200, JSON.stringify(put.json));
  const token = await tokenFor(DEMO_USER, "user", { name: "Demo Reader" });
  await hostPage(t, page, course, { attrs: `data-token="${token}"` });
  await page.locator("[data-testid=form]").waitFor();
  await page.locator("[data-testid=form-rating] label[data-stars='2']").click();
  await page.fill("[data-testid=form-title]", "Waiting review");
  await page.fill("[data-testid=form-remarks]", "Held until a moderator looks.");
  await page.click("[data-testid=form-send]");
  await page.locator("[data-testid=announce]").filter({ hasText: "once a moderator approves it" }).waitFor();
  await page.locator("[data-testid=held-comment]").filter({ hasText: "Waiting review" })
    .filter({ hasText: "Waiting for approval" }).waitFor();
  assert.equal(await page.locator("[data-testid=comment]").filter({ hasText: "Waiting review" }).count(), 0);
  const listed = await (await fetchWithin(`${session.server.url}/api/comments?courseId=${course}&size=20`)).text();
  assert.ok(!listed.includes("Waiting review"), "others do not see it");
  // Approved on the moderation page.
  const mod = await session.newPage(t);
  await mod.page.goto(`${session.server.url}/comments/moderate`);
  await mod.page.click("#demo-moderator");
  const item = mod.page.locator("[data-testid=queue-item]").filter({ hasText: "Waiting review" });
  await item.waitFor();
  await item.locator("[data-testid=mod-approve]").click();
  await item.locator("[data-testid=mod-error]").filter({ hasText: "Give a reason first" }).waitFor();
  await item.getByLabel("Reason (recorded with the action)").fill("Fair criticism");
  await item.locator("[data-testid=mod-approve]").click();
  await mod.page.locator("#status").filter({ hasText: "Done" }).waitFor();
  assert.equal(await mod.page.locator("[data-testid=queue-item]").filter({ hasText: "Waiting review" }).count(), 0);
  await page.evaluate(() => window.throngComments.reload());
  await page.locator("[data-testid=comment]").filter({ hasText: "Waiting review" }).waitFor();
  assert.equal(await page.locator("[data-testid=held]").count(), 0);
  await api("PUT", `/api/comments/host/courses/${course}`, admin, { providerId: provider, title: now.json.courseTitle, premoderate: false });
  assert.deepEqual(errors, []);
  assert.deepEqual(mod.errors, []);
}, [DESKTOP]);

pageTest("a reader reports a review; the moderation page hides it", async ({ page, errors, vp, t }) => {
  const course = vp === PHONE ? 16 : 15;
  // A reader reports a review from the widget.
  const reader = await tokenFor(DEMO_USER, "user", { name: "Demo Reader" });
  await hostPage(t, page, course, { attrs: `data-token="${reader}" data-page-size="20"` });
  const target = page.locator("[data-testid=comment]").filter({ has: page.locator("[data-testid=report]") }).first();
  const id = await target.getAttribute("data-comment-id");
  await target.locator("[data-testid=report]").click();
  await page.getByLabel("Why are you reporting this review?").fill("Off topic advert");
  await page.click("[data-testid=report-send]");
  await page.locator("[data-testid=reader-note]").filter({ hasText: "a moderator will look at it" }).waitFor();
  // The moderator hides it.
  await page.goto(`${session.server.url}/comments/moderate`);
  await page.click("#demo-moderator");
  const item = page.locator(`[data-testid=queue-item][data-comment-id="${id}"]`);
  await item.waitFor();
  assert.match(await item.textContent(), /Off topic advert/);
  assert.match(await item.textContent(), /1 report/);
  await item.getByLabel("Reason (recorded with the action)").fill("Advert");
  await item.locator("[data-testid=mod-hide]").click();
  await page.locator("#status").filter({ hasText: `hide on comment ${id}` }).waitFor();
  await item.waitFor({ state: "detached" });
  const listed = await (await fetchWithin(`${session.server.url}/api/comments?courseId=${course}&size=20&sizeThread=20`,
    { headers: { "cache-control": "no-cache" } })).json();
  assert.ok(!listed.some((b) => b.thread.some((c) => String(c.commentId) === id)), "hidden from the listing");
  const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  assert.ok(scroll <= inner, `page is ${scroll} px wide in a ${inner} px viewport`);
  assert.deepEqual(errors, []);
});
