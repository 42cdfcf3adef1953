"""test_hostile_admin.py: the admin API and the database under pressure and
tampering. A settings POST is all or nothing, even when the writer's queue is
full (it waits for the writer instead of queueing half); 16 concurrent admin
writers all get through while the writer is stalled; a change waiting for
the writer is not undone by a pool reload meanwhile; the database file
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

    def post_async(self, g, tok, path, body):
        """A POST sent from a thread: a change's answer waits for its commit, which a stalled writer
        holds back. Returns (thread, result dict: "r" once answered)."""
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("r", self.post(g, tok, path, body)))
        t.start()
        self.addCleanup(t.join, 30)
        return t, result

    def answered(self, t, result):
        t.join(30)
        r = result.get("r")
        self.assertIsNotNone(r, "never answered")
        return r

    def stall(self, g, tok=None):
        """The database's write lock held from outside, once the gateway's writer is idle (a batch it
        took before, say its start-up writes on a loaded machine, would be stuck behind the stall
        and keep it from taking what the test sends next)."""
        if tok:
            wait_for(lambda: self.writer(g, tok)["idle"], what="the gateway's writer to be idle")
        s = WriterStall(g)
        self.addCleanup(s.release)
        return s

    def setting(self, g, key):
        rows = g.query("SELECT value FROM settings WHERE key = ?", (key,))
        return rows[0]["value"] if rows else None

    def writer(self, g, tok):
        """The overview's writer: pending_changes (queued, not yet taken into a commit) and
        changes_waiting (admin requests held until the queue has room), as the loop sees them."""
        return http_call(g.port, "GET", "/admin/api/overview", None, {"Authorization": f"Bearer {tok}"}).json()["writer"]

    def test_two_settings_are_queued_together_or_the_request_waits(self):
        g, tok = self.admin_gateway()
        stall = self.stall(g, tok)
        # changes the writer cannot commit fill its queue (64 changes): each is applied and queued at
        # once, its answer held for the commit the stall holds back; enables go in until one has to
        # wait for room (however the writer took them into batches)
        posts = []

        def one_waits():
            w = self.writer(g, tok)
            return w["changes_waiting"] >= 1 and w["changes_waiting"] + w["answers_waiting"] == len(posts)
        while not one_waits():
            self.assertLess(len(posts), 200, self.writer(g, tok))
            posts.append(self.post_async(g, tok, "/admin/api/accounts/enable", {"account": "a"}))
            wait_for(lambda: sum(self.writer(g, tok)[k] for k in ("changes_waiting", "answers_waiting")) == len(posts),
                     what="the enable held")
        self.assertTrue(all("r" not in res for _, res in posts), "a change answered before its commit")
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("r", self.post(
            g, tok, "/admin/api/settings", {"strategy": "balanced", "rotation": "aggregate_api_rotation"})))
        t.start()
        wait_for(lambda: self.writer(g, tok)["changes_waiting"] >= 2, what="the settings POST to wait for room too")
        self.assertNotIn("r", result)  # held, not answered
        stall.release()
        t.join(30)
        r = result.get("r")
        self.assertIsNotNone(r, "the settings POST never answered")
        self.assertIn(r.status, (200, 202), r)  # 202: held past 10 s by the stall on a slow machine
        if r.status == 200:
            self.assertEqual(self.setting(g, "rotation"), "aggregate_api_rotation", "answered 200 before written")
        wait_for(lambda: self.setting(g, "rotation") == "aggregate_api_rotation" or None, what="both settings committed")
        for t2, res in posts:
            self.assertIn(self.answered(t2, res).status, (200, 202))
        self.assertEqual(self.setting(g, "route_strategy"), "balanced")
        ov = http_call(g.port, "GET", "/admin/api/overview", None, {"Authorization": f"Bearer {tok}"}).json()
        self.assertEqual((ov["strategy"], ov["rotation"]), ("balanced", "aggregate_api_rotation"))

    def test_sixteen_concurrent_admin_writers_all_succeed_through_a_stalled_writer(self):
        g, tok = self.admin_gateway()
        stall = self.stall(g, tok)
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
        # behind the stalled writer every writer still running has its request held: waiting for room
        # in the queue, or queued and waiting for its commit (an answer is a written change)
        def all_held():
            w = self.writer(g, tok)
            waiting = w["changes_waiting"] + w["answers_waiting"]
            return waiting > 0 and waiting == sum(t.is_alive() for t in threads)
        wait_for(all_held, what="every writer waiting for room")
        stall.release()
        for t in threads:
            t.join(60)
        self.assertEqual(len(statuses), 16 * 12)
        refused = [s for s in statuses if s[0] not in (200, 202)]  # 202: applied, its commit held past 10 s
        self.assertEqual(refused, [], f"{len(refused)} of {len(statuses)} admin writes refused")
        # the database and the running gateway agree on the last change
        ov = http_call(g.port, "GET", "/admin/api/overview", None, {"Authorization": f"Bearer {tok}"}).json()
        wait_for(lambda: (self.setting(g, "route_strategy"), self.setting(g, "rotation"))
                 == (ov["strategy"], ov["rotation"]) or None, what="the database to match the running gateway")

    def test_a_change_waiting_for_the_writer_is_not_undone_by_a_reload_meanwhile(self):
        # the admin API applies a change to the running gateway at once and queues its row for the
        # writer; another process's change to the database meanwhile (a `switchyard` command) moves
        # config_version, and a pool reload then would read the admin change's row as it was
        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b"))], start=False)
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "a")
        tok = admin_token(g)
        g.start()
        self.assertEqual(g.post("/v1/responses", BODY).headers["x-switchyard-account"], "a")
        stall = self.stall(g, tok)
        posts = [self.post_async(g, tok, "/admin/api/accounts/disable", {"account": "a"}),
                 self.post_async(g, tok, "/admin/api/settings", {"strategy": "balanced"})]
        wait_for(lambda: self.writer(g, tok)["answers_waiting"] == 2, what="both changes made, answers held")

        def looked():  # the tick's answer to a moved config_version: a reload, or the word that it waits
            log = g.log_text()
            return log.count("pool: reloaded") + log.count("pool: the reload waits")
        before = looked()
        # another process's change, committed through the stall's own connection (its trigger moves
        # config_version), which takes the write lock straight back: the admin changes stay unwritten
        stall.c.execute("UPDATE accounts SET sort = sort WHERE name = 'b'")
        stall.c.execute("COMMIT")
        stall.c.execute("BEGIN IMMEDIATE")
        wait_for(lambda: looked() > before, what="the gateway to see the moved config_version")
        ov = http_call(g.port, "GET", "/admin/api/overview", None, {"Authorization": f"Bearer {tok}"}).json()
        accts = {x["name"]: x for x in http_call(g.port, "GET", "/admin/api/accounts", None,
                                                 {"Authorization": f"Bearer {tok}"}).json()["accounts"]}
        self.assertEqual((accts["a"]["state"], ov["strategy"]), ("disabled", "balanced"),
                         "a reload undid admin changes the gateway had acknowledged")
        self.assertEqual(g.post("/v1/responses", BODY).headers["x-switchyard-account"], "b")
        # written: the reload that follows reads them from the database
        reloads = g.log_text().count("pool: reloaded")
        stall.release()
        wait_for(lambda: g.query("SELECT 1 FROM accounts WHERE name = 'a' AND enabled = 0")
                 and self.setting(g, "route_strategy") == "balanced", what="the admin changes committed")
        wait_for(lambda: g.log_text().count("pool: reloaded") > reloads, what="the reload after the commit")
        self.assertTrue(all(self.answered(t, res).status in (200, 202) for t, res in posts))
        self.assertEqual(g.post("/v1/responses", BODY).headers["x-switchyard-account"], "b")
        ov = http_call(g.port, "GET", "/admin/api/overview", None, {"Authorization": f"Bearer {tok}"}).json()
        self.assertEqual(ov["strategy"], "balanced")

    def test_an_acknowledged_change_is_written_when_its_answer_comes(self):
        # issue 33: a disable answered 200, then kill -9 within 20 ms, came back enabled after a
        # restart. A change's answer now waits for its commit: the row is in the database when the
        # answer arrives, and a kill -9 right then loses nothing
        g, tok = self.admin_gateway()
        r = self.post(g, tok, "/admin/api/accounts/disable", {"account": "a"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(g.query("SELECT enabled FROM accounts WHERE name = 'a'")[0]["enabled"], 0)
        r = self.post(g, tok, "/admin/api/settings", {"strategy": "balanced"})
        self.assertEqual(r.status, 200, r)
        g.kill9()  # at once, the answer just read
        self.assertEqual(self.setting(g, "route_strategy"), "balanced")
        g.start()
        accts = {x["name"]: x for x in http_call(g.port, "GET", "/admin/api/accounts", None,
                                                 {"Authorization": f"Bearer {tok}"}).json()["accounts"]}
        self.assertEqual(accts["a"]["state"], "disabled")

    def test_a_change_held_past_the_commit_wait_is_answered_202_not_written(self):
        g, tok = self.admin_gateway()
        stall = self.stall(g, tok)
        t, res = self.post_async(g, tok, "/admin/api/accounts/disable", {"account": "a"})
        wait_for(lambda: self.writer(g, tok)["answers_waiting"] == 1, what="the answer held for the commit")
        self.assertNotIn("r", res)
        r = self.answered(t, res)  # the 10 s wait runs out behind the stall
        self.assertEqual(r.status, 202, r)
        self.assertEqual((r.json()["ok"], r.json()["written"]), (True, False))
        stall.release()
        wait_for(lambda: g.query("SELECT 1 FROM accounts WHERE name = 'a' AND enabled = 0") or None,
                 what="written once the stall is gone")

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
