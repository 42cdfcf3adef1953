"""test_recovery.py: failover that finishes the job (issue 10), end to end:
`ordered` keeps the head of the sort order, same-account retries, waiting
for capacity, time limits, 2xx answers that are not answers, the circuit
breaker and the return to the primary, context-window fallback, and the
accounting of the attempt that finally served.

Timers are shortened through settings (environment) or a policy copy with
smaller numbers, so the file stays fast; tests never assert timings."""

import http.client
import json
import os
import re
import threading
import time

from harness import (GatewayTest, PyUpstream, account, main, source_dir, wait_for, is_error_event, chat_text,
                     response_text)

RESP_BODY = {"model": "gpt-test", "input": "hi"}
RESP_STREAM = dict(RESP_BODY, stream=True)
CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
CHAT_STREAM = dict(CHAT_BODY, stream=True)


class RecoveryTest(GatewayTest):

    def short_policies(self, server_cooldown=1, server_retries=0, edits=()):
        """A copy of policies/ where a 5xx fails over at once and rests server_cooldown seconds;
        edits: further (pattern, replacement, file) substitutions."""
        subs = [(r'failover\("server", 30\)', f'failover("server", {server_cooldown})', "classify.lua"),
                (r'local SERVER_RETRIES = 1', f'local SERVER_RETRIES = {server_retries}', "classify.lua")]
        texts = {}
        for pat, rep, name in subs + list(edits):
            if name not in texts:
                with open(os.path.join(source_dir(), "policies", name)) as f:
                    texts[name] = f.read()
            texts[name], n = re.subn(pat, rep, texts[name])
            self.assertGreaterEqual(n, 1, f"{pat!r} not found in {name}")
        return self.policy_copy(texts)

    def hang_up_during(self, g, event):
        """Sends a request, hangs up once the trace shows `event` (a wait began); returns its log row."""
        conn = http.client.HTTPConnection("127.0.0.1", g.port, timeout=30)
        conn.request("POST", "/v1/responses", body=json.dumps(RESP_BODY),
                     headers={"Authorization": f"Bearer {g.key}", "Content-Type": "application/json"})
        wait_for(lambda: event in g.trace_text(), what=f"{event}: the wait to start")
        conn.sock.close()
        conn.close()
        return g.wait_request_logs(1)[-1]

    def served_by(self, r):
        return r.headers.get("x-switchyard-account")

    # --- ordered means ordered

    def test_ordered_primary_keeps_its_turn_over_unused_secondaries(self):
        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b")),
                          account("c", self.mock.url("c"))])
        for _ in range(12):
            r = g.post("/v1/responses", RESP_BODY)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(self.served_by(r), "a")
        self.assertEqual(set(self.mock.accounts_hit()), {"a"})

    # --- retry on the same account

    def mapped(self, name, scenario="ok", to="gpt-other"):
        return account(name, self.mock.url(name, scenario), args=["--model-map", json.dumps({"gpt-test": to})])

    def test_5xx_retries_the_same_account_once_with_the_same_body(self):
        g = self.gateway([account("a", self.mock.url("a", "status=500,times=1")), account("b", self.mock.url("b"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.served_by(r), "a")
        self.assertEqual(r.headers.get("x-switchyard-attempts"), "2")
        reqs = self.mock.requests()
        self.assertEqual([q["account"] for q in reqs], ["a", "a"], reqs)
        self.assertEqual(reqs[0]["body_hash"], reqs[1]["body_hash"])
        wait_for(lambda: "CANDIDATE_RETRY" in g.trace_text(), what="a CANDIDATE_RETRY trace event")
        row = g.wait_request_logs(1)[-1]
        self.assertEqual(row["attempts"], 2)
        self.assertIn('switchyard_retries_total{account="a"} 1\n', g.get("/metrics", key=None).text)

    def test_5xx_again_after_the_retry_fails_over(self):
        g = self.gateway([account("a", self.mock.url("a", "status=502")), account("b", self.mock.url("b"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.served_by(r), "b")
        self.assertEqual(self.mock.accounts_hit(), ["a", "a", "b"])

    def test_server_error_in_stream_retries_the_same_account(self):
        g = self.gateway([account("a", self.mock.url("a", "late_error,after=0,code=server_error,times=1")),
                          account("b", self.mock.url("b"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(response_text(s.events), "hello from a")
        self.assertEqual(self.mock.accounts_hit(), ["a", "a"])

    def test_429_short_retry_after_is_waited_out_when_the_fallback_changes_the_model(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,retry_after=1,times=1")), self.mapped("b")])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.served_by(r), "a")
        reqs = self.mock.requests()
        self.assertEqual([q["account"] for q in reqs], ["a", "a"], reqs)
        self.assertEqual({q["model"] for q in reqs}, {"gpt-test"})

    def test_429_retry_after_ms_is_waited_out_too(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,retry_after_ms=300,times=1")), self.mapped("b")])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(self.served_by(r), "a")
        self.assertEqual(self.mock.accounts_hit(), ["a", "a"])
        wait_for(lambda: "after_ms=300" in g.trace_text(), what="a retry after 300 ms")

    def test_429_short_retry_after_is_waited_out_when_no_candidate_remains(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,retry_after=1,times=1"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.mock.accounts_hit(), ["a", "a"])

    def test_429_short_retry_after_fails_over_at_once_to_a_same_model_candidate(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,retry_after=1")), account("b", self.mock.url("b"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.mock.accounts_hit(), ["a", "b"])

    def test_429_long_retry_after_fails_over_even_to_a_mapped_model(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,retry_after=30")), self.mapped("b")])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        reqs = self.mock.requests()
        self.assertEqual([(q["account"], q["model"]) for q in reqs], [("a", "gpt-test"), ("b", "gpt-other")])

    def test_retries_per_request_are_bounded(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,retry_after=1"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 429, r)  # the pool is out for its 429s: usage_limit_reached (test_codex_native.py)
        self.assertEqual(r.json()["error"]["type"], "usage_limit_reached")
        # the policy waits a 429 out twice on one account; C never allows more than 4 retries
        self.assertEqual(self.mock.accounts_hit(), ["a", "a", "a"])

    def test_client_hang_up_cancels_the_retry_wait(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,retry_after=5,times=1")), self.mapped("b")])
        row = self.hang_up_during(g, "CANDIDATE_RETRY")
        self.assertEqual(row["status"], 499, row)
        self.assertEqual(row["attempts"], 1, row)
        self.assertEqual(self.mock.accounts_hit(), ["a"])

    # --- time limits

    def test_first_byte_limit_is_not_extended_by_the_connect_limit(self):
        # headers after 2 s: within connect (3 s) + first byte (0.5 s), beyond the first-byte limit
        g = self.gateway([account("a", self.mock.url("a", "slow_headers,ms=2000")), account("b", self.mock.url("b"))],
                         env={"SWITCHYARD_CONNECT_TIMEOUT_MS": "3000", "SWITCHYARD_FIRST_BYTE_TIMEOUT_MS": "500"})
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(response_text(s.events), "hello from b")
        wait_for(lambda: "account=a reason=failover class=timeout" in g.trace_text(),
                 what="a's failover as a timeout in the trace")

    def test_stream_without_output_by_the_ttft_limit_fails_over_before_commit(self):
        g = self.gateway([account("a", self.mock.url("a", "stall,ms=30000")), account("b", self.mock.url("b"))],
                         env={"SWITCHYARD_TTFT_MS": "500"})
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(s.types().count("response.created"), 1, s.types())
        self.assertEqual(response_text(s.events), "hello from b")
        self.assertFalse([e for e in s.events if is_error_event(e)])
        self.assertEqual(self.mock.accounts_hit(), ["a", "b"])
        wait_for(lambda: [q for q in self.mock.requests("a") if q["aborted"]], what="a's stream to be abandoned")
        row = g.wait_request_logs(1)[-1]
        self.assertEqual(g.log_account_name(row), "b")

    def test_chat_stream_without_output_by_the_ttft_limit_fails_over(self):
        g = self.gateway([account("a", self.mock.url("a", "stall,ms=30000")), account("b", self.mock.url("b"))],
                         env={"SWITCHYARD_TTFT_MS": "500"})
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(chat_text(s.events), "hello from b")

    def test_slow_first_token_is_still_served_when_no_other_candidate_is_left(self):
        g = self.gateway([account("a", self.mock.url("a", "stall,ms=1200"))], env={"SWITCHYARD_TTFT_MS": "300"})
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(response_text(s.events), "hello from a")
        self.assertEqual(s.types()[-1], "response.completed")

    def test_slow_stream_the_policy_keeps_at_the_ttft_limit_is_recorded_as_served(self):
        # the policy returns the time-to-first-token timeout: the slow stream is
        # committed and served, and its attempt is "ok", not "returned"
        pol = self.short_policies(edits=[(r'if ev\.timeout then return failover\("timeout", 20\) end',
                                          'if ev.timeout then return give_back("timeout") end', "classify.lua")])
        g = self.gateway([account("a", self.mock.url("a", "stall,ms=1200")), account("b", self.mock.url("b"))],
                         env={"SWITCHYARD_TTFT_MS": "300"}, policies=pol)
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(response_text(s.events), "hello from a")
        row = g.wait_request_logs(1)[-1]
        self.assertEqual(row["status"], 200, row)
        self.assertEqual([(t["account"], t["outcome"]) for t in json.loads(row["attempts_json"])], [("a", "ok")])

    # --- a 2xx that is not an answer

    def assertBadAnswerFailedOver(self, g, first="a"):
        aid = g.account_id(first)
        st = wait_for(lambda: g.query("SELECT * FROM account_state WHERE account_id = ? AND last_error = 'bad_answer'",
                                      (aid,)), what=f"{first}'s state to record bad_answer")[0]
        self.assertLess(st["success_ema"], 1.0, "a 2xx that is no answer was credited to health")
        self.assertGreater(st["cooldown_until"], 0)
        wait_for(lambda: "class=bad_answer" in g.trace_text(), what="the failover as bad_answer in the trace")

    def test_html_challenge_page_with_200_fails_over(self):
        g = self.gateway([account("a", self.mock.url("a", "html")), account("b", self.mock.url("b"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["output"][0]["content"][0]["text"], "hello from b")
        self.assertNotIn("<html", r.text)
        self.assertEqual(self.mock.accounts_hit(), ["a", "b"])
        self.assertBadAnswerFailedOver(g)

    def test_html_challenge_page_for_a_stream_fails_over(self):
        g = self.gateway([account("a", self.mock.url("a", "html")), account("b", self.mock.url("b"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(response_text(s.events), "hello from b")

    def test_empty_200_body_fails_over(self):
        g = self.gateway([account("a", self.mock.url("a", "empty")), account("b", self.mock.url("b"))])
        r = g.post("/v1/chat/completions", CHAT_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["choices"][0]["message"]["content"], "hello from b")
        self.assertBadAnswerFailedOver(g)

    def assertStreamFailsOverToB(self, scenario, path, body, text):
        g = self.gateway([account("a", self.mock.url("a", scenario)), account("b", self.mock.url("b"))])
        s = g.stream(path, body)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(text(s.events), "hello from b")
        self.assertEqual([e for e in s.events if is_error_event(e)], [])
        self.assertBadAnswerFailedOver(g)
        return s

    def test_empty_event_stream_fails_over(self):
        self.assertStreamFailsOverToB("empty", "/v1/responses", RESP_STREAM, response_text)

    def test_stream_ending_with_no_output_and_no_terminal_event_fails_over(self):
        s = self.assertStreamFailsOverToB("no_output", "/v1/responses", RESP_STREAM, response_text)
        self.assertEqual(s.types().count("response.created"), 1, s.types())

    def test_chat_stream_ending_with_no_output_fails_over(self):
        self.assertStreamFailsOverToB("no_output", "/v1/chat/completions", CHAT_STREAM, chat_text)

    def test_no_answer_from_the_only_account_is_an_error_not_a_success(self):
        g = self.gateway([account("a", self.mock.url("a", "no_output"))])
        r = g.post("/v1/responses", RESP_STREAM)
        self.assertNotEqual(r.status, 200, r)
        self.assertOpenAIError(r)
        row = g.wait_request_logs(1)[-1]
        self.assertNotEqual(row["status"], 200, row)

    # --- wait for capacity instead of a 503

    def test_request_waits_for_a_cooling_account_instead_of_a_503(self):
        pdir = self.short_policies(server_cooldown=1)
        g = self.gateway([account("a", self.mock.url("a", "status=500,times=1"))], policies=pdir)
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.served_by(r), "a")
        self.assertEqual(self.mock.accounts_hit(), ["a", "a"])
        wait_for(lambda: "CANDIDATE_WAIT" in g.trace_text(), what="a CANDIDATE_WAIT trace event")
        self.assertIn("switchyard_waits_total 1\n", g.get("/metrics", key=None).text)

    def test_wait_beyond_the_budget_answers_503_with_retry_after(self):
        g = self.gateway([account("a", self.mock.url("a", "status=500"))],
                         env={"SWITCHYARD_CAPACITY_WAIT_MS": "1000"})
        r = g.post("/v1/responses", RESP_BODY)
        self.assertOpenAIError(r, 503)
        ra = r.headers.get("retry-after")
        self.assertIsNotNone(ra, r.headers)
        self.assertTrue(1 <= int(ra) <= 30, ra)   # a rests 30 s after the 5xx
        trace = wait_for(lambda: (lambda t: t if "REQUEST_FINAL" in t else None)(g.trace_text()),
                         what="the request's trace")
        self.assertNotIn("CANDIDATE_WAIT", trace)
        # a second request while a rests: refused at once, still saying when to come back
        r = g.post("/v1/responses", RESP_BODY)
        self.assertOpenAIError(r, 503)
        self.assertTrue(1 <= int(r.headers.get("retry-after")) <= 30, r.headers)

    def busy_pool(self, env=None):
        """a: a usage limit (it rests an hour); b: one in flight at most, its next request held by the
        test. Returns (gateway, b's upstream, the first request's thread and result)."""
        up = PyUpstream("b")
        self.addCleanup(up.close)
        up.hold_next = True
        g = self.gateway([account("a", self.mock.url("a", "quota429")),
                          account("b", up.base_url(), args=["--max-concurrency", "1"])], env=env)
        first = {}
        t = threading.Thread(target=lambda: first.setdefault("r", g.post("/v1/responses", RESP_BODY)))
        t.start()
        self.assertTrue(up.held.wait(30), "b never got the first request")  # a rests, b is at its limit
        return g, up, t, first

    def test_a_request_waits_for_the_slot_of_a_busy_account_instead_of_a_503(self):
        g, up, t, first = self.busy_pool()
        second = {}
        t2 = threading.Thread(target=lambda: second.setdefault("r", g.post("/v1/responses", RESP_BODY)))
        t2.start()
        wait_for(lambda: "reason=busy" in g.trace_text(), what="the second request waiting for b's slot")
        self.assertNotIn("r", second)  # waiting, not answered 503
        up.release()
        t.join(30)
        t2.join(30)
        self.assertEqual((first["r"].status, self.served_by(first["r"])), (200, "b"), first["r"])
        self.assertEqual((second["r"].status, self.served_by(second["r"])), (200, "b"), second["r"])
        self.assertEqual(up.count(), 2)

    def test_a_pool_out_of_slots_past_the_wait_says_to_come_back_in_a_second_not_at_the_longest_rest(self):
        g, up, t, first = self.busy_pool(env={"SWITCHYARD_CAPACITY_WAIT_MS": "200"})
        r = g.post("/v1/responses", RESP_BODY)
        self.assertOpenAIError(r, 503)
        self.assertEqual(r.headers.get("retry-after"), "1", r.headers)  # a slot, not a's hour
        up.release()
        t.join(30)
        self.assertEqual(first["r"].status, 200, first["r"])

    def test_client_hang_up_cancels_the_wait_for_capacity(self):
        pdir = self.short_policies(server_cooldown=8)
        g = self.gateway([account("a", self.mock.url("a", "status=500,times=1"))], policies=pdir)
        row = self.hang_up_during(g, "CANDIDATE_WAIT")
        self.assertEqual(row["status"], 499, row)
        self.assertEqual(self.mock.accounts_hit(), ["a"])

    # --- circuit breaker and the return to the primary

    def breaker_policies(self, server_cooldown=1, open_seconds=60, half_life=60):
        return self.short_policies(server_cooldown=server_cooldown, edits=[
            (r'local OPEN_SECONDS = 60', f'local OPEN_SECONDS = {open_seconds}', "breaker.lua"),
            (r'local HEALTH_HALF_LIFE = 60', f'local HEALTH_HALF_LIFE = {half_life}', "order.lua")])

    def test_breaker_opens_after_4_failures_for_an_api_key_account(self):
        # a rests 0 s after each 5xx, so only the breaker can keep it out
        g = self.gateway([account("a", self.mock.url("a", "status=500")), account("b", self.mock.url("b"))],
                         policies=self.breaker_policies(server_cooldown=0), env={"SWITCHYARD_ROUTE_STRATEGY": "balanced"})
        for _ in range(12):
            r = g.post("/v1/responses", RESP_BODY)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(self.served_by(r), "b")
        self.assertEqual(len(self.mock.requests("a")), 4, "a was tried after its breaker opened")
        wait_for(lambda: "account a: circuit open after 4 failures in a row" in g.log_text(),
                 what="the log to say a's circuit opened")
        wait_for(lambda: "reason=\"breaker_open" in g.trace_text(), what="a CANDIDATE_SKIP reason=breaker_open")

    def test_primary_serves_again_within_a_few_requests_after_its_outage(self):
        # a fails 4 times (its breaker opens for 1 s), then works again; b never fails
        g = self.gateway([account("a", self.mock.url("a", "status=500,times=4")), account("b", self.mock.url("b"))],
                         policies=self.breaker_policies(server_cooldown=1, open_seconds=1, half_life=1))

        def served_by_a():
            r = g.post("/v1/responses", RESP_BODY)
            self.assertEqual(r.status, 200, r)
            return self.served_by(r) == "a"

        wait_for(served_by_a, interval=0.2, what="the primary to serve again after its outage")
        self.assertEqual(len(self.mock.requests("a")), 5)
        for _ in range(4):
            r = g.post("/v1/responses", RESP_BODY)
            self.assertEqual(self.served_by(r), "a", "traffic did not stay on the recovered primary")

    def test_account_reset_clears_cooldown_ladder_and_breaker(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429")), account("b", self.mock.url("b"))])
        self.assertEqual(self.served_by(g.post("/v1/responses", RESP_BODY)), "b")
        aid = g.account_id("a")
        wait_for(lambda: g.query("SELECT 1 FROM account_state WHERE account_id = ? AND ladder_step = 1 AND"
                                 " cooldown_until > 0", (aid,)), what="a's ladder step to be stored")
        self.assertEqual(self.served_by(g.post("/v1/responses", RESP_BODY)), "b")
        self.assertEqual(len(self.mock.requests("a")), 1, "a was tried while cooling down")
        p = g.cli("account", "reset", "--db", g.db_path, "--name", "a")
        self.assertIn("reset", p.stdout)
        wait_for(lambda: "account a: reset" in g.log_text(), what="the gateway to clear a's state")
        self.assertEqual(self.served_by(g.post("/v1/responses", RESP_BODY)), "b")
        self.assertEqual(len(self.mock.requests("a")), 2, "a was not tried again after the reset")
        # the ladder started over: this 429 is step 1 again, not step 2
        wait_for(lambda: g.query("SELECT 1 FROM account_state WHERE account_id = ? AND ladder_step = 1 AND"
                                 " cooldown_until > 0", (aid,)), what="a's ladder to start over")
        self.assertEqual(g.cli("account", "reset", "--db", g.db_path, "--name", "nope", check=False).returncode, 1)

    # --- context-window fallback

    def test_context_length_error_goes_once_to_the_larger_context_fallback(self):
        big = account("big", self.mock.url("big"), args=["--context-fallback", "--model-map",
                                                         json.dumps({"gpt-test": "gpt-test-long"})])
        g = self.gateway([account("a", self.mock.url("a", "ctxlen")), account("same", self.mock.url("same", "ctxlen")),
                          big])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.served_by(r), "big")
        reqs = self.mock.requests()
        self.assertEqual([(q["account"], q["model"]) for q in reqs], [("a", "gpt-test"), ("big", "gpt-test-long")],
                         "the request went to an equivalent account")
        wait_for(lambda: "reason=context_fallback" in g.trace_text(), what="a CANDIDATE_SKIP reason=context_fallback")
        # a was not blamed for a request that was too long. The writer commits account state some ms after
        # the answer: the request's log row, queued after any state it changed and committed with it or
        # later, is awaited first (else a cooldown written a moment late would go unseen)
        self.assertEqual(g.wait_request_logs(1)[-1]["status"], 200)
        aid = g.account_id("a")
        self.assertFalse(g.query("SELECT 1 FROM account_state WHERE account_id = ? AND cooldown_until > 0", (aid,)))

    def test_context_length_error_is_sent_to_a_fallback_only_once(self):
        g = self.gateway([account("a", self.mock.url("a", "ctxlen")),
                          account("big", self.mock.url("big", "ctxlen"), args=["--context-fallback"]),
                          account("bigger", self.mock.url("bigger"), args=["--context-fallback"])])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.json()["error"]["code"], "context_length_exceeded")
        self.assertEqual(self.mock.accounts_hit(), ["a", "big"])

    def test_context_fallback_verdict_with_none_left_records_the_attempt_as_returned(self):
        # a policy that asks for the fallback whatever context_fallbacks says: the
        # second too-long answer is returned, and the attempts record says so
        pol = self.short_policies(edits=[(r'if ev\.context_fallbacks > 0 and mentions', 'if mentions', "classify.lua")])
        g = self.gateway([account("a", self.mock.url("a", "ctxlen")),
                          account("big", self.mock.url("big", "ctxlen"), args=["--context-fallback"])], policies=pol)
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 400, r)
        tried = json.loads(g.wait_request_logs(1)[-1]["attempts_json"])
        self.assertEqual([(t["account"], t["outcome"]) for t in tried],
                         [("a", "context_fallback"), ("big", "returned")])

    def test_context_length_error_without_a_fallback_is_returned_unchanged(self):
        g = self.gateway([account("a", self.mock.url("a", "ctxlen")), account("b", self.mock.url("b"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.json()["error"]["code"], "context_length_exceeded")
        self.assertEqual(self.mock.accounts_hit(), ["a"])

    # --- accounting

    def test_request_log_names_the_serving_account_model_attempts_and_usage(self):
        g = self.gateway([account("a", self.mock.url("a", "status=500")), self.mapped("b")])
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(response_text(s.events), "hello from b")
        r = g.post("/v1/chat/completions", CHAT_BODY)
        self.assertEqual(r.status, 200, r)
        rows = g.wait_request_logs(2)
        for row in rows:
            self.assertEqual(g.log_account_name(row), "b", row)
            self.assertEqual(row["upstream_model"], "gpt-other", row)
            self.assertEqual(row["model"], "gpt-test", row)
            self.assertEqual((row["input_tokens"], row["output_tokens"], row["total_tokens"]), (7, 3, 10), row)
        self.assertEqual(rows[0]["attempts"], 3, rows[0])   # a, a again (retry), b
        tried = json.loads(rows[0]["attempts_json"])
        self.assertEqual([(t["account"], t["model"], t["outcome"]) for t in tried],
                         [("a", "gpt-test", "retry"), ("a", "gpt-test", "failover"), ("b", "gpt-other", "ok")])
        for outcome in ("outcome=retry", "outcome=failover"):
            wait_for(lambda: outcome in g.trace_text(), what=f"an ATTEMPT_END {outcome}")

    def test_turn_state_pin_holds_after_a_wait_for_capacity(self):
        # a issues the turn state; the next turn finds a resting, waits for it,
        # and must then go to a again, not to whichever account plans first
        g = self.gateway([account("b", self.mock.url("b", "status=500,times=1"), sort=1),
                          account("a", self.mock.url("a", "status=500,ok_first=1,times=2,turn_state=ts1"), sort=2)],
                         policies=self.short_policies(server_cooldown=1))
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual((r.status, self.served_by(r), r.headers.get("x-codex-turn-state")), (200, "a", "ts1"), r)
        # b is back 0.3 s before a: the wait must be for a, not for the soonest
        time.sleep(0.3)
        r = g.post("/v1/responses", RESP_BODY, headers={"x-codex-turn-state": "ts1"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.served_by(r), "a", "the turn left the account that owns its state")
        wait_for(lambda: "CANDIDATE_POOL_AGAIN" in g.trace_text(), what="the wait for capacity")

    # --- stream resume (text-only chat streams; on by default)

    def resume_policies(self):
        return self.short_policies()

    def test_cut_chat_stream_is_finished_on_the_next_account_when_the_policy_allows(self):
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2")), account("b", self.mock.url("b"))],
                         policies=self.resume_policies())
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertFalse(s.truncated, s)
        self.assertEqual([e for e in s.events if is_error_event(e)], [], "the client saw the cut")
        # a delivered "hello from"; b continued (the mock answers its whole text again: the repeat is taken out)
        self.assertEqual(chat_text(s.events), "hello from b")
        self.assertEqual(s.events[-1]["data"].strip(), "[DONE]")
        reqs = self.mock.requests()
        self.assertEqual([q["account"] for q in reqs], ["a", "b"])
        self.assertIsNone(reqs[0]["prefill"])
        self.assertEqual(reqs[1]["continued"], "hello from", "the delivered text was not sent to continue from")
        self.assertEqual(reqs[1]["model"], "gpt-test")
        row = g.wait_request_logs(1)[-1]
        self.assertEqual(row["resumed"], 1, row)
        self.assertEqual(row["status"], 200, row)
        self.assertEqual(g.log_account_name(row), "b")
        wait_for(lambda: "STREAM_RESUME req=" in g.trace_text(), what="a STREAM_RESUME trace event")

    def test_resumed_stream_gives_back_its_body_bytes_in_flight(self):
        # the continuation body replaces the client's: the body budget must
        # get back what the request took, not the longer continuation's size
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2")), account("b", self.mock.url("b"))],
                         policies=self.resume_policies())
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(g.wait_request_logs(1)[-1]["resumed"], 1)
        h = g.get("/health").json()
        self.assertEqual(h["request_bodies"]["bytes_in_flight"], 0, h["request_bodies"])
        # a body shorter than the continuation grew (with messages: the mock checks them as the API does)
        r = g.post("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(r.status, 200, r)

    def test_resume_prefill_never_carries_the_cut_accounts_token(self):
        # a careless upstream echoed its own Authorization into the answer, then the stream was cut
        g = self.gateway([account("a", self.mock.url("a", "reflect_auth=200,cut=1")), account("b", self.mock.url("b"))],
                         policies=self.resume_policies())
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(g.wait_request_logs(1)[-1]["resumed"], 1)
        reqs = self.mock.requests()
        self.assertEqual([q["account"] for q in reqs], ["a", "b"])
        token = g.accounts["a"]
        self.assertIn("bad credentials", reqs[1]["continued"])
        self.assertNotIn(token, reqs[1]["continued"])
        self.assertIn("[redacted]", reqs[1]["continued"])
        self.assertNotIn(token.encode(), s.raw)

    def test_cut_chat_stream_is_not_resumed_when_the_policy_turns_resume_off(self):
        pol = self.short_policies(edits=[(r'local RESUME_CHAT_STREAMS = true', 'local RESUME_CHAT_STREAMS = false',
                                          "classify.lua")])
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2")), account("b", self.mock.url("b"))],
                         policies=pol)
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        errs = [e for e in s.events if is_error_event(e)]
        self.assertEqual(len(errs), 1, s.events)
        self.assertEqual(errs[0]["json"]["error"]["code"], "upstream_stream_interrupted")
        self.assertEqual(self.mock.accounts_hit(), ["a"])
        self.assertEqual(g.wait_request_logs(1)[-1]["resumed"], 0)

    def test_refused_prefill_ends_with_the_explicit_interrupted_error(self):
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2")),
                          account("b", self.mock.url("b", "status=400"))], policies=self.resume_policies())
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(chat_text(s.events), "hello from")
        errs = [e for e in s.events if is_error_event(e)]
        self.assertEqual(len(errs), 1, s.events)
        self.assertEqual(errs[0]["json"]["error"]["code"], "upstream_stream_interrupted")
        self.assertNotIn("[DONE]", s.raw.decode() if isinstance(s.raw, bytes) else s.raw)
        self.assertEqual(self.mock.accounts_hit(), ["a", "b"])

    def test_responses_stream_is_not_resumed_when_the_policy_says_so(self):
        pol = self.short_policies(edits=[(r'local RESUME_RESPONSES_STREAMS = true',
                                          'local RESUME_RESPONSES_STREAMS = false', "classify.lua")])
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2")), account("b", self.mock.url("b"))],
                         policies=pol)
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.types()[-1], "response.failed", s.types())
        self.assertEqual(self.mock.accounts_hit(), ["a"])


if __name__ == "__main__":
    main()
