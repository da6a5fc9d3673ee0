// The comments widget at /comments/ in headless Chromium against a real
// throng server (demo data: 200 users, 20 courses, 10 comments each, half
// of them with the provider's reply). Each test uses its own course. Tests
// marked with both viewports run on a 1000 px desktop and a 390 px phone;
// a failing one leaves a screenshot (its path in the error).

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { fetchWithin, sharedSession } from "./lib/server.mjs";

const TEST_MS_MAX = 60_000;
const DESKTOP = { name: "desktop", width: 1000, height: 900 };
const PHONE = { name: "390 px", width: 390, height: 844 };
const SHOTS_DIR = process.env.THRONG_E2E_SHOTS || join(tmpdir(), "throng-e2e-shots");
/** The demo page signs in as this user (`seed::DEMO_USER_ID`). */
const DEMO_USER = 150;

const session = sharedSession();
const newPage = session.newPage;

/**
 * A test on each of `viewports`: `fn({ page, errors, vp })`. On failure the
 * page's screenshot is written and named in the error.
 */
function pageTest(name, fn, viewports = [DESKTOP, PHONE]) {
  for (const vp of viewports) {
    test(`${name} (${vp.name})`, { timeout: TEST_MS_MAX }, async (t) => {
      const { page, errors } = await newPage(t);
      await page.setViewportSize({ width: vp.width, height: vp.height });
      try {
        await fn({ page, errors, vp, t });
      } catch (e) {
        mkdirSync(SHOTS_DIR, { recursive: true });
        const shot = join(SHOTS_DIR, `comments-${name}-${vp.name}`.replace(/[^a-z0-9-]+/gi, "_") + ".png");
        await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
        e.message += `\nscreenshot: ${shot}` + (errors.length ? `\npage errors: ${errors.join("\n")}` : "");
        throw e;
      }
    });
  }
}

async function courseTitle(course) {
  return (await (await fetchWithin(`${session.server.url}/api/courses/${course}/rating`)).json()).courseTitle;
}

/** Opens the demo page on `course` and waits until the widget shows it. */
async function openCourse(page, course) {
  await page.goto(`${session.server.url}/comments/`);
  await page.locator("[data-testid=course-title]", { hasText: await courseTitle(1) }).waitFor();
  if (course !== 1) {
    await page.fill("#course", String(course));
    await page.click("#show");
    await page.locator("[data-testid=course-title]", { hasText: await courseTitle(course) }).waitFor();
  }
  await page.locator("[data-testid=block]").first().waitFor();
}

/** No horizontal scrolling: the page is no wider than the viewport. */
async function assertNoHorizontalScroll(page) {
  const { scroll, inner } = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
  }));
  assert.ok(scroll <= inner, `page is ${scroll} px wide in a ${inner} px viewport`);
}

/** Picks `n` stars in the star picker `testid` (none is chosen before). */
async function pickStars(scope, testid, n) {
  await scope.locator(`[data-testid=${testid}] label[data-stars="${n}"]`).click();
}

async function ratingOf(course) {
  return (await fetchWithin(`${session.server.url}/api/courses/${course}/rating`, { cache: "no-store" })).json();
}

async function ownBlock(course, user) {
  const r = await fetchWithin(`${session.server.url}/api/comments?courseId=${course}&userId=${user}&sizeThread=20`,
    { headers: { "cache-control": "no-cache" } });
  return (await r.json())[0] ?? null;
}

test("shows the rating and the comments with replies, and pages", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await openCourse(page, 2);
  const rating = await (await fetchWithin(`${session.server.url}/api/courses/2/rating`)).json();
  assert.match(await page.textContent("[data-testid=rating-summary]"), new RegExp(`from ${rating.count} rating`));
  const api = await (await fetchWithin(`${session.server.url}/api/comments?courseId=2&size=5&sizeThread=5`)).json();
  const blocks = page.locator("[data-testid=block]");
  assert.equal(await blocks.count(), api.length, "one block per user, page size 5");
  assert.equal((await blocks.first().locator(".tc-name").first().textContent()).trim(), api[0].displayName);
  const replies = api.flatMap((b) => b.thread.flatMap((c) => c.reply));
  assert.equal(await page.locator("[data-testid=reply]").count(), replies.length, "replies are shown");
  assert.equal(await page.locator("[data-testid=signed-out]").count(), 1, "no form when signed out");

  // Paging: older, then newer again.
  assert.equal(await page.locator("[data-testid=newer]").isDisabled(), true);
  await page.click("[data-testid=older]");
  await page.locator("text=page 2").waitFor();
  const page2 = await (await fetchWithin(`${session.server.url}/api/comments?courseId=2&skip=5&size=5&sizeThread=5`)).json();
  assert.equal(await blocks.count(), page2.length);
  await page.click("[data-testid=newer]");
  await page.locator("text=page 1").waitFor();
  assert.deepEqual(errors, []);
});

test("a signed-in user posts a review; it shows at once; bad input shows the error", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await openCourse(page, 3);
  const before = await (await fetchWithin(`${session.server.url}/api/courses/3/rating`)).json();
  const hadRating = (await ownBlock(3, DEMO_USER)) !== null;
  await page.click("#demo-user");
  await page.locator("[data-testid=form]").waitFor();

  // No stars and no title: people's words beside each field, nothing is written.
  assert.equal(await page.locator("[data-testid=form-rating] input:checked").count(), 0, "no stars chosen by default");
  await page.fill("[data-testid=form-remarks]", "No title here.");
  await page.click("[data-testid=form-send]");
  await page.locator("[data-testid=form-title-error]").filter({ hasText: "Give your review a title." }).waitFor();
  await page.locator("[data-testid=form-rating-error]").filter({ hasText: "Choose a rating" }).waitFor();
  assert.equal(await page.locator("[data-testid=form-remarks-error]").textContent(), "");
  const still = await (await fetchWithin(`${session.server.url}/api/courses/3/rating`)).json();
  assert.equal(still.count, before.count);

  await pickStars(page, "form-rating", 4);
  await page.fill("[data-testid=form-title]", "Browser <b>review</b>");
  await page.fill("[data-testid=form-remarks]", "Written in Chromium.\nSecond line.");
  await page.click("[data-testid=form-send]");
  await page.locator("[data-testid=message]").filter({ hasText: "posted" }).waitFor();
  const first = page.locator("[data-testid=block]").first();
  assert.equal((await first.locator(".tc-title").first().textContent()).trim(), "Browser <b>review</b>", "text, not HTML");
  assert.equal(await page.locator("[data-testid=block] b").count(), 0);
  const after = await (await fetchWithin(`${session.server.url}/api/courses/3/rating`)).json();
  // One rating per user: a user who had rated counts once still.
  assert.equal(after.count, before.count + (hadRating ? 0 : 1));
  assert.ok(after.stars[3] >= 1);
  assert.match(await page.textContent("[data-testid=rating-summary]"), new RegExp(`from ${after.count} rating`));
  assert.deepEqual(errors, []);
});

test("the course's provider replies and edits the reply", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await openCourse(page, 4);
  await page.click("#demo-provider");
  await page.locator("[data-testid=reply-send]").first().waitFor();
  // A comment without a reply yet: its box is empty, ready to write one.
  const comment = page.locator("[data-testid=comment]").filter({ has: page.locator("[data-testid=reply-send]") }).first();
  assert.equal(await comment.locator("[data-testid=reply-remarks]").inputValue(), "");
  const id = await comment.getAttribute("data-comment-id");
  await comment.locator("[data-testid=reply-remarks]").fill("Thank you from the provider.");
  await comment.locator("[data-testid=reply-send]").click();
  await page.locator("[data-testid=message]").filter({ hasText: /Reply (posted|edited)/ }).waitFor();
  const same = page.locator(`[data-testid=comment][data-comment-id="${id}"]`);
  await same.locator("[data-testid=reply]").filter({ hasText: "Thank you from the provider." }).waitFor();

  // The reply shows once: no edit box repeats it until Edit is clicked.
  assert.equal(await same.locator("textarea").count(), 0, "no edit box before Edit");
  assert.equal(await same.getByText("Thank you from the provider.", { exact: true }).count(), 1, "the reply shows once");
  await same.locator("[data-testid=reply-edit]").click();
  assert.equal(await same.locator("[data-testid=reply-remarks]").inputValue(), "Thank you from the provider.",
    "the edit box is prefilled when editing");
  await same.locator("[data-testid=reply-remarks]").fill("Edited reply.");
  await same.locator("[data-testid=reply-send]").click();
  await page.locator("[data-testid=message]").filter({ hasText: "Reply edited." }).waitFor();
  await page.locator(`[data-testid=comment][data-comment-id="${id}"] [data-testid=reply]`)
    .filter({ hasText: "Edited reply." }).waitFor();
  assert.equal(await page.locator(`[data-testid=comment][data-comment-id="${id}"] [data-testid=reply]`).count(), 1,
    "one reply per comment");
  assert.deepEqual(errors, []);
});

pageTest("the header names the course; titles agree with stars; each date shows once", async ({ page, errors }) => {
  const NEGATIVE = /^(Disappointing|Confusing|Frustrating|Uneven|Mediocre|Dry)\b/;
  const POSITIVE = /^(Great|Excellent|Outstanding|Inspiring|Solid|Useful|Practical|Well-paced)\b/;
  let checked = 0;
  for (const course of [1, 5, 9]) {
    await openCourse(page, course);
    const title = await courseTitle(course);
    assert.equal((await page.textContent("[data-testid=course-title]")).trim(), `Reviews · ${title}`);
    assert.doesNotMatch(await page.textContent("[data-testid=course-title]"), /course \d+$/);
    for (const c of await page.locator("[data-testid=comment]").all()) {
      const stars = Number((await c.locator("[data-testid=comment-stars]").getAttribute("aria-label")).split(" ")[0]);
      const t = (await c.locator(".tc-title").first().textContent()).trim();
      if (stars <= 2) assert.doesNotMatch(t, POSITIVE, `"${t}" at ${stars} stars (course ${course})`);
      if (stars >= 4) assert.doesNotMatch(t, NEGATIVE, `"${t}" at ${stars} stars (course ${course})`);
      checked++;
    }
    // One date per comment and per reply: none repeated in the block's header.
    for (const b of await page.locator("[data-testid=block]").all()) {
      const items = (await b.locator("[data-testid=comment]").count()) + (await b.locator("[data-testid=reply]").count());
      assert.equal(await b.locator(".tc-date").count(), items, "each date once");
    }
  }
  assert.ok(checked >= 10, `${checked} comments checked`);
  await assertNoHorizontalScroll(page);
  assert.deepEqual(errors, []);
});

pageTest("a user posts, edits and deletes their own review from the page", async ({ page, errors, vp }) => {
  const course = vp === PHONE ? 7 : 6;
  await openCourse(page, course);
  await page.click("#demo-user");
  await page.locator("[data-testid=form]").waitFor();
  await assertNoHorizontalScroll(page);
  const before = await ratingOf(course);
  const hadBlock = await ownBlock(course, DEMO_USER);

  await pickStars(page, "form-rating", 5);
  await page.fill("[data-testid=form-title]", "Loved it");
  await page.fill("[data-testid=form-remarks]", "Posted from the page.");
  await page.click("[data-testid=form-send]");
  await page.locator("[data-testid=message]").filter({ hasText: "posted" }).waitFor();
  const mine = page.locator("[data-testid=comment]").filter({ hasText: "Loved it" });
  assert.equal(await mine.count(), 1);
  const posted = await ratingOf(course);
  assert.equal(posted.count, before.count + (hadBlock ? 0 : 1), "one rating per user");
  // Other users' reviews have no Edit or Delete.
  const others = await page.locator("[data-testid=comment]").filter({ hasNot: page.locator("[data-testid=own-edit]") }).count();
  assert.ok(others >= 1, "others' reviews are not editable");
  await assertNoHorizontalScroll(page);

  // Edit: 5 stars to 2, new title; the rating follows, the count does not.
  await mine.locator("[data-testid=own-edit]").click();
  assert.equal(await page.locator("[data-testid=edit-rating] input:checked").getAttribute("value"), "5",
    "the edit form starts from the review's own stars");
  await pickStars(page, "edit-rating", 2);
  await page.fill("[data-testid=edit-title]", "Second thoughts");
  await page.click("[data-testid=edit-save]");
  await page.locator("[data-testid=message]").filter({ hasText: "updated" }).waitFor();
  const edited = page.locator("[data-testid=comment]").filter({ hasText: "Second thoughts" });
  assert.equal(await edited.locator("[data-testid=comment-stars]").getAttribute("aria-label"), "2 of 5 stars");
  const after = await ratingOf(course);
  assert.equal(after.count, posted.count);
  assert.equal(after.stars[1], posted.stars[1] + 1);
  assert.equal(after.stars[4], posted.stars[4] - 1);
  assert.match(await page.textContent("[data-testid=rating-summary]"), new RegExp(`${after.average.toFixed(2)} out of 5 from ${after.count} rating`));
  assert.equal((await ownBlock(course, DEMO_USER)).lastTitle, "Second thoughts");

  // Delete: asked once more, then gone; the rating is as before posting.
  await edited.locator("[data-testid=own-delete]").click();
  await edited.locator("[data-testid=own-delete-confirm]").click();
  await page.locator("[data-testid=message]").filter({ hasText: "deleted" }).waitFor();
  assert.equal(await page.locator("[data-testid=comment]").filter({ hasText: "Second thoughts" }).count(), 0);
  const gone = await ratingOf(course);
  assert.equal(gone.count, before.count);
  assert.deepEqual(gone.stars, before.stars);
  await assertNoHorizontalScroll(page);
  assert.deepEqual(errors, []);
});

/**
 * A page of another origin (a second server on loopback, another port)
 * that embeds the widget with `body`. Resolves its URL; the server closes
 * when the test ends.
 */
async function hostPage(t, page, course, body) {
  const host = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(`<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1"></head>
      <body><h1>A course site</h1>${body}</body></html>`);
  });
  await new Promise((ok) => host.listen(0, "127.0.0.1", ok));
  t.after(() => new Promise((ok) => { host.closeAllConnections(); host.close(ok); }));
  await page.goto(`http://127.0.0.1:${host.address().port}/course/${course}`);
}

async function demoUserToken() {
  const r = await fetchWithin(`${session.server.url}/api/comments/demo-token?role=user`);
  return (await r.json()).token;
}

pageTest("a host page hands the widget its user's token; the user posts", async ({ page, errors, vp, t }) => {
  const course = vp === PHONE ? 11 : 10;
  const token = await demoUserToken();
  // data-token in the tag.
  await hostPage(t, page, course,
    `<script src="${session.server.url}/widget/comments.js" data-course="${course}" data-token="${token}"></script>`);
  await page.locator("[data-testid=form]").waitFor();
  assert.equal(await page.locator("[data-testid=signed-out]").count(), 0);
  await pickStars(page, "form-rating", 4);
  await page.fill("[data-testid=form-title]", "From the host page");
  await page.fill("[data-testid=form-remarks]", "Signed in by the course site.");
  await page.click("[data-testid=form-send]");
  await page.locator("[data-testid=comment]").filter({ hasText: "From the host page" }).waitFor();
  assert.equal((await ownBlock(course, DEMO_USER)).lastTitle, "From the host page");
  await assertNoHorizontalScroll(page);

  // setToken from the host's own script, after the widget loaded.
  await hostPage(t, page, course,
    `<script src="${session.server.url}/widget/comments.js" data-course="${course}"></script>`);
  await page.locator("[data-testid=signed-out]").waitFor();
  await page.evaluate((t) => window.throngComments.setToken(t), token);
  await page.locator("[data-testid=form]").waitFor();
  await page.locator("[data-testid=comment]").filter({ hasText: "From the host page" })
    .locator("[data-testid=own-edit]").waitFor();
  assert.deepEqual(errors, []);
});
