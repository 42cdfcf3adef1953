#!/usr/bin/env python3
"""bench/large_pool.py: a pool of N ChatGPT accounts (default 20 000), every
one due for its usage and model polls at start, against a usage endpoint
that answers after BENCH_USAGE_MS (default 200 ms). Prints, while the polls
run for BENCH_SECONDS (default 60): /health's latency (p50, p99, max over
one probe every 50 ms), one chat request's latency now and then, the
gateway's RSS (VmHWM) and descriptors (most seen), the polls started and
in flight (the most at once), and how many accounts were polled by the end.
Figures only, nothing asserted; not part of the test suite (issue 33: at
10 000 accounts /health stalled for 5 s, at 20 000 the descriptors ran out).

    python3 bench/large_pool.py [BUILD_DIR]
    BENCH_ACCOUNTS=10000 BENCH_SECONDS=30 python3 bench/large_pool.py build
"""

import os
import sqlite3
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
os.environ.setdefault("SWITCHYARD_BIN", os.path.join(BUILD, "switchyard"))
os.environ.setdefault("MOCK_UPSTREAM_BIN", os.path.join(BUILD, "tests", "mock_upstream"))
os.environ.setdefault("SWITCHYARD_SRC", ROOT)

from harness import Gateway, Mock, account, http_call, vm_kib  # noqa: E402

N = int(os.environ.get("BENCH_ACCOUNTS", "20000"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "60"))
USAGE_MS = int(os.environ.get("BENCH_USAGE_MS", "200"))
CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


def metric(g, name):
    for line in http_call(g.port, "GET", "/metrics", timeout=30).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return -1


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else float("nan")


def main():
    mock = Mock()
    mock.start()
    base = mock.url("a0", f"ok,ms={USAGE_MS}", v1=False) + "/backend-api/codex"
    mock.set_usage("a0", {"plan_type": "plus", "rate_limit": {"primary_window": {"used_percent": 5}}})
    g = Gateway([account("a0", base, kind="chatgpt")],
                env={"SWITCHYARD_MODEL_POLL_S": "900", "SWITCHYARD_LOG_LEVEL": "info"})
    db = sqlite3.connect(g.db_path)
    cols = [r[1] for r in db.execute("PRAGMA table_info(accounts)")]
    rest = [c for c in cols if c not in ("id", "name")]
    db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
               f"INSERT INTO accounts(name, {', '.join(rest)}) SELECT 'a' || i, {', '.join(rest)} "
               "FROM n, accounts WHERE accounts.name = 'a0'", (N - 1,))
    db.commit()
    db.close()
    t0 = time.monotonic()
    g.start()
    started = time.monotonic() - t0
    pid = g.proc.pid
    health, chats, fds_max = [], [], 0
    stop = time.monotonic() + SECONDS
    last_chat = 0.0
    while time.monotonic() < stop:
        t = time.monotonic()
        r = http_call(g.port, "GET", "/health", timeout=120)
        health.append(time.monotonic() - t)
        if r.status != 200:
            print(f"/health answered {r.status}")
        if t - last_chat > 2:
            last_chat = t
            c0 = time.monotonic()
            r = g.post("/v1/chat/completions", CHAT)
            chats.append((time.monotonic() - c0, r.status))
        try:
            fds_max = max(fds_max, len(os.listdir(f"/proc/{pid}/fd")))
        except OSError:
            pass
        time.sleep(0.05)
    polled = sqlite3.connect(g.db_path).execute(
        "SELECT COUNT(*) FROM account_state WHERE usage_polled_at > 0").fetchone()[0]
    print(f"accounts {N}, usage endpoint answers after {USAGE_MS} ms, {SECONDS:.0f} s sampled "
          f"(gateway ready in {started:.1f} s)")
    print(f"/health  probes {len(health)}  p50 {pct(health, .5) * 1000:.1f} ms  p99 {pct(health, .99) * 1000:.1f} ms"
          f"  max {max(health) * 1000:.1f} ms")
    print(f"chat     requests {len(chats)}  statuses {sorted(set(s for _, s in chats))}"
          f"  p50 {pct([d for d, _ in chats], .5) * 1000:.1f} ms  max {max(d for d, _ in chats) * 1000:.1f} ms")
    print(f"gateway  VmHWM {vm_kib(pid, 'VmHWM') / 1024:.0f} MiB  VmRSS {vm_kib(pid, 'VmRSS') / 1024:.0f} MiB"
          f"  descriptors (most seen) {fds_max}")
    started_n = metric(g, 'switchyard_account_polls_total{result="started"}')
    deferred = metric(g, 'switchyard_account_polls_total{result="deferred"}')
    most = metric(g, "switchyard_account_polls_in_flight_max")
    print(f"polls    started {started_n:.0f}  in flight at most {most:.0f}  deferred ticks {deferred:.0f}"
          f"  accounts with their usage polled {polled} of {N}")
    g.stop()
    mock.stop()
    g.cleanup()


if __name__ == "__main__":
    main()
