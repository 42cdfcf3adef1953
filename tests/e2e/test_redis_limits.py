"""test_redis_limits.py: rate limits and budgets held across the gateways of
one pool through a real Redis (docs/scale-out.md, "Rate limits and
budgets"): a platform key's and an account's requests per minute are one
bucket in the pool, not one per gateway; a key's budget spent through one
gateway is over on the others; with Redis gone each gateway's own bucket
goes on from the pool's last word. Skipped, saying so, only where
redis-server is not installed."""

import threading
import time

from harness import account, http_call, main, wait_for
from test_redis import RedisGatewayTest


def admin_token(g):
    return g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
MILLION = "ok,input_tokens=1000000,cached=400000"  # a gpt-5 request costs about $0.80


class RedisLimitsTest(RedisGatewayTest):

    def three(self, accounts, key_args=None, env=None):
        """Three gateways of one pool; key_args: a key `team` added to the first one's database with them
        (shared with the others by the pool), returned with the gateways once every one has it."""
        # a take answered within a second, not 50 ms: on a loaded machine a late answer lets the local
        # bucket decide (the fallback, tested on its own below), which is not what these tests prove
        env = dict({"SWITCHYARD_REDIS_WAIT_MS": "1000"}, **(env or {}))
        gs = [self.gateway(accounts, env=self.env(env), start=False) for _ in range(3)]
        key = None
        if key_args is not None:
            p = gs[0].cli("key", "add", "--db", gs[0].db_path, "--name", "team", *key_args)
            key = [ln.strip() for ln in p.stdout.splitlines() if ln.strip()][-1]
        for g in gs:
            g.admin_tok = admin_token(g)
            g.start()
        for g in gs:
            wait_for(lambda g=g: "redis: resynchronised" in g.log_text(), what="the gateway to reach redis")
            if key:  # each pool reloads the rows it was given: the running gateway holds the key
                wait_for(lambda g=g: self.team_key(g), what="the key in every gateway's pool")
        return gs, key

    def team_key(self, g):
        """The key `team` as g's running pool holds it (the admin API's keys: its budget as spent
        here and heard from the pool), or None."""
        r = http_call(g.port, "GET", "/admin/api/keys", None, {"Authorization": f"Bearer {g.admin_tok}"})
        assert r.status == 200, r
        return next((k for k in r.json()["keys"] if k["name"] == "team"), None)

    def parallel(self, gs, key=None, body=None, per_gateway=3, rounds=5):
        """per_gateway clients on each gateway, each sending rounds requests one after another: the statuses."""
        statuses, lock = [], threading.Lock()

        def client(g):
            for _ in range(rounds):
                r = g.post("/v1/chat/completions", body or CHAT, key=key or g.key)
                with lock:
                    statuses.append(r.status)

        threads = [threading.Thread(target=client, args=(g,)) for g in gs for _ in range(per_gateway)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return statuses

    def test_a_key_rpm_limit_holds_across_three_gateways_under_parallel_load(self):
        gs, key = self.three([account("a", self.mock.url("a"))], key_args=["--rpm", "12"])
        t0 = time.monotonic()
        statuses = self.parallel(gs, key=key, per_gateway=3, rounds=6)  # 54 requests
        refilled = (time.monotonic() - t0) * 12 / 60  # the bucket refills while the load runs
        self.assertEqual(sorted(set(statuses)), [200, 429], statuses)
        ok = statuses.count(200)
        self.assertGreaterEqual(ok, 12, statuses)
        self.assertLessEqual(ok, 12 + int(refilled + 1), "one bucket for the pool, not 12 per gateway")
        self.assertEqual(ok, len(self.mock.requests("a")))
        r = None
        for g in gs:  # a gateway that took none itself refuses too once the pool's bucket is empty
            r = g.post("/v1/chat/completions", CHAT, key=key)
            self.assertEqual(r.status, 429, r)
        self.assertGreaterEqual(int(r.headers.get("retry-after", "0")), 1)
        hkeys = self.redis.cli("KEYS", "sy:{t}:bucket:key:*") or ""
        self.assertTrue(hkeys.endswith(":rpm"), hkeys)

    def test_an_account_rpm_limit_holds_across_three_gateways_under_parallel_load(self):
        accts = [account("a", self.mock.url("a"), args=("--max-rpm", "6")), account("b", self.mock.url("b"))]
        gs, _ = self.three(accts, env={"SWITCHYARD_ROUTE_STRATEGY": "ordered"})
        t0 = time.monotonic()
        statuses = self.parallel(gs, per_gateway=3, rounds=4)  # 36 requests
        refilled = (time.monotonic() - t0) * 6 / 60
        self.assertEqual(statuses, [200] * 36, "the requests a could not take went to b")
        a, b = len(self.mock.requests("a")), len(self.mock.requests("b"))
        self.assertGreaterEqual(a, 6)
        self.assertLessEqual(a, 6 + int(refilled + 1), "one bucket for the pool, not 6 per gateway")
        self.assertEqual(a + b, 36)
        self.assertEqual(self.redis.cli("HGET", "sy:{t}:bucket:account:a:rpm", "pm"), "6")

    def test_a_key_budget_spent_through_one_gateway_refuses_on_the_others(self):
        gs, key = self.three([account("a", self.mock.url("a", MILLION))], key_args=["--budget", "0.5"])
        g1, g2, g3 = gs
        body = dict(CHAT, model="gpt-5")
        self.assertEqual(g1.post("/v1/chat/completions", body, key=key).status, 200)  # $0.80 of $0.50
        for g in (g2, g3):  # the others hear the total on the channel
            wait_for(lambda g=g: self.team_key(g)["budget"]["over"], what="the pool's total heard")
        for g in (g2, g3):
            r = g.post("/v1/chat/completions", body, key=key)
            self.assertEqual(r.status, 429, r)
            self.assertEqual(r.json()["error"]["code"], "insufficient_quota")
        self.assertEqual(len(self.mock.requests("a")), 1)
        spent = self.redis.cli("GET", self.redis.cli("KEYS", "sy:{t}:spend:key:*:month:*"))
        self.assertAlmostEqual(float(spent), 0.8, delta=0.1)
        # a gateway started later reads the pool's total at its connect
        g4 = self.gateway([account("a", self.mock.url("a", MILLION))], env=self.env(), start=False)
        g4.admin_tok = admin_token(g4)
        g4.start()
        # its pool reloads the key, then reads the key's total
        wait_for(lambda: (self.team_key(g4) or {}).get("budget", {}).get("over"), what="the key and its total on g4")
        self.assertEqual(g4.post("/v1/chat/completions", body, key=key).status, 429)
        self.assertEqual(len(self.mock.requests("a")), 1)

    def test_redis_down_the_local_buckets_go_on_from_the_pools_last_word_with_no_failed_request(self):
        gs, key = self.three([account("a", self.mock.url("a"))], key_args=["--rpm", "6"])
        g1, g2, g3 = gs

        def refilled():  # whole tokens one gateway's own bucket can have gained since t0 (6 a minute)
            return int((time.monotonic() - t0) * 6 / 60)
        t0 = time.monotonic()  # the pool's bucket was full before this; it refills from here on
        for g in (g1, g1, g2, g2, g3, g3):  # the pool's bucket empty; g3 heard it last, g1 when 4 were left
            self.assertEqual(g.post("/v1/chat/completions", CHAT, key=key).status, 200)
        self.redis.stop()
        for g in gs:
            wait_for(lambda g=g: not g.get("/health").json()["shared"]["reachable"], what="the link down")
        # g3's own bucket says what the pool said: empty (without the pool's word it would hold 4);
        # what it gained since is the refill of the time the link took to go (a loaded machine is slow)
        g3_first = [g3.post("/v1/chat/completions", CHAT, key=key).status for _ in range(3)]
        self.assertLessEqual(g3_first.count(200), refilled(), g3_first)
        self.assertLessEqual(set(g3_first), {200, 429}, g3_first)
        statuses = self.parallel(gs, key=key, per_gateway=2, rounds=4)
        self.assertEqual(sorted(set(statuses)), [200, 429], "no failure beyond the limit's own 429s")
        # g1 had 4 left, g2 2, g3 none, and each the refill since
        self.assertLessEqual(statuses.count(200) + g3_first.count(200), 4 + 2 + 3 * (refilled() + 1), statuses)
        self.assertEqual(len(self.mock.requests("a")), 6 + g3_first.count(200) + statuses.count(200))


if __name__ == "__main__":
    main()
