"""test_failover.py: failing over between upstream accounts, end to end:
which failures switch accounts (and that the client never sees the failed
attempt), which ones must not be retried, cooldowns that survive kill -9,
the 503 when nothing is left, request logs, trace events and
previous_response_id affinity.

Accounts are added with sort 10, 20, ... in list order. The default
"ordered" strategy moves the healthier of two random picks among the first
three to the front, keeping the earlier one on a tie, so with two fresh
(equally healthy) accounts the first one listed is always tried first. The
tests that rely on the order use two accounts."""

import os
import time

from harness import (GatewayTest, account, chat_text, event_type, is_error_event, main,
                     response_text, source_dir, wait_for)

CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
RESP_BODY = {"model": "gpt-test", "input": "hi"}
RESP_STREAM = dict(RESP_BODY, stream=True)
CHAT_STREAM = dict(CHAT_BODY, stream=True)

# a 429 whose Retry-After keeps the account cooling for the whole test, however slow the machine
LONG_429 = "status=429,retry_after=600"


class FailoverTest(GatewayTest):

    def two(self, first_scenario, second_scenario="ok", env=None, names=("a", "b")):
        a, b = names
        return self.gateway([account(a, self.mock.url(a, first_scenario)),
                             account(b, self.mock.url(b, second_scenario))], env=env)

    def assertCleanStreamFrom(self, s, name):
        """s is a complete, error-free responses stream produced by account name."""
        self.assertEqual(s.status, 200, s)
        self.assertFalse(s.truncated, s)
        errors = [e for e in s.events if is_error_event(e)]
        self.assertEqual(errors, [], "the client saw the failed attempt")
        types = s.types()
        self.assertEqual(types.count("response.created"), 1, types)
        created = next(e for e in s.events if event_type(e) == "response.created")
        self.assertTrue(created["json"]["response"]["id"].startswith(f"resp_{name}_"), created)
        self.assertEqual(types[-1], "response.completed", types)
        self.assertEqual(response_text(s.events), f"hello from {name}")

    def assertFailedOver(self, first="a", second="b"):
        reqs = self.mock.requests()
        self.assertEqual([r["account"] for r in reqs], [first, second], reqs)
        return reqs

    # --- failures that switch accounts

    def test_429_fails_over_to_next_account_with_same_request(self):
        g = self.two(LONG_429)
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["output"][0]["content"][0]["text"], "hello from b")
        a, b = self.assertFailedOver()
        for k in ("endpoint", "method", "model", "stream", "body_len", "body_hash"):
            self.assertEqual(a[k], b[k], f"the retry differs in {k}")
        self.assertEqual(b["authorization"], "Bearer " + g.accounts["b"])
        self.assertEqual(a["authorization"], "Bearer " + g.accounts["a"])

    def test_failover_status_codes_switch_account(self):
        for code in (401, 403, 404, 408, 409, 500, 502, 503):
            with self.subTest(status=code):
                self.mock.reset()
                g = self.two(f"status={code}", names=(f"s{code}a", f"s{code}b"))
                r = g.post("/v1/chat/completions", CHAT_BODY)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["choices"][0]["message"]["content"], f"hello from s{code}b")
                if code >= 500:  # a 5xx is retried once on the same account first (test_recovery.py)
                    self.assertEqual(self.mock.accounts_hit(), [f"s{code}a", f"s{code}a", f"s{code}b"])
                else:
                    self.assertFailedOver(f"s{code}a", f"s{code}b")
                g.cleanup()

    def test_quota_text_429_fails_over(self):
        g = self.two("quota429")
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertCleanStreamFrom(s, "b")
        self.assertFailedOver()

    def test_quota_error_in_stream_switches_account(self):
        g = self.two("quota_stream")
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertCleanStreamFrom(s, "b")
        self.assertFailedOver()

    def test_quota_error_in_chat_stream_switches_account(self):
        g = self.two("quota_stream")
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual([e for e in s.events if is_error_event(e)], [], "the client saw the failed attempt")
        self.assertEqual(chat_text(s.events), "hello from b")
        self.assertEqual(s.events[-1]["data"], "[DONE]")
        self.assertFailedOver()

    def test_response_failed_in_stream_switches_account(self):
        g = self.two("failed_stream")
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertCleanStreamFrom(s, "b")
        self.assertFailedOver()

    def test_connection_reset_before_response_fails_over(self):
        g = self.two("reset")
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["output"][0]["content"][0]["text"], "hello from b")
        self.assertFailedOver()
        s = g.stream("/v1/responses", RESP_STREAM)   # a is cooling now: straight to b
        self.assertCleanStreamFrom(s, "b")

    def test_slow_headers_beyond_first_byte_timeout_fails_over(self):
        g = self.two("slow_headers,ms=30000", env={"SWITCHYARD_FIRST_BYTE_TIMEOUT_MS": "500"})
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertCleanStreamFrom(s, "b")
        self.assertFailedOver()
        wait_for(lambda: self.mock.requests("a")[0]["aborted"],
                 what="the gateway to drop the slow upstream transfer")

    def test_non_streamed_slow_headers_beyond_response_timeout_fails_over(self):
        g = self.two("slow_headers,ms=30000", env={"SWITCHYARD_RESPONSE_TIMEOUT_MS": "500"})
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["output"][0]["content"][0]["text"], "hello from b")
        self.assertFailedOver()
        wait_for(lambda: self.mock.requests("a")[0]["aborted"],
                 what="the gateway to drop the slow upstream transfer")

    def test_stall_before_output_beyond_idle_timeout_fails_over(self):
        g = self.two("stall,ms=30000", env={"SWITCHYARD_IDLE_TIMEOUT_MS": "500"})
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertCleanStreamFrom(s, "b")   # a's held response.created never reached the client
        self.assertFailedOver()
        wait_for(lambda: self.mock.requests("a")[0]["aborted"],
                 what="the gateway to drop the stalled upstream transfer")

    def test_stream_longer_than_the_idle_timeout_with_shorter_gaps_is_not_cut(self):
        # the idle limit runs from the last piece of data, not from the first:
        # a stream that lasts 2.4 s, a piece every 300 ms, under a 700 ms limit
        g = self.two("slow_stream,ms=300,deltas=8", env={"SWITCHYARD_IDLE_TIMEOUT_MS": "700"})
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertFalse(s.truncated, s)
        self.assertEqual([e for e in s.events if is_error_event(e)], [], s.types())
        self.assertEqual(s.types()[-1], "response.completed", s.types())
        self.assertEqual(s.types().count("response.output_text.delta"), 8, s.types())
        self.assertEqual(self.mock.accounts_hit(), ["a"], "the stream was cut and retried")

    # --- failures that must not be retried

    def test_request_error_inside_stream_is_returned_not_retried(self):
        # an in-stream error that is the request's fault (not the account's):
        # the policy returns it, so the client sees the upstream's stream as sent
        g = self.two("late_error,after=0,code=invalid_prompt")
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(self.mock.accounts_hit(), ["a"], "a request error was retried elsewhere")
        errors = [e for e in s.events if is_error_event(e)]
        self.assertEqual(len(errors), 1, s.types())
        self.assertIn("invalid_prompt", errors[0]["data"])
        self.assertNotIn("upstream_stream_interrupted", s.raw.decode(errors="replace"))

    def test_context_length_error_is_returned_unchanged(self):
        g = self.two("ctxlen")
        r = g.post("/v1/chat/completions", CHAT_BODY)
        direct = self.mock.call("x", "ctxlen", "chat/completions", CHAT_BODY)
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.json(), direct.json(), "the upstream's 400 was altered")
        g.wait_request_logs(1)
        self.assertEqual([x["account"] for x in self.mock.requests() if x["account"] != "x"], ["a"],
                         "a request error was retried on another account")
        # and it does not cool the account: the next request still goes to a first
        g.post("/v1/chat/completions", CHAT_BODY)
        self.assertEqual([x["account"] for x in self.mock.requests() if x["account"] != "x"], ["a", "a"])

    def test_late_error_after_output_is_not_replayed(self):
        # an error about the request itself after output (not a limit of the account: those
        # are continued elsewhere, test_late_limits.py) reaches the client; nothing is resent
        g = self.two("late_error,code=invalid_prompt")
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(response_text(s.events), "hello from a")
        self.assertTrue(s.events and is_error_event(s.events[-1]),
                        f"the stream should end with an error event: {s.types()[-4:]}")
        self.assertNotIn("response.completed", s.types(), "a fake completion was sent")
        g.wait_request_logs(1)
        self.assertEqual(self.mock.accounts_hit(), ["a"], "output already sent was replayed elsewhere")

    def test_late_reset_after_output_is_not_replayed(self):
        # with resume off for Responses streams (it is on by default: test_failover_scenarios.py)
        with open(os.path.join(source_dir(), "policies", "classify.lua")) as f:
            text = f.read().replace("local RESUME_RESPONSES_STREAMS = true", "local RESUME_RESPONSES_STREAMS = false")
        self.assertIn("RESUME_RESPONSES_STREAMS = false", text)
        g = self.gateway([account("a", self.mock.url("a", "late_reset")), account("b", self.mock.url("b"))],
                         policies=self.policy_copy({"classify.lua": text}))
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(response_text(s.events), "hello from a")
        self.assertTrue(s.events and is_error_event(s.events[-1]),
                        f"the stream should end with an error event (truncated={s.truncated}): "
                        f"{s.types()[-4:]}")
        self.assertNotIn("response.completed", s.types(), "a fake completion was sent")
        g.wait_request_logs(1)
        self.assertEqual(self.mock.accounts_hit(), ["a"], "output already sent was replayed elsewhere")

    # --- nothing left

    def test_all_accounts_failing_returns_503_naming_each(self):
        g = self.two(LONG_429, "status=503", names=("acct-alpha", "acct-bravo"))
        r = g.post("/v1/responses", RESP_BODY)
        err = self.assertOpenAIError(r, 503)
        msg = err["message"]
        self.assertIn("acct-alpha", msg)
        self.assertIn("acct-bravo", msg)
        self.assertRegex(msg.lower(), r"429|rate|quota|limit", "the reason for acct-alpha is missing")
        self.assertRegex(msg.lower(), r"503|5xx|server|unavailable|upstream", "the reason for acct-bravo is missing")
        # the 503 is retried once on acct-bravo (the 429 had a same-model alternative left)
        self.assertEqual(self.mock.accounts_hit(), ["acct-alpha", "acct-bravo", "acct-bravo"])
        # both cool down now: the next request is refused without touching either
        r = g.post("/v1/responses", RESP_BODY)
        err = self.assertOpenAIError(r, 503)
        self.assertIn("acct-alpha", err["message"])
        self.assertIn("acct-bravo", err["message"])
        self.assertEqual(self.mock.accounts_hit(), ["acct-alpha", "acct-bravo", "acct-bravo"],
                         "a cooling account was tried")

    # --- state

    def test_cooldown_persists_across_requests_and_restart(self):
        g = self.two(LONG_429)
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        self.assertFailedOver()
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertCleanStreamFrom(s, "b")
        self.assertEqual(self.mock.accounts_hit(), ["a", "b", "b"], "a was tried while cooling")
        g.wait_request_logs(2)
        g.kill9()
        g.restart()
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["output"][0]["content"][0]["text"], "hello from b")
        self.assertEqual(self.mock.accounts_hit(), ["a", "b", "b", "b"], "the cooldown was lost on restart")

    def test_cooldown_ladder_climbs_on_repeated_429s_and_persists(self):
        # one account, no Retry-After: the ladder alone decides (with a second,
        # healthier account the ordered strategy's P2C would stop trying a)
        g = self.gateway([account("a", self.mock.url("a", "status=429"))])
        a = g.account_id("a")

        def state():
            rows = g.query("SELECT ladder_step, cooldown_until, last_429_at FROM account_state "
                           "WHERE account_id = ?", (a,))
            return rows[0] if rows else None

        seen = []
        for expected_step in (1, 2, 3):
            before = state()
            # a pool out for its 429s: the Responses API answers as a spent plan (test_codex_native.py)
            self.assertOpenAIError(g.post("/v1/responses", RESP_BODY), 429)
            wait_for(lambda: state() and state()["ladder_step"] == expected_step and state() != before,
                     what=f"ladder step {expected_step} to be stored")
            st = state()
            seen.append(round(st["cooldown_until"] - st["last_429_at"]))
            # end the cooldown as if its time had passed, keeping the ladder: the
            # account was back in service a moment ago, so the next 429 climbs
            g.stop()
            c = g.db()
            c.execute("UPDATE account_state SET cooldown_until = ?, last_429_at = ? WHERE account_id = ?",
                      (time.time() - 1, time.time() - 1 - seen[-1], a))
            c.commit()
            c.close()
            g.start(port=g.port)
        self.assertEqual(seen, [45, 300, 1800])
        self.assertEqual(self.mock.accounts_hit(), ["a", "a", "a"])

    def test_request_logs_record_account_status_attempts(self):
        g = self.two(LONG_429)
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        row = g.wait_request_logs(1)[-1]
        self.assertEqual(g.log_account_name(row), "b", row)
        self.assertEqual(row["status"], 200, row)
        self.assertEqual(row["attempts"], 2, row)
        if "stream" in row:
            self.assertFalse(row["stream"], row)

    def test_request_log_records_stream_usage(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        row = g.wait_request_logs(1)[-1]
        self.assertEqual(g.log_account_name(row), "a", row)
        self.assertEqual(row["status"], 200, row)
        self.assertEqual(row["attempts"], 1, row)
        self.assertEqual((row["input_tokens"], row["output_tokens"], row["total_tokens"]), (7, 3, 10), row)

    def test_trace_log_has_candidate_events(self):
        g = self.two(LONG_429, names=("acct-alpha", "acct-bravo"))
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)  # alpha is cooling: skipped
        text = wait_for(lambda: (lambda t: t if t.count("REQUEST_FINAL") >= 2 else None)(g.trace_text()),
                        what="two REQUEST_FINAL trace events")
        for ev in ("CANDIDATE_POOL", "CANDIDATE_START", "CANDIDATE_SKIP", "REQUEST_FINAL"):
            self.assertIn(ev, text)
        skips = [ln for ln in text.splitlines() if "CANDIDATE_SKIP" in ln]
        self.assertTrue(any("acct-alpha" in ln for ln in skips), skips)
        starts = [ln for ln in text.splitlines() if "CANDIDATE_START" in ln]
        self.assertTrue(any("acct-alpha" in ln for ln in starts), starts)
        self.assertTrue(any("acct-bravo" in ln for ln in starts), starts)

    def test_previous_response_id_sticks_to_producing_account(self):
        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        producer = response_text(s.events).rsplit(" ", 1)[-1]
        done = [e for e in s.events if event_type(e) == "response.completed"][-1]
        resp_id = done["json"]["response"]["id"]
        self.assertTrue(resp_id.startswith(f"resp_{producer}_"), resp_id)
        g.wait_request_logs(1)
        # a new account goes to the front of the order; wait until plain requests land on it
        g.add_account("c", self.mock.url("c"), "tok-c-" + resp_id, sort=-100)

        def served_by_c():
            r = g.post("/v1/responses", RESP_BODY)
            return r.status == 200 and r.json()["output"][0]["content"][0]["text"] == "hello from c"

        wait_for(served_by_c, interval=0.25, what="the gateway to route to the newly added first account")
        # several follow-ups, so that landing on the producer by chance (P2C) cannot pass the test
        for _ in range(4):
            before = len(self.mock.requests())
            r = g.post("/v1/responses", dict(RESP_BODY, previous_response_id=resp_id))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["output"][0]["content"][0]["text"], f"hello from {producer}")
            new = self.mock.requests()[before:]
            self.assertEqual([x["account"] for x in new], [producer], new)
            self.assertEqual(new[0]["previous_response_id"], resp_id)
        # streamed follow-ups stick too
        before = len(self.mock.requests())
        s = g.stream("/v1/responses", dict(RESP_STREAM, previous_response_id=resp_id))
        self.assertCleanStreamFrom(s, producer)
        self.assertEqual([x["account"] for x in self.mock.requests()[before:]], [producer])


if __name__ == "__main__":
    main()
