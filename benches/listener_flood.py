#!/usr/bin/env python3
"""Connection flood from many loopback addresses against a real `serve`, and what a probe and a
legitimate client still get.

The flood: ADDRESSES source addresses (127.0.0.2 upwards), PER_ADDRESS connections from each
(far under the per-client share of 128). Half of them send a request head one byte every two
seconds and never finish it (slow headers); the other half send one complete request, read the
answer and then sit idle on the kept-alive connection. Each flood connection that the server
closes is opened again at once, so the flood holds its size for the whole run.

Meanwhile, from 127.0.0.1, a health probe and a legitimate API client (`GET /v1/schedules` with a
token) each make one request on a new connection every PACE seconds, with a TIMEOUT. A request
counts as answered when its status is 200 within the timeout.

Run (after `cargo build --release`):
    python3 benches/listener_flood.py                    # embedded SQLite
    python3 benches/listener_flood.py --backend postgres # PostgreSQL on 127.0.0.1:5432
Options: --bin PATH (another build), --addresses, --per-address, --seconds, --port.
Prints one Markdown table row per run; BENCHMARKS.md and SECURITY.md quote them.
"""

import argparse
import asyncio
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_serve import LiveServe, percentile, serve_arguments  # noqa: E402



class Flood:
    """Flood connections that reopen as soon as the server closes them."""

    def __init__(self, port):
        self.port = port
        self.opened = 0
        self.stopping = False

    async def reopening(self, source, hold):
        """Opens a connection from `source`, lets `hold` keep it until the server closes it (or
        the flood stops), and opens the next, for as long as the flood lasts."""
        while not self.stopping:
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", self.port, local_addr=(source, 0)
                )
            except OSError:
                await asyncio.sleep(0.2)
                continue
            self.opened += 1
            try:
                await hold(reader, writer)
            except (OSError, ConnectionError):
                pass
            writer.close()

    async def slow_headers(self, source):
        head = b"GET /v1/health HTTP/1.1\r\nHost: flood\r\nX-Slow: " + b"a" * 10_000

        async def hold(reader, writer):
            for byte in head:
                writer.write(bytes([byte]))
                await writer.drain()
                # Sleep, but notice at once when the server closes.
                try:
                    if not await asyncio.wait_for(reader.read(1024), 2.0):
                        return
                except asyncio.TimeoutError:
                    pass
                if self.stopping:
                    return

        await self.reopening(source, hold)

    async def idle_keep_alive(self, source):
        request = b"GET /v1/health HTTP/1.1\r\nHost: flood\r\n\r\n"

        async def hold(reader, writer):
            writer.write(request)
            await writer.drain()
            # Read the answer and then wait for the server to close the idle connection.
            while not self.stopping:
                try:
                    data = await asyncio.wait_for(reader.read(4096), 1.0)
                except asyncio.TimeoutError:
                    continue
                if not data:
                    return

        await self.reopening(source, hold)


async def one_request(port, path, headers, timeout):
    """(status or None, seconds) of one GET on a new connection from 127.0.0.1."""
    started = time.monotonic()
    writer = None
    try:
        async def exchange():
            nonlocal writer
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            lines = [f"GET {path} HTTP/1.1", "Host: client", "Connection: close"]
            lines += [f"{k}: {v}" for k, v in headers.items()]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
            await writer.drain()
            status_line = await reader.readline()
            await reader.read()
            parts = status_line.split()
            return int(parts[1]) if len(parts) >= 2 else None

        status = await asyncio.wait_for(exchange(), timeout)
    except (OSError, ConnectionError, asyncio.TimeoutError, ValueError):
        status = None
    finally:
        if writer is not None:
            writer.close()
    return status, time.monotonic() - started


async def client(port, path, headers, pace, timeout, until, results):
    while time.monotonic() < until:
        tick = time.monotonic()
        results.append(await one_request(port, path, headers, timeout))
        await asyncio.sleep(max(0.0, pace - (time.monotonic() - tick)))


def summary(results):
    answered = [s for status, s in results if status == 200]
    p99 = percentile((s for _, s in results), 0.99)
    share = 100.0 * len(answered) / len(results) if results else 0.0
    return len(answered), len(results), share, p99


async def measure(args, api_path, api_headers):
    flood = Flood(args.port)
    tasks = []
    for i in range(args.addresses):
        source = f"127.0.{(i + 2) // 256}.{(i + 2) % 256}"
        for j in range(args.per_address):
            worker = flood.slow_headers if j % 2 == 0 else flood.idle_keep_alive
            tasks.append(asyncio.create_task(worker(source)))
    await asyncio.sleep(args.warmup)
    until = time.monotonic() + args.seconds
    health, api = [], []
    await asyncio.gather(
        client(args.port, "/v1/health", {}, args.pace, args.timeout, until, health),
        client(args.port, api_path, api_headers, args.pace, args.timeout, until, api),
    )
    flood.stopping = True
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return flood.opened, summary(health), summary(api)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    serve_arguments(parser, port=18091)
    parser.add_argument("--addresses", type=int, default=200)
    parser.add_argument("--per-address", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--pace", type=float, default=0.25)
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args()

    env_id = str(uuid.uuid4())
    with LiveServe(args.bin, args.backend, args.port, "http://127.0.0.1:9",
                   database_name="s8c_bench_flood") as serve:
        api_path = f"/v1/schedules?target_env_id={env_id}"
        api_headers = {"Authorization": f"Bearer {serve.token([env_id])}"}
        opened, health, api = asyncio.run(measure(args, api_path, api_headers))
    print(
        "| backend | flood | flood connections opened | health answered | health p99 "
        "| API answered | API p99 |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {args.backend} | {args.addresses} x {args.per_address} | {opened} "
        f"| {health[0]}/{health[1]} ({health[2]:.1f} %) | {health[3]:.3f} s "
        f"| {api[0]}/{api[1]} ({api[2]:.1f} %) | {api[3]:.3f} s |"
    )


if __name__ == "__main__":
    main()
