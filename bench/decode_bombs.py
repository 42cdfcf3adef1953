#!/usr/bin/env python3
"""decode_bombs.py: /health's latency while a key holder sends compressed
bodies that inflate to the body limit (issue 33).

Starts the mock upstream and a gateway (through tests/e2e/harness.py), then
for --seconds keeps --clients connections each posting a small zstd body
that decodes to just over the body limit (answered 413 once decoded that
far: all the work, no upstream), while one client asks /health in a loop
and times each answer. Prints /health's percentiles under that load and
idle. Figures only: nothing here asserts.

    SWITCHYARD_BIN=build/switchyard MOCK_UPSTREAM_BIN=build/tests/mock_upstream \\
        python3 bench/decode_bombs.py [--clients 16] [--seconds 10]

Prints one line per phase:
  DECODE_BOMBS phase=idle|bombs clients=N bombs=N health=N p50_ms=N p99_ms=N max_ms=N
"""
import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from harness import Gateway, Mock, account  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10)
    args = ap.parse_args()
    for var in ("SWITCHYARD_BIN", "MOCK_UPSTREAM_BIN"):  # the gateway runs in its own directory
        if os.environ.get(var):
            os.environ[var] = os.path.abspath(os.environ[var])
    limit = 16 << 20
    plain = b'{"model":"gpt-test","input":"' + b"x" * (limit + 4096) + b'"}'
    bomb = subprocess.run(["zstd", "-q", "-c", "-3"], input=plain, capture_output=True, check=True).stdout
    mock = Mock()
    g = Gateway([account("a", mock.url("a"))], env={"SWITCHYARD_MAX_BODY": str(limit)})
    try:
        g.start()

        def health_for(seconds, stop=None):
            lat = []
            end = time.monotonic() + seconds
            while time.monotonic() < end and not (stop and stop.is_set()):
                t0 = time.monotonic()
                g.get("/health", key=None)
                lat.append((time.monotonic() - t0) * 1000)
            return lat

        def report(phase, lat, bombs=0):
            print(f"DECODE_BOMBS phase={phase} clients={args.clients if bombs else 0} bombs={bombs} "
                  f"health={len(lat)} p50_ms={pct(lat, 0.5):.1f} p99_ms={pct(lat, 0.99):.1f} "
                  f"max_ms={max(lat) if lat else 0:.1f}", flush=True)

        report("idle", health_for(2))
        stop = threading.Event()
        sent = [0] * args.clients

        def bomber(i):
            while not stop.is_set():
                g.post("/v1/responses", bomb, key="default",
                       headers={"Content-Type": "application/json", "Content-Encoding": "zstd"})
                sent[i] += 1

        threads = [threading.Thread(target=bomber, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        lat = health_for(args.seconds)
        stop.set()
        for t in threads:
            t.join(60)
        report("bombs", lat, sum(sent))
    finally:
        g.cleanup()
        mock.stop()


if __name__ == "__main__":
    main()
