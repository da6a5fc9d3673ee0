// The admin console's "Sign in with your organisation" in headless Chromium:
// the test plays the identity provider on loopback (discovery, key set, an
// authorization endpoint that signs the person in at once and sends the
// browser back with a code, a token endpoint that checks the code and the
// PKCE verifier and answers an RS256 ID token), and a throng server names
// it with --oidc-issuer and --oidc-client-id. The button on /admin/ signs
// in and the console shows who with the mapped role; a refusal at the
// provider is a page in words with a link to try again. Desktop and a
// 390 px phone.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { createHash, generateKeyPairSync, randomUUID, sign } from "node:crypto";

import { launchBrowser, startThrong, withTimeout } from "./lib/server.mjs";

const TEST_MS_MAX = 90_000;
const CLIENT_ID = "throng-console";
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1100, height: 900 };

const b64url = (buf) => Buffer.from(buf).toString("base64url");

/** The fake provider: `deny` makes its authorization endpoint refuse. */
async function startProvider() {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = { ...publicKey.export({ format: "jwk" }), kid: "e2e", use: "sig", alg: "RS256" };
  const codes = new Map();
  const state = { deny: false, issuer: "" };
  const idToken = (claims) => {
    const head = b64url(JSON.stringify({ alg: "RS256", typ: "JWT", kid: "e2e" }));
    const body = b64url(JSON.stringify(claims));
    const sig = sign("sha256", Buffer.from(`${head}.${body}`), privateKey);
    return `${head}.${body}.${b64url(sig)}`;
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url, state.issuer);
    const json = (status, value) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(value));
    };
    if (url.pathname.endsWith("/.well-known/openid-configuration")) {
      return json(200, {
        issuer: state.issuer, jwks_uri: `${state.issuer}/certs`,
        authorization_endpoint: `${state.issuer}/auth`, token_endpoint: `${state.issuer}/token`,
      });
    }
    if (url.pathname.endsWith("/certs")) return json(200, { keys: [jwk] });
    if (url.pathname.endsWith("/auth")) {
      const q = url.searchParams;
      const back = new URL(q.get("redirect_uri"));
      back.searchParams.set("state", q.get("state"));
      if (state.deny) {
        back.searchParams.set("error", "access_denied");
        back.searchParams.set("error_description", "The user denied the request");
      } else {
        const code = randomUUID();
        codes.set(code, { challenge: q.get("code_challenge"), nonce: q.get("nonce"), redirect: q.get("redirect_uri") });
        back.searchParams.set("code", code);
      }
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }
    if (url.pathname.endsWith("/token") && req.method === "POST") {
      let text = "";
      req.setEncoding("utf8").on("data", (c) => (text += c)).on("end", () => {
        const f = new URLSearchParams(text);
        const grant = codes.get(f.get("code"));
        codes.delete(f.get("code"));
        const challenge = b64url(createHash("sha256").update(f.get("code_verifier") || "").digest());
        if (!grant || grant.challenge !== challenge || f.get("client_id") !== CLIENT_ID || f.get("redirect_uri") !== grant.redirect) {
          return json(400, { error: "invalid_grant", error_description: "PKCE verification failed" });
        }
        const now = Math.floor(Date.now() / 1000);
        json(200, {
          token_type: "Bearer", access_token: "opaque",
          id_token: idToken({
            iss: state.issuer, aud: CLIENT_ID, sub: "alice", iat: now, exp: now + 300, nonce: grant.nonce,
            email: "alice@example.org", realm_access: { roles: ["city-admins"] },
          }),
        });
      });
      return;
    }
    json(404, { error: "not_found" });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  state.issuer = `http://127.0.0.1:${server.address().port}/realms/city`;
  return { state, stop: () => new Promise((ok) => server.close(ok)) };
}

for (const [label, viewport] of [["desktop", DESKTOP], ["390 px", PHONE]]) {
  test(`"Sign in with your organisation" signs in through the provider (${label})`, { timeout: TEST_MS_MAX }, async () => {
    const provider = await startProvider();
    const server = await startThrong({
      demo: false,
      extraArgs: [
        "--oidc-issuer", provider.state.issuer, "--oidc-client-id", CLIENT_ID,
        "--token-claims", JSON.stringify({ "role-claim": "realm_access.roles", roles: { "city-admins": "admin" } }),
      ],
    });
    const browser = await launchBrowser({ viewport });
    try {
      const { page, errors } = browser;
      await page.goto(`${server.url}/admin/`);
      const button = page.getByRole("link", { name: "Sign in with your organisation" });
      await button.waitFor();
      const box = await button.boundingBox();
      assert.ok(box.height >= 44, `the button is ${box.height} px tall`);
      await button.click();
      await page.waitForURL(`${server.url}/admin/`);
      await page.locator("#who", { hasText: "Signed in as alice (admin)" }).waitFor();
      assert.equal(await page.evaluate(() => document.cookie), "", "no cookie is readable by script");
      await page.locator("#audit li", { hasText: "/admin/oidc/callback" }).first().waitFor();

      // Signed out, a refusal at the provider is said in words.
      await page.getByRole("button", { name: "Sign out" }).click();
      await page.locator("#signed-out").waitFor();
      provider.state.deny = true;
      await page.getByRole("link", { name: "Sign in with your organisation" }).click();
      const alert = page.getByRole("alert");
      await alert.waitFor();
      assert.match(await alert.innerText(), /access was denied/);
      provider.state.deny = false;
      await page.getByRole("link", { name: "Try signing in again" }).click();
      await page.locator("#who", { hasText: "Signed in as alice (admin)" }).waitFor();
      assert.deepEqual(errors.filter((e) => !/status of 403/.test(e)), []);
    } finally {
      await withTimeout(browser.close(), 15_000, "the browser to close").catch(() => {});
      await server.stop();
      await provider.stop();
    }
  });
}
