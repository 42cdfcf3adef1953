"""test_late_limits.py: a limit that arrives after output (a usage limit,
quota or capacity error event inside a 200 stream, after text or a tool call
reached the client). The account rests as it would have before output; an
answer of text only is continued on the next account with the client's bytes
continuous; a Responses stream that cannot be continued ends in the shape
its client retries the turn in (a response.failed with a code Codex does not
take as the end of the plan) when another account can serve, else the client
gets the limit as it came. An error about the request itself cools nothing.
The real Codex CLI's side is in test_codex_cli.py."""

import json
import os

from harness import (GatewayTest, account, chat_text, event_type, is_error_event, main, response_text, source_dir,
                     wait_for)

RESP_STREAM = {"model": "gpt-test", "input": "hi", "stream": True}
CHAT_STREAM = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "stream": True}


class LateLimitTest(GatewayTest):

    def cooled(self, g, name):
        """account_state of name once its cooldown is written (the writer commits it a moment after)."""
        aid = g.account_id(name)
        return wait_for(lambda: g.query("SELECT cooldown_until, last_error, ladder_step FROM account_state "
                                        "WHERE account_id = ? AND cooldown_until > 0", (aid,)),
                        what=f"{name}'s cooldown")[0]

    def failed_events(self, s):
        return [json.loads(e["data"]) for e in s.events if event_type(e) == "response.failed"]

    def test_a_usage_limit_after_text_is_continued_on_the_next_account_with_the_bytes_continuous(self):
        g = self.gateway([account("a", self.mock.url("a", "late_error,failed=1,after=2")),
                          account("b", self.mock.url("b"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(self.failed_events(s), [], "the limit reached the client")
        self.assertEqual([e for e in s.events if is_error_event(e)], [])
        # a delivered "hello from", b continued it (the mock answers its whole text again: the repeat
        # is taken out, upstream/overlap.h)
        self.assertEqual(response_text(s.events), "hello from b")
        self.assertEqual(event_type(s.events[-1]), "response.completed")
        self.assertEqual([r["account"] for r in self.mock.requests()], ["a", "b"])
        st = self.cooled(g, "a")
        self.assertEqual(st["last_error"], "quota")
        self.assertEqual(st["ladder_step"], 1)
        wait_for(lambda: "LATE_ERROR" in g.trace_text() and "action=resume" in g.trace_text(),
                 what="the LATE_ERROR trace line")

    def test_a_usage_limit_after_a_tool_call_ends_the_stream_for_the_client_to_retry_the_turn(self):
        g = self.gateway([account("a", self.mock.url("a", "late_error,failed=1,tool_call=1,after=0")),
                          account("b", self.mock.url("b"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        types = [event_type(e) for e in s.events]
        self.assertIn("response.output_item.added", types)          # the call went out
        failed = self.failed_events(s)
        self.assertEqual(len(failed), 1, types)
        err = failed[0]["response"]["error"]
        # not usage_limit_reached / insufficient_quota: Codex retries this one
        self.assertEqual(err["code"], "upstream_limit_retry", err)
        self.assertNotIn("usage_limit_reached", s.raw.decode())
        self.assertEqual(event_type(s.events[-1]), "response.failed")
        self.assertEqual(self.cooled(g, "a")["last_error"], "quota")
        # the client's retry of the turn goes to b, not to a again
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(response_text(s.events), "hello from b")
        self.assertEqual([r["account"] for r in self.mock.requests()], ["a", "b"])
        row = g.wait_request_logs(2)[0]
        tried = json.loads(row["attempts_json"])
        self.assertEqual([(t["account"], t["outcome"]) for t in tried], [("a", "retry_turn")])

    def test_a_usage_limit_after_output_with_no_account_left_reaches_the_client_as_it_came_and_still_cools(self):
        g = self.gateway([account("a", self.mock.url("a", "late_error,failed=1,tool_call=1,after=0"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        failed = self.failed_events(s)
        self.assertEqual([f["response"]["error"]["code"] for f in failed], ["usage_limit_reached"])
        self.assertEqual(self.cooled(g, "a")["last_error"], "quota")
        # the next turn is not spent on the account: the gateway says the pool is out
        r = g.post("/v1/responses", dict(RESP_STREAM, stream=False))
        self.assertEqual(r.status, 429, r)
        self.assertEqual(len(self.mock.requests("a")), 1)

    def test_a_quota_error_after_chat_text_is_continued_on_the_next_account(self):
        g = self.gateway([account("a", self.mock.url("a", "late_error,after=2")),
                          account("b", self.mock.url("b"))])
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual([e for e in s.events if is_error_event(e)], [], "the error reached the client")
        self.assertEqual(chat_text(s.events), "hello from b")
        self.assertEqual(s.events[-1]["data"].strip(), "[DONE]")
        self.assertEqual(self.cooled(g, "a")["last_error"], "quota")

    def test_a_capacity_error_after_a_chat_tool_call_reaches_the_client_and_rests_the_account(self):
        # a chat client has no retry of its own to lean on: it gets the error, the account rests
        g = self.gateway([account("a", self.mock.url("a", "late_error,code=server_is_overloaded,tool_call=1")),
                          account("b", self.mock.url("b"))])
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        errs = [json.loads(e["data"]) for e in s.events if is_error_event(e)]
        self.assertEqual([e["error"]["code"] for e in errs], ["server_is_overloaded"], s.raw[-600:])
        self.assertEqual(self.cooled(g, "a")["last_error"], "server")

    def test_an_error_after_output_about_the_request_reaches_the_client_and_cools_nothing(self):
        g = self.gateway([account("a", self.mock.url("a", "late_error,failed=1,code=invalid_prompt,after=2")),
                          account("b", self.mock.url("b"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual([f["response"]["error"]["code"] for f in self.failed_events(s)], ["invalid_prompt"])
        self.assertEqual(response_text(s.events), "hello from")
        self.assertEqual(self.mock.accounts_hit(), ["a"])
        g.wait_request_logs(1)
        self.assertFalse(g.query("SELECT 1 FROM account_state WHERE account_id = ? AND cooldown_until > 0",
                                 (g.account_id("a"),)))

    def test_turn_retry_is_policy_a_classify_without_it_gives_the_limit_as_it_came(self):
        with open(os.path.join(source_dir(), "policies", "classify.lua")) as f:
            classify = f.read()
        self.assertIn("local RETRY_TURN_RESPONSES = true", classify)
        pol = self.policy_copy({"classify.lua": classify.replace("local RETRY_TURN_RESPONSES = true",
                                                                 "local RETRY_TURN_RESPONSES = false")})
        g = self.gateway([account("a", self.mock.url("a", "late_error,failed=1,tool_call=1,after=0")),
                          account("b", self.mock.url("b"))], policies=pol)
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual([f["response"]["error"]["code"] for f in self.failed_events(s)], ["usage_limit_reached"])
        self.assertEqual(self.cooled(g, "a")["last_error"], "quota")   # it still rests


if __name__ == "__main__":
    main()
