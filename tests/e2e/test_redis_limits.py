"""test_redis_limits.py: rate limits and budgets held across the gateways of
one pool through a real Redis (docs/scale-out.md, "Rate limits and
budgets"): a platform key's and an account's requests per minute are one
bucket in the pool, not one per gateway; a key's budget spent through one
gateway is over on the others; with Redis gone each gateway's own bucket
goes on from the pool's last word. Skipped, saying so, only where
redis-server is not installed."""

import signal
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


    def stopped_redis_gateway(self, accounts, env=None):
        """One gateway of the pool with a key `team` (--rpm 100) beside its default key (no limits),
        started and on Redis; then redis-server is stopped (SIGSTOP: up, silent). The gateway and team."""
        g = self.gateway(accounts, env=self.env(env), start=False)
        p = g.cli("key", "add", "--db", g.db_path, "--name", "team", "--rpm", "100")
        team = [ln.strip() for ln in p.stdout.splitlines() if ln.strip()][-1]
        g.admin_tok = admin_token(g)
        g.start()
        wait_for(lambda: "redis: resynchronised" in g.log_text(), what="the gateway to reach redis")
        self.assertEqual(g.post("/v1/chat/completions", CHAT, key=team).status, 200)  # the pool's word had
        self.redis.proc.send_signal(signal.SIGSTOP)
        self.addCleanup(lambda: self.redis.proc.poll() is None and self.redis.proc.send_signal(signal.SIGCONT))
        return g, team

    def refused_metric(self, g, kind):
        text = g.get("/metrics").text
        line = next(ln for ln in text.splitlines()
                    if ln.startswith('switchyard_redis_limits_refused_total{kind="%s"}' % kind))
        return int(line.split()[-1])

    def test_fail_closed_a_key_with_a_rate_limit_gets_503_limits_unavailable_while_redis_is_stopped(self):
        accts = [account("a", self.mock.url("a"), args=("--max-rpm", "100")), account("b", self.mock.url("b"))]
        g, team = self.stopped_redis_gateway(accts, env={"SWITCHYARD_SHARED_LIMITS_FAIL": "closed",
                                                         "SWITCHYARD_ROUTE_STRATEGY": "ordered"})
        served_a = len(self.mock.requests("a"))
        # silent Redis: the 50 ms wait runs out, then (the PING check dropped the link) it is out of reach
        whys = set()
        for _ in range(2):
            r = g.post("/v1/chat/completions", CHAT, key=team)
            self.assertEqual(r.status, 503, r)
            err = r.json()["error"]
            self.assertEqual((err["type"], err["code"]), ("server_error", "limits_unavailable"), err)
            self.assertIn("the rate limits of this pool cannot be checked", err["message"])
            self.assertIn("(shared_limits_fail is closed)", err["message"])
            self.assertGreaterEqual(int(r.headers.get("retry-after", "0")), 1)
            whys.add("within 50 ms" if "did not answer within 50 ms" in err["message"] else err["message"])
            if len(whys) == 1:
                wait_for(lambda: not g.get("/health").json()["shared"]["reachable"], what="the link down")
        self.assertIn("within 50 ms", whys)
        self.assertTrue(any("Redis is out of reach" in w for w in whys), whys)
        # a key without limits is served; the account with a strict limit is skipped for the one without
        r = g.post("/v1/chat/completions", CHAT)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(self.mock.requests("a")), served_a, "a's limit cannot be checked: not tried")
        self.assertEqual(len(self.mock.requests("b")), 1)
        self.assertEqual(self.refused_metric(g, "key"), 2)
        self.assertGreaterEqual(self.refused_metric(g, "account"), 1)
        # the refusals are in the request log
        def refused():
            r = http_call(g.port, "GET", "/admin/api/requests?key=team", None,
                          {"Authorization": f"Bearer {g.admin_tok}"})
            rows = [q for q in r.json()["requests"] if q["status"] == 503]
            return rows if len(rows) == 2 else None
        reqs = wait_for(refused, what="both refusals in the request log")
        self.assertEqual({q["error_class"] for q in reqs}, {"limits_unavailable"}, reqs)

    def test_fail_closed_an_account_whose_limit_cannot_be_checked_is_skipped_and_alone_ends_503_naming_it(self):
        g, _ = self.stopped_redis_gateway([account("a", self.mock.url("a"), args=("--max-concurrency", "4"))],
                                          env={"SWITCHYARD_SHARED_LIMITS_FAIL": "closed"})
        r = g.post("/v1/chat/completions", CHAT)
        self.assertEqual(r.status, 503, r)
        self.assertEqual(r.json()["error"]["code"], "no_available_account")
        self.assertIn("limits_unavailable", r.json()["error"]["message"])
        self.assertIn("shared_limits_fail is closed", r.json()["error"]["message"])

    def test_fail_open_by_default_the_same_requests_are_served_by_the_local_copy_while_redis_is_stopped(self):
        accts = [account("a", self.mock.url("a"), args=("--max-rpm", "100")), account("b", self.mock.url("b"))]
        g, team = self.stopped_redis_gateway(accts, env={"SWITCHYARD_ROUTE_STRATEGY": "ordered"})
        self.assertEqual(g.post("/v1/chat/completions", CHAT, key=team).status, 200)  # the wait runs out
        wait_for(lambda: not g.get("/health").json()["shared"]["reachable"], what="the link down")
        self.assertEqual(g.post("/v1/chat/completions", CHAT, key=team).status, 200)  # out of reach
        self.assertEqual(g.post("/v1/chat/completions", CHAT).status, 200)
        self.assertEqual(len(self.mock.requests("b")), 0, "a served on its local bucket")
        self.assertEqual(self.refused_metric(g, "key"), 0)


if __name__ == "__main__":
    main()
