// The administrative pages in Slovak and Czech, on a desktop and on a
// 390 px phone: each page comes up in the browser's language (playwright's
// `locale`) with the language switcher, writes a day or a number the
// language's way, and shows an API error in the language's words (the
// error's code unchanged). English is the other tests' business: their
// wording is the English catalogue's.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { REPO_ROOT, binPath, fetchWithin, launchBrowser, run, startThrong } from "./lib/server.mjs";

const TEST_MS_MAX = 90_000;
const SHOTS = join(REPO_ROOT, "target", "e2e-screenshots");
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1100, height: 900 };

const LANGS = {
  sk: {
    locale: "sk-SK",
    format: "sk",
    label: "Jazyk",
    places: {
      title: "Miesta",
      count: /^Zodpoved\S+ \d+ miest\S*; zobrazené: \d+\.$/,
      badToken: "Tento token je neplatný alebo mu uplynula platnosť. Vložte platný token správcu.",
      closed: "zatvorené",
    },
    voting: {
      title: "Riadenie volieb",
      state: "otvorené",
      voters: /v zozname \d+ voli\S+; otvorené od /,
      badToken: "Token správcu je neplatný. Vytvorte nový príkazom throng token --role admin.",
    },
    moderate: {
      title: "Moderovanie komentárov",
      who: "neprihlásený",
      count: "Na posúdenie čaká 1 položka.",
      reports: "2 nahlásenia",
      badToken: "Tento token tu nie je platný; vložte nový.",
    },
    invites: {
      title: "Pozvánky do prieskumu",
      badToken: "Tento token tu nie je platný: vytvorte ho príkazom throng token --role admin.",
      chart: (from, to) => `Od ${from} do ${to}: `,
      edit: /^Upraviť /,
    },
    docs: {
      title: "Referenčná príručka API",
      tokens: "Ako získať token",
      search: "Hľadať operácie",
      count: /^\d+ operáci\S+\.$/,
      match: /^Zodpovedá \d+ z \d+ operáci\S+\.$/,
      needs: /^Vyžaduje token: /,
      failed: /^Dokument API sa nepodarilo načítať\. .*Skúste to znova po opätovnom načítaní stránky\.$/,
    },
  },
  cs: {
    locale: "cs-CZ",
    format: "cs",
    label: "Jazyk",
    places: {
      title: "Místa",
      count: /^Odpovíd\S+ \d+ míst\S*; zobrazeno: \d+\.$/,
      badToken: "Tento token je neplatný nebo mu vypršela platnost. Vložte platný token správce.",
      closed: "zavřeno",
    },
    voting: {
      title: "Řízení voleb",
      state: "otevřeno",
      voters: /v seznamu \d+ voli\S+; otevřeno od /,
      badToken: "Token správce je neplatný. Vytvořte nový příkazem throng token --role admin.",
    },
    moderate: {
      title: "Moderování komentářů",
      who: "nepřihlášen",
      count: "K posouzení čeká 1 položka.",
      reports: "2 nahlášení",
      badToken: "Tento token zde není platný; vložte nový.",
    },
    invites: {
      title: "Pozvánky do průzkumu",
      badToken: "Tento token zde není platný: vytvořte jej příkazem throng token --role admin.",
      chart: (from, to) => `Od ${from} do ${to}: `,
      edit: /^Upravit /,
    },
    docs: {
      title: "Referenční příručka API",
      tokens: "Jak získat token",
      search: "Hledat operace",
      count: /^\d+ operac\S*\.$/,
      match: /^Odpovídá \d+ z \d+ operac\S*\.$/,
      needs: /^Vyžaduje token: /,
      failed: /^Dokument API se nepodařilo načíst\. .*Zkuste to znovu po opětovném načtení stránky\.$/,
    },
  },
};

let server;
let adminToken = "";
before(async () => { server = await startThrong(); });
after(async () => { await server?.stop(); });

async function token() {
  if (adminToken) return adminToken;
  const out = await run(binPath("throng"), ["token", "--data-dir", server.dataDir, "--sub", "ops-lang", "--role", "admin"]);
  assert.equal(out.code, 0, out.stderr);
  adminToken = out.stdout.trim();
  return adminToken;
}

/** A day (YYYY-MM-DD) as the pages write it in `format`'s language. */
function longDay(day, format) {
  const [y, m, d] = day.split("-").map(Number);
  return new Intl.DateTimeFormat(format, { weekday: "long", day: "numeric", month: "long", year: "numeric", timeZone: "UTC" }).format(new Date(Date.UTC(y, m - 1, d)));
}

function inDays(n) {
  return new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10);
}

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

async function assertNoSidewaysScroll(page, what) {
  const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  assert.ok(scroll <= inner, `${what}: the page is ${scroll} px wide in a ${inner} px viewport`);
}

/** The switcher: a labelled select, at least 44 px each way. */
async function assertSwitcher(page, label) {
  const select = page.getByLabel(label, { exact: true });
  assert.equal(await select.count(), 1, `one control labelled ${label}`);
  assert.equal(await select.evaluate((el) => el.tagName), "SELECT");
  const box = await select.boundingBox();
  assert.ok(box.height >= 44 && box.width >= 44, `the switcher is ${box.width}x${box.height} px`);
}

/** A page in `code` on `viewport`: its language set, its switcher there. */
async function openIn(t, code, viewport, path) {
  const browser = await launchBrowser({ locale: LANGS[code].locale, viewport });
  t.after(() => browser.close());
  const { page } = browser;
  await page.goto(`${server.url}${path}`);
  await page.waitForFunction((c) => document.documentElement.lang === c, code);
  await assertSwitcher(page, LANGS[code].label);
  return browser;
}

let dayOffset = 20;

for (const [code, L] of Object.entries(LANGS)) {
  for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
    test(`${code} (${label}): the places admin page in the language, its days and an API error in its words`, { timeout: TEST_MS_MAX }, async (t) => {
      const { page, errors } = await openIn(t, code, viewport, "/booking/admin/");
      const P = L.places;
      await withScreenshot(t, page, async () => {
        assert.equal((await page.textContent("h1")).trim(), P.title);
        await page.locator("#found li").first().waitFor();
        assert.match((await page.textContent("#found-count")).trim(), P.count);
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "the places list");

        // A token the server refuses (401): the page's words for it.
        await page.fill("#a-token", "not-a-token");
        await page.click("#extend");
        await page.locator("#a-token-error").waitFor({ state: "visible" });
        assert.equal((await page.textContent("#a-token-error")).trim(), P.badToken);

        // A closed day, written the language's way.
        await page.fill("#a-token", await token());
        await page.locator("#found li button").first().click();
        await page.locator("#days-section").waitFor({ state: "visible" });
        const day = inDays(dayOffset++);
        await page.fill("#d-day", day);
        await page.fill("#d-hours", "");
        await page.click("#day-save");
        const item = page.locator(`#days li[data-day="${day}"]`);
        await item.waitFor();
        assert.match((await item.textContent()).trim(), new RegExp(`^${longDay(day, L.format)}: ${P.closed}`));
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "a place's days");
        // Back to the week's hours, so the place is as it was.
        await item.locator("button").click();
        await item.waitFor({ state: "detached" });
        assert.deepEqual(errors.filter((e) => !/Failed to load resource/.test(e)), [], "the page ran cleanly");
      });
    });
  }
}

for (const [code, L] of Object.entries(LANGS)) {
  for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
    test(`${code} (${label}): the election authority's page in the language, its times and an API error in its words`, { timeout: TEST_MS_MAX }, async (t) => {
      const { page, errors } = await openIn(t, code, viewport, "/voting/admin");
      const V = L.voting;
      await withScreenshot(t, page, async () => {
        assert.equal((await page.textContent("h1")).trim(), V.title);
        // The demo election, open, its times written the language's way.
        await page.waitForFunction(() => document.getElementById("election-state").dataset.state === "open");
        const election = await (await fetchWithin(`${server.url}/api/voting/elections/1`)).json();
        const when = (iso) => new Intl.DateTimeFormat(L.format, { dateStyle: "medium", timeStyle: "short" }).format(new Date(iso));
        const state = (await page.textContent("#election-state")).trim();
        assert.ok(state.startsWith(`${election.name}: ${V.state}; `), state);
        assert.match(state, V.voters);
        assert.ok(state.includes(when(election.opensAt)) && state.includes(when(election.closesAt)), state);
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "the authority's page");

        // A step with a token the server refuses: the code kept, the words the language's.
        await page.fill("#admin-token", "not-a-token");
        await page.click('#steps button[data-step="suspend"]');
        await page.waitForFunction(() => document.getElementById("status").dataset.code === "invalid_token");
        assert.equal((await page.textContent("#status")).trim(), V.badToken);
        assert.equal(await page.getAttribute("#election-state", "data-state"), "open", "nothing changed");
        assert.deepEqual(errors.filter((e) => !/Failed to load resource/.test(e)), [], "the page ran cleanly");
      });
    });
  }
}

for (const [code, L] of Object.entries(LANGS)) {
  for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
    test(`${code} (${label}): comments moderation in the language, a comment's time and an API error in its words`, { timeout: TEST_MS_MAX }, async (t) => {
      const { page, errors } = await openIn(t, code, viewport, "/comments/moderate");
      const M = L.moderate;
      await withScreenshot(t, page, async () => {
        assert.equal((await page.textContent("h1")).trim(), M.title);
        await page.waitForFunction((text) => document.getElementById("who").textContent === text, M.who);

        // A queue of one reported review: its counts and time the language's way.
        const createdDate = "2026-03-05T14:07:00Z";
        await page.route("**/api/comments/moderation/queue**", (route) => route.fulfill({
          status: 200,
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify([{ commentId: 77, courseId: 1, parentId: null, userId: 5, displayName: "Eva", status: "visible", reportsOpen: 2, authorBanned: false,
            createdDate, note: null, rating: 4, title: "Dobrý kurz", remarks: "Text", reportReasons: ["Reklama", "Mimo tému"] }]),
        }));
        await page.fill("#token", "a-pasted-token");
        await page.click("#use-token");
        const item = page.locator("[data-testid=queue-item]");
        await item.waitFor();
        assert.equal((await page.textContent("#status")).trim(), M.count);
        assert.equal((await item.locator(".badge.reported").textContent()).trim(), M.reports);
        const when = new Intl.DateTimeFormat(L.format, { day: "numeric", month: "long", year: "numeric", hour: "2-digit", minute: "2-digit" }).format(new Date(createdDate));
        assert.equal((await item.locator(".when").textContent()).trim(), when);
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "the queue");
        await page.unroute("**/api/comments/moderation/queue**");

        // The server refuses the token: its code's words in the language.
        await page.click("#refresh");
        await page.locator("[data-testid=queue-error]").waitFor();
        assert.equal((await page.textContent("[data-testid=queue-error]")).trim(), M.badToken);
        assert.deepEqual(errors.filter((e) => !/Failed to load resource/.test(e)), [], "the page ran cleanly");
      });
    });
  }
}

for (const [code, L] of Object.entries(LANGS)) {
  for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
    test(`${code} (${label}): the invites admin page in the language, its results' days and an API error in its words`, { timeout: TEST_MS_MAX }, async (t) => {
      const { page, errors } = await openIn(t, code, viewport, "/invites/admin");
      const I = L.invites;
      await withScreenshot(t, page, async () => {
        assert.equal((await page.textContent("h1")).trim(), I.title);
        // A token the server refuses: its code's words in the language.
        await page.fill("#token", "not-a-token");
        await page.click("#token-form button[type=submit]");
        await page.waitForFunction(() => document.getElementById("token-err").textContent !== "");
        assert.equal((await page.textContent("#token-err")).trim(), I.badToken);

        // Signed in: the sites, then one site's results over days written the language's way.
        await page.fill("#token", await token());
        await page.click("#token-form button[type=submit]");
        const site = page.locator("#sites li").first();
        await site.waitFor();
        assert.match((await site.locator("button").first().getAttribute("aria-label")), I.edit);
        await site.locator("button").nth(2).click();
        await page.locator("#chart-box svg").waitFor();
        const from = await page.inputValue("#r-from"), to = await page.inputValue("#r-to");
        const said = await page.getAttribute("#chart-box svg", "aria-label");
        assert.ok(said.startsWith(I.chart(longDay(from, L.format), longDay(to, L.format))), said);
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "the invites admin page");
        assert.deepEqual(errors.filter((e) => !/Failed to load resource/.test(e)), [], "the page ran cleanly");
      });
    });
  }
}

for (const [code, L] of Object.entries(LANGS)) {
  for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
    test(`${code} (${label}): the API reference's own words in the language, its counts, and a failed load in its words`, { timeout: TEST_MS_MAX }, async (t) => {
      const browser = await launchBrowser({ locale: L.locale, viewport });
      t.after(() => browser.close());
      const { page } = browser;
      const D = L.docs;
      await withScreenshot(t, page, async () => {
        // The document cannot be fetched: said in the language.
        await page.route("**/openapi.json", (route) => route.abort());
        await page.goto(`${server.url}/docs/`);
        await page.waitForFunction(() => document.getElementById("state").getAttribute("role") === "alert");
        assert.match((await page.textContent("#state")).trim(), D.failed);
        await page.unroute("**/openapi.json");

        await page.reload();
        await page.waitForFunction((c) => document.documentElement.lang === c, code);
        await page.waitForFunction(() => document.body.dataset.ready === "1");
        await assertSwitcher(page, L.label);
        assert.equal((await page.textContent("h1")).trim(), D.title);
        assert.equal((await page.textContent("#tokens-h")).trim(), D.tokens);
        assert.equal((await page.textContent("label[for=filter]")).trim(), D.search);
        assert.match((await page.textContent("#filter-count")).trim(), D.count);
        assert.match((await page.locator("#op-get-api-booking-admin-stats p.auth").textContent()).trim(), D.needs);
        // The operations' own texts stay the document's (English).
        await page.fill("#filter", "attendance");
        assert.match((await page.textContent("#filter-count")).trim(), D.match);
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "the API reference");
      });
    });
  }
}
