// A minimal sentin8-cron target in Node.js (20 or later), with node: modules only.
//
// It serves POST /v1/internal/schedules/run and accepts a call only when its
// Sentin8-Signature verifies: the signature with the published key the token names (kid),
// the issuer, the audience (this target's own origin), the expiry, the SHA-256 of the exact
// body, and that the token was not seen before. Anything else is answered 401 with the reason.
//
// Settings, from the environment:
//   LISTEN    host:port to listen on (default 127.0.0.1:9000; port 0 picks a free one)
//   ORIGIN    scheme://host[:port] the scheduler calls this target at, as in the schedule's
//             baseUrl (default http:// and the address listened on)
//   JWKS_URL  the scheduler's key set (default http://127.0.0.1:8080/.well-known/jwks.json)
//   ISSUER    the scheduler's signing issuer, its --signing-issuer (default sentin8-cron)

import { createServer } from "node:http";
import { createHash, createPublicKey, verify } from "node:crypto";

const RUN_PATH = "/v1/internal/schedules/run";
const LISTEN = process.env.LISTEN ?? "127.0.0.1:9000";
const JWKS_URL = process.env.JWKS_URL ?? "http://127.0.0.1:8080/.well-known/jwks.json";
const ISSUER = process.env.ISSUER ?? "sentin8-cron";
const MAX_BODY = 1024 * 1024;
let ORIGIN; // set once the address is bound

class Refused extends Error {}

const b64urlSha256 = (data) => createHash("sha256").update(data).digest("base64url");

// The scheduler's public keys by kid. Fetched on first use and again when a token names a key
// not seen yet (after a key rotation), at most every 30 seconds.
const keySet = { keys: new Map(), fetchedAt: -Infinity };

async function findKey(kid) {
  if (!keySet.keys.has(kid) && Date.now() - keySet.fetchedAt > 30_000) {
    keySet.fetchedAt = Date.now();
    let published;
    try {
      const response = await fetch(JWKS_URL, { signal: AbortSignal.timeout(5000) });
      if (!response.ok) throw new Error(`status ${response.status}`);
      published = (await response.json()).keys;
    } catch (error) {
      throw new Refused(`cannot fetch the key set (${error.message})`);
    }
    keySet.keys = new Map(published.filter((k) => k.kid).map((k) => [k.kid, k]));
  }
  return keySet.keys.get(kid);
}

// Verifies with the algorithm the key is published for, never the one the token names.
function checkSignature(jwk, signingInput, signature) {
  let ok = false;
  try {
    const key = createPublicKey({ key: jwk, format: "jwk" });
    if (jwk.alg === "EdDSA" && key.asymmetricKeyType === "ed25519") {
      ok = verify(null, signingInput, key, signature);
    } else if (jwk.alg === "ES256" && key.asymmetricKeyDetails?.namedCurve === "prime256v1") {
      // JWS carries r || s, which node calls ieee-p1363.
      ok = verify("sha256", signingInput, { key, dsaEncoding: "ieee-p1363" }, signature);
    }
  } catch {
    ok = false;
  }
  if (!ok) throw new Refused("bad signature");
}

// Replay protection: each token is accepted once, remembered until it expires. A token is
// known by its jti together with its body hash. sentin8-cron gives every call a jti of its
// own, so the hash adds nothing there; with a version whose jti was the call's
// Idempotency-Key (the same for every retry of a job), a retry still differs by its body (its
// attempt number), while a replayed token repeats both.
const seen = new Map(); // "jti body_sha256" -> exp

function firstTime(jti, bodyHash, exp) {
  const now = Date.now() / 1000;
  for (const [token, expiry] of seen) if (expiry <= now) seen.delete(token);
  const id = JSON.stringify([jti, bodyHash]);
  if (seen.has(id)) return false;
  seen.set(id, exp);
  return true;
}

// Returns the token's claims when the call may be accepted; throws Refused otherwise.
async function verifyCall(token, body) {
  if (!token) throw new Refused("no Sentin8-Signature header");
  const parts = token.split(".");
  let header, claims;
  try {
    if (parts.length !== 3) throw new Error("not three parts");
    header = JSON.parse(Buffer.from(parts[0], "base64url").toString());
    claims = JSON.parse(Buffer.from(parts[1], "base64url").toString());
    if (typeof header !== "object" || typeof claims !== "object" || !header || !claims) {
      throw new Error("not a JSON object");
    }
  } catch {
    throw new Refused("malformed token");
  }
  const jwk = await findKey(header.kid);
  if (!jwk) throw new Refused(`unknown key ${header.kid}`);
  if (header.alg !== jwk.alg) throw new Refused(`algorithm ${header.alg} is not the key's`);
  checkSignature(jwk, Buffer.from(`${parts[0]}.${parts[1]}`), Buffer.from(parts[2], "base64url"));
  if (claims.iss !== ISSUER) throw new Refused("wrong issuer");
  if (claims.aud !== ORIGIN) throw new Refused(`wrong audience (not ${ORIGIN})`);
  if (typeof claims.exp !== "number" || claims.exp <= Date.now() / 1000) {
    throw new Refused("expired");
  }
  if (claims.body_sha256 !== b64urlSha256(body)) {
    throw new Refused("body does not match body_sha256");
  }
  if (!firstTime(claims.jti, claims.body_sha256, claims.exp)) {
    throw new Refused("replayed token (jti seen before)");
  }
  return claims;
}

function answer(response, status, text, type = "text/plain; charset=utf-8") {
  response.writeHead(status, { "Content-Type": type, "Content-Length": Buffer.byteLength(text) });
  response.end(text);
}

async function handle(request, response) {
  if (request.method !== "POST" || request.url !== RUN_PATH) {
    return answer(response, 404, "not found");
  }
  const chunks = [];
  let size = 0;
  for await (const chunk of request) {
    size += chunk.length;
    if (size > MAX_BODY) return answer(response, 413, "body too large");
    chunks.push(chunk);
  }
  const body = Buffer.concat(chunks);
  let claims;
  try {
    claims = await verifyCall(request.headers["sentin8-signature"], body);
  } catch (error) {
    const why = error instanceof Refused ? error.message : "unreadable call";
    console.log(`401 ${why}`);
    return answer(response, 401, why);
  }
  // The work goes here. A retry of a job carries the same Idempotency-Key: do it once.
  // Continue the call's trace: an OpenTelemetry SDK reads `traceparent` with its W3C
  // propagator (propagation.extract(context.active(), request.headers)); its trace id is the job's.
  const trace = request.headers.traceparent ?? "-";
  console.log(
    `200 job ${claims.job_id} of schedule ${claims.schedule_id} (env ${claims.env_id}, trace ${trace}): ${body}`,
  );
  answer(response, 200, JSON.stringify({ ok: true }), "application/json");
}

const server = createServer((request, response) => {
  handle(request, response).catch(() => {
    if (!response.headersSent) answer(response, 401, "unreadable call");
  });
});
const at = LISTEN.lastIndexOf(":");
const host = LISTEN.slice(0, at).replace(/^\[|\]$/g, "");
server.listen(Number(LISTEN.slice(at + 1)), host, () => {
  const { port } = server.address();
  const address = `${LISTEN.slice(0, at)}:${port}`;
  ORIGIN = process.env.ORIGIN ?? `http://${address}`;
  console.log(`listening on http://${address}`);
});
