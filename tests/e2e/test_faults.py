"""test_faults.py: the gateway under faults: kill -9 under load, its database on a full
filesystem, a SIGHUP storm with broken policies, and /health saying what is wrong."""

import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time

from harness import GatewayTest, account, faulty_bin, main, wait_for

RESP_BODY = {"model": "gpt-test", "input": "hi"}


class Load:
    """Client threads posting requests until stopped; keeps every status seen."""

    def __init__(self, g, threads=4, body=RESP_BODY):
        self.g, self.body = g, body
        self.stop_flag = threading.Event()
        self.statuses, self.errors = [], []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def _run(self):
        while not self.stop_flag.is_set():
            try:
                r = self.g.post("/v1/responses", self.body, timeout=30)
                with self.lock:
                    self.statuses.append(r.status)
            except OSError as e:
                with self.lock:
                    self.errors.append(repr(e))

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(60)

    def count(self):
        with self.lock:
            return len(self.statuses)


def committed_ids(db_path):
    """request_logs ids a separate reader sees committed right now."""
    c = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        return {r[0] for r in c.execute("SELECT id FROM request_logs")}
    finally:
        c.close()


class FaultTest(GatewayTest):

    def health(self, g):
        r = g.get("/health", key=None)
        self.assertEqual(r.status, 200, r)
        return r.json()

    # --- kill -9

    def test_kill9_under_load_loses_no_committed_row_and_keeps_cooldowns(self):
        g = self.gateway([account("q", self.mock.url("q", "quota429,resets=3600")),
                          account("a", self.mock.url("a"))])
        # q answers 429 with a reset an hour away: cooled down, written through the writer
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        q_id = g.account_id("q")
        def q_cooldown():
            rows = g.query("SELECT cooldown_until FROM account_state WHERE account_id = ?", (q_id,))
            return rows[0]["cooldown_until"] if rows else 0
        wait_for(lambda: q_cooldown() > time.time() + 600, what="q's cooldown to be committed")
        load = Load(g)
        try:
            wait_for(lambda: load.count() >= 40, what="some load")
            seen = committed_ids(g.db_path)  # committed while the gateway runs
            wait_for(lambda: load.count() >= 80, what="more load")
            g.kill9()
        finally:
            load.stop()
        self.assertTrue(seen, "no request log was committed under load")
        self.assertTrue(all(s == 200 for s in load.statuses), set(load.statuses))
        c = sqlite3.connect(g.db_path)
        try:
            self.assertEqual(c.execute("PRAGMA integrity_check").fetchone()[0], "ok")
            after = {r[0] for r in c.execute("SELECT id FROM request_logs")}
        finally:
            c.close()
        self.assertFalse(seen - after, f"committed rows lost by kill -9: {sorted(seen - after)[:10]}")
        # the cooldown survived: after the restart q is not tried
        g.restart()
        self.mock.reset()
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("x-switchyard-account"), "a")
        self.assertEqual(self.mock.accounts_hit(), ["a"], "a cooling account was tried after the restart")

    # --- full disk

    def test_database_on_a_full_filesystem_keeps_proxying_reports_and_recovers(self):
        mnt = tempfile.mkdtemp(prefix="sy-fullfs-")
        self.addCleanup(shutil.rmtree, mnt, True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", mnt], capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest(f"cannot mount a small tmpfs to fill (needs root): {r.stderr.strip()}")
        self.addCleanup(subprocess.run, ["umount", "-l", mnt])
        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        db = os.path.join(mnt, "switchyard.db")
        shutil.copy(g.db_path, db)
        g.db_path = db
        g.start()
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        g.wait_request_logs(1)
        self.assertEqual(self.health(g)["status"], "ok")
        filler = os.path.join(mnt, "filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:  # fill the filesystem to the last byte
            for size in (65536, 512, 1):
                try:
                    while os.write(fd, b"\0" * size) > 0:
                        pass
                except OSError:
                    pass
        finally:
            os.close(fd)
        # requests keep being served while their logs cannot be written
        for _ in range(5):
            self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        h = wait_for(lambda: (lambda h: h if h["status"] == "degraded" else None)(self.health(g)),
                     what="/health to report the failing writes")
        self.assertTrue(any("database writes failing" in r for r in h["reasons"]), h)
        self.assertTrue(h["store"]["writes_failing"])
        self.assertGreater(h["store"]["failed_commits"], 0)
        self.assertIn("full", h["store"]["last_error"])
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        # space comes back: the kept logs are written and /health is ok again
        os.unlink(filler)
        wait_for(lambda: self.health(g)["status"] == "ok", timeout=30, what="/health to recover")
        rows = g.wait_request_logs(7)
        self.assertGreaterEqual(len(rows), 7)
        self.assertGreater(self.health(g)["store"]["failed_commits"], 0)  # the counter keeps the history

    # --- SIGHUP storm

    def test_sighup_storm_with_alternating_broken_policies_fails_no_request(self):
        pdir = self.policy_copy()
        path = os.path.join(pdir, "classify.lua")
        with open(path) as f:
            good = f.read()
        broken = ["return {", "return { version = 1 }\n", "error('refused at load')\n",
                  good.replace("return", "retrun", 1)]
        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b"))], policies=pdir)
        load = Load(g, threads=3)
        try:
            for i in range(40):
                text = good if i % 2 else broken[(i // 2) % len(broken)]
                tmp = path + ".tmp"
                with open(tmp, "w") as f:
                    f.write(text)
                os.replace(tmp, path)
                g.sighup()
                time.sleep(0.05)
            wait_for(lambda: load.count() >= 20, what="requests during the storm")
        finally:
            load.stop()
            with open(path, "w") as f:
                f.write(good)
        self.assertFalse(load.errors, load.errors[:5])
        self.assertTrue(load.statuses and all(s == 200 for s in load.statuses),
                        f"{len(load.statuses)} requests, statuses {sorted(set(load.statuses))}")
        self.assertTrue(g.running())
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)

    # --- /health

    def test_health_is_degraded_when_no_account_can_serve(self):
        g = self.gateway([])
        h = self.health(g)
        self.assertEqual(h["status"], "degraded")
        self.assertTrue(any("no account can serve" in r for r in h["reasons"]), h)
        for k in ("accounts", "active_requests", "policy"):
            self.assertIn(k, h)  # the first version's fields stay
        g2 = self.gateway([account("q", self.mock.url("q", "quota429,resets=3600"))])
        self.assertEqual(self.health(g2)["status"], "ok")
        g2.post("/v1/responses", RESP_BODY)  # q cools down for an hour
        h = self.health(g2)
        self.assertEqual(h["status"], "degraded", h)
        self.assertTrue(any("cooling down" in r for r in h["reasons"]), h)
        self.assertEqual(h["usable_accounts"], 0)

    def test_health_is_degraded_while_policies_fall_back_to_the_default(self):
        pdir = self.policy_copy()
        path = os.path.join(pdir, "order.lua")
        with open(path) as f:
            src = f.read()
        head = "local function order(candidates, ctx)\n"
        self.assertIn(head, src)
        with open(path, "w") as f:
            f.write(src.replace(head, head + '  if ctx.model == "boom" then error("boom") end\n'))
        g = self.gateway([account("a", self.mock.url("a"))], policies=pdir)
        self.assertEqual(self.health(g)["status"], "ok")
        self.assertEqual(g.post("/v1/responses", dict(RESP_BODY, model="boom")).status, 200)
        h = wait_for(lambda: (lambda h: h if h["status"] == "degraded" else None)(self.health(g)),
                     what="/health to report the fallback")
        self.assertTrue(any("built-in default" in r and "boom" in r for r in h["reasons"]), h)
        self.assertGreaterEqual(h["policy_fallbacks"], 1)


class CurlFailureTest(GatewayTest):
    """Paths only out-of-memory or a libcurl failure reach, through the gateway built with
    libcurl failures on demand (tests/support/fault_curl.c): a transfer that cannot start is
    the gateway's failure, never the account's, and never leaves the request waiting."""

    def faulty(self, accounts, env):
        g = self.gateway(accounts, env=env, start=False)
        g.bin = faulty_bin()
        g.start()
        return g

    def cooled(self, g):
        return g.query("SELECT account_id FROM account_state WHERE cooldown_until > ?", (time.time(),))

    def assertGatewayFailure(self, g, r):
        err = self.assertOpenAIError(r, 503)
        self.assertEqual(err["code"], "gateway_overloaded", err)
        self.assertEqual(r.headers.get("retry-after"), "1")
        rows = g.wait_request_logs(1)
        self.assertEqual((rows[-1]["status"], rows[-1]["error_class"]), (503, "gateway_internal"), rows[-1])

    def test_no_curl_handle_for_a_request_ends_it_with_a_503_instead_of_a_hang(self):
        g = self.faulty([account("a", self.mock.url("a"))], {"SY_FAULT_CURL_EASY_INIT": "1"})
        self.assertGatewayFailure(g, g.post("/v1/responses", RESP_BODY, timeout=20))
        self.assertEqual(self.mock.requests(), [])
        self.assertEqual(self.cooled(g), [], "an account was cooled down for the gateway's own failure")
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)

    def test_a_transfer_libcurl_refuses_ends_the_request_with_a_503_and_cools_no_account(self):
        g = self.faulty([account("a", self.mock.url("a")), account("b", self.mock.url("b"))],
                        {"SY_FAULT_CURL_MULTI_ADD": "1"})
        self.assertGatewayFailure(g, g.post("/v1/responses", RESP_BODY, timeout=20))
        self.assertEqual(self.mock.requests(), [])
        self.assertEqual(self.cooled(g), [], "an account was cooled down for the gateway's own failure")
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.mock.accounts_hit(), ["a"])

    def test_a_failover_libcurl_refuses_inside_a_stream_ends_with_a_503_and_cools_only_the_failed_account(self):
        # the quota error arrives inside a's stream: b's transfer starts from within libcurl's
        # callback, so it is queued and refused later, after its start returned
        g = self.faulty([account("a", self.mock.url("a", "quota_stream")), account("b", self.mock.url("b"))],
                        {"SY_FAULT_CURL_MULTI_ADD": "2"})
        self.assertGatewayFailure(g, g.post("/v1/responses", dict(RESP_BODY, stream=True), timeout=20))
        self.assertEqual(self.mock.accounts_hit(), ["a"])
        self.assertEqual([r["account_id"] for r in self.cooled(g)], [g.account_id("a")],
                         "b was cooled down for the gateway's own failure")


if __name__ == "__main__":
    main()
