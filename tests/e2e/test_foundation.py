"""test_foundation.py: the gateway's front door and plain proxying, end to end:
platform-key auth, body checks, OpenAI-shaped errors, pass-through of plain and
streamed answers, client disconnects, secrets kept out of logs, db file mode."""

import json
import os
import re
import stat
import time

from harness import (GatewayTest, RawUpstream, account, chat_text, main, parse_sse, response_text, vm_kib,
                     wait_for, event_type, HOST)

CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
RESP_BODY = {"model": "gpt-test", "input": "hi"}


def _normalize(raw, name):
    """Masks per-request ids and timestamps so two answers of the mock compare equal."""
    raw = re.sub(rb"(resp|msg)_" + re.escape(name.encode()) + rb"_\d+", rb"\1_ID", raw)
    raw = re.sub(rb"chatcmpl-" + re.escape(name.encode()) + rb"-\d+", rb"chatcmpl-ID", raw)
    return re.sub(rb'"(created_at|created)":\d+', rb'"\1":0', raw)


class BigStreamUpstream(RawUpstream):
    """An upstream that answers any request with one large chat completion stream, written
    as fast as the socket takes it: `deltas` numbered text deltas (about 240 bytes of SSE
    each), finish and usage chunks, then [DONE]. The C mock caps its streams far lower.
    Every connection gets the same stream; `finished` counts those sent whole, `ended`
    those over (whole or cut by the other side)."""

    def __init__(self, deltas):
        self.deltas = deltas
        self.finished = 0
        super().__init__()

    @staticmethod
    def text_of(i):
        return "t%07d %s " % (i, "x" * 120)

    def _events(self):
        def ev(obj):
            return ("data: " + json.dumps(obj, separators=(",", ":")) + "\n\n").encode()
        head = {"id": "chatcmpl-big", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        yield ev(dict(head, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                      "finish_reason": None}]))
        for i in range(self.deltas):
            yield ev(dict(head, choices=[{"index": 0, "delta": {"content": self.text_of(i)},
                                          "finish_reason": None}]))
        yield ev(dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        yield ev(dict(head, choices=[], usage={"prompt_tokens": 1, "completion_tokens": self.deltas,
                                               "total_tokens": self.deltas + 1}))
        yield b"data: [DONE]\n\n"

    def answer(self, conn, head, body):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        batch = []
        for e in self._events():
            batch.append(e)
            if len(batch) == 512:
                data = b"".join(batch)
                conn.sendall(b"%x\r\n%s\r\n" % (len(data), data))
                batch = []
        data = b"".join(batch)
        conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        self.finished += 1


class FoundationTest(GatewayTest):

    def one_account_gateway(self, scenario="ok", name="a", env=None, token=None):
        acct = account(name, self.mock.url(name, scenario), token=token)
        return self.gateway([acct], env=env), acct

    # --- auth

    def test_missing_platform_key_is_401_openai_shape(self):
        g, _ = self.one_account_gateway()
        r = g.post("/v1/chat/completions", CHAT_BODY, key=None)
        self.assertOpenAIError(r, 401)
        r = g.post("/v1/responses", RESP_BODY, key=None)
        self.assertOpenAIError(r, 401)
        self.assertEqual(self.mock.requests(), [], "an unauthenticated request reached the upstream")

    def test_wrong_platform_key_is_401(self):
        g, _ = self.one_account_gateway()
        flipped = g.key[:-1] + ("A" if g.key[-1] != "A" else "B")
        for bad in ("sk-definitely-not-a-platform-key", flipped, g.key + "x"):
            with self.subTest(key=bad[:6] + "..."):
                r = g.post("/v1/chat/completions", CHAT_BODY, key=bad)
                self.assertOpenAIError(r, 401)
        # the account token is not a platform key either
        r = g.post("/v1/chat/completions", CHAT_BODY, key=g.accounts["a"])
        self.assertOpenAIError(r, 401)
        self.assertEqual(self.mock.requests(), [])
        # and the right key works
        self.assertEqual(g.post("/v1/chat/completions", CHAT_BODY).status, 200)

    # --- body checks

    def test_malformed_json_is_400(self):
        g, _ = self.one_account_gateway()
        for path in ("/v1/chat/completions", "/v1/responses"):
            for body in (b'{"model": "gpt-test", "messages": [', b"not json at all", b'{"a":1} trailing'):
                with self.subTest(path=path, body=body):
                    r = g.post(path, body, headers={"Content-Type": "application/json"})
                    self.assertOpenAIError(r, 400)
        self.assertEqual(self.mock.requests(), [], "a malformed body reached the upstream")

    def test_oversize_body_is_413(self):
        g, _ = self.one_account_gateway(env={"SWITCHYARD_MAX_BODY": "1024"})
        big = dict(CHAT_BODY, messages=[{"role": "user", "content": "x" * 4096}])
        r = g.post("/v1/chat/completions", big)
        self.assertOpenAIError(r, 413)
        self.assertEqual(self.mock.requests(), [], "an oversize body reached the upstream")
        # a body under the limit still goes through
        small = dict(CHAT_BODY, messages=[{"role": "user", "content": "x" * 600}])
        r = g.post("/v1/chat/completions", small)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(self.mock.requests()), 1)

    def test_unknown_path_is_404_json(self):
        g, _ = self.one_account_gateway()
        self.assertOpenAIError(g.get("/v1/definitely-not-an-endpoint"), 404)
        self.assertOpenAIError(g.post("/v1/nope/chat", CHAT_BODY), 404)
        self.assertOpenAIError(g.get("/not-even-v1"), 404)
        self.assertEqual(self.mock.requests(), [])

    # --- plain proxying

    def test_chat_completion_plain_json_proxied(self):
        g, acct = self.one_account_gateway()
        r = g.post("/v1/chat/completions", CHAT_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertIn("application/json", r.headers.get("content-type", ""))
        body = r.json()
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["choices"][0]["message"]["content"], "hello from a")
        self.assertEqual(body["choices"][0]["finish_reason"], "stop")
        reqs = self.mock.requests()
        self.assertEqual(len(reqs), 1, reqs)
        up = reqs[0]
        self.assertEqual(up["account"], "a")
        self.assertEqual(up["endpoint"], "chat/completions")
        self.assertEqual(up["method"], "POST")
        self.assertEqual(up["model"], "gpt-test")
        self.assertFalse(up["stream"])
        self.assertEqual(up["authorization"], "Bearer " + acct["token"])
        self.assertNotIn(g.key, up["authorization"] or "", "platform key leaked upstream")

    def test_plain_answer_goes_out_whole_with_a_content_length(self):
        # a plain answer complete within one loop turn is not sent chunked
        g, _ = self.one_account_gateway()
        r = g.post("/v1/chat/completions", CHAT_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertNotIn("transfer-encoding", r.headers)
        self.assertEqual(r.headers.get("content-length"), str(len(r.body)))
        self.assertEqual(r.json()["object"], "chat.completion")

    def test_responses_plain_json_proxied(self):
        g, acct = self.one_account_gateway()
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        body = r.json()
        self.assertEqual(body["object"], "response")
        self.assertEqual(body["status"], "completed")
        self.assertTrue(body["id"].startswith("resp_a_"), body["id"])
        self.assertEqual(body["output"][0]["content"][0]["text"], "hello from a")
        self.assertEqual(body["usage"]["total_tokens"], 10)
        reqs = self.mock.requests()
        self.assertEqual(len(reqs), 1, reqs)
        self.assertEqual(reqs[0]["endpoint"], "responses")
        self.assertEqual(reqs[0]["authorization"], "Bearer " + acct["token"])

    # --- streaming

    def test_responses_stream_passes_through_all_events_in_order(self):
        g, _ = self.one_account_gateway()
        body = dict(RESP_BODY, stream=True)
        s = g.stream("/v1/responses", body)
        self.assertEqual(s.status, 200, s)
        self.assertFalse(s.truncated, s)
        self.assertIn("text/event-stream", s.headers.get("content-type", ""))
        # what the upstream sends for the same request, straight from the mock
        direct = self.mock.call("a", "ok", "responses", body)
        self.assertEqual(direct.status, 200)
        want = parse_sse(_normalize(direct.body, "a"))
        got = parse_sse(_normalize(s.raw, "a"))
        self.assertEqual([event_type(e) for e in got], [event_type(e) for e in want])
        self.assertEqual([(e["event"], e["json"]) for e in got], [(e["event"], e["json"]) for e in want],
                         "event payloads were altered on the way")
        types = s.types()
        self.assertEqual(types[0], "response.created")
        self.assertEqual(types[-1], "response.completed")
        self.assertGreaterEqual(types.count("response.output_text.delta"), 3)
        for e in s.events:
            self.assertEqual(e["json"]["type"], e["event"], e)
        self.assertEqual(response_text(s.events), "hello from a")
        usage = s.events[-1]["json"]["response"]["usage"]
        self.assertEqual((usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]), (7, 3, 10))
        self.assertTrue(self.mock.requests("a")[0]["stream"])

    def test_stream_reply_headers_arrive_and_the_connection_is_kept_alive_after(self):
        # the gateway drops a streamed reply's header list once it is written
        # (proxy_drop_sent_headers, keeping only Connection, which libevent
        # reads at the end): the client still gets every header, and the
        # connection still serves a next request
        import http.client
        g, _ = self.one_account_gateway()
        conn = http.client.HTTPConnection(HOST, g.port, timeout=10)
        hdrs = {"Authorization": f"Bearer {g.key}", "Content-Type": "application/json"}
        conn.request("POST", "/v1/chat/completions", json.dumps(dict(CHAT_BODY, stream=True)), hdrs)
        r = conn.getresponse()
        self.assertEqual(r.status, 200)
        self.assertIn("text/event-stream", r.getheader("content-type", ""))
        self.assertEqual(r.getheader("x-switchyard-account"), "a")
        self.assertEqual(r.getheader("transfer-encoding"), "chunked")
        self.assertIn(b"data: [DONE]", r.read())
        self.assertFalse(r.will_close, "a streamed reply closed a keep-alive connection")
        sock = conn.sock
        conn.request("POST", "/v1/chat/completions", json.dumps(dict(CHAT_BODY, stream=True)), hdrs)
        r = conn.getresponse()
        self.assertIs(conn.sock, sock, "the second request did not reuse the connection")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.getheader("x-switchyard-account"), "a")
        self.assertIn(b"data: [DONE]", r.read())
        # asked to close: the connection ends with the stream
        conn.request("POST", "/v1/chat/completions", json.dumps(dict(CHAT_BODY, stream=True)),
                     dict(hdrs, Connection="close"))
        r = conn.getresponse()
        self.assertIn(b"data: [DONE]", r.read())
        self.assertTrue(r.will_close)
        conn.close()

    def test_stream_read_from_upstream_in_small_pieces_arrives_unaltered(self):
        # a stream is read from the upstream 2 KiB at a time (upstream_transfer.c,
        # UP_STREAM_BUFFER): 300 deltas sent as fast as the socket takes
        # them are tens of KiB, so reads end mid-event (events of up to
        # ~800 bytes straddle 2 KiB boundaries) and the client must still
        # get the same events, unaltered
        g, _ = self.one_account_gateway("ok,deltas=300")
        body = dict(RESP_BODY, stream=True)
        s = g.stream("/v1/responses", body)
        self.assertEqual(s.status, 200, s)
        self.assertFalse(s.truncated, s)
        direct = self.mock.call("a", "ok,deltas=300", "responses", body)
        self.assertEqual(direct.status, 200)
        want = parse_sse(_normalize(direct.body, "a"))
        got = parse_sse(_normalize(s.raw, "a"))
        self.assertGreater(len(direct.body), 16 * 1024, "the test needs many reads")
        self.assertEqual([(e["event"], e["json"]) for e in got], [(e["event"], e["json"]) for e in want])
        self.assertEqual(s.types().count("response.output_text.delta"), 300)

    def test_each_stream_sends_its_own_headers_after_the_last_one_freed_its_list(self):
        # a stream's request header list is freed once its answer begins
        # (upstream.c, upstream_drop_sent) and its curl handle then serves
        # the next transfer: streams and a plain answer in a row each reach
        # the upstream with the account's token and their own headers
        g, _ = self.one_account_gateway()
        for i in range(3):
            s = g.stream("/v1/responses", dict(RESP_BODY, stream=True), headers={"session-id": f"sess-{i}"})
            self.assertEqual(s.status, 200, s)
            self.assertFalse(s.truncated, s)
            r = g.post("/v1/responses", RESP_BODY, headers={"session-id": f"plain-{i}"})
            self.assertEqual(r.status, 200, r)
        reqs = [r for r in self.mock.requests() if r["endpoint"] == "responses"]
        self.assertEqual([r["headers"].get("session-id") for r in reqs],
                         ["sess-0", "plain-0", "sess-1", "plain-1", "sess-2", "plain-2"])
        for r in reqs:
            self.assertEqual(r["headers"].get("authorization"), f"Bearer {g.accounts['a']}")

    def test_chat_stream_ends_with_done(self):
        g, _ = self.one_account_gateway()
        s = g.stream("/v1/chat/completions", dict(CHAT_BODY, stream=True))
        self.assertEqual(s.status, 200, s)
        self.assertFalse(s.truncated, s)
        self.assertIn("text/event-stream", s.headers.get("content-type", ""))
        datas = [e["data"] for e in s.events]
        self.assertEqual(datas[-1], "[DONE]", datas[-3:])
        self.assertEqual(datas.count("[DONE]"), 1)
        chunks = [e["json"] for e in s.events[:-1]]
        self.assertTrue(all(isinstance(c, dict) for c in chunks), chunks)
        self.assertEqual(chunks[0]["choices"][0]["delta"].get("role"), "assistant")
        self.assertEqual(chat_text(s.events), "hello from a")
        finishes = [ch.get("finish_reason") for c in chunks for ch in c.get("choices", [])]
        self.assertIn("stop", finishes)
        self.assertTrue(any(c.get("usage") for c in chunks), "usage chunk missing")

    def test_models_endpoint(self):
        g, _ = self.one_account_gateway()
        r = g.get("/v1/models")
        self.assertEqual(r.status, 200, r)
        body = r.json()
        self.assertEqual(body.get("object"), "list")
        self.assertIsInstance(body.get("data"), list)
        self.assertTrue(body["data"], body)
        for m in body["data"]:
            self.assertIsInstance(m.get("id"), str)
        self.assertOpenAIError(g.get("/v1/models", key=None), 401)

    def test_client_disconnect_cancels_upstream(self):
        g, _ = self.one_account_gateway("slow_stream,ms=200")
        st = g.open_stream("/v1/responses", dict(RESP_BODY, stream=True))
        self.assertEqual(st.status, 200)
        self.assertTrue(st.read_until(lambda raw: b"response.output_text.delta" in raw),
                        f"stream ended before any text: {st.raw[:400]!r}")
        st.close()
        rec = wait_for(lambda: [r for r in self.mock.requests("a") if r["aborted"]],
                       what="the upstream request to be aborted after the client left")[0]
        self.assertFalse(rec["completed"], "the upstream stream ran to the end anyway")
        self.assertTrue(g.running(), "gateway died after a client disconnect")
        # the gateway still serves
        self.assertEqual(g.get("/v1/models").status, 200)

    def test_slow_client_gets_a_large_stream_whole_while_the_gateway_holds_little(self):
        # ~30 MB of SSE to a client that reads nothing for a while: far more than the gateway
        # queues for one client (4 MiB) plus what the kernel buffers, so the upstream transfer
        # must be paused and resumed; every delta must still arrive, once and in order
        n = 120000
        up = BigStreamUpstream(n)
        self.addCleanup(up.close)
        g = self.gateway([account("big", f"http://{HOST}:{up.port}/v1")])
        rss_before = vm_kib(g.proc.pid, "VmRSS")
        st = g.open_stream("/v1/chat/completions", dict(CHAT_BODY, stream=True))
        self.assertEqual(st.status, 200)
        time.sleep(1.5)  # the client stalls; the gateway must stop reading the upstream
        parts = []
        while True:  # read it all (OpenStream.raw would copy quadratically at this size)
            b = st.resp.read1(1 << 20)
            if not b:
                break
            parts.append(b)
        st.close()
        raw = b"".join(parts)
        self.assertTrue(raw.endswith(b"data: [DONE]\n\n"), f"stream ended early: {raw[-300:]!r}")
        events = parse_sse(raw)
        expected = "".join(BigStreamUpstream.text_of(i) for i in range(n))
        self.assertEqual(chat_text(events), expected, "deltas lost, doubled or reordered")
        self.assertEqual([e["data"] for e in events].count("[DONE]"), 1)
        if not os.environ.get("ASAN_OPTIONS"):  # ASan keeps freed memory in quarantine
            grown = vm_kib(g.proc.pid, "VmHWM") - rss_before
            self.assertLess(grown, 16 * 1024, f"the gateway's memory grew by {grown} KiB: no back-pressure?")

    # --- hygiene

    def test_upstream_token_never_in_logs(self):
        tok_a = "sk-proj-UPSTREAMSECRET" + os.urandom(12).hex()
        tok_b = "opaque" + os.urandom(10).hex() + "zz"   # looks like nothing in particular
        tok_c = "tok-" + os.urandom(16).hex()
        g = self.gateway([
            account("a", self.mock.url("a", "status=401"), token=tok_a),
            account("b", self.mock.url("b", "status=429,retry_after=600"), token=tok_b),
            account("c", self.mock.url("c", "ok"), token=tok_c),
        ])
        g.post("/v1/chat/completions", CHAT_BODY)
        g.stream("/v1/responses", dict(RESP_BODY, stream=True))
        g.post("/v1/responses", b"{broken", headers={"Content-Type": "application/json"})
        g.post("/v1/responses", RESP_BODY, key="sk-wrong-" + os.urandom(8).hex())
        g.get("/v1/models")
        wait_for(lambda: len(g.request_logs()) >= 2, what="request logs")
        g.sighup()
        g.stop()  # flush everything it would write
        secrets = {"token a": tok_a, "token b": tok_b, "token c": tok_c, "platform key": g.key}
        texts = {"gateway log": g.log_text(), "trace log": g.trace_text()}
        for what, _, out, err in g.cli_runs:
            texts[f"`{what}` stderr"] = err
            if what != "key add":  # key add prints the new key once, by design
                texts[f"`{what}` stdout"] = out
        for tname, text in texts.items():
            for sname, secret in secrets.items():
                with self.subTest(where=tname, secret=sname):
                    self.assertNotIn(secret, text, f"{sname} appears in the {tname}")
                    # nor a long tail of it (a "redacted" prefix is fine, the secret part is not)
                    self.assertNotIn(secret[-16:], text, f"part of {sname} appears in the {tname}")
        # the upstreams got their own tokens and never the platform key
        for r in self.mock.requests():
            self.assertNotIn(g.key, r["authorization"] or "")

    def test_db_file_mode_0600(self):
        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        self.assertEqual(stat.S_IMODE(os.stat(g.db_path).st_mode), 0o600, "db created by the CLI")
        g.start()
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        g.wait_request_logs(1)
        for suffix in ("", "-wal", "-shm", "-journal"):
            path = g.db_path + suffix
            if os.path.exists(path):
                with self.subTest(file=os.path.basename(path)):
                    self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600, path)


if __name__ == "__main__":
    main()
