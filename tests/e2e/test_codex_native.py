"""test_codex_native.py: what Codex understands from the gateway (issue 22).

When every account that serves the Responses API is out for its plan's
usage (resting after a quota error or a 429, or a usage window spent), the
client gets the ChatGPT backend's own answer for a spent plan: HTTP 429 with
error.type usage_limit_reached, the plan and when the first account is back
(resets_at, resets_in_seconds, Retry-After), which Codex shows as a usage
limit instead of retrying. Other endpoints, and a pool out for any other
reason, keep the 503 no_available_account that names each account. The
choice is policies/exhausted.lua's."""

import time

from harness import GatewayTest, account, main, wait_for

RESP = {"model": "gpt-test", "input": "hi"}
CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


class PoolUsageLimitTest(GatewayTest):

    def test_a_pool_out_of_quota_answers_usage_limit_reached_with_the_soonest_reset(self):
        g = self.gateway([account("a", self.mock.url("a", "quota429,resets=7200")),
                          account("b", self.mock.url("b", "quota429,resets=600"))])
        before = time.time()
        r = g.post("/v1/responses", RESP)
        self.assertEqual(r.status, 429, r)
        err = r.json()["error"]
        self.assertEqual(err["type"], "usage_limit_reached")
        self.assertEqual(err["code"], "usage_limit_reached")
        self.assertIn("usage limit", err["message"])
        # b is back first: its own resets_in_seconds (600 s) outlasts the 45 s ladder step
        self.assertGreaterEqual(err["resets_at"], int(before) + 590)
        self.assertLessEqual(err["resets_at"], int(time.time()) + 611)
        self.assertGreater(err["resets_in_seconds"], 500)
        self.assertEqual(int(r.headers["retry-after"]), err["resets_in_seconds"])
        # streamed requests get the same answer before any stream starts
        s = g.post("/v1/responses", dict(RESP, stream=True))
        self.assertEqual(s.status, 429, s)
        self.assertEqual(s.json()["error"]["type"], "usage_limit_reached")
        text = wait_for(lambda: (lambda t: t if "POOL_USAGE_LIMIT" in t else None)(g.trace_text()),
                        what="a POOL_USAGE_LIMIT line")
        self.assertIn("accounts=2", text)

    def test_chat_completions_keep_the_503_naming_each_account(self):
        g = self.gateway([account("a", self.mock.url("a", "quota429"))])
        r = g.post("/v1/chat/completions", CHAT)
        self.assertOpenAIError(r, 503)
        self.assertEqual(r.json()["error"]["code"], "no_available_account")

    def test_a_pool_out_for_another_reason_keeps_the_503(self):
        g = self.gateway([account("a", self.mock.url("a", "quota429")),
                          account("b", self.mock.url("b", "status=500"))],
                         env={"SWITCHYARD_CAPACITY_WAIT_MS": "0"})
        r = g.post("/v1/responses", RESP)
        self.assertOpenAIError(r, 503)
        self.assertEqual(r.json()["error"]["code"], "no_available_account")
        self.assertIn("a:", r.json()["error"]["message"])


if __name__ == "__main__":
    main()
