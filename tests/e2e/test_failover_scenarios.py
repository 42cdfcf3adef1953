"""test_failover_scenarios.py: the failover benchmark's last scenarios, each
shaped like the fault it names: a slow first token (headers at once, the
first token late), a stream cut mid-answer, a fallback that refuses an
assistant prefill, and a client that closes right after the terminal event.
docs/policies.md ("Slow first token", "Stream resume", "Accounting") says
what the gateway does in each."""

import json
import socket
import time

from harness import (GatewayTest, account, chat_text, is_error_event, main, response_text)

CHAT_STREAM = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "stream": True}
RESP_STREAM = {"model": "gpt-test", "input": "hi", "stream": True}


class SlowFirstTokenTest(GatewayTest):

    def test_silent_chat_stream_fails_over_within_the_first_token_limit(self):
        # headers at once, the first token after 20 s: the default limit of a
        # non-reasoning chat stream is 15 s
        g = self.gateway([account("a", self.mock.url("a", "stall,ms=20000")), account("b", self.mock.url("b"))])
        t0 = time.monotonic()
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        took = time.monotonic() - t0
        self.assertEqual(s.status, 200, s)
        self.assertEqual(chat_text(s.events), "hello from b")
        self.assertEqual([e for e in s.events if is_error_event(e)], [])
        self.assertGreater(took, 14.0)
        self.assertLess(took, 17.5, "the silent stream was not failed over within the 15 s limit")
        self.assertEqual(self.mock.accounts_hit(), ["a", "b"])
        row = g.wait_request_logs(1)[-1]
        self.assertEqual([(t["account"], t["class"]) for t in json.loads(row["attempts_json"])],
                         [("a", "timeout"), ("b", "")])

    def test_reasoning_request_is_not_cut_while_silent_longer_than_a_chat_stream_nor_while_it_shows_progress(self):
        # silent 16 s (past the chat limit), then reasoning summary deltas, then the answer
        g = self.gateway([account("a", self.mock.url("a", "stall,ms=16000,think=3,think_ms=1000")),
                          account("b", self.mock.url("b"))])
        body = dict(RESP_STREAM, reasoning={"effort": "high", "summary": "auto"})
        s = g.stream("/v1/responses", body)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(response_text(s.events), "hello from a")
        self.assertEqual(s.types().count("response.reasoning_summary_text.delta"), 3, s.types())
        self.assertEqual(s.types()[-1], "response.completed")
        self.assertEqual(self.mock.accounts_hit(), ["a"])


class ClientClosesAfterDoneTest(GatewayTest):

    def raw_stream_until(self, g, path, body, marker):
        """POSTs a stream on a raw socket, reads until marker, closes at once (unread bytes: a reset)."""
        payload = json.dumps(body).encode()
        req = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {g.key}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n").encode() + payload
        sock = socket.create_connection(("127.0.0.1", g.port), timeout=20)
        try:
            sock.sendall(req)
            got = b""
            while marker not in got:
                b = sock.recv(65536)
                if not b:
                    break
                got += b
        finally:
            sock.close()
        self.assertIn(marker, got)
        return got

    def test_stream_whose_client_closes_right_after_done_is_logged_as_served_with_its_usage(self):
        # the upstream ends its body a little after [DONE] (tail): the client is gone by then
        g = self.gateway([account("a", self.mock.url("a", "ok,tail=150"))])
        n = 30
        for i in range(n):
            if i % 3 == 2:
                self.raw_stream_until(g, "/v1/responses", RESP_STREAM, b"event: response.completed")
            else:
                self.raw_stream_until(g, "/v1/chat/completions", CHAT_STREAM, b"data: [DONE]")
        rows = g.wait_request_logs(n)
        self.assertEqual([r["status"] for r in rows], [200] * n, [(r["status"], r["error_class"]) for r in rows])
        for r in rows:
            self.assertGreater(r["total_tokens"] or 0, 0, r)
            self.assertEqual(r["error_class"] or "", "", r)
            self.assertEqual([t["outcome"] for t in json.loads(r["attempts_json"])], ["ok"], r)


if __name__ == "__main__":
    main()
