// The comments widget at /comments/ in headless Chromium against a real
// throng server (demo data: 200 users, 20 courses, 10 comments each, half
// of them with the provider's reply). Each test uses its own course.

import { test } from "node:test";
import assert from "node:assert/strict";

import { fetchWithin, sharedSession } from "./lib/server.mjs";

const TEST_MS_MAX = 60_000;

const session = sharedSession();
const newPage = session.newPage;

/** Opens the demo page on `course` and waits until the widget shows it. */
async function openCourse(page, course) {
  await page.goto(`${session.server.url}/comments/`);
  await page.locator(".throng-comments h3", { hasText: /· course 1$/ }).waitFor();
  if (course !== 1) {
    await page.fill("#course", String(course));
    await page.click("#show");
    await page.locator(".throng-comments h3", { hasText: new RegExp(`· course ${course}$`) }).waitFor();
  }
  await page.locator("[data-testid=block]").first().waitFor();
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
  await page.click("#demo-user");
  await page.locator("[data-testid=form]").waitFor();

  // Empty title: the server's message is shown, nothing is written.
  await page.fill("[data-testid=form-remarks]", "No title here.");
  await page.click("[data-testid=form-send]");
  await page.locator("[data-testid=form-error]").filter({ hasText: "title" }).waitFor();
  const still = await (await fetchWithin(`${session.server.url}/api/courses/3/rating`)).json();
  assert.equal(still.count, before.count);

  await page.selectOption("[data-testid=form-rating]", "4");
  await page.fill("[data-testid=form-title]", "Browser <b>review</b>");
  await page.fill("[data-testid=form-remarks]", "Written in Chromium.\nSecond line.");
  await page.click("[data-testid=form-send]");
  await page.locator("[data-testid=message]").filter({ hasText: "posted" }).waitFor();
  const first = page.locator("[data-testid=block]").first();
  assert.equal((await first.locator(".tc-title").first().textContent()).trim(), "Browser <b>review</b>", "text, not HTML");
  assert.equal(await page.locator("[data-testid=block] b").count(), 0);
  const after = await (await fetchWithin(`${session.server.url}/api/courses/3/rating`)).json();
  assert.equal(after.count, before.count + 1);
  assert.equal(after.stars[3], before.stars[3] + 1);
  assert.match(await page.textContent("[data-testid=rating-summary]"), new RegExp(`from ${after.count} rating`));
  // The browser logs the deliberate 422; nothing else may fail.
  assert.deepEqual(errors.filter((e) => !e.includes("status of 422")), []);
});

test("the course's provider replies and edits the reply", { timeout: TEST_MS_MAX }, async (t) => {
  const { page, errors } = await newPage(t);
  await openCourse(page, 4);
  await page.click("#demo-provider");
  const comment = page.locator("[data-testid=comment]").first();
  await comment.locator("[data-testid=reply-send]").waitFor();
  const id = await comment.getAttribute("data-comment-id");
  await comment.locator("[data-testid=reply-remarks]").fill("Thank you from the provider.");
  await comment.locator("[data-testid=reply-send]").click();
  await page.locator("[data-testid=message]").filter({ hasText: /Reply (posted|edited)/ }).waitFor();
  const same = page.locator(`[data-testid=comment][data-comment-id="${id}"]`);
  await same.locator("[data-testid=reply]").filter({ hasText: "Thank you from the provider." }).waitFor();

  await same.locator("[data-testid=reply-remarks]").fill("Edited reply.");
  await same.locator("[data-testid=reply-send]").click();
  await page.locator("[data-testid=message]").filter({ hasText: "Reply edited." }).waitFor();
  await page.locator(`[data-testid=comment][data-comment-id="${id}"] [data-testid=reply]`)
    .filter({ hasText: "Edited reply." }).waitFor();
  assert.equal(await page.locator(`[data-testid=comment][data-comment-id="${id}"] [data-testid=reply]`).count(), 1,
    "one reply per comment");
  assert.deepEqual(errors, []);
});
