#!/usr/bin/env python3
"""big_bodies.py: the gateway's memory for large request bodies.

Starts the mock upstream and a gateway (through tests/e2e/harness.py), sends
N requests at once whose body is a JSON array of zeros just under 16 MiB
(the default body limit; the worst case for a parser that builds a node per
element), and prints the gateway's RSS before, its peak (VmHWM) and its RSS
a few seconds after they ended (memory given back). Figures only: nothing
here asserts.

    SWITCHYARD_BIN=build/switchyard MOCK_UPSTREAM_BIN=build/tests/mock_upstream \\
        python3 bench/big_bodies.py [--clients 8] [--mib 16]

Prints one line:
  BIG_BODIES clients=N body_bytes=N statuses=... rss_before_mib=N peak_mib=N rss_after_mib=N
"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from harness import Gateway, Mock, account, vm_kib  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--mib", type=int, default=16)
    args = ap.parse_args()
    for var in ("SWITCHYARD_BIN", "MOCK_UPSTREAM_BIN"):  # the gateway runs in its own directory
        if os.environ.get(var):
            os.environ[var] = os.path.abspath(os.environ[var])
    n = (args.mib << 20) // 2 - 32
    body = b'{"model":"gpt-test","input":[' + b"0," * (n - 1) + b"0]}"
    mock = Mock()
    g = Gateway([account("a", mock.url("a"))], env={"SWITCHYARD_LOG_LEVEL": "info",
                                                    "SWITCHYARD_MAX_BODY": str(len(body) + 1024)})
    try:
        g.start()
        g.post("/v1/responses", {"model": "gpt-test", "input": "hi"})
        before = vm_kib(g.proc.pid, "VmRSS")
        statuses = []
        lock = threading.Lock()

        def one():
            r = g.post("/v1/responses", body)
            with lock:
                statuses.append(r.status)

        threads = [threading.Thread(target=one) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak = vm_kib(g.proc.pid, "VmHWM")
        time.sleep(2.5)  # the 1 s tick gives freed memory back
        after = vm_kib(g.proc.pid, "VmRSS")
        print(f"BIG_BODIES clients={args.clients} body_bytes={len(body)} "
              f"statuses={','.join(map(str, sorted(statuses)))} rss_before_mib={before // 1024} "
              f"peak_mib={peak // 1024} rss_after_mib={after // 1024}")
    finally:
        g.cleanup()
        mock.stop()


if __name__ == "__main__":
    main()
