// Shared machinery for the page tests: start and stop a throng server on a
// free port with a fresh data folder, launch Debian's Chromium through
// playwright-core, and run commands with a time limit. Every wait here is
// bounded, so a broken server or browser fails a test instead of hanging it.

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before } from "node:test";
import { chromium } from "playwright-core";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const TARGET_DIR = process.env.CARGO_TARGET_DIR
  ? resolve(REPO_ROOT, process.env.CARGO_TARGET_DIR)
  : join(REPO_ROOT, "target");
export const CHROMIUM_PATH = process.env.THRONG_E2E_CHROMIUM || "/usr/bin/chromium";

// Flags that keep Chromium off the network: without them it tries to reach
// Google services at start and the sandboxed machines refuse it.
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const SERVER_START_MS_MAX = 30_000;
const SERVER_STOP_MS_MAX = 5_000;
const BROWSER_LAUNCH_MS_MAX = 30_000;
/// Default for every Playwright action and wait in a test.
export const PAGE_WAIT_MS_MAX = 15_000;
const LOG_CHARS_MAX = 16_000;

/** Path of a workspace binary in target/debug (e.g. "throng", "throng-load"). */
export function binPath(name) {
  return join(TARGET_DIR, "debug", name);
}

/** A fresh temporary folder; the caller removes it (or uses `removeDir`). */
export function tempDir(prefix) {
  return mkdtempSync(join(tmpdir(), `throng-e2e-${prefix}-`));
}

export function removeDir(dir) {
  if (dir) rmSync(dir, { recursive: true, force: true });
}

/** Keeps the last LOG_CHARS_MAX characters written to a stream, for failure messages. */
function tailBuffer() {
  let text = "";
  return {
    push(chunk) {
      text += chunk;
      if (text.length > LOG_CHARS_MAX) text = text.slice(-LOG_CHARS_MAX);
    },
    get text() {
      return text;
    },
  };
}

/** Rejects with a message naming `what` if `promise` does not settle within `ms`. */
export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Starts `throng serve --demo` (without `--demo` when `demo` is false) on
 * 127.0.0.1:0 with a fresh data folder and resolves once it prints
 * `throng listening on http://ADDR`.
 * Returns { url, addr, dataDir, process, log(), stop() }.
 */
export async function startThrong({ extraArgs = [], env = {}, startMsMax = SERVER_START_MS_MAX, demo = true, prepare = null } = {}) {
  const bin = process.env.THRONG_BIN || binPath("throng");
  if (!existsSync(bin)) {
    throw new Error(`${bin} is missing: build it with 'cargo build -p throng' (tests-e2e/run.sh does)`);
  }
  const dataDir = tempDir("data");
  // `prepare(dataDir, bin)` readies the store first (a seed), for a server
  // without the demo data.
  if (prepare) {
    try {
      await prepare(dataDir, bin);
    } catch (e) {
      removeDir(dataDir);
      throw e;
    }
  }
  const args = ["serve", ...(demo ? ["--demo"] : []), "--listen", "127.0.0.1:0", "--data-dir", dataDir, ...extraArgs];
  const child = spawn(bin, args, {
    cwd: dataDir,
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG || "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stdout = tailBuffer();
  const stderr = tailBuffer();
  child.stderr.setEncoding("utf8").on("data", (c) => stderr.push(c));
  const exited = new Promise((res) => child.once("exit", (code, signal) => res({ code, signal })));

  const listening = new Promise((res, reject) => {
    let pending = "";
    child.stdout.setEncoding("utf8").on("data", (chunk) => {
      stdout.push(chunk);
      if (pending === null) return;
      pending += chunk;
      const m = pending.match(/throng listening on (http:\/\/(\S+))\r?\n/);
      if (m) {
        pending = null;
        res({ url: m[1], addr: m[2] });
      }
    });
    child.once("error", reject);
    exited.then(({ code, signal }) =>
      reject(new Error(`throng exited before listening (code ${code}, signal ${signal})\n${stderr.text}`)),
    );
  });

  let stopped = null;
  const stop = () => {
    stopped ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        try {
          await withTimeout(exited, SERVER_STOP_MS_MAX, "throng to stop after SIGTERM");
        } catch {
          child.kill("SIGKILL");
          await withTimeout(exited, SERVER_STOP_MS_MAX, "throng to stop after SIGKILL").catch(() => {});
        }
      }
      removeDir(dataDir);
    })();
    return stopped;
  };

  try {
    const { url, addr } = await withTimeout(listening, startMsMax, `'${bin} ${args.join(" ")}' to print its address`);
    return {
      url,
      addr,
      dataDir,
      process: child,
      log: () => `--- throng stdout ---\n${stdout.text}\n--- throng stderr ---\n${stderr.text}`,
      stop,
    };
  } catch (e) {
    await stop();
    e.message += `\n${stderr.text}`;
    throw e;
  }
}

/**
 * Launches Debian's Chromium headless with a fresh profile (`extraArgs`:
 * more command-line flags; `locale`: the browser's language, e.g. "sk-SK").
 * Returns
 * { context, page, errors, close() }; `errors` collects uncaught page errors
 * and console errors so a test can assert the page ran cleanly.
 */
export async function launchBrowser({ launchMsMax = BROWSER_LAUNCH_MS_MAX, viewport = { width: 1000, height: 900 }, extraArgs = [], locale = undefined } = {}) {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`${CHROMIUM_PATH} is missing: apt-get install -y chromium chromium-driver`);
  }
  const profileDir = tempDir("chromium");
  let context;
  try {
    context = await chromium.launchPersistentContext(profileDir, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: [...CHROMIUM_ARGS, ...extraArgs],
      timeout: launchMsMax,
      viewport,
      // The browser's languages (navigator.languages and Accept-Language).
      ...(locale ? { locale } : {}),
    });
  } catch (e) {
    removeDir(profileDir);
    throw e;
  }
  context.setDefaultTimeout(PAGE_WAIT_MS_MAX);
  context.setDefaultNavigationTimeout(PAGE_WAIT_MS_MAX);
  const page = context.pages()[0] ?? (await context.newPage());
  const errors = watchErrors(page);
  let closed = null;
  const close = () => {
    closed ??= withTimeout(context.close(), SERVER_STOP_MS_MAX, "Chromium to close")
      .catch(() => context.browser()?.close())
      .finally(() => removeDir(profileDir));
    return closed;
  };
  return { context, page, errors, close };
}

/** Collects uncaught exceptions and console errors of a page. */
export function watchErrors(page) {
  const errors = [];
  page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console.error: ${m.text()}`);
  });
  return errors;
}

/**
 * Runs a command to completion with a time limit. Resolves
 * { code, signal, stdout, stderr }; never rejects on a non-zero exit
 * (the caller asserts), but does reject on a timeout after killing it.
 */
export function run(cmd, args, { cwd = REPO_ROOT, env = {}, timeoutMs = 60_000 } = {}) {
  return new Promise((res, reject) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    const stdout = tailBuffer();
    const stderr = tailBuffer();
    child.stdout.setEncoding("utf8").on("data", (c) => stdout.push(c));
    child.stderr.setEncoding("utf8").on("data", (c) => stderr.push(c));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`timed out after ${timeoutMs} ms: ${cmd} ${args.join(" ")}\n${stderr.text}`));
    }, timeoutMs);
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      res({ code, signal, stdout: stdout.text, stderr: stderr.text });
    });
  });
}

/** fetch with a time limit (AbortSignal), for API checks next to the page. */
export function fetchWithin(url, options = {}, timeoutMs = PAGE_WAIT_MS_MAX) {
  return fetch(url, { ...options, signal: AbortSignal.timeout(timeoutMs) });
}

/** Today as YYYY-MM-DD in UTC: the demo data starts at the server's UTC day. */
export function todayUtc() {
  return new Date().toISOString().slice(0, 10);
}

/**
 * One throng server and one browser for a whole test file (started before
 * its first test, stopped after its last). `session.server` and
 * `session.browser` are set once started; `session.newPage(t)` opens a tab
 * for test `t`, closed when the test ends, with its page errors collected.
 */
export function sharedSession(options = {}) {
  const session = {
    server: undefined,
    browser: undefined,
    async newPage(t) {
      const page = await session.browser.context.newPage();
      const errors = watchErrors(page);
      t.after(() => page.close());
      return { page, errors };
    },
  };
  before(async () => {
    session.server = await startThrong(options);
    session.browser = await launchBrowser();
  });
  after(async () => {
    await session.browser?.close();
    await session.server?.stop();
  });
  return session;
}
