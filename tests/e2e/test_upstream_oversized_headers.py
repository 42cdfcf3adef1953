"""test_upstream_oversized_headers.py: an upstream whose response headers are larger than
libcurl takes (a 10 MiB header line; the mock's big_header=N). That is the account's fault,
like a connection it drops: the request fails over to the healthy account, never a 503
"out of memory" of the gateway's own."""

from harness import GatewayTest, account, main

RESP_BODY = {"model": "gpt-test", "input": "hi"}
CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
HUGE = 10 << 20


class OversizedHeaderTest(GatewayTest):

    def pool(self):
        return self.gateway([account("huge", self.mock.url("huge", f"ok,big_header={HUGE}")),
                             account("good", self.mock.url("good"))])

    def test_a_10_mib_response_header_fails_over_to_the_healthy_account(self):
        g = self.pool()
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertIn("hello from good", r.text)
        self.assertEqual(r.headers.get("x-switchyard-account"), "good")
        self.assertEqual(self.mock.accounts_hit(), ["huge", "good"])
        row = g.wait_request_logs(1)[-1]
        self.assertEqual((row["status"], row["attempts"]), (200, 2), row)
        self.assertIn('"class":"network"', row["attempts_json"])  # the account's fault, as a dropped connection

    def test_a_stream_whose_headers_are_too_large_fails_over_before_the_client_sees_anything(self):
        g = self.pool()
        s = g.stream("/v1/chat/completions", dict(CHAT_BODY, stream=True))
        self.assertEqual(s.status, 200, s)
        self.assertFalse(s.truncated, s)
        self.assertEqual(s.headers.get("x-switchyard-account"), "good")
        self.assertIn("data: [DONE]", s.raw.decode())

    def test_an_account_alone_with_oversized_headers_answers_an_upstream_error_not_out_of_memory(self):
        g = self.gateway([account("huge", self.mock.url("huge", f"ok,big_header={HUGE}"))])
        r = g.post("/v1/responses", RESP_BODY)
        err = self.assertOpenAIError(r)
        self.assertNotEqual(r.status, 200, r)
        self.assertNotIn("out of memory", err["message"])


if __name__ == "__main__":
    main()
