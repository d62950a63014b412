#!/usr/bin/env python3
"""A minimal sentin8-cron target in Python.

It serves POST /v1/internal/schedules/run and accepts a call only when its Sentin8-Signature
verifies: the signature with the published key the token names (kid), the issuer, the
audience (this target's own origin), the expiry, the SHA-256 of the exact body, and that the
token was not seen before. Anything else is answered 401 with the reason.

Settings, from the environment:
  LISTEN    host:port to listen on (default 127.0.0.1:9000; port 0 picks a free one)
  ORIGIN    scheme://host[:port] the scheduler calls this target at, as in the schedule's
            baseUrl (default http:// and the address listened on)
  JWKS_URL  the scheduler's key set (default http://127.0.0.1:8080/.well-known/jwks.json)
  ISSUER    the scheduler's signing issuer, its --signing-issuer (default sentin8-cron)

Needs the `cryptography` package (requirements.txt, or Debian's python3-cryptography).
"""

import base64
import hashlib
import json
import os
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

RUN_PATH = "/v1/internal/schedules/run"
LISTEN = os.environ.get("LISTEN", "127.0.0.1:9000")
JWKS_URL = os.environ.get("JWKS_URL", "http://127.0.0.1:8080/.well-known/jwks.json")
ISSUER = os.environ.get("ISSUER", "sentin8-cron")
MAX_BODY = 1024 * 1024
ORIGIN = None  # set once the address is bound


class Refused(Exception):
    """A call answered 401; the message says why."""


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url_sha256(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


class KeySet:
    """The scheduler's public keys by kid. Fetched on first use and again when a token names a
    key not seen yet (after a key rotation), at most every 30 seconds."""

    def __init__(self, url):
        self.url = url
        self.keys = {}
        self.fetched_at = None
        self.lock = threading.Lock()

    def find(self, kid):
        with self.lock:
            stale = self.fetched_at is None or time.monotonic() - self.fetched_at > 30
            if kid not in self.keys and stale:
                self.fetched_at = time.monotonic()
                try:
                    with urllib.request.urlopen(self.url, timeout=5) as response:
                        published = json.load(response)["keys"]
                except Exception as error:
                    raise Refused(f"cannot fetch the key set ({error})") from error
                self.keys = {key["kid"]: key for key in published if "kid" in key}
            return self.keys.get(kid)


def check_signature(jwk, signing_input, signature):
    """Verifies with the algorithm the key is published for, never the one the token names."""
    try:
        if jwk.get("alg") == "EdDSA" and jwk.get("crv") == "Ed25519":
            key = Ed25519PublicKey.from_public_bytes(b64url_decode(jwk["x"]))
            key.verify(signature, signing_input)
        elif jwk.get("alg") == "ES256" and jwk.get("crv") == "P-256" and len(signature) == 64:
            x, y = (int.from_bytes(b64url_decode(jwk[c]), "big") for c in ("x", "y"))
            key = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
            # JWS carries r || s; the library wants them DER-encoded.
            r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
            key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(hashes.SHA256()))
        else:
            raise Refused("bad signature (unsupported key or signature)")
    except (InvalidSignature, ValueError) as error:
        raise Refused("bad signature") from error


class SeenTokens:
    """Replay protection: each token is accepted once, remembered until it expires.

    A token is known by its jti together with its body hash. sentin8-cron gives every call a
    jti of its own, so the hash adds nothing there; with a version whose jti was the call's
    Idempotency-Key (the same for every retry of a job), a retry still differs by its body
    (its attempt number), while a replayed token repeats both."""

    def __init__(self):
        self.expiries = {}
        self.lock = threading.Lock()

    def first_time(self, jti, body_hash, exp):
        now = time.time()
        with self.lock:
            self.expiries = {k: e for k, e in self.expiries.items() if e > now}
            if (jti, body_hash) in self.expiries:
                return False
            self.expiries[(jti, body_hash)] = exp
            return True


KEYS = KeySet(JWKS_URL)
SEEN = SeenTokens()


def verify_call(token, body):
    """Returns the token's claims when the call may be accepted; raises Refused otherwise."""
    if not token:
        raise Refused("no Sentin8-Signature header")
    try:
        header_b64, claims_b64, signature_b64 = token.split(".")
        header = json.loads(b64url_decode(header_b64))
        claims = json.loads(b64url_decode(claims_b64))
        signature = b64url_decode(signature_b64)
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise ValueError("not a JSON object")
    except ValueError as error:
        raise Refused("malformed token") from error
    jwk = KEYS.find(header.get("kid"))
    if jwk is None:
        raise Refused(f"unknown key {header.get('kid')}")
    if header.get("alg") != jwk.get("alg"):
        raise Refused(f"algorithm {header.get('alg')} is not the key's")
    check_signature(jwk, f"{header_b64}.{claims_b64}".encode(), signature)
    if claims.get("iss") != ISSUER:
        raise Refused("wrong issuer")
    if claims.get("aud") != ORIGIN:
        raise Refused(f"wrong audience (not {ORIGIN})")
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or exp <= time.time():
        raise Refused("expired")
    if claims.get("body_sha256") != b64url_sha256(body):
        raise Refused("body does not match body_sha256")
    if not SEEN.first_time(claims.get("jti"), claims["body_sha256"], exp):
        raise Refused("replayed token (jti seen before)")
    return claims


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != RUN_PATH:
            return self.answer(404, "not found")
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            return self.answer(413, "body missing or too large")
        body = self.rfile.read(length)
        try:
            claims = verify_call(self.headers.get("Sentin8-Signature"), body)
        except Refused as why:
            print(f"401 {why}", flush=True)
            return self.answer(401, str(why))
        except Exception as error:  # never a 500 for a call we cannot read
            print(f"401 unreadable call ({error!r})", flush=True)
            return self.answer(401, "unreadable call")
        # The work goes here. A retry of a job carries the same Idempotency-Key: do it once.
        # Continue the call's trace: an OpenTelemetry SDK reads `traceparent` with its W3C
        # propagator (opentelemetry.propagate.extract(self.headers)); its trace id is the job's.
        trace = self.headers.get("traceparent", "-")
        print(
            f"200 job {claims.get('job_id')} of schedule {claims.get('schedule_id')} "
            f"(env {claims.get('env_id')}, trace {trace}): {body.decode('utf-8', 'replace')}",
            flush=True,
        )
        self.answer(200, json.dumps({"ok": True}), "application/json")

    def answer(self, status, text, content_type="text/plain; charset=utf-8"):
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass  # one line per call is printed above


def main():
    global ORIGIN
    host, _, port = LISTEN.rpartition(":")
    server = ThreadingHTTPServer((host.strip("[]"), int(port)), Handler)
    address = f"{host}:{server.server_address[1]}"
    ORIGIN = os.environ.get("ORIGIN", f"http://{address}")
    print(f"listening on http://{address}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
