"""test_redis_config.py: accounts, platform keys and settings shared by the
gateways of one pool through a real Redis (docs/scale-out.md, "Accounts,
keys and settings"). Each gateway has its own database; the CLI writes to
one of them and the others serve what it wrote. Skipped, saying so, only
where redis-server is not installed."""

import os
import shutil
import subprocess

from harness import account, main, wait_for
from test_redis import RedisGatewayTest


class SlowProxy:
    """A TCP listener on 127.0.0.1 that forwards to a unix socket, every chunk back 'delay'
    seconds late: a Redis far away."""

    def __init__(self, target, delay):
        import socket
        import threading
        self.target, self.delay, self.closed = target, delay, False
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        import socket
        import threading
        while not self.closed:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            u = socket.socket(socket.AF_UNIX)
            u.connect(self.target)
            threading.Thread(target=self.pipe, args=(c, u, 0), daemon=True).start()
            threading.Thread(target=self.pipe, args=(u, c, self.delay), daemon=True).start()

    def pipe(self, a, b, delay):
        import time
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                if delay:
                    time.sleep(delay)
                b.sendall(d)
        except OSError:
            pass
        for x in (a, b):
            try:
                x.close()
            except OSError:
                pass

    def close(self):
        self.closed = True
        self.srv.close()


class RedisConfigTest(RedisGatewayTest):

    def two(self, accounts_a, accounts_b=()):
        ga = self.gateway(accounts_a, env=self.env(), start=False)
        gb = self.gateway(list(accounts_b), env=self.env(), start=False)
        for g in (ga, gb):
            g.start()
        for g in (ga, gb):
            wait_for(lambda g=g: "accounts, keys and settings in step with the pool" in g.log_text(),
                     what="the gateway's first config resync")
        return ga, gb

    def names(self, g):
        return sorted(r["name"] for r in g.query("SELECT name FROM accounts"))

    def barrier(self, frm, to):
        """Returns once `to` has applied a change made on frm's database now (a platform key added). frm
        tells its changes in the order its reconciles find them, each reconcile weighing every shared row
        against what it last recorded, over one link; `to` applies what one read of the pool holds. So
        whatever frm had to tell before this (one of its rows told back, say) is in the pool and weighed
        by `to` by then: the sign for "frm told nothing more", where a sleep would only hope so."""
        self._barriers = getattr(self, "_barriers", 0) + 1
        name = f"barrier-{self._barriers}"
        frm.add_key(name)
        wait_for(lambda: to.query("SELECT 1 FROM platform_keys WHERE name = ?", (name,)),
                 what=f"{name}, added on one gateway, on the other")

    def serves(self, g, key, account_name):
        r = g.post("/v1/chat/completions", {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]},
                   key=key)
        return r.status == 200 and r.headers.get("x-switchyard-account") == account_name

    def test_an_account_added_on_one_gateway_serves_on_the_other(self):
        ga, gb = self.two([account("a", self.mock.url("a"))])
        wait_for(lambda: self.names(gb) == ["a"], what="a on gateway b's database")
        wait_for(lambda: self.serves(gb, gb.key, "a"), what="gateway b to serve through a")
        # a later add, with the CLI against a's database while both run
        ga.cli("account", "add", "--db", ga.db_path, "--name", "late", "--base-url", self.mock.url("late"),
               "--token", "sk-late", "--sort", "1")
        wait_for(lambda: self.serves(gb, gb.key, "late"), what="the late account to serve on b")
        listed = gb.cli("account", "list", "--db", gb.db_path).stdout
        self.assertIn("late", listed)
        self.assertEqual(len(self.mock.requests("late")), 1)
        # nothing told twice: b applied it and did not tell it back as its own change
        self.barrier(gb, ga)
        self.assertNotIn("told the pool account:late", gb.log_text())
        self.assertEqual(ga.log_text().count("applied account:late"), 0)
        self.assertNotIn("changed here and in the pool", ga.log_text() + gb.log_text())

    def test_a_key_added_on_one_gateway_authenticates_on_the_other_and_its_revoke_stops_it(self):
        ga, gb = self.two([account("a", self.mock.url("a"))])
        key = ga.add_key("team")
        wait_for(lambda: self.serves(gb, key, "a"), what="the new key to authenticate on b")
        ga.cli("key", "revoke", "--db", ga.db_path, "--name", "team")
        wait_for(lambda: gb.post("/v1/chat/completions", {"model": "gpt-test", "messages": []}, key=key).status
                 == 401, what="the revoked key to be refused on b")
        rows = gb.query("SELECT revoked FROM platform_keys WHERE name = 'team'")
        self.assertEqual([r["revoked"] for r in rows], [1])

    def test_a_removed_account_and_a_setting_reach_the_other_gateway(self):
        ga, gb = self.two([account("a", self.mock.url("a")), account("b", self.mock.url("b"))])
        wait_for(lambda: self.names(gb) == ["a", "b"], what="both accounts on b")
        ga.cli("account", "remove", "--db", ga.db_path, "--name", "a")
        ga.cli("config", "set", "--db", ga.db_path, "usage_poll_s", "600")
        wait_for(lambda: self.names(gb) == ["b"], what="the removal on b")
        wait_for(lambda: gb.query("SELECT value FROM settings WHERE key = 'usage_poll_s'") == [{"value": "600"}],
                 what="the setting on b")
        wait_for(lambda: self.serves(gb, gb.key, "b"), what="b serving through the account left")

    def test_a_fresh_gateway_with_an_empty_database_serves_the_pool_with_the_first_ones_keys(self):
        ga, gb = self.two([account("a", self.mock.url("a"))])
        gc = self.gateway([], env=self.env(), start=False)
        os.remove(gc.db_path)  # nothing at all: no account, no key
        gc.start()
        # each shared row is its own write (a commit of its own, the keys' reload after): one key serving
        # says nothing of the other's row yet
        wait_for(lambda: self.serves(gc, ga.key, "a"), what="the fresh gateway to serve a's key")
        wait_for(lambda: self.serves(gc, gb.key, "a"), what="the fresh gateway to serve b's key")
        self.assertEqual(self.names(gc), ["a"])

    def test_the_pools_data_lost_while_the_link_stays_up_is_told_again(self):
        # FLUSHALL (or eviction, or a replica promoted empty) with the connection up: each gateway
        # finds the pool's layout key gone, says so, and resyncs as on a reconnect, so a fresh
        # gateway with an empty database serves the pool's accounts and keys again (before: 401s
        # until the next change)
        ga, gb = self.two([account("a", self.mock.url("a"))])
        wait_for(lambda: self.names(gb) == ["a"], what="a on b")
        for g in (ga, gb):  # each gateway watches for the loss once it has seen the layout written
            wait_for(lambda g=g: "the pool's generation" in g.log_text(), what="the pool's generation watched")
        self.assertEqual(self.redis.cli("FLUSHALL"), "OK")
        for g in (ga, gb):
            wait_for(lambda g=g: "the pool's keys are gone while the link stayed up" in g.log_text(),
                     what="the loss noticed")
            wait_for(lambda g=g: 'switchyard_redis_resyncs_total{cause="data_lost"} 1' in g.get("/metrics").text
                     or None, what="the loss counted")
        wait_for(lambda: self.redis.cli("EXISTS", "sy:{t}:schema") == "1", what="the layout written again")
        gc = self.gateway([], env=self.env(), start=False)
        os.remove(gc.db_path)
        gc.start()
        wait_for(lambda: self.serves(gc, ga.key, "a"), what="the fresh gateway to serve a's key after the loss")
        self.assertEqual(self.names(gc), ["a"])

    def test_redis_metrics_and_a_round_trip_slower_than_the_wait_in_health(self):
        ga, gb = self.two([account("a", self.mock.url("a"))])
        m = wait_for(lambda: (lambda t: t if "switchyard_redis_rtt_seconds_count 0" not in t else None)(
            ga.get("/metrics").text), what="a round trip measured")
        self.assertIn("switchyard_redis_up 1", m)
        for kind in ("ask", "slot", "chain", "limits", "rotation"):
            self.assertIn(f'switchyard_redis_waits_expired_total{{kind="{kind}"}}', m)
        self.assertIn('switchyard_redis_resyncs_total{cause="connect"} 1', m)
        for reason in ("link_down", "in_flight", "unreadable"):
            self.assertIn(f'switchyard_redis_messages_dropped_total{{reason="{reason}"}}', m)
        promtool = shutil.which("promtool")  # the Redis metrics are valid exposition text
        if promtool:
            p = subprocess.run([promtool, "check", "metrics"], input=m, capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(ga.get("/health").json()["status"], "ok")
        # a Redis slower than the 50 ms a request waits for it (every answer 120 ms late, through a
        # proxy of the test's own): /health says so, reachable all the same, and the waits that ran
        # out are counted by kind
        proxy = SlowProxy(self.redis.sock, 0.12)
        self.addCleanup(proxy.close)
        gs = self.gateway([account("s", self.mock.url("s"))], start=False,
                          env={"SWITCHYARD_REDIS": f"redis://127.0.0.1:{proxy.port}?pool=t", "SWITCHYARD_USAGE_POLL_S": "0"})
        gs.start()
        h = wait_for(lambda: (lambda j: j if any("round trip" in r for r in j.get("reasons", [])) else None)(
            gs.get("/health").json()), what="the slow round trip in /health")
        self.assertEqual(h["status"], "degraded")
        self.assertTrue(h["shared"]["reachable"], h)
        self.assertIn("SWITCHYARD_REDIS_WAIT_MS", " ".join(h["reasons"]))
        self.assertEqual(gs.post("/v1/chat/completions", {"model": "gpt-test", "messages": [{"role": "user",
                                                                                          "content": "hi"}]}
                                 ).status, 200)
        m = gs.get("/metrics").text
        self.assertNotIn("switchyard_redis_rtt_seconds_sum 0.0", m)

    def test_an_account_added_while_redis_is_down_reaches_the_other_gateway_when_it_returns(self):
        ga, gb = self.two([account("a", self.mock.url("a"))])
        wait_for(lambda: self.names(gb) == ["a"], what="a on b")
        self.redis.stop()
        for g in (ga, gb):
            wait_for(lambda g=g: not g.get("/health").json()["shared"]["reachable"], what="the link lost")
        ga.cli("account", "add", "--db", ga.db_path, "--name", "offline", "--base-url", self.mock.url("offline"),
               "--token", "sk-offline", "--sort", "1")
        # a has taken the change in (it serves through it) and would tell it now if it could
        wait_for(lambda: self.serves(ga, ga.key, "offline"), what="a to serve through the new account")
        self.assertEqual(self.names(gb), ["a"], "nothing reaches b while redis is down")
        self.redis.start()  # empty: a must tell everything again
        wait_for(lambda: self.names(gb) == ["a", "offline"], what="the account added meanwhile on b")
        wait_for(lambda: self.serves(gb, gb.key, "offline"), what="b to serve through it")

    def test_a_change_made_while_apart_loses_to_the_pools_newer_one(self):
        ga, gb = self.two([account("a", self.mock.url("a"))])
        wait_for(lambda: self.names(gb) == ["a"], what="a on b")
        gb.stop()
        ga.cli("account", "update", "--db", ga.db_path, "--name", "a", "--weight", "7")
        wait_for(lambda: '"weight":7' in (self.redis.cli("HGET", "sy:{t}:config", "account:a") or ""),
                 what="a's change in the pool")
        gb.cli("account", "update", "--db", gb.db_path, "--name", "a", "--weight", "3")
        gb.start()
        wait_for(lambda: gb.query("SELECT weight FROM accounts WHERE name = 'a'") == [{"weight": 7}],
                 what="the pool's newer weight on b")
        self.assertIn("changed here and in the pool while apart", gb.log_text())
        self.barrier(gb, ga)  # whatever b would tell of its own weight has reached a by now
        self.assertNotIn("told the pool account:a", gb.log_text())
        self.assertEqual(ga.query("SELECT weight FROM accounts WHERE name = 'a'"), [{"weight": 7}])


if __name__ == "__main__":
    main()
