"""test_redis_routing.py: routing state shared by the gateways of one pool
through a real Redis (docs/scale-out.md): the balanced rotation's position,
an account reset, a session that moved, and the slot script loaded once
(EVALSHA, with the NOSCRIPT fallback). Reuses test_redis's base class (a
redis-server of the test's own); skipped, saying so, only where
redis-server is not installed."""

import json
import subprocess
import threading
import time

from harness import account, admin_call, main, wait_for
from test_redis import RedisGatewayTest


class RedisRoutingTest(RedisGatewayTest):

    def gateways(self, n, accounts, env=None):
        gs = [self.gateway(accounts, env=self.env(env), start=False) for _ in range(n)]
        for g in gs:
            g.start()
        for g in gs:
            wait_for(lambda g=g: "redis: resynchronised" in g.log_text(), what="the gateway to reach redis")
        return gs

    def ask(self, g, key=None, model="gpt-test", session=None):
        headers = {"session_id": session} if session else None
        # store: false, so no turn is told to the pool (its script, an EVAL, would count in the slot test)
        return g.post("/v1/responses", {"model": model, "input": "hi", "store": False}, key=key or g.key,
                      headers=headers)

    def served_by(self, r):
        self.assertEqual(r.status, 200, r)
        return r.headers.get("x-switchyard-account")

    def rest_until(self, g, name):
        rows = g.query("SELECT s.cooldown_until FROM account_state s JOIN accounts a ON a.id = s.account_id"
                       " WHERE a.name = ?", (name,))
        return rows[0]["cooldown_until"] if rows else 0

    def rest_a_everywhere(self, gs):
        """a answers g1 a 429 (once): every gateway rests it for 10 minutes."""
        self.assertEqual(self.served_by(self.ask(gs[0])), "b")
        for g in gs:
            wait_for(lambda g=g: self.rest_until(g, "a") > time.time() + 500, what="a's rest on every gateway")

    def resyncs(self, g):
        return g.log_text().count("redis: resynchronised")

    # --- the balanced rotation

    def test_balanced_rotation_across_three_gateways_spreads_consecutive_requests_evenly(self):
        accts = [account(n, self.mock.url(n)) for n in ("a", "b", "c")]
        gs = self.gateways(3, accts, env={"SWITCHYARD_ROUTE_STRATEGY": "balanced", "SWITCHYARD_REDIS_WAIT_MS": "1000"})
        key = gs[0].key  # one client key, shared with the others through the pool's config
        for g in gs[1:]:
            wait_for(lambda g=g: g.get("/v1/models", key=key).status == 200, what="the key on every gateway")
        served = [self.served_by(self.ask(gs[n % 3], key=key)) for n in range(6)]
        self.assertEqual(len(set(served[:3])), 3, f"the first three (one per gateway) went to three accounts: {served}")
        self.assertEqual(sorted(served), ["a", "a", "b", "b", "c", "c"], served)
        self.assertTrue(self.redis.cli("KEYS", "sy:{t}:cursor:*"), "the position is the pool's")

    def test_balanced_rotation_spreads_conversations_not_turns_across_gateways(self):
        # three-turn conversations over three accounts, each turn on another gateway: only a
        # conversation's first turn picks an account (and takes a position); the others are kept
        # on it by their session. The session reaches the other gateway through the pool (its
        # record in Redis, written as the first answer ends: docs/scale-out.md): the next turn waits for
        # it, so that what this proves is the rotation, not that race
        accts = [account(n, self.mock.url(n)) for n in ("a", "b", "c")]
        gs = self.gateways(2, accts, env={"SWITCHYARD_ROUTE_STRATEGY": "balanced", "SWITCHYARD_REDIS_WAIT_MS": "1000"})
        key = gs[0].key
        wait_for(lambda: gs[1].get("/v1/models", key=key).status == 200, what="the key on both gateways")
        starts = []
        for conv in range(6):
            session = f"conv-{conv}"
            first = self.served_by(self.ask(gs[0], key=key, session=session))
            wait_for(lambda: self.redis.cli("GET", f"sy:{{t}}:sess:{session}") == first, what="the session in redis")
            for turn in (1, 2):
                self.assertEqual(self.served_by(self.ask(gs[turn % 2], key=key, session=session)), first,
                                 f"conversation {conv} left its account")
            starts.append(first)
        self.assertEqual(sorted(starts), ["a", "a", "b", "b", "c", "c"], starts)
        self.assertEqual(len(set(starts[:3])), 3, starts)

    # --- an account reset

    def test_an_account_reset_through_one_gateway_lets_the_others_use_the_account_at_once(self):
        accts = [account("a", self.mock.url("a", "status=429,retry_after=600,times=1")),
                 account("b", self.mock.url("b"))]
        gs = self.gateways(3, accts)
        self.rest_a_everywhere(gs)
        r = admin_call(gs[0], "POST", "/admin/api/accounts/reset", {"account": "a"})
        self.assertEqual(r.status, 200, r)
        # the others apply the reset when its message reaches them (they say so): awaited by that line, not
        # by a sleep; the rest key's DEL went before the message on the same link, so it is gone by then
        for g in gs[1:]:
            wait_for(lambda g=g: "account a: reset by another gateway" in g.log_text(), what="the reset heard")
        for g in gs[1:]:
            self.assertEqual(self.served_by(self.ask(g)), "a", "the reset reached this gateway")
        self.assertEqual(self.redis.cli("EXISTS", "sy:{t}:rest:a"), "0")

    def test_an_account_reset_with_the_cli_is_not_brought_back_by_a_resync(self):
        accts = [account("a", self.mock.url("a", "status=429,retry_after=600,times=1")),
                 account("b", self.mock.url("b"))]
        gs = self.gateways(3, accts)
        self.rest_a_everywhere(gs)
        gs[0].cli("account", "reset", "--db", gs[0].db_path, "--name", "a")
        for g in gs:
            wait_for(lambda g=g: self.rest_until(g, "a") < time.time(), what="the reset on every gateway")
        # every gateway loses its link and reads the pool's keys again
        before = [self.resyncs(g) for g in gs]
        self.redis.cli("CLIENT", "KILL", "TYPE", "normal")
        self.redis.cli("CLIENT", "KILL", "TYPE", "pubsub")
        for g, n in zip(gs, before):
            wait_for(lambda g=g, n=n: self.resyncs(g) > n, what="the gateway to resynchronise")
        for g in gs:
            self.assertEqual(self.served_by(self.ask(g)), "a", "the rest did not come back from redis")

    # --- a session that moved

    def test_a_session_moved_on_one_gateway_is_followed_by_the_others(self):
        accts = [account("a", self.mock.url("a", "ok,models=gpt-test")), account("b", self.mock.url("b"))]
        gs = self.gateways(3, accts)
        for g in gs:
            self.assertEqual(self.served_by(self.ask(g, session="sess-move-1")), "a")
        # a refuses another model on g1 (refused here only, no rest): the session moves to b there
        self.assertEqual(self.served_by(self.ask(gs[0], model="gpt-other", session="sess-move-1")), "b")
        wait_for(lambda: self.redis.cli("GET", "sy:{t}:sess:sess-move-1") == "b", what="the move in redis")
        # the move is published; each gateway that knows the session follows it when the message arrives
        # (and says so at debug): awaited by that line, not by a sleep
        for g in gs[1:]:
            wait_for(lambda g=g: "redis: session sess-move-1 follows another instance to account b" in g.log_text(),
                     what="the gateway to follow the move")
        for g in gs[1:]:
            self.assertEqual(self.served_by(self.ask(g, session="sess-move-1")), "b",
                             "the gateway followed the session to b")

    # --- slots of max_concurrency: the script loaded once

    def slot_scripts(self):
        """{"eval": n, "evalsha": n}: the scripts run on a's slot key since the last in_step, read from
        Redis's slow log (every command logged there from in_step on), so a script of another job still
        landing (a config row told at the connect, the layout lease given back) is not taken for a slot's."""
        p = subprocess.run(["redis-cli", "-s", self.redis.sock, "--json", "SLOWLOG", "GET", "-1"],
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = {"eval": 0, "evalsha": 0}
        for entry in json.loads(p.stdout):
            args = entry[3]
            if len(args) > 3 and args[0].lower() in out and args[3] == "sy:{t}:inflight:a":
                out[args[0].lower()] += 1
        return out

    def slot_holds(self, g1, g2):
        """A slow request through g1 holds a's only slot: g2 sends its request to b meanwhile."""
        first = {}
        t = threading.Thread(target=lambda: first.update(r=self.ask(g1)))
        t.start()
        try:
            wait_for(lambda: self.redis.cli("ZCARD", "sy:{t}:inflight:a") == "1", what="a's slot taken in redis")
            self.assertEqual(self.served_by(self.ask(g2)), "b")
        finally:
            t.join()
        self.assertEqual(self.served_by(first["r"]), "a")
        wait_for(lambda: self.redis.cli("ZCARD", "sy:{t}:inflight:a") == "0", what="a's slot given back")

    def in_step(self, gs, counts=None):
        """Every gateway in step with the pool and its layout version written (its scripts loaded: SCRIPT LOAD
        goes before the config read on the link), then Redis's slow log started afresh (slot_scripts)."""
        for i, g in enumerate(gs):
            n = counts[i] if counts else 0
            wait_for(lambda g=g, n=n: g.log_text().count("in step with the pool") > n, what="the config in step")
        # and the layout version written (a script under a lease, at each connect to a Redis without it)
        wait_for(lambda: self.redis.cli("GET", "sy:{t}:schema") == "1", what="the pool's layout version")
        # from here every command is logged with its arguments: the slot's scripts are told from the others
        # by their key, with no wait for the others to have landed
        self.redis.cli("CONFIG", "SET", "slowlog-max-len", "100000")
        self.redis.cli("CONFIG", "SET", "slowlog-log-slower-than", "0")
        self.redis.cli("SLOWLOG", "RESET")

    def test_slots_are_taken_with_the_loaded_script_after_a_restart_and_a_flushed_script_cache(self):
        accts = [account("a", self.mock.url("a", "slow_headers,ms=600"), args=("--max-concurrency", "1")),
                 account("b", self.mock.url("b"))]
        gs = self.gateways(2, accts, env={"SWITCHYARD_ROUTE_STRATEGY": "ordered", "SWITCHYARD_REDIS_WAIT_MS": "1000"})
        self.in_step(gs)
        self.slot_holds(*gs)
        stats = self.slot_scripts()
        self.assertGreaterEqual(stats["evalsha"], 2, stats)
        self.assertEqual(stats["eval"], 0, f"the script's text is not sent per slot: {stats}")
        # Redis restarted (its script cache empty): the gateways load it again at the reconnect
        counts = [g.log_text().count("in step with the pool") for g in gs]
        self.redis.stop()
        self.redis.start()
        self.in_step(gs, counts)
        self.slot_holds(*gs)
        stats = self.slot_scripts()
        self.assertGreaterEqual(stats["evalsha"], 2, stats)
        self.assertEqual(stats["eval"], 0, stats)
        # the cache emptied under a live link: NOSCRIPT, then the text once, and slots still hold
        self.redis.cli("SCRIPT", "FLUSH")
        self.slot_holds(*gs)
        self.slot_holds(*gs)
        stats = self.slot_scripts()
        self.assertEqual(stats["eval"], 1, f"the text went once, then the cached script: {stats}")
        self.assertIn("the slot script is not in Redis's cache", "".join(g.log_text() for g in gs))

if __name__ == "__main__":
    main()
