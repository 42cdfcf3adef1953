"""test_redis_conversation.py: a stored conversation (previous_response_id)
moves to another account on any gateway of the pool, not only on the one
that relayed its turns (docs/scale-out.md, "Stored conversations"). The
turns each gateway records are shared through a real Redis; a gateway whose
own record lacks a chain reads it from there, once, when the owner of its
previous response cannot serve. The mock's accounts are strict: b does not
know a's response ids and refuses a's encrypted reasoning. Skipped, saying
so, only where redis-server is not installed."""

import json

from harness import account, main, wait_for
from test_redis import RedisGatewayTest

ORDERED = {"SWITCHYARD_ROUTE_STRATEGY": "ordered"}


def text_of(r):
    return "".join(c.get("text", "") for item in r.json()["output"] if item.get("type") == "message"
                   for c in item.get("content", []))


class RedisConversationTest(RedisGatewayTest):

    def gateways(self, accounts, n=2, env=None):
        e = dict(ORDERED, **(env or {}))
        gs = [self.gateway(accounts, env=self.env(e), start=False) for _ in range(n)]
        for g in gs:
            g.start()
        for g in gs:
            wait_for(lambda g=g: "redis: resynchronised" in g.log_text(), what="the gateway to reach redis")
        return gs

    def turn(self, g, text, prev=None, include=False):
        body = {"model": "gpt-test", "input": text}
        if prev:
            body["previous_response_id"] = prev
        if include:
            body["include"] = ["reasoning.encrypted_content"]
        r = g.post("/v1/responses", body, key=g.key)
        self.assertEqual(r.status, 200, r)
        return r

    def shared_turn(self, rid):
        return wait_for(lambda: self.redis.cli("HGET", f"sy:{{t}}:conv:{rid}", "a") or None,
                        what=f"turn {rid} in redis")

    def test_a_conversation_whose_account_rests_moves_on_another_gateway_with_a_reasoning_stripped(self):
        ga, gb = self.gateways([account("a", self.mock.url("a", "status=429,ok_first=1,retry_after=600,echo_input=1")),
                                account("b", self.mock.url("b", "ok,echo_input=1"))])
        r1 = self.turn(ga, "one", include=True)
        self.assertEqual(r1.headers.get("x-switchyard-account"), "a")
        id1 = r1.json()["id"]
        self.assertIn("reasoning", [i["type"] for i in r1.json()["output"]])
        self.assertEqual(self.shared_turn(id1), "a")
        # turn 2 reaches gateway B, which never saw turn 1; a answers 429 now
        r2 = self.turn(gb, "two", prev=id1)
        self.assertEqual(r2.headers.get("x-switchyard-account"), "b")
        self.assertEqual(r2.headers.get("x-switchyard-moved"), "a->b")
        self.assertEqual(r2.headers.get("x-switchyard-stripped"), "dropped=1")
        self.assertIn("[chain=0 items=3]", text_of(r2))  # one, out1's message, two: a's reasoning left out
        b_reqs = self.mock.requests("b")
        self.assertEqual(len(b_reqs), 1, "b was sent the turn once: accepted as rebuilt, no strip-retry")
        self.assertIsNone(b_reqs[0]["previous_response_id"])
        self.assertEqual(b_reqs[0]["input_items"], 3)
        self.assertEqual(b_reqs[0].get("blobs") or [], [])
        wait_for(lambda: "by=previous_response_id turns=1" in gb.trace_text(), what="B's trace of the move")
        # B recorded the moved turn with the client's own input: the chain goes on at b, natively, from A
        id2 = r2.json()["id"]
        self.assertEqual(self.shared_turn(id2), "b")
        self.assertEqual(json.loads(self.redis.cli("HGET", f"sy:{{t}}:conv:{id2}", "i")),
                         [{"type": "message", "role": "user", "content": "two"}])
        r3 = self.turn(ga, "three", prev=id2)
        self.assertEqual((r3.headers.get("x-switchyard-account"), r3.headers.get("x-switchyard-moved")), ("b", None))
        self.assertIn("[chain=1 items=1]", text_of(r3))

    def test_a_chain_of_three_turns_alternating_gateways_moves_twice_from_the_shared_record(self):
        ga, gb = self.gateways([account("a", self.mock.url("a", "status=429,ok_first=1,retry_after=600,echo_input=1")),
                                account("b", self.mock.url("b", "status=429,ok_first=1,retry_after=600,echo_input=1")),
                                account("c", self.mock.url("c", "ok,echo_input=1"))])
        id1 = self.turn(ga, "one").json()["id"]                 # A, on a
        self.shared_turn(id1)
        r2 = self.turn(gb, "two", prev=id1)                     # B: a rests, rebuilt from A's turn for b
        self.assertEqual((r2.headers.get("x-switchyard-account"), r2.headers.get("x-switchyard-moved")), ("b", "a->b"))
        self.assertIn("[chain=0 items=3]", text_of(r2))
        id2 = r2.json()["id"]
        self.shared_turn(id2)
        r3 = self.turn(ga, "three", prev=id2)                   # A: b rests, rebuilt from B's turn and A's for c
        self.assertEqual((r3.headers.get("x-switchyard-account"), r3.headers.get("x-switchyard-moved")), ("c", "b->c"))
        self.assertIn("[chain=0 items=5]", text_of(r3))          # one, out1, two, out2, three
        c_req = self.mock.requests("c")[-1]
        self.assertIsNone(c_req["previous_response_id"])
        self.assertEqual(c_req["input_items"], 5)
        self.assertEqual([r["account"] for r in self.mock.requests()], ["a", "a", "b", "b", "c"])

    def test_the_shared_record_keeps_the_retention_and_forgets_a_deleted_or_unstored_turn(self):
        ga, gb = self.gateways([account("a", self.mock.url("a"))], env={"SWITCHYARD_CONVERSATION_MAX_ROWS": "3"})
        prev, ids = None, []
        for n in range(5):
            prev = self.turn((ga, gb)[n % 2], f"turn {n}", prev=prev).json()["id"]
            ids.append(prev)
            # each gateway writes its turn when the transfer ends, unawaited: the next turn (through the
            # other gateway) goes once this one is in, so the two writes reach Redis in the turns' order
            self.shared_turn(prev)
        self.assertEqual(self.redis.cli("ZCARD", "sy:{t}:conv-order"), "3")
        self.assertEqual([self.redis.cli("EXISTS", f"sy:{{t}}:conv:{i}") for i in ids], ["0", "0", "1", "1", "1"])
        ttl = int(self.redis.cli("TTL", f"sy:{{t}}:conv:{ids[-1]}"))
        self.assertTrue(0 < ttl <= 7 * 86400, ttl)
        held = sum(len(self.redis.cli("HGET", f"sy:{{t}}:conv:{i}", f)) for i in ids[2:] for f in ("i", "o"))
        self.assertEqual(int(self.redis.cli("GET", "sy:{t}:conv-bytes")), held)
        r = gb.request("DELETE", f"/v1/responses/{ids[-1]}", key=gb.key)
        self.assertEqual(r.status, 200, r)
        wait_for(lambda: self.redis.cli("EXISTS", f"sy:{{t}}:conv:{ids[-1]}") == "0", what="the deleted turn gone")
        # a turn sent with store: false asked for nothing to be kept: not shared either. Its write would
        # go before the next turn's on A's link: once that one is in, it would be too
        r = ga.post("/v1/responses", {"model": "gpt-test", "input": "x", "store": False}, key=ga.key)
        self.assertEqual(r.status, 200, r)
        self.shared_turn(self.turn(ga, "y").json()["id"])
        self.assertEqual(self.redis.cli("EXISTS", f"sy:{{t}}:conv:{r.json()['id']}"), "0")

    def test_the_shared_record_trims_the_oldest_turns_whatever_their_sizes_or_ids(self):
        # turns of one second, each a little smaller in its first digit ("9713:resp_a_1", "8713:...",
        # ...): by whole seconds they tied and were ordered by that text, and the turn just written went
        # first. With 2 rows kept, each new turn stays and the oldest goes.
        ga, gb = self.gateways([account("a", self.mock.url("a"))], env={"SWITCHYARD_CONVERSATION_MAX_ROWS": "2"})
        ids = []
        for n, size in enumerate((9500, 8500, 7500, 6500, 5500, 4500)):
            rid = self.turn((ga, gb)[n % 2], "x" * size).json()["id"]
            ids.append(rid)
            self.shared_turn(rid)  # each gateway's write is unawaited: in before the next turn
        self.assertEqual(self.redis.cli("ZCARD", "sy:{t}:conv-order"), "2")
        self.assertEqual([self.redis.cli("EXISTS", f"sy:{{t}}:conv:{i}") for i in ids], ["0"] * 4 + ["1"] * 2)


if __name__ == "__main__":
    main()
