"""test_codex_session.py: what keeps a Codex session whole across the pool:
the client headers Codex sends reach the upstream (and nothing else does),
the serving account's x-codex-* rate-limit headers and turn state come back
to the client, a request carrying a turn state goes first to the account
that issued it and moves on without it when that account cannot serve, and
session affinity keeps a session's turns on one account under
both strategies, moves it when that account fails over, and forgets it after
its idle time or when the table is full.

Who served a request is read from the x-switchyard-account header. Accounts
are added in list order with sort 10, 20, ... (ids follow). The balanced
strategy is used where a test needs to know which account comes next without
affinity (strict round-robin by id)."""

import re
import time

from harness import GatewayTest, account, http_call, main, wait_for

RESP = {"model": "gpt-test", "input": "hi"}
BALANCED = {"SWITCHYARD_ROUTE_STRATEGY": "balanced"}

# What a client may send and the gateway passes upstream as is.
FORWARDED = {
    "session-id": "sess-1", "session_id": "sess-1", "thread-id": "thr-1", "conversation_id": "conv-1",
    "x-client-request-id": "req-1", "x-codex-turn-state": "ts-unknown", "x-codex-turn-metadata": '{"turn_id":"t1"}',
    "x-codex-beta-features": "remote_compaction_v2", "x-openai-subagent": "review",
    "x-codex-parent-thread-id": "thr-0", "x-codex-window-id": "w-1:0", "originator": "codex_exec",
    "version": "0.171.0", "OpenAI-Beta": "responses=experimental",
}


def served_by(resp):
    return resp.headers.get("x-switchyard-account")


class HeaderTest(GatewayTest):

    def test_codex_client_headers_are_forwarded_and_others_are_not(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        hdrs = dict(FORWARDED, **{"x-not-allowed": "1", "Cookie": "c=1", "Accept-Encoding": "zstd"})
        r = g.post("/v1/responses", RESP, headers=hdrs)
        self.assertEqual(r.status, 200, r)
        got = self.mock.requests("a")[0]["headers"]
        for name, value in FORWARDED.items():
            self.assertEqual(got.get(name.lower()), value, f"{name} was not forwarded: {got}")
        for name in ("x-not-allowed", "cookie"):
            self.assertNotIn(name, got)
        self.assertNotEqual(got.get("accept-encoding"), "zstd")
        self.assertEqual(got["authorization"], f"Bearer {g.accounts['a']}")

    def test_the_pools_rate_limit_headers_and_the_serving_accounts_turn_state_reach_the_client(self):
        # the usage windows describe the pool (route/pool_usage.h): a spent
        # (100 %) and b at 42 % leave 29 % of the primary window on average
        g = self.gateway([account("a", self.mock.url("a", "status=429,primary=100,turn_state=ts-a")),
                          account("b", self.mock.url("b", "ok,primary=42,secondary=7,turn_state=ts-b"))],
                         env=BALANCED)
        for stream in (False, True):
            r = g.post("/v1/responses", dict(RESP, stream=stream), stream=stream)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(served_by(r), "b")
            self.assertEqual(r.headers.get("x-codex-primary-used-percent"), "71")
            self.assertEqual(r.headers.get("x-codex-secondary-used-percent"), "7")  # only b reports one
            self.assertEqual(r.headers.get("x-codex-primary-window-minutes"), "300")
            self.assertEqual(r.headers.get("x-codex-turn-state"), "ts-b")

    def test_an_upstream_header_echoing_the_account_token_is_not_relayed(self):
        g = self.gateway([account("a", self.mock.url("a", "ok,echo_auth=1,primary=5"))])
        r = g.post("/v1/responses", RESP)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("x-codex-primary-used-percent"), "5")
        self.assertNotIn("x-codex-echo", r.headers)
        self.assertFalse(any(g.accounts["a"] in v for v in r.headers.values()), r.headers)

    def test_rate_limit_headers_of_a_returned_error_reach_the_client(self):
        g = self.gateway([account("a", self.mock.url("a", "ctxlen,primary=55"))])
        r = g.post("/v1/responses", RESP)
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.headers.get("x-codex-primary-used-percent"), "55")

    def test_reset_at_and_window_minutes_headers_are_read(self):
        reset = int(time.time()) + 7777
        g = self.gateway([account("a", self.mock.url(
            "a", f"ok,primary=30,primary_reset_at={reset},primary_window=300,"
                 f"secondary=60,secondary_reset_at={reset + 1000}"))])
        self.assertEqual(g.post("/v1/responses", RESP).status, 200)

        def state():
            rows = g.query("SELECT * FROM account_state WHERE primary_used_pct = 30")
            return rows[0] if rows else None
        st = wait_for(state, what="the account state with the header figures")
        self.assertEqual(st["primary_reset_at"], reset)
        self.assertEqual(st["secondary_reset_at"], reset + 1000)
        self.assertEqual(st["primary_window_s"], 18000)
        self.assertEqual(st["secondary_window_s"], 10080 * 60)
        self.assertEqual(st["secondary_used_pct"], 60)

    def test_turn_state_keeps_the_next_turn_on_the_account_that_issued_it(self):
        g = self.gateway([account("a", self.mock.url("a", "ok,turn_state=ts-a")),
                          account("b", self.mock.url("b", "ok,turn_state=ts-b")),
                          account("c", self.mock.url("c", "ok,turn_state=ts-c"))], env=BALANCED)
        first = g.post("/v1/responses", RESP)
        self.assertEqual(served_by(first), "a")
        self.assertEqual(first.headers.get("x-codex-turn-state"), "ts-a")
        # round-robin alone would give b, c, a, b
        who = [served_by(g.post("/v1/responses", RESP, headers={"x-codex-turn-state": "ts-a"}))
               for _ in range(4)]
        self.assertEqual(who, ["a"] * 4)
        self.assertEqual([r["headers"].get("x-codex-turn-state") for r in self.mock.requests()][1:],
                         ["ts-a"] * 4)
        text = wait_for(lambda: (lambda t: t if t.count("REQUEST_FINAL") >= 5 else None)(g.trace_text()),
                        what="five REQUEST_FINAL lines")
        self.assertEqual(text.count("pinned_by=x-codex-turn-state"), 4, text)
        # an unknown turn state pins nothing
        self.assertEqual(served_by(g.post("/v1/responses", RESP, headers={"x-codex-turn-state": "nope"})), "b")

    def test_turn_state_owner_that_cannot_serve_moves_the_turn_without_its_turn_state(self):
        # separate backends: the mock refuses a turn state another account issued
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=1,turn_state=ts-a")),
                          account("b", self.mock.url("b", "ok,turn_state=ts-b")),
                          account("c", self.mock.url("c", "ok,turn_state=ts-c"))], env=BALANCED)
        self.assertEqual(served_by(g.post("/v1/responses", RESP)), "a")
        # a answers 429 now: the turn goes on to b, without a's turn state
        r = g.post("/v1/responses", RESP, headers={"x-codex-turn-state": "ts-a"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(served_by(r), "b")
        self.assertEqual(r.headers.get("x-switchyard-moved"), "a->b")
        self.assertEqual(r.headers.get("x-switchyard-stripped"), "turn_state=1")
        self.assertEqual(r.headers.get("x-codex-turn-state"), "ts-b")  # what the client echoes next
        # a is cooling down: the same turn state goes straight to the next account
        r = g.post("/v1/responses", RESP, headers={"x-codex-turn-state": "ts-a"})
        self.assertEqual(r.status, 200, r)
        self.assertIn(served_by(r), ("b", "c"))
        self.assertEqual(r.headers.get("x-switchyard-moved"), "a->" + served_by(r))
        # b's turn state pins b from then on (round-robin alone would alternate b and c)
        who = [served_by(g.post("/v1/responses", RESP, headers={"x-codex-turn-state": "ts-b"})) for _ in range(3)]
        self.assertEqual(who, ["b"] * 3)
        reqs = self.mock.requests()
        self.assertEqual([x["account"] for x in reqs][:3], ["a", "a", "b"])
        sent = [(x["account"], x["headers"].get("x-codex-turn-state")) for x in reqs[1:]]
        self.assertEqual(sent[0], ("a", "ts-a"))      # the owner first, with its turn state
        for acct, ts in sent[1:3]:
            self.assertNotEqual(acct, "a")
            self.assertIsNone(ts)                      # moved: never another account's turn state
        self.assertEqual(sent[3:], [("b", "ts-b")] * 3)
        self.assertFalse([x for x in reqs if x["account"] != "a" and x["headers"].get("x-codex-turn-state") == "ts-a"])
        text = wait_for(lambda: (lambda t: t if t.count("REQUEST_FINAL") >= 6 else None)(g.trace_text()),
                        what="six REQUEST_FINAL lines")
        self.assertEqual(text.count("pinned_by=x-codex-turn-state"), 5, text)
        moves = [ln for ln in text.splitlines() if "CONVERSATION_MOVE" in ln]
        self.assertEqual(len(moves), 2, text)
        self.assertIn("from=a to=b by=x-codex-turn-state stripped=turn_state", moves[0])
        m = http_call(g.port, "GET", "/metrics")
        self.assertEqual(m.status, 200, m)
        self.assertIn('switchyard_conversation_moves_total{by="x-codex-turn-state"} 2', m.text)

    def test_mock_refuses_a_turn_state_another_account_issued(self):
        # the strictness the test above relies on: proven against the mock directly
        g = self.gateway([account("a", self.mock.url("a", "ok,turn_state=ts-a")),
                          account("b", self.mock.url("b", "ok,turn_state=ts-b"))])
        self.assertEqual(served_by(g.post("/v1/responses", RESP)), "a")
        r = http_call(self.mock.port, "POST", "/acct/b/ok/v1/responses", RESP,
                      headers={"x-codex-turn-state": "ts-a"})
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.json()["error"]["code"], "invalid_turn_state")


class AffinityTest(GatewayTest):

    def oks(self, names):
        return [account(n, self.mock.url(n)) for n in names]

    def ask(self, g, session, header="session-id"):
        r = g.post("/v1/responses", RESP, headers={header: session} if session else None)
        self.assertEqual(r.status, 200, r)
        return served_by(r)

    def pool_lines(self, g, n):
        text = wait_for(lambda: (lambda t: t if t.count("REQUEST_FINAL") >= n else None)(g.trace_text()),
                        what=f"{n} REQUEST_FINAL lines")
        return [ln for ln in text.splitlines() if "CANDIDATE_POOL" in ln]

    def test_balanced_rotates_sessions_not_turns(self):
        g = self.gateway(self.oks("abc"), env=BALANCED)
        s1 = [self.ask(g, "s1") for _ in range(3)]
        s2 = [self.ask(g, "s2", header="session_id") for _ in range(3)]
        s3 = [self.ask(g, "s3") for _ in range(3)]
        self.assertEqual((s1, s2, s3), (["a"] * 3, ["b"] * 3, ["c"] * 3))
        # turns of older sessions interleaved with new ones keep their accounts
        self.assertEqual([self.ask(g, "s2"), self.ask(g, "s1"), self.ask(g, "s4"), self.ask(g, "s3")],
                         ["b", "a", "a", "c"])
        lines = self.pool_lines(g, 13)
        self.assertIn("affinity=none", lines[0])
        self.assertIn("affinity=a", lines[1])
        self.assertTrue(re.search(r"AFFINITY .*session=s1 account=a previous=- reason=new_session", g.trace_text()))

    def test_ordered_keeps_a_session_on_one_account(self):
        g = self.gateway(self.oks("abc"))
        who = [self.ask(g, "sess-ordered") for _ in range(8)]
        self.assertEqual(len(set(who)), 1, who)
        lines = self.pool_lines(g, 8)
        self.assertTrue(all(f"affinity={who[0]}" in ln for ln in lines[1:]), lines)

    def test_requests_without_a_session_are_not_pinned(self):
        g = self.gateway(self.oks("ab"), env=BALANCED)
        self.assertEqual([self.ask(g, None) for _ in range(4)], ["a", "b", "a", "b"])
        self.assertTrue(all("affinity=-" in ln for ln in self.pool_lines(g, 4)))

    def test_session_moves_when_its_account_fails_over_and_stays_there(self):
        # a's third request and b's third answer 429; the cooldown policy rests
        # nobody, so a can serve again at once: only affinity keeps the session on b.
        pol = self.policy_copy({"cooldown.lua": "return { version = 1, cooldown = "
                                                "function(st, class, now) return 0, st.ladder_step end }\n"})
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=2")),
                          account("b", self.mock.url("b", "status=429,ok_first=3"))],
                         env=BALANCED, policies=pol)
        who = [self.ask(g, "sess-move") for _ in range(5)]
        self.assertEqual(who, ["a", "a", "b", "b", "b"])
        self.assertEqual(self.mock.accounts_hit(), ["a", "a", "a", "b", "b", "b"])
        self.pool_lines(g, 5)
        self.assertTrue(re.search(r"AFFINITY .*session=sess-move account=b previous=a reason=moved",
                                  g.trace_text()), g.trace_text())

    def test_session_is_forgotten_after_its_idle_time(self):
        g = self.gateway(self.oks("ab"), env=dict(BALANCED, SWITCHYARD_AFFINITY_IDLE_S="1"))
        self.assertEqual(self.ask(g, "idle"), "a")
        self.assertEqual(self.ask(g, "idle"), "a")
        time.sleep(1.6)  # longer than the idle time: the entry is gone, not a timing assertion
        self.assertEqual(self.ask(g, "idle"), "b")
        lines = self.pool_lines(g, 3)
        self.assertIn("affinity=a", lines[1])
        self.assertIn("affinity=none", lines[2])

    def test_the_table_is_bounded_and_forgets_the_least_recently_used(self):
        g = self.gateway(self.oks("abc"), env=dict(BALANCED, SWITCHYARD_AFFINITY_MAX="2"))
        self.assertEqual([self.ask(g, "s1"), self.ask(g, "s2")], ["a", "b"])
        self.assertEqual(self.ask(g, "s1"), "a")     # s1 used again: s2 is now the oldest
        self.assertEqual(self.ask(g, "s3"), "c")     # evicts s2
        self.assertEqual(self.ask(g, "s1"), "a")     # still known
        self.assertEqual(self.ask(g, "s2"), "a")     # forgotten: next in rotation after c
        lines = self.pool_lines(g, 6)
        self.assertIn("affinity=a", lines[4])
        self.assertIn("affinity=none", lines[5])

    def test_a_session_leaves_its_account_once_the_guard_puts_it_in_reserve(self):
        # a's answers say its 5 h window is 97 % used: the guard reserves it
        g = self.gateway([account("a", self.mock.url("a", "ok,primary=97")),
                          account("b", self.mock.url("b"))], env=BALANCED)
        self.assertEqual(self.ask(g, "s"), "a")
        self.assertEqual(self.ask(g, "s"), "b")
        self.assertEqual(self.ask(g, "s"), "b")
        lines = self.pool_lines(g, 3)
        self.assertIn("affinity=unavailable", lines[1])
        self.assertIn("affinity=b", lines[2])

    def test_a_cooling_session_account_is_left_and_the_session_follows(self):
        g = self.gateway([account("a", self.mock.url("a", "status=500,ok_first=1")),
                          account("b", self.mock.url("b"))], env=BALANCED)
        self.assertEqual(self.ask(g, "s"), "a")
        self.assertEqual(self.ask(g, "s"), "b")      # a fails (500, cools 30 s): fail over
        self.assertEqual(self.ask(g, "s"), "b")      # a is cooling down: the session is on b
        lines = self.pool_lines(g, 3)
        self.assertIn("affinity=b", lines[2])


if __name__ == "__main__":
    main()
