"""test_hostile.py: clients that bend the rules, over raw sockets: HTTP/1.0, half-closed
sockets, ambiguous framing, wrongly typed fields, idle and surplus connections, a
process out of file descriptors, and bodies built to blow up memory."""

import json
import os
import resource
import signal
import socket
import struct
import threading
import time

from harness import GatewayTest, PyUpstream, account, main, vm_kib, wait_for, HOST

RESP_BODY = {"model": "gpt-test", "input": "hi"}
CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


def raw_request(g, method, path, body=None, version="1.1", headers=(), auth=True):
    """The bytes of one request, framed by hand."""
    lines = [f"{method} {path} HTTP/{version}", f"Host: {HOST}:{g.port}"]
    if auth:
        lines.append(f"Authorization: Bearer {g.key}")
    data = b""
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        lines.append("Content-Type: application/json")
        if not any(h.lower().startswith(("content-length:", "transfer-encoding:")) for h in headers):
            lines.append(f"Content-Length: {len(data)}")
    lines.extend(headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def read_to_eof(sock, timeout=20.0):
    """Everything the peer sends until it closes (the test's timeout only stops a hang)."""
    sock.settimeout(timeout)
    parts = []
    while True:
        b = sock.recv(65536)
        if not b:
            return b"".join(parts)
        parts.append(b)


def read_one_response(sock, timeout=20.0):
    """(status, headers dict lower-cased, body) of one response framed by Content-Length,
    chunked encoding or the connection's close."""
    sock.settimeout(timeout)
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = sock.recv(65536)
        if not b:
            raise AssertionError(f"connection closed inside the headers: {buf!r}")
        buf += b
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers.setdefault(k.strip().lower(), []).append(v.strip())
    if "content-length" in headers:
        n = int(headers["content-length"][0])
        while len(rest) < n:
            b = sock.recv(65536)
            if not b:
                break
            rest += b
        return status, headers, rest[:n], rest[n:]
    if headers.get("transfer-encoding", [""])[0].lower() == "chunked":
        out = b""
        while True:
            while b"\r\n" not in rest:
                rest += sock.recv(65536)
            size_line, rest = rest.split(b"\r\n", 1)
            size = int(size_line, 16)
            while len(rest) < size + 2:
                rest += sock.recv(65536)
            out += rest[:size]
            rest = rest[size + 2:]
            if size == 0:
                return status, headers, out, rest
    return status, headers, rest + read_to_eof(sock, timeout), b""


def connect(g):
    return socket.create_connection((HOST, g.port), timeout=20)


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def socket_fds(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n


def settled_socket_fds(pid):
    """socket_fds once it stopped changing: a connection the client already closed keeps its
    descriptor in the gateway until the next sweep (100 ms)."""
    seen = []

    def stable():
        seen.append(socket_fds(pid))
        return len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]
    wait_for(stable, interval=0.15, what="the gateway's sockets to settle")
    return seen[-1]


class HostileTest(GatewayTest):

    def one(self, scenario="ok", env=None):
        return self.gateway([account("a", self.mock.url("a", scenario))], env=env)

    # --- HTTP/1.0

    def assertFramedHttp10(self, raw, what):
        head, _, body = raw.partition(b"\r\n\r\n")
        text = head.decode("latin-1")
        self.assertTrue(text.startswith("HTTP/"), f"{what}: {raw[:200]!r}")
        hl = {ln.split(":", 1)[0].strip().lower(): ln.split(":", 1)[1].strip()
              for ln in text.split("\r\n")[1:] if ":" in ln}
        self.assertNotIn("transfer-encoding", hl, f"{what}: chunked is not HTTP/1.0: {text}")
        if "content-length" in hl:
            self.assertEqual(int(hl["content-length"]), len(body),
                             f"{what}: Content-Length disagrees with the body: {raw[:400]!r}")
        return int(text.split()[1]), hl, body

    def test_http10_keepalive_client_gets_a_framed_answer(self):
        g = self.one()
        for body, what in ((RESP_BODY, "plain"), (dict(RESP_BODY, stream=True), "stream"),
                           (dict(CHAT_BODY, stream=True), "chat stream")):
            path = "/v1/chat/completions" if "messages" in body else "/v1/responses"
            for version, conn_hdr in (("1.0", ("Connection: keep-alive",)), ("1.0", ()),
                                      ("0.9", ("Connection: keep-alive",))):
                with self.subTest(what=what, version=version, headers=conn_hdr):
                    s = connect(g)
                    s.sendall(raw_request(g, "POST", path, body, version=version, headers=conn_hdr))
                    raw = read_to_eof(s)  # the answer must end: by its length or by the close
                    s.close()
                    status, hl, payload = self.assertFramedHttp10(raw, what)
                    self.assertEqual(status, 200, raw[:300])
                    if what == "plain":
                        self.assertEqual(json.loads(payload)["status"], "completed")
                    elif what == "stream":
                        self.assertIn(b"response.completed", payload)
                    else:
                        self.assertTrue(payload.rstrip().endswith(b"data: [DONE]"), payload[-200:])

    def test_http10_stream_whose_upstream_ends_after_the_last_event_is_finished_once(self):
        # everything was written before the upstream's end: libevent closes the
        # HTTP/1.0 connection inside evhttp_send_reply_end, which calls the close callback
        g = self.one("ok,tail=300")
        for body, path in ((dict(RESP_BODY, stream=True), "/v1/responses"),
                           (dict(CHAT_BODY, stream=True), "/v1/chat/completions")):
            with self.subTest(path=path):
                s = connect(g)
                s.sendall(raw_request(g, "POST", path, body, version="1.0"))
                raw = read_to_eof(s)
                s.close()
                status, _, payload = self.assertFramedHttp10(raw, path)
                self.assertEqual(status, 200, raw[:300])
        rows = g.wait_request_logs(2)
        self.assertEqual([r["status"] for r in rows], [200, 200], rows)
        self.assertTrue(g.running(), "the gateway died")
        self.assertEqual(g.get("/health").status, 200)

    def test_http10_error_replies_are_framed_too(self):
        g = self.one("status=429")
        s = connect(g)
        s.sendall(raw_request(g, "POST", "/v1/responses", {"model": 5}, version="1.0",
                              headers=("Connection: keep-alive",)))
        status, hl, body, _ = read_one_response(s)
        s.close()
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(body)["error"]["type"], "invalid_request_error")

    def read_until_end_or_reset(self, s):
        """(bytes read, how it ended: "fin" or "reset")."""
        s.settimeout(20)
        parts = []
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                return b"".join(parts), "reset"
            if not b:
                return b"".join(parts), "fin"
            parts.append(b)

    def test_http10_plain_answer_cut_by_the_upstream_ends_with_a_reset_not_a_clean_close(self):
        # an HTTP/1.0 answer without a Content-Length runs to the close: a clean
        # close after half the body would hand the client half a body as complete
        g = self.one("plain_cut,bytes=3000000")  # past the 1 MiB held whole: a part is relayed before the cut
        for conn_hdr in ((), ("Connection: keep-alive",)):
            with self.subTest(headers=conn_hdr):
                s = connect(g)
                s.sendall(raw_request(g, "POST", "/v1/responses", RESP_BODY, version="1.0", headers=conn_hdr))
                raw, end = self.read_until_end_or_reset(s)
                s.close()
                self.assertRegex(raw[:16], rb"^HTTP/1\.[01] 200 ", raw[:200])  # the cut came after the status
                self.assertNotIn(b"content-length", raw.partition(b"\r\n\r\n")[0].lower(), raw[:400])
                self.assertEqual(end, "reset", f"a cut close-delimited answer ended with a clean close: {raw[:400]!r}")
        rows = g.wait_request_logs(2)
        self.assertEqual([r["error_class"] for r in rows], ["body_interrupted"] * 2, rows)

    def slow_http10_reader(self, g):
        """An HTTP/1.0 client with a tiny receive buffer whose (large) answer has begun and
        which reads no further yet."""
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(20)
        s.connect((HOST, g.port))
        s.sendall(raw_request(g, "POST", "/v1/responses", RESP_BODY, version="1.0"))
        self.assertTrue(s.recv(16, socket.MSG_PEEK).startswith(b"HTTP/1."))  # the answer has begun
        return s

    def test_http10_answer_cut_by_a_forced_exit_ends_with_a_reset_not_a_clean_close(self):
        # a large answer to a client that does not read yet: a first stop signal waits for
        # it, a second exits at once; what was not sent must not look like the end
        g = self.one("ok,bytes=16000000")
        s = self.slow_http10_reader(g)
        g.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "stopping: waiting for 1 request" in g.log_text(), what="the drain to wait for the answer")
        g.proc.send_signal(signal.SIGTERM)
        g.proc.wait(20)
        raw, end = self.read_until_end_or_reset(s)
        s.close()
        self.assertLess(len(raw), 16000000)
        self.assertEqual(end, "reset", f"a cut answer ended with a clean close after {len(raw)} bytes")
        self.assertIn("answer(s) unfinished", g.log_text())

    def test_http10_answer_cut_because_the_client_stopped_reading_ends_with_a_reset(self):
        # the client reads nothing for longer than the idle timeout: libevent closes the
        # connection mid-answer; what the client reads later must not look whole
        g = self.one("ok,bytes=16000000", env={"SWITCHYARD_CLIENT_IDLE_TIMEOUT_S": "1"})
        s = self.slow_http10_reader(g)
        rows = g.wait_request_logs(1)  # the gateway gave up on the client
        self.assertEqual(rows[0]["status"], 499, rows[0])
        raw, end = self.read_until_end_or_reset(s)
        s.close()
        self.assertLess(len(raw), 16000000)
        self.assertEqual(end, "reset", f"a cut answer ended with a clean close after {len(raw)} bytes")

    def test_http11_plain_answer_cut_by_the_upstream_never_gets_the_final_chunk(self):
        g = self.one("plain_cut,bytes=3000000")  # past the 1 MiB held whole: a part is relayed before the cut
        s = connect(g)
        s.sendall(raw_request(g, "POST", "/v1/responses", RESP_BODY))
        raw, _ = self.read_until_end_or_reset(s)
        s.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), raw[:200])
        self.assertIn(b"transfer-encoding: chunked", head.lower(), raw[:400])
        self.assertTrue(body, "nothing of the body was sent: the test does not cut mid-body")
        # the body's chunks, as a client reads them: the last one must not be the 0-chunk
        rest, sizes = body, []
        while b"\r\n" in rest:
            size_line, rest = rest.split(b"\r\n", 1)
            size = int(size_line, 16)
            sizes.append(size)
            if size == 0 or len(rest) < size + 2:
                break
            rest = rest[size + 2:]
        self.assertNotIn(0, sizes, f"the cut answer ended with the final chunk: {raw[-200:]!r}")

    def test_head_answers_carry_no_body(self):
        # a body after a HEAD answer would be read as the next answer on the connection
        g = self.one()
        for path, want in (("/health", 200), ("/v1/models", 405), ("/v1/responses", 405), ("/nope", 404)):
            with self.subTest(path=path):
                s = connect(g)
                s.sendall(raw_request(g, "HEAD", path) + raw_request(g, "GET", "/health", headers=("Connection: close",)))
                raw = read_to_eof(s)
                s.close()
                first, _, rest = raw.partition(b"\r\n\r\n")
                self.assertTrue(first.startswith(b"HTTP/1.1 %d " % want), raw[:200])
                self.assertTrue(rest.startswith(b"HTTP/1.1 200 "), f"HEAD answer had a body: {rest[:200]!r}")

    # --- half-close

    def test_half_closed_client_still_gets_its_answer(self):
        # the upstream takes a moment, so the EOF is seen while the request waits
        for scenario, body in (("slow_headers,ms=400", RESP_BODY),
                               ("slow_headers,ms=400", dict(RESP_BODY, stream=True))):
            with self.subTest(stream=body.get("stream", False)):
                self.mock.reset()
                g = self.one(scenario)
                s = connect(g)
                s.sendall(raw_request(g, "POST", "/v1/responses", body,
                                      headers=("Connection: close",)))
                s.shutdown(socket.SHUT_WR)
                status, _, payload, _ = read_one_response(s)
                s.close()
                self.assertEqual(status, 200, payload[:300])
                self.assertIn(b"completed", payload)
                rows = g.wait_request_logs(1)
                self.assertEqual(rows[-1]["status"], 200, rows)

    def test_client_hanging_up_on_its_second_request_stops_the_upstream(self):
        # the hang-up watch belongs to the connection and stays between its requests: it must
        # still notice a client that resets the connection while its second request waits
        # the first answered at once, the second held longer than anything here waits (60 s): its end
        # can only be the gateway's abort, never a hold that ran out before the test hung up
        g = self.one("slow_headers,ms=60000,ok_first=1")
        s = connect(g)
        s.sendall(raw_request(g, "POST", "/v1/responses", RESP_BODY))
        status, _, payload, _ = read_one_response(s)
        self.assertEqual(status, 200, payload[:300])
        s.sendall(raw_request(g, "POST", "/v1/responses", RESP_BODY))
        wait_for(lambda: len(self.mock.requests("a")) == 2, what="the second request upstream")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # a reset, not a half-close: the client is gone
        rec = wait_for(lambda: [r for r in self.mock.requests("a")[1:] if r["aborted"]],
                       what="the second upstream request to be aborted after the client left")[0]
        self.assertFalse(rec["completed"], "the upstream answered a client that was gone")
        rows = g.wait_request_logs(2)
        self.assertEqual(sorted(r["status"] for r in rows), [200, 499], rows)

    # --- framing

    def test_ambiguous_framing_is_refused_before_any_upstream(self):
        g = self.one()
        body = json.dumps(RESP_BODY).encode()
        cases = {
            "two different Content-Length": (f"Content-Length: {len(body)}", f"Content-Length: {len(body) + 3}"),
            "Content-Length and chunked": (f"Content-Length: {len(body)}", "Transfer-Encoding: chunked"),
        }
        for what, hdrs in cases.items():
            with self.subTest(what=what):
                s = connect(g)
                data = body if "chunked" not in what else f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
                s.sendall(raw_request(g, "POST", "/v1/responses", data, headers=hdrs))
                status, hl, payload, _ = read_one_response(s)
                s.close()
                self.assertEqual(status, 400, payload)
                if "chunked" in what:
                    continue  # libevent 2.1 refuses this one itself, with its HTML page (docs/architecture.md)
                self.assertEqual(json.loads(payload)["error"]["code"], "bad_request_framing")
                self.assertEqual(hl.get("connection"), ["close"])
        self.assertEqual(self.mock.requests(), [], "a refused request reached the upstream")
        # the same Content-Length twice is merely redundant
        s = connect(g)
        s.sendall(raw_request(g, "POST", "/v1/responses", body,
                              headers=(f"Content-Length: {len(body)}", f"Content-Length: {len(body)}")))
        status, _, payload, _ = read_one_response(s)
        s.close()
        self.assertEqual(status, 200, payload)

    def test_every_method_libevent_knows_gets_a_json_answer(self):
        g = self.one()
        for method in ("TRACE", "PUT", "DELETE", "OPTIONS", "PATCH"):
            with self.subTest(method=method):
                s = connect(g)
                s.sendall(raw_request(g, method, "/v1/responses", headers=("Connection: close",)))
                status, hl, payload, _ = read_one_response(s)
                s.close()
                self.assertIn(status, (404, 405), payload)
                self.assertIn("application/json", hl.get("content-type", [""])[0], payload)
                self.assertIn("error", json.loads(payload))
        # an unknown method is refused by libevent itself, with its HTML page (documented)
        s = connect(g)
        s.sendall(b"BREW /v1/responses HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, _, _ = read_one_response(s)
        s.close()
        self.assertEqual(status, 501)
        self.assertEqual(self.mock.requests(), [])

    # --- field types

    def test_wrongly_typed_fields_get_400_before_any_upstream(self):
        g = self.one()
        cases = [
            ("/v1/responses", dict(RESP_BODY, input=5)),
            ("/v1/responses", dict(RESP_BODY, input={"role": "user"})),
            ("/v1/responses", dict(RESP_BODY, input=None)),
            ("/v1/responses", dict(RESP_BODY, previous_response_id=12)),
            ("/v1/responses", dict(RESP_BODY, previous_response_id=["resp_1"])),
            ("/v1/chat/completions", dict(CHAT_BODY, messages="hi")),
            ("/v1/chat/completions", dict(CHAT_BODY, messages={"role": "user"})),
        ]
        for path, body in cases:
            with self.subTest(path=path, body=body):
                err = self.assertOpenAIError(g.post(path, body), 400)
                self.assertEqual(err["type"], "invalid_request_error")
        self.assertEqual(self.mock.requests(), [], "a wrongly typed request reached the upstream")
        # the right types pass
        self.assertEqual(g.post("/v1/responses", dict(RESP_BODY, input=[{"role": "user", "content": "hi"}])).status, 200)
        self.assertEqual(g.post("/v1/responses", dict(RESP_BODY, previous_response_id=None)).status, 200)

    # --- connections

    def test_idle_client_connection_is_closed_after_the_idle_timeout(self):
        g = self.one(env={"SWITCHYARD_CLIENT_IDLE_TIMEOUT_S": "1"})
        s = connect(g)
        s.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\n")  # and then nothing
        s.settimeout(15)  # only against a hang; the setting says 1 s
        data = read_to_eof(s, timeout=15)
        s.close()
        self.assertNotIn(b" 200 ", data[:20])
        # a kept-alive connection between requests too
        s = connect(g)
        s.sendall(raw_request(g, "GET", "/health"))
        status, _, _, _ = read_one_response(s)
        self.assertEqual(status, 200)
        self.assertEqual(read_to_eof(s, timeout=15), b"")
        s.close()

    def test_a_request_dripped_byte_by_byte_is_cut_off_with_408(self):
        # each byte comes well within the idle timeout; the request as a whole must not take
        # longer than the request timeout
        g = self.one(env={"SWITCHYARD_CLIENT_REQUEST_TIMEOUT_S": "2", "SWITCHYARD_CLIENT_IDLE_TIMEOUT_S": "30"})
        req = raw_request(g, "POST", "/v1/responses", RESP_BODY)
        s = connect(g)
        got = b""
        s.settimeout(0.3)
        for i in range(len(req)):  # about 30 s at most; the cut comes after ~2 s
            try:
                s.sendall(req[i:i + 1])
            except OSError:
                break
            try:
                b = s.recv(65536)
                got += b
                if not b or got:
                    break
            except socket.timeout:
                pass
        try:
            got += read_to_eof(s, timeout=10)
        except OSError:
            pass
        s.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 408 "), got[:200])
        self.assertEqual(json.loads(got.partition(b"\r\n\r\n")[2])["error"]["code"], "request_timeout")
        self.assertEqual(self.mock.requests(), [])
        health = g.get("/health", key=None).json()
        self.assertEqual(health["connections"]["slow_requests_closed"], 1, health)

    def test_the_request_timeout_spares_long_answers_and_pipelined_requests(self):
        # a 4 s stream with a 1 s request timeout, while the client already sends its next
        # request: the time the server spends answering is not the client's
        for scenario, body in (("slow_stream,ms=200", dict(RESP_BODY, stream=True)),   # answer being written
                               ("slow_headers,ms=2500", RESP_BODY)):                   # answer awaited
            with self.subTest(scenario=scenario):
                g = self.one(scenario, env={"SWITCHYARD_CLIENT_REQUEST_TIMEOUT_S": "1"})
                s = connect(g)
                s.sendall(raw_request(g, "POST", "/v1/responses", body))
                # the next request goes once the first is with the upstream (awaited) or its answer has
                # begun (the stream: peeked), by their signs rather than a sleep
                if body.get("stream"):
                    self.assertTrue(s.recv(16, socket.MSG_PEEK).startswith(b"HTTP/1.1 200"))
                else:
                    wait_for(lambda: self.mock.requests(), what="the first request at the upstream")
                s.sendall(raw_request(g, "GET", "/health", headers=("Connection: close",), auth=False))
                status, _, payload, rest = read_one_response(s)
                self.assertEqual(status, 200, payload[:200])
                self.assertIn(b"completed", payload)
                s.settimeout(20)
                while b"\r\n\r\n" not in rest:
                    b = s.recv(65536)
                    if not b:
                        break
                    rest += b
                s.close()
                self.assertTrue(rest.startswith(b"HTTP/1.1 200 "), rest[:200])

    def test_the_request_timeout_spares_a_kept_alive_client_polling_any_handler(self):
        # the dashboard polls /metrics and /admin/ on one connection for far longer than the
        # request timeout; those handlers are not server.c's, and must be spared all the same
        g = self.one(env={"SWITCHYARD_CLIENT_REQUEST_TIMEOUT_S": "1"})
        s = connect(g)
        deadline = time.monotonic() + 3.5
        n = 0
        while time.monotonic() < deadline:
            for path in ("/metrics", "/admin/"):
                s.sendall(raw_request(g, "GET", path, auth=False))
                status, _, payload, _ = read_one_response(s)
                self.assertIn(status, (200, 301, 302), f"{path} after {n} requests: {payload[:200]!r}")
                n += 1
            time.sleep(0.3)
        s.close()

    def test_idle_timeout_spares_requests_waiting_on_their_upstream(self):
        # waiting for headers, or for the next event of a stream, is the upstream's time
        for scenario, body in (("slow_headers,ms=2500", RESP_BODY),
                               ("stall,ms=2500", dict(RESP_BODY, stream=True))):
            with self.subTest(scenario=scenario):
                g = self.one(scenario, env={"SWITCHYARD_CLIENT_IDLE_TIMEOUT_S": "1"})
                if body.get("stream"):
                    st = g.stream("/v1/responses", body)
                    self.assertEqual(st.status, 200)
                    self.assertIn("response.completed", st.types())
                else:
                    r = g.post("/v1/responses", body)
                    self.assertEqual(r.status, 200, r)

    def test_idle_timeout_spares_a_committed_stream_whose_upstream_pauses(self):
        # a long-lived stream already flowing to the client, then silent upstream for longer
        # than the client idle timeout (a model thinking, a tool running): the silence is the
        # upstream's, bounded by the upstream idle timeout, and the client that sends nothing
        # while it reads a stream is not idle
        g = self.one("slow_stream,ms=1500,deltas=3", env={"SWITCHYARD_CLIENT_IDLE_TIMEOUT_S": "1"})
        st = g.stream("/v1/responses", dict(RESP_BODY, stream=True))
        self.assertEqual(st.status, 200)
        types = st.types()
        self.assertEqual(types.count("response.output_text.delta"), 3, types)
        self.assertIn("response.completed", types)
        # the idle timeout still closes a kept-alive connection that then says nothing
        s = connect(g)
        s.sendall(raw_request(g, "POST", "/v1/responses", RESP_BODY))
        status, _, payload, rest = read_one_response(s)
        self.assertEqual(status, 200, payload[:200])
        # closed by the gateway: read_to_eof's timeout only stops a hang (no stopwatch on the 1 s)
        self.assertEqual(rest + read_to_eof(s, timeout=10), b"")
        s.close()

    def test_connections_beyond_the_cap_get_a_json_503_and_service_resumes(self):
        g = self.one(env={"SWITCHYARD_MAX_CONNECTIONS": "4"})
        base = settled_socket_fds(g.proc.pid)
        idle = [connect(g) for _ in range(4)]
        wait_for(lambda: socket_fds(g.proc.pid) >= base + 4, what="the idle connections to be accepted")
        s = connect(g)
        s.sendall(raw_request(g, "POST", "/v1/responses", RESP_BODY))
        status, hl, payload, _ = read_one_response(s)
        s.close()
        self.assertEqual(status, 503, payload)
        self.assertEqual(json.loads(payload)["error"]["code"], "too_many_connections")
        self.assertEqual(hl.get("connection"), ["close"])
        self.assertEqual(self.mock.requests(), [])
        for c in idle:
            c.close()
        wait_for(lambda: g.post("/v1/responses", RESP_BODY).status == 200,
                 what="requests to be served again once the idle connections closed")
        health = g.get("/health", key=None).json()
        self.assertGreaterEqual(health["connections"]["refused"], 1, health)
        self.assertEqual(health["connections"]["cap"], 4)

    def connect_from(self, g, source):
        s = socket.socket()
        s.settimeout(20)
        s.bind((source, 0))
        s.connect((HOST, g.port))
        return s

    def test_one_client_address_cannot_take_every_connection(self):
        g = self.one(env={"SWITCHYARD_MAX_CONNECTIONS": "8", "SWITCHYARD_MAX_CONNECTIONS_PER_IP": "3",
                          "SWITCHYARD_MAX_CONNECTIONS_PER_IP_LOOPBACK": "1"})
        base = settled_socket_fds(g.proc.pid)
        idle = [self.connect_from(g, "127.0.0.1") for _ in range(3)]
        wait_for(lambda: socket_fds(g.proc.pid) >= base + 3, what="the idle connections to be accepted")
        s = self.connect_from(g, "127.0.0.1")
        refused_body = dict(RESP_BODY, input="one connection too many for this address")
        s.sendall(raw_request(g, "POST", "/v1/responses", refused_body))
        status, hl, payload, _ = read_one_response(s)
        s.close()
        self.assertEqual(status, 503, payload)
        err = json.loads(payload)["error"]
        self.assertEqual(err["code"], "too_many_connections")
        self.assertEqual(err["type"], "server_error")
        self.assertIn("address", err["message"])
        self.assertEqual(hl.get("connection"), ["close"])
        self.assertEqual(hl.get("retry-after"), ["1"])
        refused_len = len(json.dumps(refused_body))
        self.assertEqual([r for r in self.mock.requests() if r["body_len"] == refused_len], [])
        # another address still gets in (127.0.0.2 is loopback too, and counted apart)
        o = self.connect_from(g, "127.0.0.2")
        o.sendall(raw_request(g, "POST", "/v1/responses", RESP_BODY, headers=("Connection: close",)))
        status, _, payload, _ = read_one_response(o)
        o.close()
        self.assertEqual(status, 200, payload[:300])
        for c in idle:
            c.close()
        wait_for(lambda: g.post("/v1/responses", RESP_BODY).status == 200,
                 what="the address to be served again once its connections closed")
        health = g.get("/health", key=None).json()["connections"]
        self.assertEqual(health["per_ip_cap"], 3, health)
        self.assertGreaterEqual(health["refused_per_ip"], 1, health)

    def test_a_silent_connection_over_its_address_share_is_answered_and_closed(self):
        # waiting for its first request would let a client that never sends one hold the slot
        g = self.one(env={"SWITCHYARD_MAX_CONNECTIONS_PER_IP": "1", "SWITCHYARD_MAX_CONNECTIONS_PER_IP_LOOPBACK": "1"})
        settled_socket_fds(g.proc.pid)  # the harness's own check that the port accepts is let go
        held = self.connect_from(g, "127.0.0.1")
        s = self.connect_from(g, "127.0.0.1")
        raw = read_to_eof(s)  # nothing sent: the answer comes, then the close
        s.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 503 "), raw[:300])
        self.assertEqual(json.loads(body)["error"]["code"], "too_many_connections")
        held.sendall(raw_request(g, "POST", "/v1/responses", RESP_BODY))
        status, _, payload, _ = read_one_response(held)
        held.close()
        self.assertEqual(status, 200, payload[:300])

    def test_loopback_clients_are_exempt_from_the_per_address_cap_by_default(self):
        g = self.one(env={"SWITCHYARD_MAX_CONNECTIONS_PER_IP": "2"})
        base = settled_socket_fds(g.proc.pid)
        idle = [connect(g) for _ in range(4)]
        wait_for(lambda: socket_fds(g.proc.pid) >= base + 4, what="the idle connections to be accepted")
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        for c in idle:
            c.close()
        health = g.get("/health", key=None).json()["connections"]
        self.assertEqual(health["refused_per_ip"], 0, health)

    def test_out_of_descriptors_neither_spins_nor_floods_the_log_and_recovers(self):
        limit = 40

        def low_nofile():
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        g = self.gateway([account("a", self.mock.url("a"))],
                         env={"SWITCHYARD_MAX_CONNECTIONS": "1000", "SWITCHYARD_LOG_LEVEL": "info"},
                         start=False)
        g.preexec = low_nofile
        g.start()
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        held = []
        try:
            for _ in range(3 * limit):  # the kernel completes these handshakes in the backlog
                c = socket.socket()
                c.setblocking(False)
                c.connect_ex((HOST, g.port))
                held.append(c)
            wait_for(lambda: "pausing" in g.log_text(), what="the gateway to pause accepting")
            cpu0, log0 = proc_cpu_seconds(g.proc.pid), os.path.getsize(g.log_path)
            time.sleep(2.0)  # exhausted for a while: a spinning loop would burn ~2 s of CPU here
            cpu = proc_cpu_seconds(g.proc.pid) - cpu0
            grown = os.path.getsize(g.log_path) - log0
            print(f"  out of descriptors for 2 s: {cpu:.2f} s of CPU, {grown} bytes of log")
            self.assertLess(cpu, 1.0, "the gateway spun while out of descriptors")
            self.assertLess(grown, 20000, "the log flooded while out of descriptors")
            self.assertTrue(g.running())
        finally:
            for c in held:
                c.close()
        wait_for(lambda: self._try_post(g), timeout=20, what="service after descriptors were freed")
        self.assertLess(os.path.getsize(g.log_path), 200000)

    def _try_post(self, g):
        try:
            return g.post("/v1/responses", RESP_BODY, timeout=5).status == 200
        except OSError:
            return False

    def test_soft_descriptor_limit_is_raised_to_the_hard_one_at_start(self):
        def soft_below_hard():
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096))

        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        g.preexec = soft_below_hard
        g.start()
        with open(f"/proc/{g.proc.pid}/limits") as f:
            line = next(ln for ln in f if ln.startswith("Max open files"))
        self.assertEqual(line.split()[3:5], ["4096", "4096"], line)
        self.assertEqual(g.get("/health", key=None).json()["connections"]["descriptor_limit"], 4096)

    def test_default_connection_cap_holds_ten_thousand_streams_when_descriptors_allow(self):
        # a long-lived stream holds a client and an upstream socket: with a hard limit of
        # 2 x 10 000 + 64 the default cap (16 384, formerly 4 096) gives way only to the
        # descriptors, so 10 000 streams fit
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        want = 20064 if hard == resource.RLIM_INFINITY else min(hard, 20064)
        if want < 8256:
            self.skipTest(f"hard descriptor limit {hard} is below 8256")

        def soft_low():
            resource.setrlimit(resource.RLIMIT_NOFILE, (1024, want))

        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        g.preexec = soft_low
        g.start()
        conns = g.get("/health", key=None).json()["connections"]
        self.assertEqual(conns["descriptor_limit"], want)
        self.assertEqual(conns["cap"], min(16384, (want - 64) // 2))
        self.assertGreater(conns["cap"], 4096)

    def test_no_descriptor_for_the_upstream_is_a_503_and_cools_no_account(self):
        # a request whose body is still coming while idle connections take every descriptor
        # left: when it is complete, curl cannot open the upstream socket. That is the
        # gateway's shortage, not the account's.
        limit = 40

        def low_nofile():
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b"))],
                         env={"SWITCHYARD_MAX_CONNECTIONS": "1000", "SWITCHYARD_LOG_LEVEL": "info"},
                         start=False)
        g.preexec = low_nofile
        g.start()
        req = raw_request(g, "POST", "/v1/responses", RESP_BODY, headers=("Connection: close",))
        base = settled_socket_fds(g.proc.pid)
        s = connect(g)
        s.sendall(req[:-5])
        wait_for(lambda: socket_fds(g.proc.pid) > base, what="the request's connection to be accepted")
        idle = []
        try:
            while "Too many open files" not in g.log_text():
                self.assertLess(len(idle), 3 * limit, "the descriptors never ran out")
                c = socket.socket()
                c.setblocking(False)
                c.connect_ex((HOST, g.port))
                idle.append(c)
                time.sleep(0.01)
            s.sendall(req[-5:])
            status, _, payload, _ = read_one_response(s)
            s.close()
        finally:
            for c in idle:
                c.close()
        self.assertEqual(status, 503, payload)
        self.assertEqual(json.loads(payload)["error"]["code"], "gateway_overloaded")
        self.assertEqual(self.mock.requests(), [])
        # the writer commits an account's state some ms after the answer: the request's log row, queued
        # after any state the request changed and committed with or after it, comes first
        self.assertEqual(g.wait_request_logs(1)[-1]["status"], 503)
        cooled = g.query("SELECT account_id FROM account_state WHERE cooldown_until > ?", (time.time(),))
        self.assertEqual(cooled, [], "an account was cooled down for the gateway's own shortage")
        wait_for(lambda: self._try_post(g), what="service once descriptors are free")

    # --- memory

    def test_a_16_mib_array_body_costs_a_small_multiple_of_its_size_and_is_given_back(self):
        n = 8 * 1024 * 1024 - 32  # "0," each: a 16 MiB body, just inside the default limit
        body = b'{"model":"gpt-test","input":[' + b"0," * (n - 1) + b"0]}"
        self.assertLess(len(body), 16 << 20)
        g = self.one()
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        rss0 = vm_kib(g.proc.pid, "VmRSS")
        r = g.post("/v1/responses", body)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.mock.requests()[-1]["body_len"], len(body))
        peak = vm_kib(g.proc.pid, "VmHWM") - rss0
        print(f"  16 MiB body: peak RSS grew by {peak // 1024} MiB")
        if os.environ.get("ASAN_OPTIONS"):
            return  # ASan keeps freed memory in quarantine and pads allocations
        self.assertLess(peak * 1024, 4 * len(body), "memory per request above ~3x the body")
        wait_for(lambda: vm_kib(g.proc.pid, "VmRSS") - rss0 < 8 * 1024, timeout=10,
                 what="the gateway to give the body's memory back")

    def test_bodies_over_the_in_flight_budget_get_a_503_and_later_ones_pass(self):
        # the first request is held at its upstream until the test lets it go (not for a fixed 3 s that
        # a loaded machine could use up before the second request is refused)
        up = PyUpstream("a")
        self.addCleanup(up.close)
        up.hold_next = True
        g = self.gateway([account("a", up.base_url())], env={"SWITCHYARD_MAX_BODIES_IN_FLIGHT": str(1 << 20)})
        big = dict(RESP_BODY, input="x" * (700 << 10))
        first = {}
        t = threading.Thread(target=lambda: first.setdefault("r", g.post("/v1/responses", big)))
        t.start()
        try:
            self.assertTrue(up.held.wait(20), "the first request never reached the upstream")
            err = self.assertOpenAIError(g.post("/v1/responses", big), 503)
            self.assertEqual(err["code"], "body_budget_exceeded")
            self.assertEqual(up.count(), 1)
        finally:
            up.release()
            t.join(30)
        self.assertEqual(first["r"].status, 200)
        self.assertEqual(g.post("/v1/responses", big).status, 200)  # nothing in flight: it fits
        self.assertEqual(up.count(), 2)


    def test_bodies_still_arriving_count_in_the_budget_and_the_one_passing_it_gets_a_503(self):
        # slow clients each part-way through a large body: what libevent holds
        # for them counts, so together they cannot pass the budget
        budget = 1 << 20
        g = self.one(env={"SWITCHYARD_MAX_BODIES_IN_FLIGHT": str(budget)})
        body = b'{"model":"gpt-test","input":"' + b"x" * (450 << 10) + b'"}'
        sent = 400 << 10
        conns = []
        for _ in range(3):
            s = connect(g)
            s.sendall(raw_request(g, "POST", "/v1/responses", body)[:-(len(body) - sent)])
            conns.append(s)
        # the third 400 KiB passes the 1 MiB budget: that connection hears why at once
        refused = []

        def one_refused():
            for s in conns:
                s.settimeout(0.05)
                try:
                    if s.recv(1, socket.MSG_PEEK):
                        refused.append(s)
                        return True
                except (socket.timeout, BlockingIOError):
                    pass
            return False
        wait_for(one_refused, timeout=20, what="a connection over the body budget to be answered")
        status, hl, payload, _ = read_one_response(refused[0])
        self.assertEqual(status, 503, payload)
        err = json.loads(payload)["error"]
        self.assertEqual(err["code"], "body_budget_exceeded")
        self.assertEqual(err["type"], "server_error")
        self.assertEqual(hl.get("retry-after"), ["1"])
        self.assertEqual(hl.get("connection"), ["close"])
        # the other two bodies are still being read (libevent reads a socket in pieces, a loop turn each, and
        # /health can be answered in between): every sample stays within the budget, and the count reaches
        # both 400 KiB once they are read
        def settled():
            h = g.get("/health", key=None).json()["request_bodies"]
            self.assertLessEqual(h["bytes_in_flight"] + h["bytes_receiving"], budget, h)
            return h if h["bytes_receiving"] >= 2 * sent else None
        health = wait_for(settled, what="the two bodies that fit to be counted while they arrive")
        self.assertGreaterEqual(health["bytes_receiving"], 2 * sent, health)
        self.assertGreaterEqual(health["refused"], 1, health)
        # the others fit: they finish and are served
        for s in conns:
            if s is refused[0]:
                continue
            s.settimeout(20)
            s.sendall(body[sent:])
            status, _, payload, _ = read_one_response(s)
            self.assertEqual(status, 200, payload[:300])
        for s in conns:
            s.close()
        wait_for(lambda: g.get("/health", key=None).json()["request_bodies"]["bytes_receiving"] == 0,
                 what="the bodies' bytes to be given back")


    def test_a_body_over_the_limit_gets_the_json_413_before_it_is_all_sent(self):
        # 1.5 MiB of a declared 2 MiB body with a 1 MiB limit: refused as the bytes pass the
        # limit (and the headers' allowance), not after the whole body was read
        g = self.one(env={"SWITCHYARD_MAX_BODY": str(1 << 20)})
        body = b'{"model":"gpt-test","input":"' + b"x" * (2 << 20) + b'"}'
        s = connect(g)
        s.sendall(raw_request(g, "POST", "/v1/responses", body)[:-(len(body) - (3 << 19))])
        status, hl, payload, _ = read_one_response(s)
        s.close()
        self.assertEqual(status, 413, payload[:300])
        err = json.loads(payload)["error"]
        self.assertEqual((err["code"], err["type"]), ("request_too_large", "invalid_request_error"))
        self.assertEqual(hl.get("connection"), ["close"])
        self.assertEqual(self.mock.requests(), [])
        wait_for(lambda: g.get("/health", key=None).json()["request_bodies"]["bytes_receiving"] == 0,
                 what="the refused request's bytes to be given back")

    def test_a_client_sending_its_whole_oversized_body_at_once_reads_the_json_413(self):
        # refused as the bytes pass the limit, while the client is still writing the rest:
        # what it still sends is read and dropped, so it is not reset before it reads why
        g = self.one(env={"SWITCHYARD_MAX_BODY": str(4 << 20)})
        body = b'{"model":"gpt-test","input":"' + b"x" * (6 << 20) + b'"}'
        for _ in range(3):
            err = self.assertOpenAIError(g.post("/v1/responses", body), 413)
            self.assertEqual(err["code"], "request_too_large")
        self.assertEqual(self.mock.requests(), [])
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)

    def test_bytes_pipelined_while_an_answer_is_written_count_in_the_budget_and_wait(self):
        # a client that sends a huge next request while its stream is written: libevent
        # would read it all into memory; past the budget the connection is not read until
        # the answer is out, and the request is then served
        budget = 1 << 20
        g = self.one("slow_stream,ms=100,deltas=30", env={"SWITCHYARD_MAX_BODIES_IN_FLIGHT": str(budget)})
        s = connect(g)
        s.sendall(raw_request(g, "POST", "/v1/responses", dict(RESP_BODY, stream=True)))
        s.settimeout(20)
        got = s.recv(16, socket.MSG_PEEK)  # the answer has begun
        self.assertTrue(got.startswith(b"HTTP/1.1 200"), got)
        big = b'{"model":"gpt-test","input":"' + b"x" * (3 << 20) + b'"}'
        sender = threading.Thread(target=lambda: s.sendall(raw_request(g, "POST", "/v1/responses", big)))
        sender.start()
        first = {}
        reader = threading.Thread(target=lambda: first.setdefault("r", read_one_response(s)))
        reader.start()
        seen = []
        while reader.is_alive():  # while the stream is written: every chunk it writes
            h = g.get("/health", key=None).json()
            self.assertIn("request_bodies", h, h)
            # only while the stream's request is in flight: once it is over the next request is read, at
            # once (the reader here may not have returned yet on a loaded machine)
            if h["active_requests"] >= 1:
                seen.append(h["request_bodies"]["bytes_receiving"])
            time.sleep(0.05)
        reader.join()
        self.assertGreater(max(seen), budget // 2, f"the pipelined bytes were not counted: {seen}")
        self.assertLessEqual(max(seen), budget + (32 << 10), f"read past the budget: {seen}")
        status, _, payload, rest = first["r"]
        self.assertEqual(status, 200)
        self.assertIn(b"response.completed", payload)
        sender.join(30)
        while b"\r\n\r\n" not in rest:
            rest += s.recv(65536)
        self.assertTrue(rest.startswith(b"HTTP/1.1 200"), rest[:300])
        s.close()
        wait_for(lambda: len(self.mock.requests()) >= 2, what="the pipelined request to reach the upstream")
        self.assertEqual(self.mock.requests()[-1]["body_len"], len(big))

if __name__ == "__main__":
    main()
