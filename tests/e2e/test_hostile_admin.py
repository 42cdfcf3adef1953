"""test_hostile_admin.py: the admin API and the database under pressure and
tampering. A settings POST is all or nothing, even when the writer's queue is
full (it waits for the writer instead of queueing half); 16 concurrent admin
writers all get through while the writer is stalled; the database file
deleted, made unreadable, truncated or replaced under a running gateway makes
/health degraded with the reason (logged once), the admin overview says it,
and requests keep being served."""

import os
import shutil
import sqlite3
import threading
import time

from harness import GatewayTest, account, http_call, main, wait_for

BODY = {"model": "gpt-test", "input": "hi"}


def admin_token(g):
    return g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]


class WriterStall:
    """Holds the database's write lock from outside, so the gateway's writer cannot commit."""

    def __init__(self, g):
        self.c = sqlite3.connect(g.db_path, timeout=10, isolation_level=None, check_same_thread=False)
        self.c.execute("BEGIN IMMEDIATE")

    def release(self):
        if self.c:
            self.c.execute("ROLLBACK")
            self.c.close()
            self.c = None


class HostileAdminTest(GatewayTest):

    def admin_gateway(self):
        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b"))], start=False)
        tok = admin_token(g)
        g.start()
        return g, tok

    def post(self, g, tok, path, body):
        return http_call(g.port, "POST", path, body, {"Authorization": f"Bearer {tok}"}, timeout=30)

    def stall(self, g):
        s = WriterStall(g)
        self.addCleanup(s.release)
        return s

    def setting(self, g, key):
        rows = g.query("SELECT value FROM settings WHERE key = ?", (key,))
        return rows[0]["value"] if rows else None

    def test_two_settings_are_queued_together_or_the_request_waits(self):
        g, tok = self.admin_gateway()
        stall = self.stall(g)
        # one change the writer takes and then cannot commit, then 63 more: the queue
        # (64 changes) has room for exactly one
        self.assertEqual(self.post(g, tok, "/admin/api/accounts/enable", {"account": "a"}).status, 200)
        time.sleep(0.3)
        for _ in range(63):
            r = self.post(g, tok, "/admin/api/accounts/enable", {"account": "a"})
            self.assertEqual(r.status, 200, r)
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("r", self.post(
            g, tok, "/admin/api/settings", {"strategy": "balanced", "rotation": "aggregate_api_rotation"})))
        t.start()
        time.sleep(1.0)
        stall.release()
        t.join(30)
        r = result.get("r")
        self.assertIsNotNone(r, "the settings POST never answered")
        self.assertEqual(r.status, 200, r)
        wait_for(lambda: self.setting(g, "rotation") == "aggregate_api_rotation" or None,
                 what="both settings committed")
        self.assertEqual(self.setting(g, "route_strategy"), "balanced")
        ov = http_call(g.port, "GET", "/admin/api/overview", None, {"Authorization": f"Bearer {tok}"}).json()
        self.assertEqual((ov["strategy"], ov["rotation"]), ("balanced", "aggregate_api_rotation"))

    def test_sixteen_concurrent_admin_writers_all_succeed_through_a_stalled_writer(self):
        g, tok = self.admin_gateway()
        stall = self.stall(g)
        statuses, lock = [], threading.Lock()
        values = [("balanced", "account_rotation"), ("ordered", "hybrid_rotation")]

        def writer(i):
            for k in range(12):
                strategy, rotation = values[(i + k) % 2]
                if k % 3 == 2:
                    r = self.post(g, tok, "/admin/api/accounts/enable", {"account": "ab"[i % 2]})
                else:
                    r = self.post(g, tok, "/admin/api/settings", {"strategy": strategy, "rotation": rotation})
                with lock:
                    statuses.append((r.status, r.body[:200]))

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        stall.release()
        for t in threads:
            t.join(60)
        self.assertEqual(len(statuses), 16 * 12)
        refused = [s for s in statuses if s[0] != 200]
        self.assertEqual(refused, [], f"{len(refused)} of {len(statuses)} admin writes refused")
        # the database and the running gateway agree on the last change
        ov = http_call(g.port, "GET", "/admin/api/overview", None, {"Authorization": f"Bearer {tok}"}).json()
        wait_for(lambda: (self.setting(g, "route_strategy"), self.setting(g, "rotation"))
                 == (ov["strategy"], ov["rotation"]) or None, what="the database to match the running gateway")

    # ---- the database file tampered with while serving

    def tamper_and_check(self, tamper, words):
        g, tok = self.admin_gateway()
        self.assertEqual(http_call(g.port, "GET", "/health").json()["status"], "ok")
        tamper(g)

        def degraded():
            h = http_call(g.port, "GET", "/health").json()
            return h if h["status"] == "degraded" and any(w in " ".join(h["reasons"]) for w in words) else None
        h = wait_for(degraded, timeout=15, what="/health degraded with the reason")
        self.assertIn(g.db_path, h["store"]["file_problem"])
        self.assertEqual(g.post("/v1/responses", BODY).status, 200)  # still serving
        ov = http_call(g.port, "GET", "/admin/api/overview", None, {"Authorization": f"Bearer {tok}"}).json()
        self.assertTrue(any(w in ov["writer"]["file_problem"] for w in words), ov["writer"])
        time.sleep(2.5)  # a few more checks: the log says it once
        problem = h["store"]["file_problem"]
        self.assertEqual(g.log_text().count(problem), 1, g.log_text()[-3000:])
        self.assertNotIn("not an error", g.log_text())
        return g

    def test_deleted_database_makes_health_degraded_with_the_reason(self):
        self.tamper_and_check(lambda g: os.unlink(g.db_path), ["deleted"])

    def test_unreadable_database_makes_health_degraded_with_the_reason(self):
        def chmod(g):
            os.chmod(g.db_path, 0)
            self.addCleanup(os.chmod, g.db_path, 0o600)
        self.tamper_and_check(chmod, ["no longer readable"])

    def test_truncated_database_makes_health_degraded_with_the_reason(self):
        def truncate(g):
            with open(g.db_path, "r+b") as f:
                f.truncate(0)
        self.tamper_and_check(truncate, ["truncated"])

    def test_replaced_database_makes_health_degraded_with_the_reason(self):
        def replace(g):
            other = g.db_path + ".other"
            shutil.copyfile(g.db_path, other)
            os.replace(other, g.db_path)
        self.tamper_and_check(replace, ["replaced"])


if __name__ == "__main__":
    main()
