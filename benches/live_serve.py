"""What the Python benches share: a real `serve` on loopback (embedded SQLite, or a fresh
PostgreSQL database migrated as the owner and served as the service role), with tokens
checked against a shared secret and calls signed, and HS256 tokens for it.

    with LiveServe(bin, "sqlite", port, target_allow="http://127.0.0.1:9") as serve:
        token = serve.token([env_id])
"""

import base64
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ADMIN_URL = os.environ.get(
    "SENTIN8_CRON_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)


def hs256_token(secret, sub, envs, scope="sentin8:cron:write", ttl=3600):
    """An HS256 token with `scope` for `envs`."""

    def b64(raw):
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    now = int(time.time())
    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = b64(
        json.dumps(
            {"sub": sub, "scope": scope, "envs": envs, "iat": now, "exp": now + ttl}
        ).encode()
    )
    signature = hmac.new(secret.encode(), f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return f"{header}.{claims}.{b64(signature)}"


def percentile(values, share):
    """The nearest-rank `share` quantile of `values` (NaN for none)."""
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(len(values) * share))]


def serve_arguments(parser, port):
    """The options every bench over a live `serve` takes: the binary, the store, the port."""
    parser.add_argument("--bin", default="target/release/sentin8-cron")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--port", type=int, default=port)


class LiveServe:
    """`serve` started on enter, healthy, and stopped (its database dropped) on exit."""

    def __init__(self, binary, backend, port, target_allow, database_name="s8c_bench"):
        self.binary = binary
        self.backend = backend
        self.port = port
        self.target_allow = target_allow
        self.database_name = database_name
        self.secret = base64.b64encode(os.urandom(48)).decode()
        self.base = f"http://127.0.0.1:{port}"
        self.workdir = None
        self.proc = None
        self.log = None

    def token(self, envs, sub="bench"):
        return hs256_token(self.secret, sub, envs)

    def __enter__(self):
        self.workdir = tempfile.mkdtemp(prefix="s8c-bench-")
        key = os.path.join(self.workdir, "signing.pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key], check=True)
        os.chmod(key, 0o600)
        if self.backend == "postgres":
            host = ADMIN_URL.split("@", 1)[1].split("/", 1)[0]
            name = self.database_name
            subprocess.run(
                ["psql", "-q", ADMIN_URL, "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)",
                 "-c", f"CREATE DATABASE {name}"],
                check=True,
            )
            subprocess.run(
                [self.binary, "migrate", "--database-url", f"postgres://postgres@{host}/{name}"],
                check=True, stdout=subprocess.DEVNULL,
            )
            database = f"postgres://sentin8_cron_service@{host}/{name}?sslmode=disable"
        else:
            database = f"sqlite://{self.workdir}/bench.db"
        env = dict(
            os.environ,
            SENTIN8_CRON_JWT_HS256_SECRET=self.secret,
            SENTIN8_CRON_SIGNING_KEY_FILE=key,
            SENTIN8_CRON_TARGET_ALLOW=self.target_allow,
            RUST_LOG="warn",
        )
        self.log = open(os.path.join(self.workdir, "serve.log"), "wb")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}",
             "--database-url", database],
            env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        self._wait_healthy()
        return self

    def _wait_healthy(self):
        for _ in range(150):
            if self.proc.poll() is not None:
                self.__exit__(None, None, None)
                sys.exit(f"serve exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"{self.base}/v1/health", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        self.__exit__(None, None, None)
        sys.exit("serve did not become healthy")

    def __exit__(self, *_):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()
        if self.log is not None:
            self.log.close()
        if self.backend == "postgres":
            subprocess.run(
                ["psql", "-q", ADMIN_URL, "-c",
                 f"DROP DATABASE IF EXISTS {self.database_name} WITH (FORCE)"],
                stdout=subprocess.DEVNULL,
            )
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return False
