#!/usr/bin/env python3
"""One tenant's backfill flood against a real `serve`, and what another tenant still gets.

Tenant A holds SCHEDULES_A `allow_all` schedules and, for the whole flood, keeps CONCURRENT
backfill requests of 1,000 occurrences each in flight (one token), as fast as they are
answered: the environment's cap on waiting jobs refuses the excess with 409, and the backlog
drains through a local target that answers every call after TARGET_MS.

Tenant B, meanwhile, triggers one of its five schedules in turn once a second and lists its schedules ten times a
second. Reported: how long after its trigger's answer each of B's calls reached the target,
B's list p50/p99 during the flood against the same before it (quiet), and, on SQLite, how
many health probes (one every 0.5 s) did not answer 200 while A's backlog drained.

Run (after `cargo build --release`):
    python3 benches/backfill_flood.py                    # embedded SQLite
    python3 benches/backfill_flood.py --backend postgres # PostgreSQL on 127.0.0.1:5432
Options: --bin PATH, --seconds (flood), --quiet-seconds, --target-ms, --concurrent.
"""

import argparse
import base64
import http.server
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_serve import LiveServe, percentile, serve_arguments  # noqa: E402



class Target:
    """A local target: answers every call after a delay and notes when B's calls arrive."""

    def __init__(self, delay):
        self.delay = delay
        self.watched = None
        self.arrivals = []
        self.calls = 0
        self.lock = threading.Lock()
        target = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                arrived = time.monotonic()
                seen = body + str(self.headers).encode()
                with target.lock:
                    target.calls += 1
                    watched = target.watched
                if watched and any(w.encode() in seen for w in watched):
                    with target.lock:
                        target.arrivals.append(arrived)
                elif watched:
                    # The signature's claims carry the schedule id too (base64url JSON).
                    sig = self.headers.get("Sentin8-Signature", "")
                    parts = sig.split(".")
                    if len(parts) == 3:
                        padded = parts[1] + "=" * (-len(parts[1]) % 4)
                        try:
                            claims = base64.urlsafe_b64decode(padded)
                        except ValueError:
                            claims = b""
                        if any(w.encode() in claims for w in watched):
                            with target.lock:
                                target.arrivals.append(arrived)
                time.sleep(target.delay)
                reply = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *_):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def request(method, url, tok=None, body=None, timeout=30):
    """(status, parsed body or None, seconds)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if tok:
        req.add_header("Authorization", f"Bearer {tok}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as err:
        raw = err.read()
        status = err.code
    except (OSError, urllib.error.URLError):
        return None, None, time.monotonic() - started
    took = time.monotonic() - started
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    return status, parsed, took


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    serve_arguments(parser, port=18092)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--quiet-seconds", type=float, default=10.0)
    parser.add_argument("--target-ms", type=float, default=20.0)
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--schedules-a", type=int, default=4)
    args = parser.parse_args()

    target = Target(args.target_ms / 1000.0)
    env_a, env_b = str(uuid.uuid4()), str(uuid.uuid4())
    base_url = f"http://127.0.0.1:{target.port}"
    serve = LiveServe(args.bin, args.backend, args.port, base_url,
                      database_name="s8c_bench_backfill")
    token_a, token_b = serve.token([env_a], "tenant-a"), serve.token([env_b], "tenant-b")
    api = serve.base
    with serve:
        def create(env_id, tok, name, cron):
            status, body, _ = request(
                "POST", f"{api}/v1/schedules?target_env_id={env_id}", tok,
                {"domain": "bench", "schedule_type": name, "cron": cron, "overlap": "allow_all",
                 "target_config": {"baseUrl": base_url}},
            )
            if status != 201:
                sys.exit(f"create {name}: {status} {body}")
            return body["id"]

        a_ids = [create(env_a, token_a, f"a{i}", "* * * * *") for i in range(args.schedules_a)]
        # B triggers its schedules in turn, so each trigger finds its schedule's last job ended
        # (a trigger is refused while one is open) and measures only how soon a call starts.
        b_ids = [create(env_b, token_b, f"b{i}", "0 0 1 1 *") for i in range(5)]
        target.watched = set(b_ids)
        stop = threading.Event()
        list_url = f"{api}/v1/schedules?target_env_id={env_b}"

        def b_lists(until, out):
            while time.monotonic() < until:
                tick = time.monotonic()
                status, _, took = request("GET", list_url, token_b)
                out.append(took if status == 200 else float("inf"))
                time.sleep(max(0.0, 0.1 - (time.monotonic() - tick)))

        def b_triggers(until, out):
            turn = 0
            while time.monotonic() < until:
                tick = time.monotonic()
                b_id = b_ids[turn % len(b_ids)]
                turn += 1
                arrived_before = len(target.arrivals)
                status, body, _ = request(
                    "POST", f"{api}/v1/schedules/{b_id}/trigger?target_env_id={env_b}", token_b
                )
                answered = time.monotonic()
                if status not in (200, 201, 202):
                    print(f"B's trigger answered {status}: {body}", file=sys.stderr)
                    out.append(float("inf"))
                else:
                    # Until its call arrives (bounded by the next trigger plus a margin).
                    deadline = answered + 10.0
                    while len(target.arrivals) == arrived_before and time.monotonic() < deadline:
                        time.sleep(0.005)
                    if len(target.arrivals) > arrived_before:
                        out.append(target.arrivals[arrived_before] - answered)
                    else:
                        print("B's triggered call did not arrive within 10 s", file=sys.stderr)
                        out.append(float("inf"))
                time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))

        def health(until, out):
            while time.monotonic() < until:
                status, _, _ = request("GET", f"{api}/v1/health", timeout=2)
                out.append(status)
                time.sleep(0.5)

        quiet_lists, quiet_triggers = [], []
        until = time.monotonic() + args.quiet_seconds
        threads = [threading.Thread(target=b_lists, args=(until, quiet_lists)),
                   threading.Thread(target=b_triggers, args=(until, quiet_triggers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        accepted = refused = 0
        backfill_took, refusal_took = [], []
        counts_lock = threading.Lock()

        def a_backfills(until):
            nonlocal accepted, refused
            i = 0
            while time.monotonic() < until and not stop.is_set():
                sid = a_ids[i % len(a_ids)]
                i += 1
                now = time.time()
                body = {
                    "from": time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime(now - 999 * 60)),
                    "to": time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime(now)),
                }
                status, _, took = request(
                    "POST", f"{api}/v1/schedules/{sid}/backfill?target_env_id={env_a}",
                    token_a, body,
                )
                with counts_lock:
                    if status == 202:
                        accepted += 1
                        backfill_took.append(took)
                    else:
                        refused += 1
                        refusal_took.append(took)
                if status != 202:
                    time.sleep(0.25)

        flood_lists, flood_triggers, probes = [], [], []
        calls_before = target.calls
        until = time.monotonic() + args.seconds
        threads = [threading.Thread(target=a_backfills, args=(until,))
                   for _ in range(args.concurrent)]
        threads += [threading.Thread(target=b_lists, args=(until, flood_lists)),
                    threading.Thread(target=b_triggers, args=(until, flood_triggers)),
                    threading.Thread(target=health, args=(until, probes))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        drained = target.calls - calls_before

        def ms(x):
            return "lost" if x == float("inf") else f"{x * 1000:.0f} ms"

        print("| backend | B trigger to call (quiet: p50 / max) | B trigger to call (flood: "
              "p50 / p99 / max) | B list p99 quiet | B list p99 flood | ratio | health not 200 "
              "| A backfills accepted / refused | A backfill p50 / max (accepted; refused) "
              "| calls in the flood |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        q99 = percentile(quiet_lists, 0.99)
        f99 = percentile(flood_lists, 0.99)
        bad = sum(1 for s in probes if s != 200)
        print(
            f"| {args.backend} | {ms(percentile(quiet_triggers, 0.5))} / {ms(max(quiet_triggers))} "
            f"| {ms(percentile(flood_triggers, 0.5))} / {ms(percentile(flood_triggers, 0.99))} / "
            f"{ms(max(flood_triggers))} | {ms(q99)} | {ms(f99)} | {f99 / q99:.1f}x "
            f"| {bad}/{len(probes)} | {accepted} / {refused} "
            f"| {ms(percentile(backfill_took, 0.5))} / {ms(max(backfill_took, default=0))}; "
            f"{ms(percentile(refusal_took, 0.5))} / {ms(max(refusal_took, default=0))} "
            f"| {drained} |"
        )
    target.server.shutdown()


if __name__ == "__main__":
    main()
