// The pages in English, Slovak and Czech, on a desktop and on a 390 px
// phone: a page comes up in the browser's language (playwright's `locale`
// sets navigator.languages and Accept-Language), the language switcher
// changes it and the choice outlives a reload, days are written the
// language's way (never 2026-11-28, never the US way), an API error shows
// the catalogue's words for its code (and the server's own words for a
// code the catalogue lacks); the index and the 404 page too. The pages are
// one answer for every language (the choice is made in the browser), so
// caches need no Vary.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { REPO_ROOT, fetchWithin, launchBrowser, startThrong } from "./lib/server.mjs";

const TEST_MS_MAX = 90_000;
const SHOTS = join(REPO_ROOT, "target", "e2e-screenshots");
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1000, height: 900 };

const LANGS = {
  en: {
    locale: "en-US",
    format: "en-GB",
    switchTo: "sk",
    label: "Language",
    h1: "Book a vaccination or test appointment",
    places: "20 places match.",
    slotFull: /^This time slot is already taken/,
    manageCancel: "Cancel this registration",
    cancelled: /^Your registration is cancelled/,
    pages: "Pages",
    bookingLink: "Booking",
    notFound: "Page not found",
    staff: "A place's day",
    invite: { title: "Help us improve", yes: "Yes, open the survey", close: "Close", survey: "Demo survey" },
    comments: { region: "Course reviews", sortBy: "Sort by", signIn: "Sign in to write a review.", sort: "Most helpful" },
    vote: { review: "Review my vote", open: "Open", reviewTitle: "Check your vote before casting it", recorded: "Your vote is recorded", alreadyVoted: /^This voter has already voted/, found: ["On the board", "Not on the board yet"], summary: /^\d+ ballots? counted in all districts\.$/, live: "Live: updates as ballots are counted." },
  },
  sk: {
    locale: "sk-SK",
    format: "sk",
    switchTo: "cs",
    label: "Jazyk",
    h1: "Rezervácia termínu očkovania alebo testu",
    places: "Zodpovedá 20 miest.",
    slotFull: /^Tento termín je už obsadený/,
    manageCancel: "Zrušiť rezerváciu",
    cancelled: /^Vaša rezervácia je zrušená/,
    pages: "Stránky",
    bookingLink: "Rezervácia",
    notFound: "Stránka sa nenašla",
    staff: "Deň miesta",
    invite: { title: "Pomôžte nám zlepšiť sa", yes: "Áno, otvoriť dotazník", close: "Zavrieť", survey: "Ukážkový dotazník" },
    comments: { region: "Hodnotenia kurzu", sortBy: "Zoradiť podľa", signIn: "Ak chcete napísať hodnotenie, prihláste sa.", sort: "Najužitočnejšie" },
    vote: { review: "Skontrolovať hlas", open: "Otvorené", reviewTitle: "Pred odovzdaním hlas skontrolujte", recorded: "Váš hlas je zaznamenaný", alreadyVoted: /^Tento volič už hlasoval/, found: ["Je na tabuli", "Zatiaľ nie je na tabuli"], summary: /^Započítan\S+ \d+ hlasovac\S+ lístk?\S* vo všetkých obvodoch\.$/, live: "Naživo: aktualizuje sa so započítavaním hlasovacích lístkov." },
  },
  cs: {
    locale: "cs-CZ",
    format: "cs",
    switchTo: "en",
    label: "Jazyk",
    h1: "Rezervace termínu očkování nebo testu",
    places: "Odpovídá 20 míst.",
    slotFull: /^Tento termín je již obsazen/,
    manageCancel: "Zrušit rezervaci",
    cancelled: /^Vaše rezervace je zrušena/,
    pages: "Stránky",
    bookingLink: "Rezervace",
    notFound: "Stránka nenalezena",
    staff: "Den místa",
    invite: { title: "Pomozte nám se zlepšit", yes: "Ano, otevřít dotazník", close: "Zavřít", survey: "Ukázkový dotazník" },
    comments: { region: "Hodnocení kurzu", sortBy: "Seřadit podle", signIn: "Chcete-li napsat hodnocení, přihlaste se.", sort: "Nejužitečnější" },
    vote: { review: "Zkontrolovat hlas", open: "Otevřeno", reviewTitle: "Před odevzdáním hlas zkontrolujte", recorded: "Váš hlas je zaznamenán", alreadyVoted: /^Tento volič již hlasoval/, found: ["Je na tabuli", "Zatím není na tabuli"], summary: /^Sečten\S* \d+ hlasovac\S+ lístk?\S* ve všech obvodech\.$/, live: "Živě: aktualizuje se se sčítáním hlasovacích lístků." },
  },
};

let server;
// Ballots reach the board after one other is cast (the voting tests' setting).
before(async () => { server = await startThrong({ extraArgs: ["--voting-mix-ballots-min", "1"] }); });
after(async () => { await server?.stop(); });

/** A day (YYYY-MM-DD) as the pages write it in `format`'s language. */
function longDay(day, format) {
  const [y, m, d] = day.split("-").map(Number);
  return new Intl.DateTimeFormat(format, { weekday: "long", day: "numeric", month: "long", year: "numeric", timeZone: "UTC" }).format(new Date(Date.UTC(y, m - 1, d)));
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
  assert.equal(await select.isVisible(), true);
  const box = await select.boundingBox();
  assert.ok(box.height >= 44 && box.width >= 44, `the switcher is ${box.width}x${box.height} px`);
  return select;
}

const failOnce = (status, code, message) => async (route) => {
  if (route.request().method() !== "POST") return route.fallback();
  await route.fulfill({ status, headers: { "Content-Type": "application/json" }, body: JSON.stringify({ error: { code, message } }) });
};

let person = 0;

for (const [code, L] of Object.entries(LANGS)) {
  for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
    test(`${code} (${label}): booking in the browser's language, its dates and errors; the switcher's choice outlives a reload`, { timeout: TEST_MS_MAX }, async (t) => {
      const browser = await launchBrowser({ locale: L.locale, viewport });
      t.after(() => browser.close());
      const { page, errors } = browser;
      await withScreenshot(t, page, async () => {
        await page.goto(`${server.url}/booking/`);
        await page.waitForFunction((c) => document.documentElement.lang === c, code);
        assert.equal((await page.textContent("h1")).trim(), L.h1);
        await page.waitForFunction((text) => document.getElementById("place-count").textContent === text, L.places);
        await assertSwitcher(page, L.label);
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "the booking page");
        assert.deepEqual(errors, [], "the page ran cleanly");

        // A 409 with a code the catalogue knows: its words, not the server's.
        const free = page.locator("#slots button:not([disabled])").first();
        await free.waitFor();
        await free.click();
        const n = ++person;
        await page.fill("#name", `Ján Novák ${n}`);
        await page.fill("#nationalId", `900101-${String(7000 + n)}`);
        await page.fill("#phone", "+421 900 123 456");
        await page.fill("#email", `jan${n}@example.org`);
        await page.route("**/api/booking/registrations", failOnce(409, "slot_full", "server words for a full slot"));
        await page.click("#submit");
        await page.waitForFunction(() => document.getElementById("status").className === "error");
        const said = (await page.textContent("#status")).trim();
        assert.match(said, L.slotFull);
        assert.doesNotMatch(said, /server words/);
        await page.unroute("**/api/booking/registrations");

        // A code the catalogue lacks: the server's own words.
        await page.route("**/api/booking/registrations", failOnce(400, "not_in_any_catalogue", "Words only the server has."));
        await page.locator("#slots button:not([disabled])").first().click();
        await page.click("#submit");
        await page.waitForFunction(() => document.getElementById("status").textContent.includes("Words only the server has."));
        await page.unroute("**/api/booking/registrations");

        // Booked: the day in the language's words.
        await page.locator("#slots button:not([disabled])").first().click();
        await page.click("#submit");
        await page.locator("#confirmation").waitFor();
        const day = await page.getAttribute("#conf-day", "datetime");
        assert.match(day, /^\d{4}-\d\d-\d\d$/);
        const written = (await page.textContent("#conf-day")).trim();
        assert.equal(written, longDay(day, L.format));
        assert.doesNotMatch(written, /\d{4}-\d\d|[A-Z][a-z]+ \d{1,2}, \d{4}/, "neither ISO nor US style");
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "the confirmation");

        // The registration, opened from the confirmation, cancelled.
        await page.click("#conf-manage");
        await page.locator("#registration").waitFor();
        await page.waitForFunction((c) => document.documentElement.lang === c, code);
        assert.equal((await page.textContent("#r-day")).trim(), longDay(day, L.format));
        assert.equal((await page.textContent("#r-cancel")).trim(), L.manageCancel);
        await assertSwitcher(page, L.label);
        await page.click("#r-cancel");
        await page.click("#r-cancel-yes");
        await page.locator("#cancelled").waitFor();
        assert.match((await page.textContent("#cancelled")).trim(), L.cancelled);
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "the manage page");

        // Another language, chosen: at once, and still after a reload.
        const other = LANGS[L.switchTo];
        await page.goto(`${server.url}/booking/`);
        const select = await assertSwitcher(page, L.label);
        await select.selectOption(L.switchTo);
        await page.waitForFunction((c) => document.documentElement.lang === c, L.switchTo);
        assert.equal((await page.textContent("h1")).trim(), other.h1);
        await page.waitForFunction((text) => document.getElementById("place-count").textContent === text, other.places);
        await assertSwitcher(page, other.label);
        await page.reload();
        await page.waitForFunction((c) => document.documentElement.lang === c, L.switchTo);
        assert.equal((await page.textContent("h1")).trim(), other.h1);
        await page.waitForFunction((text) => document.getElementById("place-count").textContent === text, other.places);
        assert.equal(await (await assertSwitcher(page, other.label)).inputValue(), L.switchTo);
        // The month calendar in the chosen language's words.
        const title = (await page.textContent(".cal-title")).trim();
        const [y, m] = (await page.inputValue("#day")).split("-").map(Number);
        assert.equal(title, new Intl.DateTimeFormat(other.format, { month: "long", year: "numeric", timeZone: "UTC" }).format(new Date(Date.UTC(y, m - 1, 15))));
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "the booking page in another language");
      });
    });
  }

  test(`${code}: the index, the 404 page and the staff page in the browser's language, with the switcher`, { timeout: TEST_MS_MAX }, async (t) => {
    const browser = await launchBrowser({ locale: L.locale, viewport: PHONE });
    t.after(() => browser.close());
    const { page, errors } = browser;
    await withScreenshot(t, page, async () => {
      await page.goto(`${server.url}/`);
      await page.waitForFunction((c) => document.documentElement.lang === c, code);
      assert.equal((await page.locator("h2").first().textContent()).trim(), L.pages);
      assert.equal((await page.locator('a[href="/booking/"]').textContent()).trim(), L.bookingLink);
      await assertSwitcher(page, L.label);
      await assertNoSidewaysScroll(page, "the index");
      const res = await page.goto(`${server.url}/no/such/page`);
      assert.equal(res.status(), 404);
      await page.waitForFunction((c) => document.documentElement.lang === c, code);
      assert.equal((await page.textContent("h1")).trim(), L.notFound);
      await assertSwitcher(page, L.label);
      await assertNoSidewaysScroll(page, "the 404 page");
      // The staff page of a place's day too.
      await page.goto(`${server.url}/booking/staff/`);
      await page.waitForFunction((c) => document.documentElement.lang === c, code);
      assert.equal((await page.textContent("h1")).trim(), L.staff);
      await assertSwitcher(page, L.label);
      await assertNoSidewaysScroll(page, "the staff page");
      assert.deepEqual(errors.filter((e) => !/404/.test(e)), []);
    });
  });
}

for (const [code, L] of Object.entries(LANGS)) {
  for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
    test(`${code} (${label}): voting with its review step, "find my ballot" and the results in the browser's language`, { timeout: TEST_MS_MAX }, async (t) => {
      const browser = await launchBrowser({ locale: L.locale, viewport });
      t.after(() => browser.close());
      const { page } = browser;
      const V = L.vote;
      await withScreenshot(t, page, async () => {
        await page.goto(`${server.url}/voting/`);
        await page.waitForFunction((c) => document.documentElement.lang === c, code);
        await page.locator('#parties input[name="party"]').first().waitFor({ state: "attached" });
        assert.equal((await page.textContent("#vote")).trim(), V.review);
        await assertSwitcher(page, L.label);
        // The election's times written the language's way.
        const election = await (await fetchWithin(`${server.url}/api/voting/elections/1`)).json();
        const when = (iso) => new Intl.DateTimeFormat(L.format, { dateStyle: "medium", timeStyle: "short" }).format(new Date(iso));
        assert.equal((await page.textContent("#election-info")).trim(), `${V.open}: ${code === "en" ? "from" : "od"} ${when(election.opensAt)} ${code === "en" ? "to" : "do"} ${when(election.closesAt)}.`);
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "the vote page");

        // Review, then cast.
        await page.click("#demo-voter");
        await page.waitForFunction(() => document.getElementById("voter-id").value !== "");
        const voter = await page.inputValue("#voter-id");
        const token = await page.inputValue("#token");
        await page.locator('#parties input[name="party"]').first().check();
        await page.click("#vote");
        await page.locator("#review").waitFor();
        assert.equal((await page.textContent("#review-title")).trim(), V.reviewTitle);
        await page.click("#confirm");
        await page.locator("#receipt").waitFor();
        assert.equal((await page.textContent("#receipt-title")).trim(), V.recorded);
        const receiptLink = await page.getAttribute("#receipt-link", "href");

        // The same voter again: the API's already_voted in the language's words.
        await page.click("#again");
        await page.fill("#voter-id", voter);
        await page.fill("#token", token);
        await page.locator('#parties input[name="party"]').first().check();
        await page.click("#vote");
        await page.click("#confirm");
        await page.waitForFunction(() => document.getElementById("status").dataset.code === "already_voted");
        assert.match((await page.textContent("#status")).trim(), V.alreadyVoted);

        // Find my ballot: an answer in words.
        await page.goto(`${server.url}${receiptLink}`);
        await page.waitForFunction(() => ["counted", "waiting"].includes(document.getElementById("answer").dataset.state));
        assert.ok(V.found.includes((await page.textContent("#answer-title")).trim()), await page.textContent("#answer"));
        await assertSwitcher(page, L.label);
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "find my ballot");

        // The results: counts with plurals, live in the language's words.
        await page.goto(`${server.url}/voting/results`);
        await page.waitForFunction(() => document.getElementById("conn").dataset.state === "live");
        assert.equal((await page.textContent("#conn")).trim(), V.live);
        assert.match((await page.textContent("#summary")).trim(), V.summary);
        if (viewport === PHONE) await assertNoSidewaysScroll(page, "the results");
        const other = LANGS[L.switchTo];
        await (await assertSwitcher(page, L.label)).selectOption(L.switchTo);
        await page.waitForFunction((text) => document.getElementById("conn").textContent === text, other.vote.live);
        assert.match((await page.textContent("#summary")).trim(), other.vote.summary);
        await page.reload();
        await page.waitForFunction((text) => document.getElementById("conn").textContent === text, other.vote.live);
        assert.equal(await page.evaluate(() => document.documentElement.lang), L.switchTo);
      });
    });
  }
}

for (const [code, L] of Object.entries(LANGS)) {
  test(`${code}: the comments widget speaks its host page's language, else the browser's; dates and counts the language's way`, { timeout: TEST_MS_MAX }, async (t) => {
    // The browser prefers another language: the host page's <html lang> wins.
    const other = Object.entries(LANGS).find(([c]) => c !== code);
    const browser = await launchBrowser({ locale: other[1].locale, viewport: PHONE });
    t.after(() => browser.close());
    const { page } = browser;
    const C = L.comments;
    const host = (lang) => `<!doctype html><html${lang ? ` lang="${lang}"` : ""}><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,"><title>Course</title></head>` +
      `<body><h1>A course</h1><script src="${server.url}/widget/comments.js" data-course="1"></script></body></html>`;
    await page.route(`${server.url}/host-page/**`, (route) => route.fulfill({
      status: 200,
      headers: { "Content-Type": "text/html; charset=utf-8" },
      body: host(new URL(route.request().url()).searchParams.get("lang")),
    }));
    await withScreenshot(t, page, async () => {
      await page.goto(`${server.url}/host-page/?lang=${code}`);
      const region = page.locator("throng-comments [role=region]");
      await region.waitFor();
      assert.equal(await region.getAttribute("aria-label"), C.region);
      assert.equal(await region.getAttribute("lang"), code);
      await page.locator("[data-testid=signed-out]").waitFor();
      assert.equal((await page.textContent("[data-testid=signed-out]")).trim(), C.signIn);
      assert.equal(await page.locator("throng-comments select option[value=helpful]").textContent(), C.sort);
      assert.equal(await page.evaluate(() => document.documentElement.lang), code, "the host page's lang is left alone");
      assert.equal(await page.locator("#lang-select").count(), 0, "no switcher on a host's page");
      await assertNoSidewaysScroll(page, "the widget");
      // Without a lang on the host page: the browser's language.
      await page.goto(`${server.url}/host-page/`);
      await page.locator("[data-testid=signed-out]").waitFor();
      assert.equal(await page.locator("throng-comments [role=region]").getAttribute("lang"), other[0]);
      assert.equal((await page.textContent("[data-testid=signed-out]")).trim(), other[1].comments.signIn);
    });
  });
}

for (const [code, L] of Object.entries(LANGS)) {
  test(`${code}: the survey invitation speaks its host page's language (the site's default texts); the survey page the browser's`, { timeout: TEST_MS_MAX }, async (t) => {
    const [otherCode, other] = Object.entries(LANGS).find(([c]) => c !== code);
    const browser = await launchBrowser({ locale: other.locale, viewport: PHONE });
    t.after(() => browser.close());
    const { page, context } = browser;
    // A host page of the demo site (1) on throng's own origin, in `code`.
    await page.route(`${server.url}/host-invite/**`, (route) => route.fulfill({
      status: 200,
      headers: { "Content-Type": "text/html; charset=utf-8" },
      body: `<!doctype html><html lang="${code}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,"><title>Shop</title></head>` +
        `<body><h1>Shop</h1><script src="${server.url}/invite.js" data-site="1" async></script></body></html>`,
    }));
    await withScreenshot(t, page, async () => {
      await page.goto(`${server.url}/host-invite/`);
      const dialog = page.locator("[data-throng-invite] >> [role=dialog]");
      await dialog.waitFor({ state: "visible" });
      assert.equal(await dialog.getAttribute("lang"), code);
      assert.equal((await page.locator("[data-throng-invite] >> #throng-invite-title").textContent()).trim(), L.invite.title);
      assert.equal((await page.locator("[data-throng-invite] >> button.yes").textContent()).trim(), L.invite.yes);
      assert.equal(await page.locator("[data-throng-invite] >> button.x").getAttribute("aria-label"), L.invite.close);
      await assertNoSidewaysScroll(page, "the invitation");
      // Yes opens the survey in a new tab, in the browser's language.
      const opened = context.waitForEvent("page");
      await page.locator("[data-throng-invite] >> button.yes").click();
      const survey = await opened;
      await survey.waitForLoadState();
      await survey.waitForFunction((c) => document.documentElement.lang === c, otherCode);
      assert.equal((await survey.textContent("h1")).trim(), other.invite.survey);
      await assertSwitcher(survey, other.label);
    });
  });
}

test("one page for every language: the same answer whatever Accept-Language; catalogues cached by their hashed names", { timeout: TEST_MS_MAX }, async () => {
  const bodies = [];
  for (const accept of ["en", "sk-SK,sk;q=0.9", "cs"]) {
    const res = await fetchWithin(`${server.url}/booking/`, { headers: { "Accept-Language": accept } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("cache-control"), "no-cache");
    bodies.push(await res.text());
  }
  assert.equal(bodies[1], bodies[0]);
  assert.equal(bodies[2], bodies[0]);
  const script = /src="(\/assets\/i18n\.[0-9a-f]{10}\.js)"/.exec(bodies[0]);
  assert.ok(script, "the page names the language script by its hashed name");
  const js = await fetchWithin(`${server.url}${script[1]}`);
  assert.equal(js.headers.get("cache-control"), "public, max-age=31536000, immutable");
  const text = await js.text();
  for (const code of Object.keys(LANGS)) {
    const url = new RegExp(`"${code}":"(/assets/i18n/${code}\\.[0-9a-f]{10}\\.json)"`).exec(text);
    assert.ok(url, `${code}: its catalogue's hashed address`);
    const res = await fetchWithin(`${server.url}${url[1]}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("cache-control"), "public, max-age=31536000, immutable");
    const catalogue = await res.json();
    assert.equal(typeof catalogue["booking.book.title"], "string");
  }
});
