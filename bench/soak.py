#!/usr/bin/env python3
"""bench/soak.py: mixed traffic with faults for a long time (default 30
minutes), printing what must not grow without bound: the gateway's RSS and
descriptors, the database (with its WAL), the trace log, and the request
outcomes. Run by bench/soak.sh; not part of the test suite (figures only,
nothing asserted, though a gateway that dies or stops answering ends the run
with exit status 1).

Traffic: SOAK_CLIENTS threads, each sending one request after another, a mix
of chat and Responses, plain and streamed, some Codex-shaped (session id,
encrypted reasoning carried back). The pool and its faults:

  ok1, ok2       api keys on the mock's ok scenario
  storm1..3      api keys flipped between ok and status=429 every 30 s (a 429
                 storm: `account update --base-url` on the running gateway,
                 so the pool reloads under load too)
  quota          always quota429 (usage limit with a reset time)
  cut            streams cut after output (late_reset), plain answers fine
  stall          streams that stall 4 s before their first token
  login          a ChatGPT login whose access token lives 120 s: refreshed
                 every minute through the mock's token endpoint

and a SIGHUP every 10 s, the admin API (/admin/api/stats, requests,
accounts) and /metrics and /health polled every 2 s.

    SOAK_MINUTES=30 SOAK_CLIENTS=8 SOAK_PAUSE_MS=20 python3 bench/soak.py BUILD_DIR

The accounts are served in balanced (round-robin) order so that every fault
is met all the time; SOAK_PAUSE_MS keeps the rate near a busy workstation's
(with no pause the mock and gateway do thousands of requests a second and
the run measures the disk more than the gateway).
"""

import base64
import json
import os
import random
import signal
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
os.environ.setdefault("SWITCHYARD_BIN", os.path.join(BUILD, "switchyard"))
os.environ.setdefault("MOCK_UPSTREAM_BIN", os.path.join(BUILD, "tests", "mock_upstream"))
os.environ.setdefault("SWITCHYARD_SRC", ROOT)

from harness import Gateway, Mock, account, admin_get, http_call  # noqa: E402

MINUTES = float(os.environ.get("SOAK_MINUTES", "30"))
CLIENTS = int(os.environ.get("SOAK_CLIENTS", "8"))
SAMPLE_S = float(os.environ.get("SOAK_SAMPLE_S", "60"))
PAUSE_S = float(os.environ.get("SOAK_PAUSE_MS", "20")) / 1000  # between one client's requests


def b64(obj):
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def jwt(payload):
    return b64({"alg": "none", "typ": "JWT"}) + "." + b64(payload) + ".soak"


def login_file(path, name):
    access = {"exp": int(time.time()) + 120, "sub": name}
    idt = {"email": f"{name}@example.com",
           "https://api.openai.com/auth": {"chatgpt_account_id": f"acct-{name}", "chatgpt_plan_type": "plus"}}
    with open(path, "w") as f:
        json.dump({"name": name, "OPENAI_API_KEY": None, "last_refresh": "2025-01-01T00:00:00Z",
                   "tokens": {"id_token": jwt(idt), "access_token": jwt(access),
                              "refresh_token": f"rt_{name}_1", "account_id": f"acct-{name}"}}, f)


def proc_figures(pid):
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss, fds


def file_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class Soak:
    def __init__(self):
        self.mock = Mock()
        self.mock.start()
        m = self.mock
        accts = [account("ok1", m.url("ok1")), account("ok2", m.url("ok2"))]
        accts += [account(f"storm{i}", m.url(f"storm{i}")) for i in (1, 2, 3)]
        accts += [account("quota", m.url("quota", "quota429")),
                  account("cut", m.url("cut", "late_reset,after=2")),
                  account("stall", m.url("stall", "stall,ms=4000"))]
        # balanced: every account gets its turns, so the faulty ones are hit all the time
        env = {"SWITCHYARD_LOG_LEVEL": "info", "SWITCHYARD_ROUTE_STRATEGY": "balanced",
               "SWITCHYARD_OAUTH_TOKEN_URL": f"{m.base()}/oauth/ok,ttl=120/token",
               "SWITCHYARD_USAGE_POLL_S": "0"}
        specs = []
        for i, a in enumerate(accts):
            a = dict(a)
            a["token"] = a.get("token") or f"sk-{a['name']}"
            a["sort"] = (i + 1) * 10
            specs.append(a)
        self.g = Gateway(specs, env=env)
        lf = os.path.join(self.g.dir, "login-auth.json")
        login_file(lf, "login")
        self.g.cli("account", "import", "--db", self.g.db_path, lf)
        self.g.cli("account", "update", "--db", self.g.db_path, "--name", "login",
                   "--base-url", m.url("login", "ok,auth=1", v1=False), "--max-concurrency", "0")
        self.g.start()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.outcomes = {}
        self.errors = []
        self.requests = 0

    def count(self, key):
        with self.lock:
            self.outcomes[key] = self.outcomes.get(key, 0) + 1
            self.requests += 1

    def client(self, seed):
        rnd = random.Random(seed)
        g = self.g
        while not self.stop.wait(PAUSE_S):
            kind = rnd.choice(["chat", "chat_stream", "resp", "resp_stream", "codex"])
            try:
                if kind == "chat":
                    r = g.post("/v1/chat/completions", {"model": "gpt-soak", "messages": [
                        {"role": "user", "content": "hi"}]}, timeout=60)
                    self.count(f"{kind} {r.status}")
                elif kind == "chat_stream":
                    r = g.stream("/v1/chat/completions", {"model": "gpt-soak", "stream": True, "messages": [
                        {"role": "user", "content": "hi"}]}, timeout=60)
                    self.count(f"{kind} {r.status}{' cut' if r.truncated else ''}")
                elif kind == "resp":
                    r = g.post("/v1/responses", {"model": "gpt-soak", "input": "hi"}, timeout=60)
                    self.count(f"{kind} {r.status}")
                else:
                    body = {"model": "gpt-soak", "input": [{"role": "user", "content": "hi"}], "stream": True,
                            "store": False, "include": ["reasoning.encrypted_content"]}
                    hdrs = {"session_id": f"soak-{seed}-{rnd.randrange(50)}"} if kind == "codex" else None
                    r = g.stream("/v1/responses", body, headers=hdrs, timeout=60)
                    self.count(f"{kind} {r.status}{' cut' if r.truncated else ''}")
            except Exception as e:  # a hang or a refused connection: counted and shown
                self.count(f"{kind} exception")
                with self.lock:
                    if len(self.errors) < 20:
                        self.errors.append(repr(e)[:200])

    def storms(self):
        bad = False
        while not self.stop.wait(30):
            bad = not bad
            for i in (1, 2, 3):
                url = self.mock.url(f"storm{i}", "status=429" if bad else "ok")
                self.g.cli("account", "update", "--db", self.g.db_path, "--name", f"storm{i}", "--base-url", url,
                           check=False)

    def hups(self):
        while not self.stop.wait(10):
            self.g.sighup()

    def polls(self):
        while not self.stop.wait(2):
            try:
                for path in ("/admin/api/stats", "/admin/api/requests?limit=50", "/admin/api/accounts"):
                    admin_get(self.g, path)
                http_call(self.g.port, "GET", "/metrics")
                http_call(self.g.port, "GET", "/health")
            except Exception as e:
                with self.lock:
                    if len(self.errors) < 20:
                        self.errors.append("poll: " + repr(e)[:200])

    def alive(self):
        return self.g.proc is not None and self.g.proc.poll() is None

    def figures(self):
        g = self.g
        rss, fds = proc_figures(g.proc.pid)
        db = file_size(g.db_path) + file_size(g.db_path + "-wal")
        return {"rss_kib": rss, "fds": fds, "db_bytes": db, "trace_bytes": file_size(g.trace_path),
                "log_bytes": file_size(g.log_path), "requests": self.requests}

    def run(self):
        threads = [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(CLIENTS)]
        threads += [threading.Thread(target=f, daemon=True) for f in (self.storms, self.hups, self.polls)]
        for t in threads:
            t.start()
        time.sleep(min(20, MINUTES * 60 / 4))  # warm: caches, pools and the first refresh settle
        first = self.figures()
        print(f"start  {json.dumps(first)}", flush=True)
        t0, end = time.time(), time.time() + MINUTES * 60
        ok = True
        while time.time() < end:
            time.sleep(min(SAMPLE_S, max(0.1, end - time.time())))
            if not self.alive():
                print("the gateway exited", flush=True)
                ok = False
                break
            print(f"{(time.time() - t0) / 60:5.1f} min {json.dumps(self.figures())}", flush=True)
        last = self.figures() if self.alive() else None
        self.stop.set()
        for t in threads:
            t.join(timeout=70)
        refreshes = sum(1 for r in self.mock.requests() if r.get("endpoint") == "oauth_token")
        print(f"end    {json.dumps(last)}")
        if last:
            growth = {k: last[k] - first[k] for k in ("rss_kib", "fds", "db_bytes", "trace_bytes", "log_bytes")}
            print(f"growth {json.dumps(growth)}  over {MINUTES:g} min, {last['requests'] - first['requests']}"
                  f" requests ({(last['db_bytes'] - first['db_bytes']) / max(1, last['requests'] - first['requests']):.0f}"
                  " db bytes per request: request logs are kept until retention removes them)")
        print(f"outcomes {json.dumps(dict(sorted(self.outcomes.items())))}")
        print(f"token refreshes {refreshes}")
        if self.errors:
            print("errors (first 20):")
            for e in self.errors:
                print("  " + e)
        alive = self.alive()
        self.g.stop()
        self.mock.stop()
        return ok and alive


if __name__ == "__main__":
    sys.exit(0 if Soak().run() else 1)
