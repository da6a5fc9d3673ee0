// The admin console (/admin/) in headless Chromium against a real throng
// server (demo data): signing in by a one-time link from `throng admin
// link` (once only), the services' admin pages opened from the console and
// working with its session (no token pasted), the audit log filtered by
// service, signing out; a forged request from a page on another origin (a
// second loopback server: same site, other port, so the SameSite cookie
// goes along) refused by the server. Desktop and a 390 px phone. A failing
// test leaves a screenshot in target/e2e-screenshots/.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { REPO_ROOT, binPath, fetchWithin, run, sharedSession, withTimeout } from "./lib/server.mjs";

const TEST_MS_MAX = 90_000;
const session = sharedSession();
const SHOTS = join(REPO_ROOT, "target", "e2e-screenshots");
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1100, height: 900 };

async function withScreenshot(t, page, body) {
  try {
    await body();
  } catch (e) {
    mkdirSync(SHOTS, { recursive: true });
    const shot = join(SHOTS, `${t.name.replace(/[^a-z0-9]+/gi, "-").slice(0, 80)}.png`);
    await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
    t.diagnostic(`screenshot: ${shot}`);
    throw e;
  }
}

/** A one-time sign-in link printed by `throng admin link`. */
async function signInLink(sub, role = "admin", claims = []) {
  const out = await run(binPath("throng"), [
    "admin", "link", "--data-dir", session.server.dataDir, "--sub", sub, "--role", role,
    "--public-url", session.server.url, ...claims.flatMap((c) => ["--claim", c]),
  ]);
  assert.equal(out.code, 0, out.stderr);
  const link = out.stdout.trim();
  assert.ok(link.startsWith(`${session.server.url}/admin/signin#`), link);
  return link;
}

async function adminToken() {
  const out = await run(binPath("throng"), ["token", "--data-dir", session.server.dataDir, "--sub", "api-user", "--role", "admin"]);
  assert.equal(out.code, 0, out.stderr);
  return out.stdout.trim();
}

async function noSidewaysScroll(page) {
  const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  assert.ok(scroll <= client, `scrolls sideways: ${scroll} > ${client}`);
}

async function tapTargets(page, selector) {
  for (const box of await page.locator(selector).all()) {
    if (!(await box.isVisible())) continue;
    const b = await box.boundingBox();
    assert.ok(b.height >= 44, `${selector} is ${b.height} px tall`);
  }
}

async function signIn(page, sub) {
  const link = await signInLink(sub);
  await page.goto(link);
  await page.waitForURL(`${session.server.url}/admin/`);
  await page.locator("#who", { hasText: `Signed in as ${sub} (admin)` }).waitFor();
  return link;
}

for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
  test(`a one-time link signs in once; the console lists the services' pages (${label})`, { timeout: TEST_MS_MAX }, async (t) => {
    const { page, errors } = await session.newPage(t);
    await page.setViewportSize(viewport);
    await withScreenshot(t, page, async () => {
      const sub = `alice-${viewport.width}@example.org`;
      const link = await signIn(page, sub);
      assert.equal(await page.evaluate(() => location.hash), "", "the link's secret is cleared from the address");
      const hrefs = await page.locator("#pages a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
      for (const href of ["/booking/staff/", "/booking/admin/", "/comments/moderate", "/voting/admin", "/invites/admin"]) {
        assert.ok(hrefs.includes(href), `${href} in ${hrefs}`);
      }
      assert.ok(await page.locator('meta[name="viewport"]').count());
      await noSidewaysScroll(page);
      await tapTargets(page, "#pages a, button, select");
      // The cookie is HttpOnly: no script reads it.
      assert.equal(await page.evaluate(() => document.cookie), "");
      // The same link again: refused in words.
      await page.goto(link);
      await page.locator("#err", { hasText: "used already" }).waitFor();
      assert.deepEqual(errors.filter((e) => !e.includes("401")), []);
    });
  });

  test(`each service's admin page works with the console's session (${label})`, { timeout: TEST_MS_MAX }, async (t) => {
    const { page, errors } = await session.newPage(t);
    await page.setViewportSize(viewport);
    await withScreenshot(t, page, async () => {
      const sub = `bob-${viewport.width}@example.org`;
      await signIn(page, sub);

      // Invites: the sites load, and a change made by the page's own client
      // goes through with the session (and is in the audit log).
      await page.locator('#pages a[href="/invites/admin"]').click();
      await page.waitForURL(/\/invites\/admin$/);
      await page.locator("#console-session", { hasText: sub }).waitFor();
      await page.locator("#sites-section").waitFor();
      const siteName = `Console site ${viewport.width}`;
      const status = await page.evaluate(async (name) => {
        const res = await Throng.client().fetch("/api/invites/sites", {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ name, surveyUrl: "https://survey.example/s/1", allowedOrigins: ["https://shop.example"] }),
        });
        return res.status;
      }, siteName);
      assert.equal(status, 201);
      await page.reload();
      await page.locator("#sites-section", { hasText: siteName }).waitFor();
      await noSidewaysScroll(page);

      // Booking's places admin: listed, no token asked.
      await page.goto(`${session.server.url}/admin/`);
      await page.locator('#pages a[href="/booking/admin/"]').click();
      await page.locator("#console-session", { hasText: sub }).waitFor();
      assert.equal(await page.locator("#a-token").isVisible(), false);
      await noSidewaysScroll(page);

      // The staff day list: an admin's session opens a place's day.
      await page.goto(`${session.server.url}/admin/`);
      await page.locator('#pages a[href="/booking/staff/"]').click();
      await page.locator("#console-session", { hasText: sub }).waitFor();
      await page.fill("#s-place", "3");
      await page.locator('#pick button[type="submit"]').click();
      await page.locator("#day").waitFor();
      await noSidewaysScroll(page);

      // Comments moderation: the queue, not "Sign in".
      await page.goto(`${session.server.url}/admin/`);
      await page.locator('#pages a[href="/comments/moderate"]').click();
      await page.locator("#console-session", { hasText: sub }).waitFor();
      await page.locator("#status", { hasText: "to look at" }).waitFor();
      assert.equal(await page.locator('[data-testid="queue-error"]').count(), 0);

      // Voting's authority page: the elections load.
      await page.goto(`${session.server.url}/admin/`);
      await page.locator('#pages a[href="/voting/admin"]').click();
      await page.locator("#console-session", { hasText: sub }).waitFor();
      await page.waitForFunction(() => document.querySelector("#election").options.length > 0);
      await noSidewaysScroll(page);

      // The audit log: the change, by whom, filtered by service.
      await page.goto(`${session.server.url}/admin/`);
      const row = page.locator("#audit li", { hasText: `${sub} (admin, session): POST /api/invites/sites` });
      await row.first().waitFor();
      await page.selectOption("#audit-service", "console");
      await page.waitForFunction(() => {
        const rows = [...document.querySelectorAll("#audit li")];
        return rows.length > 0 && rows.every((li) => li.querySelector(".service").textContent === "console");
      });
      await page.locator("#audit li", { hasText: `${sub} (admin, link): POST /api/admin/session` }).first().waitFor();
      await noSidewaysScroll(page);
      await tapTargets(page, "#audit-service, #audit-refresh, #sign-out");

      // Signing out: the console says so, the service pages ask for a token.
      await page.locator("#sign-out").click();
      await page.locator("#signed-out").waitFor();
      await page.goto(`${session.server.url}/invites/admin`);
      await page.locator("#token").waitFor();
      assert.equal(await page.locator("#console-session").count(), 0);
      assert.deepEqual(errors.filter((e) => !/401|403/.test(e)), []);
    });
  });
}

test("a forged request from a page on another origin is refused", { timeout: TEST_MS_MAX }, async (t) => {
  const { page } = await session.newPage(t);
  await withScreenshot(t, page, async () => {
    await signIn(page, "carol@example.org");
    const target = `${session.server.url}/api/invites/sites`;
    const body = JSON.stringify({ name: "Forged", surveyUrl: "https://evil.example/", allowedOrigins: ["https://evil.example"] });
    // The attacker's pages: a form posting JSON-looking text (a form can
    // set no header), and a script's no-cors fetch (its custom header
    // dropped by the browser).
    const evil = createServer((req, res) => {
      res.setHeader("content-type", "text/html");
      if (req.url === "/form") {
        const [k, v] = [body.slice(0, -2), body.slice(-2)];
        res.end(`<form id="f" method="POST" action="${target}" enctype="text/plain">` +
          `<input type="hidden" name='${k.replace(/'/g, "&#39;")}' value='${v}'></form>` +
          `<script>document.getElementById("f").submit()</script>`);
      } else {
        res.end(`<p>evil</p><script>
          fetch(${JSON.stringify(target)}, { method: "POST", mode: "no-cors", credentials: "include",
            headers: { "X-Throng-Request": "1", "Content-Type": "text/plain" }, body: ${JSON.stringify(body)} })
            .then(() => { document.title = "sent"; }, () => { document.title = "failed"; });
        </script>`);
      }
    });
    await withTimeout(new Promise((r) => evil.listen(0, "127.0.0.1", r)), 5_000, "the other origin's server");
    t.after(() => evil.close());
    const evilUrl = `http://127.0.0.1:${evil.address().port}`;
    assert.notEqual(evilUrl, session.server.url);

    await page.goto(`${evilUrl}/form`);
    await page.waitForURL(target);
    const answer = await page.locator("body").innerText();
    assert.match(answer, /request_header_missing|cross_site_request/, answer);
    await page.goto(`${evilUrl}/fetch`);
    await page.waitForFunction(() => document.title === "sent" || document.title === "failed");

    const token = await adminToken();
    const sites = await (await fetchWithin(target, { headers: { Authorization: `Bearer ${token}` } })).json();
    assert.ok(!sites.sites.some((s) => s.name === "Forged"), JSON.stringify(sites));
    // Both attempts are in the audit log, refused, under the session's name.
    const audit = await (await fetchWithin(`${session.server.url}/api/admin/audit?service=invites`, {
      headers: { Authorization: `Bearer ${token}` },
    })).json();
    const refused = audit.events.filter((e) => e.sub === "carol@example.org" && e.status === 403);
    assert.equal(refused.length, 2, JSON.stringify(audit.events));
  });
});
