// rimthan with `--auth oidc` against a real OpenID provider: the certified `oidc-provider`
// package, started here on loopback, issuing JWT access tokens by the client-credentials grant
// (no browser) with the rimthan endpoint as their audience (RFC 8707) and an `org` claim.
// Alice and Bob belong to one organization, Carol to another. The provider's signing key is
// rotated in the middle of the run by restarting it with a new key published first.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync, randomUUID } from "node:crypto";
import { createServer } from "node:net";
import Provider from "oidc-provider";

import { httpClient, sdkDriver } from "./lib/sdk.mjs";
import { startHttpServer, tempDir } from "./lib/server.mjs";
import { GET_ACTIVE, RESEARCH, START, advance, hostFor, startArguments } from "./lib/session.mjs";

const SCOPE = "rimthan:workflow";
const PEOPLE = { alice: "lab-one", bob: "lab-one", carol: "lab-two" };

function signingKey() {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { ...privateKey.export({ format: "jwk" }), kid: randomUUID(), alg: "RS256", use: "sig" };
}

async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** oidc-provider on 127.0.0.1:port, signing with the first of `keys`. */
async function startProvider(port, keys) {
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: Object.keys(PEOPLE).map((id) => ({
      client_id: id,
      client_secret: `${id}-secret`,
      grant_types: ["client_credentials"],
      redirect_uris: [],
      response_types: [],
      scope: SCOPE,
    })),
    jwks: { keys },
    scopes: [SCOPE],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => ({
          scope: SCOPE,
          audience: resource,
          accessTokenFormat: "jwt",
          accessTokenTTL: 600,
          jwt: { sign: { alg: "RS256" } },
        }),
      },
    },
    extraTokenClaims: (_ctx, token) => ({ org: PEOPLE[token.clientId] }),
  });
  const server = provider.listen(port, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  return {
    issuer,
    stop: () => new Promise((resolve) => {
      server.closeAllConnections?.();
      server.close(resolve);
    }),
  };
}

/** An access token for `who`, by the client-credentials grant, for the rimthan endpoint. */
async function tokenFor(issuer, who, resource) {
  // Once more on a transport error: fetch may reuse a connection of a provider since restarted.
  const post = (init) => fetch(`${issuer}/token`, init).catch(() => fetch(`${issuer}/token`, init));
  const response = await post({
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from(`${who}:${who}-secret`).toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded",
    },
    body: new URLSearchParams({ grant_type: "client_credentials", scope: SCOPE, resource }),
  });
  const body = await response.json();
  assert.equal(response.status, 200, JSON.stringify(body));
  return body.access_token;
}

const kidOf = (jwt) => JSON.parse(Buffer.from(jwt.split(".")[0], "base64url")).kid;

describe("OpenID provider (oidc-provider) and --auth oidc", () => {
  let provider;
  let server;
  let port;
  const first = signingKey();
  const second = signingKey();

  before(async () => {
    port = await freePort();
    provider = await startProvider(port, [first]);
    // A trailing slash the provider's own issuer lacks: accepted, as operators write it.
    server = await startHttpServer(["--auth", "oidc", "--oidc-issuer", `${provider.issuer}/`]);
  });

  after(async () => {
    await server?.stop();
    await provider?.stop();
  });

  test("the protected-resource metadata names the provider as authorization server", async () => {
    const metadata = await (await fetch(`${server.base}/.well-known/oauth-protected-resource/mcp`)).json();
    assert.deepEqual(metadata.authorization_servers, [`${provider.issuer}/`]);
    assert.equal(metadata.resource, server.url);
  });

  test("two people of one organization share a session across a key rotation; a third is refused", async () => {
    const { dir: project, cleanup } = await tempDir("oidc-project");
    try {
      const aliceToken = await tokenFor(provider.issuer, "alice", server.url);
      assert.equal(kidOf(aliceToken), first.kid);
      const alice = sdkDriver(await httpClient(server.url, "legacy", { authorization: `Bearer ${aliceToken}` }));
      const host = hostFor(RESEARCH);
      const started = await alice.call(START, startArguments(RESEARCH, host));
      assert.equal(started.structured.status, "active", JSON.stringify(started.structured));
      let payload = await advance(alice, project, started.structured, RESEARCH, host);
      payload = await advance(alice, project, payload, RESEARCH, host);

      // Rotation: the provider now signs with a new key and still publishes the old one.
      await provider.stop();
      provider = await startProvider(port, [second, first]);
      const bobToken = await tokenFor(provider.issuer, "bob", server.url);
      assert.equal(kidOf(bobToken), second.kid, "the provider signs with the new key");

      // Bob's first call carries a key rimthan has not seen: it fetches the keys and accepts it.
      const bob = sdkDriver(await httpClient(server.url, "legacy", { authorization: `Bearer ${bobToken}` }));
      const resumed = await bob.call(GET_ACTIVE, { checkpoint: payload.checkpoint });
      assert.notEqual(resumed.isError, true, JSON.stringify(resumed.structured));
      assert.equal(resumed.structured.step.id, payload.step.id);
      // Alice's token, signed by the old key, keeps working while that key is published.
      const stillAlice = await alice.call(GET_ACTIVE, { checkpoint: payload.checkpoint });
      assert.notEqual(stillAlice.isError, true, JSON.stringify(stillAlice.structured));

      while (payload.status !== "completed") payload = await advance(bob, project, payload, RESEARCH, host);

      const carolToken = await tokenFor(provider.issuer, "carol", server.url);
      const carol = sdkDriver(await httpClient(server.url, "legacy", { authorization: `Bearer ${carolToken}` }));
      const refused = await carol.call(GET_ACTIVE, { checkpoint: payload.checkpoint });
      assert.equal(refused.isError, true);
      assert.deepEqual(refused.structured.failures.map((f) => f.code), ["session_access_denied"]);
    } finally {
      await cleanup();
    }
  });

  test("a token for another audience, or none, is refused with the reason and never echoed", async () => {
    const elsewhere = await tokenFor(provider.issuer, "alice", "https://other.example/mcp");
    for (const [authorization, description] of [
      [`Bearer ${elsewhere}`, "wrong audience"],
      ["Bearer not-a-jwt", null],
    ]) {
      const response = await fetch(server.url, {
        method: "POST",
        headers: { authorization, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
      assert.equal(response.status, 401);
      const challenge = response.headers.get("www-authenticate");
      assert.match(challenge, /error="invalid_token"/);
      if (description) assert.match(challenge, new RegExp(`error_description="${description}"`));
      assert.ok(!challenge.includes(elsewhere));
    }
  });
});

test("a provider whose discovery names another issuer keeps /readyz false and says why", async () => {
  const port = await freePort();
  const provider = await startProvider(port, [signingKey()]);
  const { spawn } = await import("node:child_process");
  const { rimthanBin } = await import("./lib/server.mjs");
  const listen = await freePort();
  // localhost is the same machine, but not the issuer the provider names.
  const child = spawn(rimthanBin(), ["serve", "--listen", `127.0.0.1:${listen}`, "--database-url", "sqlite::memory:",
    "--auth", "oidc", "--oidc-issuer", `http://localhost:${port}`], { stdio: ["ignore", "ignore", "ignore"] });
  try {
    let answer = "";
    for (let i = 0; i < 100 && !answer.includes("discovery document names issuer"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const response = await fetch(`http://127.0.0.1:${listen}/readyz`).catch(() => null);
      if (response) {
        assert.equal(response.status, 503);
        answer = await response.text();
      }
    }
    assert.match(answer, /identity provider not ready: the discovery document names issuer/);
  } finally {
    child.kill("SIGTERM");
    await provider.stop();
  }
});
