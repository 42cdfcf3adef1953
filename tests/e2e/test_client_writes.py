"""test_client_writes.py: how answers reach clients (server.c's server_reply*: an answer is
written on the socket in the loop turn that makes it, the rest left to libevent when the
socket takes only part), over raw sockets: answers far larger than the socket buffers to
a client that reads slowly, pipelined requests, answers followed by the close (HTTP/1.0,
Connection: close), a stream whose client vanishes while the gateway holds its backlog,
errors made while a request is dispatched on a kept-alive connection, and many kept-alive
clients at once. Every answer is checked byte for byte or event by event."""

import http.client
import json
import signal
import socket
import struct
import threading
import time

from harness import GatewayTest, account, chat_text, main, parse_sse, response_text, wait_for, HOST
from test_foundation import BigStreamUpstream, _normalize
from test_hostile import proc_cpu_seconds, raw_request

RESP_BODY = {"model": "gpt-test", "input": "hi"}
CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}

# far more than the gateway's send buffer (net.ipv4.tcp_wmem: at most 4 MiB) and the client's
# receive buffer (held at 16 KiB below) take together: the gateway's own writes (in the turn
# each piece is relayed) meet a full socket, writing part or nothing, and libevent must
# finish them as the client reads (instrumented: a few partial writes of 16 KiB to 500 KiB
# per run, the rest EAGAIN)
BIG = 9 << 20


def loop_thread_state(pid):
    """The state letter of the gateway's loop (its main thread): S while it waits for events."""
    with open(f"/proc/{pid}/task/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def unread_from(port):
    """Bytes waiting unread in the socket connected to port (the gateway's end of its upstream
    connection), or None when there is no such connection."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if int(f[2].rsplit(":", 1)[1], 16) == port and int(f[3], 16) == 0x01:
                return int(f[4].split(":")[1], 16)
    return None


def upstream_paused(g, port):
    """The gateway has stopped reading its upstream at port: bytes wait unread in that socket while
    its loop sleeps, and none of them was read meanwhile. A loop still relaying would be runnable
    (the kernel wakes it for those bytes) or would have taken some."""
    before = unread_from(port)
    if not before or loop_thread_state(g.proc.pid) != "S":
        return False
    return unread_from(port) == before


def counted_pad(n):
    """What the mock's `seq=1` pad of n bytes is: each 8 bytes their offset in hex."""
    return "".join("%08x" % i for i in range(0, n, 8))[:n]


class Client:
    """One client connection read by hand. Answers are taken off one byte buffer, so
    pipelined answers and what follows an answer are seen exactly as they arrive."""

    def __init__(self, g, rcvbuf=None, timeout=30.0):
        self.g = g
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:  # before connect: the window stays this small (no autotuning)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((HOST, g.port))
        self.buf = bytearray()  # taken from the front (cheap for a bytearray), added at the end
        self.recv_size = 65536
        self.pause = 0.0  # seconds between reads: a slow reader
        self.reads = 0

    def send(self, *requests):
        self.sock.sendall(b"".join(requests))

    def request(self, method, path, body=None, version="1.1", headers=(), auth=True):
        return raw_request(self.g, method, path, body, version=version, headers=headers, auth=auth)

    def _more(self, what):
        if self.pause:
            time.sleep(self.pause)
        b = self.sock.recv(self.recv_size)
        if not b:
            raise AssertionError(f"the connection closed {what} ({len(self.buf)} bytes unread: {self.buf[:200]!r})")
        self.reads += 1
        self.buf += b

    def _take(self, n, what):
        while len(self.buf) < n:
            self._more(what)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _line(self, what):
        while b"\r\n" not in self.buf:
            self._more(what)
        i = self.buf.index(b"\r\n")
        line = bytes(self.buf[:i])
        del self.buf[:i + 2]
        return line

    def answer(self):
        """(status, headers {lower-case name: value}, body, framing) of the next answer;
        framing is "length", "chunked" or "close" (the body ran to the connection's end)."""
        while b"\r\n\r\n" not in self.buf:
            self._more("inside an answer's head")
        i = self.buf.index(b"\r\n\r\n")
        head = bytes(self.buf[:i])
        del self.buf[:i + 4]
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            k = k.strip().lower()
            if k in headers:
                raise AssertionError(f"header {k} twice: {head!r}")
            headers[k] = v.strip()
        if "content-length" in headers:
            return status, headers, self._take(int(headers["content-length"]), "inside a body"), "length"
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self._line("inside a chunk's size"), 16)
                parts.append(self._take(size, "inside a chunk"))
                if self._take(2, "after a chunk") != b"\r\n":
                    raise AssertionError("a chunk not followed by CRLF")
                if size == 0:
                    return status, headers, b"".join(parts), "chunked"
        body = bytes(self.buf) + self.rest_until_close()
        self.buf = bytearray()
        return status, headers, body, "close"

    def rest_until_close(self):
        """What arrives until the server closes (b"" for a close right after the last answer);
        a reset instead of a close fails."""
        parts = []
        while True:
            try:
                b = self.sock.recv(65536)
            except ConnectionResetError:
                raise AssertionError(f"reset instead of a close after {sum(map(len, parts))} bytes")
            if not b:
                return b"".join(parts)
            parts.append(b)

    def vanish(self):
        """Drops the connection at once (a reset: the unread bytes are discarded)."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def close(self):
        self.sock.close()


class ClientWritesTest(GatewayTest):

    def one(self, scenario="ok", env=None):
        return self.gateway([account("a", self.mock.url("a", scenario))], env=env)

    # --- checks of one answer, exact

    def assertPlainResponse(self, ans, model="gpt-test", pad=0, name="a"):
        status, headers, body, framing = ans
        self.assertEqual(status, 200, body[:300])
        obj = json.loads(body)  # the whole body: a cut one is no JSON
        self.assertEqual((obj["object"], obj["status"], obj["model"]), ("response", "completed", model), body[:300])
        self.assertEqual(obj["output"][0]["content"][0]["text"], f"hello from {name}")
        if pad:
            self.assertEqual(len(obj["pad"]), pad)
            self.assertTrue(obj["pad"] == counted_pad(pad), "the big answer's bytes were lost, doubled or moved")
        return obj

    def assertResponsesStream(self, ans, name="a"):
        status, headers, body, framing = ans
        self.assertEqual(status, 200, body[:300])
        self.assertIn("text/event-stream", headers.get("content-type", ""))
        events = parse_sse(body)
        types = [e["event"] for e in events]
        self.assertEqual(types[0], "response.created", types)
        self.assertEqual(types[-1], "response.completed", types)
        self.assertEqual(types.count("response.completed"), 1, types)
        self.assertEqual(response_text(events), f"hello from {name}")
        self.assertTrue(body.endswith(b"\n\n"), body[-100:])
        return events

    def assertChatStream(self, ans, model="gpt-test"):
        status, headers, body, framing = ans
        self.assertEqual(status, 200, body[:300])
        events = parse_sse(body)
        datas = [e["data"] for e in events]
        self.assertEqual(datas[-1], "[DONE]", datas[-3:])
        self.assertEqual(datas.count("[DONE]"), 1)
        self.assertEqual(chat_text(events), "hello from a")
        self.assertEqual({e["json"]["model"] for e in events[:-1]}, {model})
        return events

    def assertErrorAnswer(self, ans, status, code, framing="length"):
        got, headers, body, how = ans
        self.assertEqual(got, status, body[:300])
        self.assertEqual(how, framing, headers)
        self.assertIn("application/json", headers.get("content-type", ""))
        err = json.loads(body)["error"]
        self.assertEqual(err["code"], code, err)
        self.assertTrue(err["message"] and err["type"], err)

    def assertKeptAlive(self, ans):
        self.assertNotEqual(ans[1].get("connection", "").lower(), "close", ans[1])

    def assertHealthy(self, g):
        self.assertTrue(g.running(), "the gateway died")
        h = g.get("/health", key=None)
        self.assertEqual(h.status, 200, h)
        st = g.stream("/v1/responses", dict(RESP_BODY, stream=True))
        self.assertEqual(st.status, 200, st)
        self.assertFalse(st.truncated, st)
        self.assertEqual(st.types()[-1], "response.completed", st)

    # --- 1. an answer far larger than the socket buffers, read slowly

    def test_large_answer_to_a_slow_reader_arrives_whole_and_the_connection_serves_the_next_request(self):
        # 9 MiB to a client with a 16 KiB window reading 16 KiB at a time with pauses: the
        # gateway's own writes meet a full socket and libevent writes the rest as the client
        # reads; the answer must be the mock's bytes exactly. Pipelined behind it, answers of 1 MiB
        # and 9 MiB in turn (two accounts, strict round robin) and a stream: each is made
        # while the socket still holds the unread tail of the one before, so its own write
        # is partial too, and the next request must wait until libevent wrote all of it
        # (evhttp's "written" callback once, at the end). Then, on the same connection, one
        # more request.
        mid = 1 << 20
        g = self.gateway([account("a", self.mock.url("a", f"ok,bytes={BIG},seq=1")),
                          account("b", self.mock.url("b", f"ok,bytes={mid},seq=1"))],
                         env={"SWITCHYARD_ROUTE_STRATEGY": "balanced"})
        c = Client(g, rcvbuf=16384)
        c.send(*[c.request("POST", "/v1/responses", RESP_BODY) for _ in range(4)],
               c.request("POST", "/v1/responses", dict(RESP_BODY, stream=True)))
        c.recv_size, c.pause = 16384, 0.001
        first = c.answer()
        self.assertGreater(c.reads, 100, "the answer came in too few reads to have been read slowly")
        self.assertPlainResponse(first, pad=BIG)
        self.assertKeptAlive(first)
        for name, pad in (("b", mid), ("a", BIG), ("b", mid)):
            ans = c.answer()
            self.assertPlainResponse(ans, pad=pad, name=name)
            self.assertKeptAlive(ans)
        self.assertResponsesStream(c.answer(), name="a")
        c.pause = 0.0
        self.assertEqual(c.buf, b"", "bytes after the last answer")
        direct = self.mock.call("a", f"ok,bytes={BIG},seq=1", "responses", RESP_BODY)
        self.assertEqual(direct.status, 200)
        self.assertTrue(_normalize(first[2], "a") == _normalize(direct.body, "a"),
                        "the answer differs from what the upstream sent")
        c.send(c.request("POST", "/v1/responses", RESP_BODY))
        self.assertPlainResponse(c.answer(), pad=mid, name="b")
        c.close()
        self.assertEqual([r["account"] for r in self.mock.requests()], ["a", "b", "a", "b", "a", "a", "b"])
        self.assertEqual([r["stream"] for r in self.mock.requests()][:5], [False] * 4 + [True])

    def test_whole_answers_made_while_the_socket_is_full_arrive_whole_in_order_before_the_close(self):
        # a 9 MiB answer fills the socket of a slowly reading client; pipelined behind it,
        # upstream errors of 15 000 bytes, each relayed whole in one reply (Content-Length)
        # into a socket with little or no room just then: the direct write takes nothing
        # (or a part), libevent the rest. Each must arrive whole before the next answer
        # begins, and the last (Connection: close) before the close.
        n_errors = 16
        g = self.one(f"big_error=400,bytes=15000,ok_first=1,pad={BIG},seq=1")
        c = Client(g, rcvbuf=16384)
        c.send(c.request("POST", "/v1/responses", RESP_BODY),
               *[c.request("POST", "/v1/responses", RESP_BODY) for _ in range(n_errors - 1)],
               c.request("POST", "/v1/responses", RESP_BODY, headers=("Connection: close",)))
        c.recv_size, c.pause = 16384, 0.001
        self.assertPlainResponse(c.answer(), pad=BIG)
        for i in range(n_errors):
            status, headers, body, framing = c.answer()
            self.assertEqual((status, framing), (400, "length"), f"error {i}: {body[:200]!r}")
            err = json.loads(body)["error"]
            self.assertEqual(err["code"], "big_error")
            self.assertTrue(err["message"] == "x" * 15000, f"error {i}: its message was cut or altered")
        self.assertEqual(c.buf + c.rest_until_close(), b"", "bytes after the last answer")
        c.close()
        self.assertEqual(len(self.mock.requests("a")), n_errors + 1)

    # --- 2. pipelining

    def test_pipelined_requests_get_their_answers_in_order_each_complete(self):
        # four requests in one send on one connection: plain, chat stream, plain, models;
        # each answered whole and in the order asked (the models tell them apart), then the
        # connection still serves
        g = self.one()
        c = Client(g)
        c.send(c.request("POST", "/v1/responses", dict(RESP_BODY, model="m-1")),
               c.request("POST", "/v1/chat/completions", dict(CHAT_BODY, model="m-2", stream=True)),
               c.request("POST", "/v1/responses", dict(RESP_BODY, model="m-3")),
               c.request("GET", "/v1/models"))
        a1, a2, a3, a4 = c.answer(), c.answer(), c.answer(), c.answer()
        self.assertPlainResponse(a1, model="m-1")
        self.assertChatStream(a2, model="m-2")
        self.assertEqual(a2[3], "chunked")
        self.assertPlainResponse(a3, model="m-3")
        self.assertEqual(a4[0], 200, a4)
        self.assertEqual(json.loads(a4[2])["object"], "list")
        for a in (a1, a2, a3, a4):
            self.assertKeptAlive(a)
        self.assertEqual(c.buf, b"", "bytes after the last answer")
        self.assertEqual([(r["endpoint"], r["model"]) for r in self.mock.requests("a")],
                         [("responses", "m-1"), ("chat/completions", "m-2"), ("responses", "m-3"), ("models", None)])
        # the same again with a slow answer first: the others wait behind it
        g2 = self.one("slow_headers,ms=300")
        c2 = Client(g2)
        c2.send(c2.request("POST", "/v1/responses", dict(RESP_BODY, model="m-4")),
                c2.request("POST", "/v1/responses", dict(RESP_BODY, model="m-5", stream=True)),
                c2.request("GET", "/health", auth=False),
                c2.request("POST", "/v1/responses", dict(RESP_BODY, model="m-6")))
        self.assertPlainResponse(c2.answer(), model="m-4")
        self.assertResponsesStream(c2.answer())
        h = c2.answer()
        self.assertEqual(h[0], 200, h)
        self.assertIn("status", json.loads(h[2]))
        self.assertPlainResponse(c2.answer(), model="m-6")
        c.send(c.request("POST", "/v1/responses", dict(RESP_BODY, model="m-7")))
        self.assertPlainResponse(c.answer(), model="m-7")
        c.close()
        c2.close()

    # --- 3. the close after the answer

    def test_http10_and_connection_close_answers_end_with_a_close_after_the_whole_body(self):
        # HTTP/1.0 without keep-alive, and HTTP/1.1 with Connection: close: the whole answer,
        # then the server's close (FIN, not a reset), for a plain answer, a stream, an error
        # made while dispatching, and a 9 MiB answer read slowly (the close must wait for
        # libevent to finish writing it)
        g = self.one()
        gbig = self.one(f"ok,bytes={BIG},seq=1")
        for version, hdrs in (("1.0", ()), ("1.1", ("Connection: close",))):
            cases = (
                ("plain", g, "POST", "/v1/responses", RESP_BODY),
                ("stream", g, "POST", "/v1/responses", dict(RESP_BODY, stream=True)),
                ("chat stream", g, "POST", "/v1/chat/completions", dict(CHAT_BODY, stream=True)),
                ("404", g, "GET", "/nope", None),
                ("400", g, "POST", "/v1/responses", b'{"model": "gpt-test", "input": '),
                ("big", gbig, "POST", "/v1/responses", RESP_BODY),
            )
            for what, gw, method, path, body in cases:
                with self.subTest(version=version, what=what):
                    c = Client(gw, rcvbuf=16384 if what == "big" else None)
                    c.send(c.request(method, path, body, version=version, headers=hdrs))
                    if what == "big":
                        c.recv_size, c.pause = 16384, 0.001
                    ans = c.answer()
                    c.pause = 0.0
                    if version == "1.0":
                        self.assertNotIn("transfer-encoding", ans[1])
                    if what in ("plain", "big"):
                        self.assertPlainResponse(ans, pad=BIG if what == "big" else 0)
                    elif what == "stream":
                        self.assertResponsesStream(ans)
                    elif what == "chat stream":
                        self.assertChatStream(ans)
                    else:  # libevent frames an HTTP/1.0 answer without keep-alive by the close
                        framing = "close" if version == "1.0" else "length"
                        self.assertErrorAnswer(ans, int(what), "unknown_url" if what == "404" else "invalid_json",
                                               framing)
                    if ans[3] != "close":  # framed by its length or chunks: the close follows
                        self.assertEqual(c.buf + c.rest_until_close(), b"", "bytes after the answer")
                    c.close()
        self.assertTrue(g.running() and gbig.running())

    # --- 4. a client gone while its stream is held back

    def test_stream_client_vanishing_while_the_gateway_holds_its_backlog_leaves_the_gateway_healthy(self):
        # a ~30 MB stream to a client that reads nothing: the gateway fills the socket, holds
        # up to 4 MiB more and pauses the upstream; then the client resets the connection.
        # The gateway must drop the answer (499, upstream connection closed) and go on
        # serving: a whole stream of the same upstream on a new connection, /health, the mock
        n = 120000
        up = BigStreamUpstream(n)
        self.addCleanup(up.close)
        g = self.gateway([account("big", f"http://{HOST}:{up.port}/v1")])
        c = Client(g, rcvbuf=4096)
        c.send(c.request("POST", "/v1/chat/completions", dict(CHAT_BODY, stream=True)))
        c.recv_size = 16
        c._more("before the stream began")
        self.assertTrue(c.buf.startswith(b"HTTP/1.1 200"), c.buf)
        # the client stalls; the gateway fills what it may and pauses the upstream
        wait_for(lambda: upstream_paused(g, up.port), what="the gateway to pause the upstream")
        # held back, the paused transfer costs nothing: no loop turn spent on it again and
        # again (curl's "now" timeouts run in the turn they are set), and others are served
        cpu0 = proc_cpu_seconds(g.proc.pid)
        time.sleep(1.0)  # held back for a while: a loop spinning on the paused transfer burns ~1 s
        spent = proc_cpu_seconds(g.proc.pid) - cpu0
        print(f"  a stream held back for 1 s: {spent:.2f} s of CPU")
        self.assertLess(spent, 0.5, "the gateway spun on a paused stream")
        self.assertEqual(g.get("/health", key=None).status, 200)
        c.vanish()
        rows = g.wait_request_logs(1)
        self.assertEqual(rows[0]["status"], 499, rows[0])
        wait_for(lambda: up.ended >= 1, what="the big upstream's connection to be dropped")
        self.assertEqual(up.finished, 0, "the upstream got to send the whole stream to a client that was gone")
        self.assertTrue(g.running(), "the gateway died")
        self.assertEqual(g.get("/health", key=None).status, 200)
        c = Client(g)
        c.send(c.request("POST", "/v1/chat/completions", dict(CHAT_BODY, stream=True)))
        status, _, body, _ = c.answer()
        c.close()
        self.assertEqual(status, 200)
        self.assertTrue(body.endswith(b"data: [DONE]\n\n"), body[-200:])
        self.assertTrue(chat_text(parse_sse(body)) == "".join(BigStreamUpstream.text_of(i) for i in range(n)),
                        "deltas lost, doubled or reordered")
        self.assertEqual(up.finished, 1)

    def test_stream_clients_vanishing_mid_stream_leave_the_other_streams_whole(self):
        # twenty streams at once, one delta every 20 ms; half of their clients reset the
        # connection after their first delta, while the gateway writes to all of them
        # in the same loop turns: the other half get every event and [DONE]
        g = self.one("slow_stream,ms=20,deltas=15")
        clients = [Client(g) for _ in range(20)]
        for c in clients:
            c.send(c.request("POST", "/v1/chat/completions", dict(CHAT_BODY, stream=True)))
        for c in clients[::2]:
            while b'"content":"hello"' not in c.buf:
                c._more("before the first delta")
            c.vanish()
        for c in clients[1::2]:
            events = parse_sse(c.answer()[2])
            datas = [e["data"] for e in events]
            self.assertEqual(datas[-1], "[DONE]")
            self.assertEqual(chat_text(events), "hello from a" + "." * 12)
            c.close()
        rows = g.wait_request_logs(20)
        self.assertEqual(sorted(r["status"] for r in rows), [200] * 10 + [499] * 10, rows)
        self.assertHealthy(g)

    def test_clients_resetting_right_after_their_requests_leave_the_gateway_healthy(self):
        # 150 connections that send requests (answered at once, or proxied, plain and
        # streamed) and reset at once: their answers are queued for the flush while the
        # connection may already be gone in the same loop turn
        g = self.one("ok,bytes=200000,seq=1")
        reqs = (raw_request(g, "GET", "/nope") + raw_request(g, "POST", "/v1/responses", RESP_BODY, auth=False),
                raw_request(g, "POST", "/v1/responses", RESP_BODY),
                raw_request(g, "POST", "/v1/responses", dict(RESP_BODY, stream=True)),
                raw_request(g, "POST", "/v1/responses", RESP_BODY) + raw_request(g, "GET", "/health", auth=False))
        for i in range(150):
            c = Client(g)
            c.send(reqs[i % len(reqs)])
            if i % 2:
                c.sock.recv(1)  # the answer has begun
            c.vanish()
        self.assertHealthy(g)
        c = Client(g)
        c.send(c.request("POST", "/v1/responses", RESP_BODY))
        self.assertPlainResponse(c.answer(), pad=200000)
        c.close()

    # --- 5. errors made while dispatching, on a kept-alive connection

    def test_dispatch_errors_on_a_kept_alive_connection_are_whole_and_the_connection_serves_on(self):
        # 401 (no key), 404 (unknown path), 400 (invalid JSON): answered inside evhttp's
        # callback for the request, written in that turn; each whole, and the same
        # connection then serves the next request, one by one and pipelined
        g = self.one()
        c = Client(g)
        errors = ((c.request("POST", "/v1/responses", RESP_BODY, auth=False), 401, "missing_api_key"),
                  (c.request("GET", "/v1/nothing-here"), 404, "unknown_url"),
                  (c.request("POST", "/v1/responses", b'{"model": "gpt-test", "input": "hi"'), 400, "invalid_json"),
                  (c.request("POST", "/v1/chat/completions", b"[1, 2"), 400, "invalid_json"))
        for req, status, code in errors:
            c.send(req)
            ans = c.answer()
            self.assertErrorAnswer(ans, status, code)
            self.assertKeptAlive(ans)
            c.send(c.request("POST", "/v1/responses", RESP_BODY))
            self.assertPlainResponse(c.answer())
        c.send(*(req for req, _, _ in errors), c.request("POST", "/v1/responses", dict(RESP_BODY, stream=True)),
               *(req for req, _, _ in errors), c.request("POST", "/v1/responses", RESP_BODY))
        for _ in range(2):
            for req, status, code in errors:
                self.assertErrorAnswer(c.answer(), status, code)
            ans = c.answer()
            if ans[1].get("content-type", "").startswith("text/event-stream"):
                self.assertResponsesStream(ans)
            else:
                self.assertPlainResponse(ans)
        c.send(c.request("POST", "/v1/responses", RESP_BODY))
        self.assertPlainResponse(c.answer())
        self.assertEqual(c.buf, b"")
        c.close()
        self.assertEqual(len(self.mock.requests("a")), 7, "an error reached the upstream")

    # --- 6. many kept-alive clients at once

    def test_many_kept_alive_clients_at_once_each_get_every_answer_whole(self):
        # 50 clients x 20 requests on their own kept-alive connections: plain answers of
        # 64 KiB (counted, so a piece of another answer shows), Responses streams and chat
        # streams in turn; every answer whole and its own, every connection kept
        pad = 64 << 10
        g = self.one(f"ok,bytes={pad},seq=1")
        want_pad = counted_pad(pad)
        n_clients, n_requests = 50, 20
        failures, done = [], []
        hdrs = {"Authorization": f"Bearer {g.key}", "Content-Type": "application/json"}

        def client(k):
            try:
                conn = http.client.HTTPConnection(HOST, g.port, timeout=60)
                sock = None
                for i in range(n_requests):
                    kind = (k + i) % 3
                    model = f"m-{k}-{i}"
                    if kind == 0:
                        conn.request("POST", "/v1/responses", json.dumps(dict(RESP_BODY, model=model)), hdrs)
                    elif kind == 1:
                        conn.request("POST", "/v1/responses", json.dumps(dict(RESP_BODY, model=model, stream=True)),
                                     hdrs)
                    else:
                        conn.request("POST", "/v1/chat/completions",
                                     json.dumps(dict(CHAT_BODY, model=model, stream=True)), hdrs)
                    r = conn.getresponse()
                    body = r.read()
                    if sock is None:
                        sock = conn.sock
                    elif conn.sock is not sock:
                        raise AssertionError(f"request {i}: the connection was not kept")
                    if r.status != 200:
                        raise AssertionError(f"request {i}: {r.status} {body[:200]!r}")
                    if kind == 0:
                        obj = json.loads(body)
                        ok = (obj["model"] == model and obj["pad"] == want_pad
                              and obj["output"][0]["content"][0]["text"] == "hello from a")
                    elif kind == 1:
                        events = parse_sse(body)
                        ok = (events[-1]["event"] == "response.completed"
                              and events[-1]["json"]["response"]["model"] == model
                              and response_text(events) == "hello from a")
                    else:
                        events = parse_sse(body)
                        ok = (events[-1]["data"] == "[DONE]" and chat_text(events) == "hello from a"
                              and {e["json"]["model"] for e in events[:-1]} == {model})
                    if not ok:
                        raise AssertionError(f"request {i} ({kind}): wrong answer {body[:300]!r}")
                    done.append(1)
                conn.close()
            except Exception as e:  # noqa: BLE001 (reported below)
                failures.append(f"client {k}: {e!r}")

        threads = [threading.Thread(target=client, args=(k,)) for k in range(n_clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(failures, [])
        self.assertEqual(len(done), n_clients * n_requests)
        self.assertEqual(len(self.mock.requests("a")), n_clients * n_requests)
        self.assertHealthy(g)

    # --- 7. stopping while an answer is still on its way

    def test_sigterm_waits_for_an_answer_still_being_written_to_a_slow_client(self):
        # the proxy is done with the request as soon as the upstream's last byte is in the
        # client's output buffer; megabytes may still be on their way to a slow reader. One
        # SIGTERM must let them arrive (then exit), not reset the connection mid-answer.
        g = self.one(f"ok,bytes={BIG},seq=1")
        c = Client(g, rcvbuf=16384)
        c.send(c.request("POST", "/v1/responses", RESP_BODY, version="1.0"))
        # 1.6 MB/s: the last ~4 MiB (what the gateway holds once the upstream is done) take
        # over 2 s, past the 1 s tick that checks whether the gateway may exit
        c.recv_size, c.pause = 16384, 0.01
        c._more("before the answer began")  # the answer has started (kept in c.buf)
        g.proc.send_signal(signal.SIGTERM)
        while True:  # slowly, to the end: HTTP/1.0, the body runs to a clean close
            time.sleep(c.pause)
            try:
                b = c.sock.recv(c.recv_size)
            except ConnectionResetError:
                self.fail(f"reset after {len(c.buf)} bytes: the stop cut the answer")
            if not b:
                break
            c.buf += b
        head, _, body = bytes(c.buf).partition(b"\r\n\r\n")
        self.assertPlainResponse((int(head.split()[1]), {}, body, "close"), pad=BIG)
        g.proc.wait(timeout=30)
        self.assertEqual(g.proc.returncode, 0, g.log_text()[-2000:])
        self.assertNotIn("unfinished", g.log_text())


if __name__ == "__main__":
    main()
