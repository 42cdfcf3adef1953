"""test_redis_once.py: what the gateways of one pool do once for all of them
through a real Redis (docs/scale-out.md, "Once per pool", "Logins
encrypted", "Configuring"): an account's usage polled by one gateway per
period with both showing its numbers, the pool's layout version migrated by
one, logins and account rows sealed with SWITCHYARD_REDIS_KEY, and the
`redis` setting starting a gateway in Redis mode. Skipped, saying so, only
where redis-server is not installed."""

import time

from harness import account, main, wait_for
from test_redis import RedisGatewayTest
from test_usage_poll import payload

KEY = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"


class RedisOnceTest(RedisGatewayTest):

    def usage(self, g, name):
        rows = g.query("SELECT s.usage_polled_at, s.primary_used_pct FROM account_state s"
                       " JOIN accounts a ON a.id = s.account_id WHERE a.name = ?", (name,))
        return rows[0] if rows else None

    def test_two_gateways_poll_an_accounts_usage_once_per_period_and_both_show_it(self):
        period = 3
        self.mock.set_usage("cg", payload(primary=42))
        spec = account("cg", self.mock.url("cg", "ok", v1=False) + "/backend-api/codex", kind="chatgpt")
        env = self.env({"SWITCHYARD_USAGE_POLL_S": str(period)})
        gs = [self.gateway([spec], env=env, start=False) for _ in range(2)]
        t0 = time.monotonic()
        self.start_together(gs)
        for g in gs:
            wait_for(lambda g=g: (self.usage(g, "cg") or {}).get("primary_used_pct") == 42,
                     what="the polled numbers on both gateways")
        # three polls seen (their own sign, not a sleep of a few periods), then the time they took: one
        # gateway per period needs two periods for them, each gateway polling would bring them in one
        polls = len(wait_for(lambda: (lambda p: p if len(p) >= 3 else None)(self.mock.usage_polls("cg")),
                             timeout=4 * period + 10, what="three usage polls"))
        elapsed = time.monotonic() - t0
        self.assertLessEqual(polls, int(elapsed / period) + 1,
                             f"{polls} polls in {elapsed:.1f} s: one gateway per period, not each")
        self.assertNotIn(self.redis.cli("PTTL", "sy:{t}:lease:usage:cg"), (None, "-2"), "the usage lease is held")
        # new numbers reach the gateway that does not poll, without it polling
        self.mock.set_usage("cg", payload(primary=77))
        for g in gs:
            wait_for(lambda g=g: (self.usage(g, "cg") or {}).get("primary_used_pct") == 77,
                     what="the next period's numbers on both gateways", timeout=3 * period + 5)
        self.assertIn('"at"', self.redis.cli("GET", "sy:{t}:usage:cg") or "")
        # started together, the layout version was written by one of them
        self.assertEqual(self.redis.cli("GET", "sy:{t}:schema"), "1")
        migrated = sum(g.log_text().count("the pool's shared state migrated from layout 0 to 1") for g in gs)
        self.assertEqual(migrated, 1)

    def test_with_a_key_logins_in_redis_are_sealed_and_the_other_gateway_still_serves(self):
        env = self.env({"SWITCHYARD_OAUTH_TOKEN_URL": f"{self.mock.base()}/oauth/slow,ms=300/token",
                        "SWITCHYARD_REDIS_KEY": KEY})
        gs = self.with_expiring_login(env)
        self.start_together(gs)
        for g in gs:
            wait_for(lambda g=g: g.query("SELECT refresh_token FROM accounts WHERE name = 'x'")[0]["refresh_token"]
                     == "rt_x_2", what="the new login on both gateways")
        login = self.redis.cli("GET", "sy:{t}:login:x") or ""
        self.assertTrue(login.startswith("sy1:"), login[:40])
        self.assertNotIn("rt_x", login)
        self.assertNotIn("refresh_token", login)
        row = wait_for(lambda: (lambda v: v if v and "sealed" in v else None)(
            self.redis.cli("HGET", "sy:{t}:config", "account:x")), what="the account row in the pool")
        self.assertNotIn("rt_x", row)
        self.assertNotIn("token", row)
        oauth = [r for r in self.mock.requests() if r["endpoint"] == "oauth_token"]
        self.assertEqual([r["refresh_token"] for r in oauth], ["rt_x_1"], "one refresh for both")
        for g in gs:
            r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}, key=g.key)
            self.assertEqual(r.status, 200, r)
        # an instance without the key cannot use them, and says so once
        gc = self.gateway([], env=self.env(), start=False)
        gc.start()
        wait_for(lambda: "this instance has no key (SWITCHYARD_REDIS_KEY)" in gc.log_text(),
                 what="the instance without the key to say so")
        # once, not at every read of a sealed row: every link is dropped, and the instance reads the pool's
        # rows again at its resync (awaited by its own line) before the count, instead of a sleep
        wait_for(lambda: "in step with the pool" in gc.log_text(), what="the keyless instance in step")
        steps = gc.log_text().count("in step with the pool")
        self.redis.cli("CLIENT", "KILL", "TYPE", "normal")
        self.redis.cli("CLIENT", "KILL", "TYPE", "pubsub")
        wait_for(lambda: gc.log_text().count("in step with the pool") > steps, what="the keyless instance read the pool again")
        self.assertEqual(gc.log_text().count("this instance has no key"), 1)
        self.assertEqual(gc.query("SELECT name FROM accounts WHERE name = 'x'"), [])
        self.assertTrue((self.redis.cli("GET", "sy:{t}:login:x") or "").startswith("sy1:"))

    def test_the_redis_setting_starts_a_gateway_in_redis_mode(self):
        g = self.gateway([account("a", self.mock.url("a"))], env={"SWITCHYARD_USAGE_POLL_S": "0"}, start=False)
        bad = g.cli("config", "set", "--db", g.db_path, "redis", "redis://app:hunter2@127.0.0.1:99999",
                    check=False)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("invalid redis", bad.stderr)
        self.assertIn("port", bad.stderr)
        self.assertNotIn("hunter2", bad.stderr + bad.stdout)
        g.cli("config", "set", "--db", g.db_path, "redis", self.redis.url())
        g.start()
        wait_for(lambda: "redis: resynchronised" in g.log_text(), what="the gateway in redis mode")
        self.assertIn("the address is the database's redis setting", g.log_text())
        self.assertEqual(g.get("/health").json()["shared"]["kind"], "redis")
        wait_for(lambda: self.redis.cli("HEXISTS", "sy:{t}:config", "account:a") == "1",
                 what="the account shared")
        self.assertEqual(self.redis.cli("HEXISTS", "sy:{t}:config", "setting:redis"), "0", "the setting is not shared")
        # SWITCHYARD_REDIS comes before the setting (which here points nowhere)
        g2 = self.gateway([], env=self.env(), start=False)
        g2.cli("config", "set", "--db", g2.db_path, "redis", "redis://127.0.0.1:1/0?pool=t")
        g2.start()
        wait_for(lambda: "redis: resynchronised" in g2.log_text(), what="the environment's redis")
        self.assertNotIn("the database's redis setting", g2.log_text())


if __name__ == "__main__":
    main()
