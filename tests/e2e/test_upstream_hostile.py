"""test_upstream_hostile.py: upstreams that misbehave after the gateway has
committed to them, or that send what must not reach a client: streams that
stop in the middle of a line or an event (the gateway's error event must
stand on its own, never glued onto the half line), secrets echoed back in
bodies, streams and headers, gzip-encoded bodies, error bodies too large to
keep whole, and plain bodies cut short (logged as failures, not 200; when
nothing of them reached the client yet, another account answers), and plain
200 answers whose body is an error object."""

import http.client
import json
import re
import socket
import threading

from harness import (GatewayTest, RawUpstream, account, chat_text, event_type, is_error_event, main,
                     parse_sse, response_text, wait_for)

CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
RESP_BODY = {"model": "gpt-test", "input": "hi"}
RESP_STREAM = dict(RESP_BODY, stream=True)
CHAT_STREAM = dict(CHAT_BODY, stream=True)


def last_event_is_gateway_error(test, s):
    """The stream's last event is the gateway's own, parsed on its own by an SSE parser."""
    test.assertTrue(s.events, s)
    last = s.events[-1]
    test.assertTrue(is_error_event(last), f"last event is not an error: {last['data'][:300]!r}")
    test.assertIsNotNone(last["json"], f"the error event is not JSON on its own: {last['data'][:200]!r}")
    test.assertIn("upstream_stream_interrupted", last["data"])


class StreamCutTest(GatewayTest):

    def one(self, scenario):
        return self.gateway([account("a", self.mock.url("a", scenario))])

    def check_responses_cut(self, scenario):
        g = self.one(scenario)
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        last_event_is_gateway_error(self, s)
        self.assertEqual(response_text(s.events), "hello from a")
        # no event is left half-made: every data line that went out is whole JSON
        for e in s.events:
            self.assertIsNotNone(e["json"], f"half an event reached the client: {e['data'][:120]!r}")
        return g

    def check_chat_cut(self, scenario):
        g = self.one(scenario)
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(s.status, 200, s)
        last_event_is_gateway_error(self, s)
        self.assertEqual(chat_text(s.events), "hello from a")
        for e in s.events:
            self.assertIsNotNone(e["json"], f"half an event reached the client: {e['data'][:120]!r}")
        self.assertNotIn(b"[DONE]", s.raw)
        return g

    def test_responses_stream_cut_mid_line_gets_a_separate_error_event(self):
        self.check_responses_cut("late_reset,partial=5")

    def test_responses_stream_ended_mid_line_gets_a_separate_error_event(self):
        self.check_responses_cut("late_reset,partial=5,end=1")

    def test_chat_stream_cut_mid_line_gets_a_separate_error_event(self):
        self.check_chat_cut("late_reset,partial=5")

    def test_chat_stream_ended_mid_line_gets_a_separate_error_event(self):
        self.check_chat_cut("late_reset,partial=5,end=1")

    def test_stream_ended_mid_line_before_any_output_is_no_answer_and_nothing_reaches_the_client(self):
        # nothing semantic was relayed: the clean end makes it a 2xx that is not an answer
        # (issue 10), so the client gets an error status, never half an event
        g = self.one("late_reset,after=0,partial=5,end=1")
        err = self.assertOpenAIError(g.post("/v1/responses", RESP_STREAM), 503)
        self.assertIn("no output", err["message"])

    def test_huge_unfinished_event_is_closed_before_the_error_event(self):
        # above what the gateway holds back (1 MiB): the half event goes out, then a blank line ends it
        g = self.one("late_reset,partial=1200000,end=1")
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        last_event_is_gateway_error(self, s)
        self.assertEqual(response_text(s.events), "hello from a")


class EchoedSecretTest(GatewayTest):
    """An upstream that reflects the Authorization header: the account's token never reaches a client."""

    TOKEN = "sk-echo-3f9a0c1d2e4b5a6978"

    def one(self, scenario):
        return self.gateway([account("a", self.mock.url("a", scenario), token=self.TOKEN)])

    def assertNoSecret(self, raw, headers):
        self.assertNotIn(self.TOKEN.encode(), raw)
        for k, v in headers.items():
            self.assertNotIn(self.TOKEN, v, f"header {k}")
        # the mock did echo it: the gateway took it out
        self.assertIn(self.TOKEN, self.mock.requests()[-1]["authorization"])
        self.assertIn(b"[redacted]", raw)

    def test_error_body_and_headers_echoing_the_token_are_scrubbed(self):
        g = self.one("reflect_auth=400")
        r = g.post("/v1/responses", RESP_BODY)
        err = self.assertOpenAIError(r, 400)
        self.assertIn("Bearer [redacted]", err["message"])
        self.assertNoSecret(r.body, r.headers)

    def test_plain_answer_echoing_the_token_is_scrubbed(self):
        g = self.one("reflect_auth=200")
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertNoSecret(r.body, r.headers)
        self.assertEqual(r.headers.get("x-request-id"), "Bearer [redacted]")  # relayed, scrubbed
        self.assertIn("Bearer [redacted]", r.json()["output"][0]["content"][0]["text"])

    def test_responses_stream_with_the_token_split_across_chunks_is_scrubbed(self):
        g = self.one("reflect_auth=200")
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertNoSecret(s.raw, s.headers)
        self.assertEqual(response_text(s.events), "bad credentials: Bearer [redacted]")
        self.assertEqual(s.types()[-1], "response.completed")

    def test_chat_stream_with_the_token_split_across_chunks_is_scrubbed(self):
        g = self.one("reflect_auth=200")
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertNoSecret(s.raw, s.headers)
        self.assertEqual(chat_text(s.events), "bad credentials: Bearer [redacted]")
        self.assertEqual(s.events[-1]["data"], "[DONE]")

    def test_echoed_token_of_a_failed_over_account_never_shows(self):
        g = self.gateway([account("a", self.mock.url("a", "reflect_auth=401"), token=self.TOKEN),
                          account("b", self.mock.url("b", "reflect_auth=400"), token=self.TOKEN + "-b")])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertOpenAIError(r, 400)
        self.assertNotIn(self.TOKEN.encode(), r.body)
        self.assertEqual([q["account"] for q in self.mock.requests()], ["a", "b"])


class EncodingTest(GatewayTest):
    """A gzip-encoded upstream body reached the client as raw gzip labelled application/json."""

    def one(self, scenario):
        return self.gateway([account("a", self.mock.url("a", scenario))])

    def test_gzip_plain_body_reaches_the_client_decoded(self):
        g = self.one("ok,gzip=1")
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertNotIn("content-encoding", r.headers)
        self.assertEqual(r.json()["output"][0]["content"][0]["text"], "hello from a")
        g.wait_request_logs(1)
        self.assertEqual(g.request_logs()[0]["output_tokens"], 3, "usage was read from the decoded body")

    def test_gzip_stream_reaches_the_client_decoded(self):
        g = self.one("ok,gzip=1")
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertNotIn("content-encoding", s.headers)
        self.assertEqual(response_text(s.events), "hello from a")
        self.assertEqual(s.types()[-1], "response.completed")

    def test_gzip_chat_stream_reaches_the_client_decoded(self):
        g = self.one("ok,gzip=1")
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(chat_text(s.events), "hello from a")
        self.assertEqual(s.events[-1]["data"], "[DONE]")

    def test_undecodable_encoding_fails_over_instead_of_reaching_the_client(self):
        g = self.gateway([account("a", self.mock.url("a", "ok,gzip=2")), account("b", self.mock.url("b"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["output"][0]["content"][0]["text"], "hello from b")
        self.assertEqual([q["account"] for q in self.mock.requests()], ["a", "b"])

    def test_gzip_error_body_is_relayed_decoded(self):
        g = self.one("ctxlen,gzip=1")
        r = g.post("/v1/responses", RESP_BODY)
        err = self.assertOpenAIError(r, 400)
        self.assertEqual(err["code"], "context_length_exceeded")


class ErrorBodyTest(GatewayTest):

    def one(self, scenario):
        return self.gateway([account("a", self.mock.url("a", scenario))])

    def test_error_body_too_large_to_keep_becomes_a_valid_error_with_the_same_status(self):
        g = self.one("big_error=400,bytes=40000")
        r = g.post("/v1/responses", RESP_BODY)
        err = self.assertOpenAIError(r, 400)
        self.assertEqual(err["code"], "upstream_error_too_large")
        self.assertIn("400", err["message"])
        self.assertLess(len(r.body), 4096)

    def test_error_body_under_the_limit_is_relayed_as_it_came(self):
        g = self.one("big_error=400,bytes=15000")
        r = g.post("/v1/responses", RESP_BODY)
        err = self.assertOpenAIError(r, 400)
        self.assertEqual(err["code"], "big_error")
        self.assertEqual(len(err["message"]), 15000)

    def test_error_body_that_is_not_json_becomes_a_valid_error_with_the_same_status(self):
        for scenario, excerpt in (("html_error=400", "400 Bad Request"), ("empty_error=400", "(empty)")):
            with self.subTest(scenario=scenario):
                g = self.one(scenario)
                r = g.post("/v1/responses", RESP_BODY)
                err = self.assertOpenAIError(r, 400)
                self.assertEqual(err["code"], "upstream_error_not_json")
                self.assertIn(excerpt, err["message"])

    def test_plain_answer_cut_midway_while_held_whole_goes_to_the_next_account(self):
        # half an answer, then 50 ms later the close: the gateway holds a plain answer
        # whole (up to 1 MiB) before relaying it, so the client has seen nothing yet
        g = self.gateway([account("a", self.mock.url("a", "plain_cut")), account("b", self.mock.url("b"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r.body[:300])
        self.assertEqual(json.loads(r.body)["output"][0]["content"][0]["text"], "hello from b")
        self.assertEqual(r.headers.get("content-length"), str(len(r.body)))
        rows = g.wait_request_logs(1)
        self.assertEqual((rows[0]["status"], rows[0]["account_name"], rows[0]["attempts"]), (200, "b", 2), rows[0])

    def test_plain_body_cut_short_is_logged_as_a_failure(self):
        g = self.one("plain_cut,bytes=3000000")  # past the 1 MiB held whole: a part is relayed before the cut
        s = g.stream("/v1/responses", RESP_BODY)   # a plain answer, read as far as it goes
        self.assertTrue(s.truncated, "the client must not be handed a cut body as complete")
        rows = g.wait_request_logs(1)
        self.assertEqual(rows[0]["status"], 502, rows[0])
        self.assertEqual(rows[0]["error_class"], "body_interrupted")
        # the trace thread writes 10-50 ms after the event, the writer commits the row in its own window:
        # either may come first, so the trace line is awaited on its own
        wait_for(lambda: re.search(r"REQUEST_FINAL .*status=502 .*class=body_interrupted", g.trace_text()),
                 what="the REQUEST_FINAL line of the cut answer")


class ErrorIn200Test(GatewayTest):
    """A plain HTTP 200 whose body is an error object (some relays answer quota and rate
    limits so): held whole and not relayed yet, it is classified like an error event
    inside a 200 stream."""

    def test_quota_error_in_a_200_plain_body_goes_to_the_next_account(self):
        for body, path in ((RESP_BODY, "/v1/responses"), (CHAT_BODY, "/v1/chat/completions")):
            with self.subTest(path=path):
                g = self.gateway([account("a", self.mock.url("a", "error200")), account("b", self.mock.url("b"))])
                r = g.post(path, body)
                self.assertEqual(r.status, 200, r.body[:300])
                self.assertNotIn(b"exceeded your current quota", r.body)
                self.assertEqual(r.headers.get("x-switchyard-account"), "b")
                rows = g.wait_request_logs(1)
                self.assertEqual((rows[0]["account_name"], rows[0]["attempts"]), ("b", 2), rows[0])
                self.assertIn('"class":"quota"', rows[0]["attempts_json"])

    def test_rate_limit_code_in_a_200_plain_body_goes_to_the_next_account(self):
        g = self.gateway([account("a", self.mock.url("a", "error200,code=rate_limit_exceeded")),
                          account("b", self.mock.url("b"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual((r.status, r.headers.get("x-switchyard-account")), (200, "b"), r.body[:300])

    def test_other_error_in_a_200_plain_body_is_relayed_as_it_came(self):
        # not the account's fault by the policy's rules: the client gets the upstream's answer
        g = self.gateway([account("a", self.mock.url("a", "error200,code=relay_refused")),
                          account("b", self.mock.url("b"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r.body[:300])
        self.assertEqual(json.loads(r.body)["error"]["code"], "relay_refused")
        self.assertEqual(r.headers.get("x-switchyard-account"), "a")
        self.assertEqual([q["account"] for q in self.mock.requests()], ["a"])


class CutBeforeRelayUpstream(RawUpstream):
    """An upstream that answers every request with a 200 head and the first `n` bytes of a
    JSON body announced longer, then closes: head, part and FIN in one segment (TCP_CORK
    held until the shutdown), so the gateway reads the cut in the same read as the bytes
    and has relayed nothing of them yet; or, with `cut` (an Event), the part first and the
    close only once the test sets it (when the client has the answer's start)."""

    def __init__(self, n=40, cut=None):
        self.n, self.count, self.pad, self.cut = n, 0, 2000, cut
        super().__init__()

    def answer(self, conn, head, body):
        self.count += 1
        answer = json.dumps({"id": "resp_cut", "object": "response", "status": "completed",
                             "output": [], "pad": "x" * self.pad}).encode()
        if not self.cut:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(answer)).encode() + b"\r\n\r\n" + answer[:self.n])
        if self.cut:
            self.cut.wait(30)  # the part is relayed before the cut: the test says when it has it
        conn.shutdown(socket.SHUT_WR)


class CutBeforeRelayTest(GatewayTest):
    """A plain answer the upstream cuts before any of it was relayed: nothing reached the
    client, so it is a failure before output, not a cut answer."""

    def test_plain_answer_cut_before_any_of_it_was_relayed_goes_to_the_next_account(self):
        up = CutBeforeRelayUpstream()
        self.addCleanup(up.close)
        g = self.gateway([account("a", up.url()), account("b", self.mock.url("b"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r.body[:300])
        obj = json.loads(r.body)
        self.assertEqual(obj["output"][0]["content"][0]["text"], "hello from b")
        self.assertEqual(r.headers.get("x-switchyard-account"), "b")
        self.assertEqual(r.headers.get("x-switchyard-attempts"), "2")
        self.assertEqual(up.count, 1)
        rows = g.wait_request_logs(1)
        self.assertEqual((rows[0]["status"], rows[0]["account_name"], rows[0]["attempts"]), (200, "b", 2), rows[0])

    def test_plain_answer_cut_before_any_of_it_was_relayed_with_no_other_account_is_a_json_error(self):
        # as for a network error before output: the account cools down and, with none
        # left, the client gets the JSON "no account" error naming the cut, not a reset
        up = CutBeforeRelayUpstream()
        self.addCleanup(up.close)
        g = self.gateway([account("a", up.url())])
        r = g.post("/v1/responses", RESP_BODY)  # a reset would raise here
        self.assertEqual(r.status, 503, r.body[:300])
        err = json.loads(r.body)["error"]
        self.assertEqual(err["code"], "no_available_account", err)
        self.assertIn("cut its answer before any of it was relayed", err["message"])
        self.assertNotIn(b"resp_cut", r.body)
        self.assertEqual(up.count, 1)
        self.assertEqual(g.get("/health", key=None).status, 200)

    def test_plain_answer_cut_after_a_part_was_relayed_is_still_a_cut_answer(self):
        # larger than the gateway holds (1 MiB) and cut after a pause: its first part
        # reached the client before the cut, so there is no taking it back, and the client
        # must not be handed it as whole
        cut = threading.Event()
        up = CutBeforeRelayUpstream(n=1_500_000, cut=cut)
        up.pad = 2_000_000
        self.addCleanup(up.close)
        self.addCleanup(cut.set)
        g = self.gateway([account("a", up.url()), account("b", self.mock.url("b"))])
        # the cut comes once the client has the answer's head (sent with the first relayed part), not after
        # a pause the gateway might not have used to relay anything on a loaded machine
        s = g.open_stream("/v1/responses", RESP_BODY)  # a plain answer, read as far as it goes
        self.assertEqual(s.status, 200, s)
        cut.set()
        truncated = False
        try:
            while s.resp.read1(65536):
                pass
        except (http.client.IncompleteRead, ConnectionError):
            truncated = True
        finally:
            s.conn.close()
        self.assertTrue(truncated, "a cut answer was handed over as complete")
        rows = g.wait_request_logs(1)
        self.assertEqual((rows[0]["status"], rows[0]["error_class"]), (502, "body_interrupted"), rows[0])
        self.assertEqual(up.count, 1)
        self.assertEqual(self.mock.requests(), [], "replayed elsewhere after output")


if __name__ == "__main__":
    main()
