"""test_websocket.py: the Responses API over WebSocket (GET /v1/responses
with Upgrade: websocket, as Codex's WebSocket transport speaks it), end to
end with a small client written here (stdlib sockets, masked frames): the
handshake and its refusals (a bad key, a wrong version, no platform key:
401 before any upgrade); a turn streamed back one text message per event;
two turns on one connection; a turn that continues the last response
(previous_response_id and only the new items) sent upstream whole, to
another account too when the first one fails; Codex's
warm-up (generate: false) answered without an upstream; failover to another
account and an upstream error as an error event with its status; ping and
pong; a client that closes mid-turn (the upstream request is cancelled);
fragmented client messages; an oversized message (closed with 1009); a
client that never reads (cut off, the gateway fine); the connection's age
limit (closed with 1001) and the idle one (1000); /metrics counting the
open sockets and their turns; the connection cap,
which a WebSocket counts against until it closes (and its kept loopback
connection until the client idle timeout closes it); the loopback
connection kept for the socket's life: many turns on one connection (no
header of one turn in the next), closed by the server between turns (by
the idle timeout, also in the very loop turn the next request goes out)
without failing the next turn, a close mid-turn on it cancelling the
upstream transfer, and no share of the per-address cap taken by it; a
stopping gateway (the turn in progress ends,
idle connections are closed with 1001, it exits cleanly); a GET without
the upgrade still a 405."""

import base64
import hashlib
import json
import os
import signal
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import HOST, GatewayTest, account, admin_get, main, wait_for

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
BETA = "responses_websockets=2026-02-06"
TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")


def user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def create(inp, **kw):
    msg = {"type": "response.create", "model": "gpt-test", "instructions": "be brief", "input": inp,
           "tools": [], "tool_choice": "auto", "parallel_tool_calls": False, "store": False, "stream": True,
           "include": []}
    msg.update(kw)
    return msg


class Closed(Exception):
    pass


class WsClient:
    """A WebSocket client just big enough for the tests: the handshake, masked
    frames (fragmented if asked), and messages read back whole."""

    def __init__(self, port, key, headers=None, ws_key=None, version="13", timeout=20.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.ws_key = ws_key or base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET /v1/responses HTTP/1.1", f"Host: {HOST}:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {self.ws_key}", f"Sec-WebSocket-Version: {version}",
                 f"OpenAI-Beta: {BETA}", "originator: codex_cli_rs", "session-id: sess-ws-1"]
        if key:
            lines.append(f"Authorization: Bearer {key}")
        for k, v in (headers or {}).items():
            lines.append(f"{k}: {v}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Closed("closed during the handshake")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        first, *rest = head.decode("latin-1").split("\r\n")
        self.status = int(first.split()[1])
        self.headers = {}
        for line in rest:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.body = b""
        if self.status != 101:
            n = int(self.headers.get("content-length", "0"))
            while len(self.buf) < n:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                self.buf += chunk
            self.body, self.buf = self.buf[:n], self.buf[n:]
        self.close_code = None
        self.close_reason = None

    def send_frame(self, opcode, payload, fin=True):
        head = bytes([(0x80 if fin else 0) | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if n < 65536 else \
            (int.from_bytes(payload, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")
        self.sock.sendall(head + mask + masked)

    def send_json(self, obj):
        self.send_frame(1, json.dumps(obj).encode())

    def send_close(self, code=1000):
        self.send_frame(8, struct.pack("!H", code))

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Closed("connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv_frame(self):
        b0, b1 = self._read(2)
        assert not (b1 & 0x80), "a server frame must not be masked"
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        return bool(b0 & 0x80), b0 & 0x0F, self._read(n)

    def recv(self):
        """The next message: (opcode, payload); a close frame's code is kept."""
        parts, op = [], None
        while True:
            fin, opcode, payload = self.recv_frame()
            if opcode >= 8:
                if opcode == 8:
                    self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                    self.close_reason = payload[2:].decode("utf-8", "replace")
                return opcode, payload
            if opcode:
                op = opcode
            parts.append(payload)
            if fin:
                return op, b"".join(parts)

    def recv_json(self):
        while True:
            op, payload = self.recv()
            if op == 1:
                return json.loads(payload)
            if op == 8:
                raise Closed(f"closed with {self.close_code}")

    def turn(self, msg):
        """Sends msg and reads its events up to a terminal one."""
        self.send_json(msg)
        events = []
        while True:
            ev = self.recv_json()
            events.append(ev)
            if ev.get("type") in TERMINAL:
                return events

    def wait_close(self):
        """Reads until the server's close frame; returns its code."""
        while True:
            op, _ = self.recv()
            if op == 8:
                return self.close_code

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class FloodUpstream:
    """An upstream whose streamed answer is larger than any socket buffer
    (deltas of 4 KiB, 40 MiB in all); aborted is set when its client goes."""

    def __init__(self):
        self.aborted = threading.Event()
        up = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                created = {"type": "response.created", "response": {"id": "resp_flood", "output": []}}
                delta = json.dumps({"type": "response.output_text.delta", "delta": "x" * 4096})
                try:
                    self.wfile.write(f"event: response.created\ndata: {json.dumps(created)}\n\n".encode())
                    for _ in range(10240):
                        self.wfile.write(f"event: response.output_text.delta\ndata: {delta}\n\n".encode())
                    self.wfile.flush()
                except OSError:
                    up.aborted.set()
                self.close_connection = True

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def base_url(self):
        return f"http://{HOST}:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def loopback_ports(port):
    """The client ports of every TCP connection to port the kernel knows
    (open, closing or in TIME_WAIT, whichever side closed first): a new
    connection to the gateway shows as a new port here."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local, remote = int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16)
            if local == port and remote:
                ports.add(remote)
            elif remote == port:
                ports.add(local)
    return ports


def loopback_client_open(port, client_port):
    """Whether the client end of the loopback connection from client_port to port is still open:
    ESTABLISHED, or CLOSE_WAIT (the server closed its end, the client has not seen it or not closed
    its own yet)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local, remote = int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16)
            if local == client_port and remote == port and int(f[3], 16) in (0x01, 0x08):
                return True
    return False


def text_of(events):
    return "".join(e.get("delta", "") for e in events if e.get("type") == "response.output_text.delta")


class WebSocketTest(GatewayTest):

    def ws(self, g, **kw):
        c = WsClient(g.port, kw.pop("key", g.key), **kw)
        self.addCleanup(c.close)
        return c

    def one(self, scenario="ok", env=None):
        return self.gateway([account("a", self.mock.url("a", scenario))], env=env)

    def assertGatewayServes(self, g):
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"})
        self.assertEqual(r.status, 200, r)

    # --- the handshake

    def test_handshake_answers_101_with_the_accept_of_the_key(self):
        g = self.one()
        c = self.ws(g)
        self.assertEqual(c.status, 101, c.body)
        want = base64.b64encode(hashlib.sha1((c.ws_key + GUID).encode()).digest()).decode()
        self.assertEqual(c.headers.get("sec-websocket-accept"), want)
        self.assertEqual(c.headers.get("upgrade", "").lower(), "websocket")
        self.assertNotIn("sec-websocket-extensions", c.headers)  # permessage-deflate is declined

    def test_a_bad_key_or_version_is_refused_before_any_upgrade(self):
        g = self.one()
        bad = self.ws(g, ws_key="not-a-key")
        self.assertEqual(bad.status, 400, bad.body)
        self.assertEqual(json.loads(bad.body)["error"]["code"], "invalid_upgrade")
        old = self.ws(g, version="8")
        self.assertEqual(old.status, 426, old.body)
        self.assertEqual(old.headers.get("sec-websocket-version"), "13")

    def test_no_platform_key_is_a_401_before_the_upgrade(self):
        g = self.one()
        c = self.ws(g, key=None)
        self.assertEqual(c.status, 401, c.body)
        self.assertEqual(json.loads(c.body)["error"]["code"], "missing_api_key")
        c = self.ws(g, key="sk-not-a-key")
        self.assertEqual(c.status, 401, c.body)
        self.assertEqual(self.mock.requests(), [])

    def test_a_get_without_the_upgrade_is_still_a_405(self):
        g = self.one()
        r = g.get("/v1/responses")
        self.assertEqual(r.status, 405, r)

    # --- turns

    def test_a_turn_streams_back_one_message_per_event(self):
        g = self.one()
        c = self.ws(g)
        events = c.turn(create([user("hi")]))
        types = [e["type"] for e in events]
        self.assertEqual(types[0], "response.created", types)
        self.assertEqual(types[-1], "response.completed", types)
        self.assertIn("response.output_item.done", types)
        self.assertEqual(text_of(events), "hello from a")
        req, = self.mock.requests()
        self.assertTrue(req["stream"], req)
        self.assertEqual(req["headers"].get("session-id"), "sess-ws-1")
        self.assertNotIn("responses_websockets", req["headers"].get("openai-beta", ""))
        rows = g.wait_request_logs(1)
        self.assertEqual(rows[0]["status"], 200, rows)

    def test_a_turns_rate_limits_event_tells_the_pools_numbers(self):
        # the turn takes the HTTP path, so its codex.rate_limits event is the
        # pool's as over SSE (route/rate_event.h), the same as /wham/usage says
        g = self.gateway([account("a", self.mock.url("a", "ok,rate_event=1,primary=20,secondary=10")),
                          account("b", self.mock.url("b", "ok,rate_event=1,primary=60,secondary=30"))],
                         env={"SWITCHYARD_ROUTE_STRATEGY": "balanced"})
        for _ in range(2):
            self.assertGatewayServes(g)
        c = self.ws(g)
        events = c.turn(create([user("hi")]))
        self.assertEqual(events[0]["type"], "codex.rate_limits", events[:2])
        pool = g.get("/wham/usage").json()["rate_limit"]
        self.assertEqual(events[0]["rate_limits"]["primary"]["used_percent"], 40)  # 100 - (80 + 40) / 2
        self.assertEqual(events[0]["rate_limits"]["primary"]["used_percent"], pool["primary_window"]["used_percent"])
        self.assertEqual(events[0]["rate_limits"]["secondary"]["used_percent"], 20)
        self.assertEqual(events[-1]["type"], "response.completed")

    def test_two_turns_on_one_connection(self):
        g = self.one()
        c = self.ws(g)
        first = c.turn(create([user("one")]))
        second = c.turn(create([user("two")]))
        self.assertEqual(first[-1]["type"], "response.completed")
        self.assertEqual(second[-1]["type"], "response.completed")
        self.assertNotEqual(first[-1]["response"]["id"], second[-1]["response"]["id"])
        self.assertEqual(len(self.mock.requests()), 2)

    def test_a_continuation_of_the_last_response_is_sent_whole(self):
        g = self.one()
        c = self.ws(g, headers=None)
        first = c.turn(create([user("one")], client_metadata={"x-codex-turn-metadata": "{\"turn\":1}"}))
        rid = first[-1]["response"]["id"]
        second = c.turn(create([user("two")], previous_response_id=rid))
        self.assertEqual(second[-1]["type"], "response.completed", second)
        r1, r2 = self.mock.requests()
        self.assertEqual(r1["input_items"], 1, r1)
        self.assertEqual(r1["headers"].get("x-codex-turn-metadata"), "{\"turn\":1}")
        # one, the answer's message, two: no previous_response_id upstream
        self.assertEqual(r2["input_items"], 3, r2)
        self.assertIsNone(r2["previous_response_id"], r2)
        self.assertEqual(r2["input_types"][1], "message", r2)

    def test_a_warmup_is_answered_without_an_upstream(self):
        g = self.one()
        c = self.ws(g)
        warm = c.turn(create([user("one")], generate=False))
        self.assertEqual([e["type"] for e in warm], ["response.created", "response.completed"], warm)
        wid = warm[-1]["response"]["id"]
        self.assertEqual(self.mock.requests(), [])
        done = c.turn(create([user("two")], previous_response_id=wid))
        self.assertEqual(text_of(done), "hello from a")
        req, = self.mock.requests()
        self.assertEqual(req["input_items"], 2, req)
        self.assertIsNone(req["previous_response_id"], req)

    def test_a_turn_fails_over_to_another_account(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,retry_after=600")),
                          account("b", self.mock.url("b", "ok"))])
        c = self.ws(g)
        events = c.turn(create([user("hi")]))
        self.assertEqual(text_of(events), "hello from b")
        self.assertFalse([e for e in events if e["type"] == "error"], events)
        self.assertEqual(self.mock.accounts_hit(), ["a", "b"])

    def test_a_continuation_moves_to_another_account_whole(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,retry_after=600,ok_first=1")),
                          account("b", self.mock.url("b", "ok"))])
        c = self.ws(g)
        first = c.turn(create([user("one")]))
        self.assertEqual(text_of(first), "hello from a")
        second = c.turn(create([user("two")], previous_response_id=first[-1]["response"]["id"]))
        self.assertEqual(text_of(second), "hello from b")
        self.assertEqual(self.mock.accounts_hit(), ["a", "a", "b"])
        moved = self.mock.requests("b")[0]
        self.assertEqual(moved["input_items"], 3, moved)
        self.assertIsNone(moved["previous_response_id"], moved)

    def test_an_upstream_error_is_an_error_event_with_its_status(self):
        g = self.one("status=400,times=1")
        c = self.ws(g)
        events = c.turn(create([user("hi")]))
        self.assertEqual(len(events), 1, events)
        self.assertEqual(events[0]["type"], "error")
        self.assertEqual(events[0]["status"], 400, events)
        self.assertIn("message", events[0]["error"])
        again = c.turn(create([user("hi")]))  # the connection stays
        self.assertEqual(again[-1]["type"], "response.completed", again)

    def test_a_bad_message_is_an_error_event(self):
        g = self.one()
        c = self.ws(g)
        c.send_frame(1, b"{not json")
        ev = c.recv_json()
        self.assertEqual((ev["type"], ev["status"], ev["error"]["code"]), ("error", 400, "invalid_json"))
        c.send_json({"type": "response.processed", "response_id": "resp_x"})  # asks for nothing
        events = c.turn(create([user("hi")]))
        self.assertEqual(events[-1]["type"], "response.completed")

    # --- the socket

    def test_ping_gets_its_pong(self):
        g = self.one()
        c = self.ws(g)
        c.send_frame(9, b"are you there")
        op, payload = c.recv()
        self.assertEqual((op, payload), (10, b"are you there"))

    def test_fragmented_messages_with_a_ping_between(self):
        g = self.one()
        c = self.ws(g)
        raw = json.dumps(create([user("hi")])).encode()
        c.send_frame(1, raw[:10], fin=False)
        c.send_frame(9, b"p")
        c.send_frame(0, raw[10:30], fin=False)
        c.send_frame(0, raw[30:], fin=True)
        op, payload = c.recv()
        self.assertEqual((op, payload), (10, b"p"))
        events = []
        while not events or events[-1]["type"] not in TERMINAL:
            events.append(c.recv_json())
        self.assertEqual(text_of(events), "hello from a")

    def test_closing_mid_turn_cancels_the_upstream_request(self):
        g = self.one("slow_stream,ms=200")
        c = self.ws(g)
        c.send_json(create([user("hi")]))
        self.assertEqual(c.recv_json()["type"], "response.created")
        c.send_close(1000)
        self.assertEqual(c.wait_close(), 1000)
        wait_for(lambda: self.mock.requests() and self.mock.requests()[0]["aborted"], what="upstream aborted")
        self.assertGatewayServes(g)

    def test_an_oversized_message_is_closed_with_1009(self):
        g = self.one(env={"SWITCHYARD_MAX_BODY": "65536"})
        c = self.ws(g)
        c.send_frame(1, b"x" * 70000)
        self.assertEqual(c.wait_close(), 1009)
        self.assertEqual(self.mock.requests(), [])
        self.assertGatewayServes(g)

    def test_a_binary_message_is_closed_with_1003(self):
        g = self.one()
        c = self.ws(g)
        c.send_frame(2, b"\x00\x01")
        self.assertEqual(c.wait_close(), 1003)

    def test_a_client_that_never_reads_is_cut_off(self):
        up = FloodUpstream()
        self.addCleanup(up.close)
        g = self.gateway([account("flood", up.base_url())], env={"SWITCHYARD_CLIENT_IDLE_TIMEOUT_S": "2"})
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(20)
        s.connect((HOST, g.port))
        self.addCleanup(s.close)
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall((f"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                   f"Authorization: Bearer {g.key}\r\n\r\n").encode())
        payload = json.dumps(create([user("hi")])).encode()
        mask = os.urandom(4)
        head = bytes([0x81, 0x80 | 126]) + struct.pack("!H", len(payload))
        s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        # never read: the socket fills, and after the idle timeout with nothing written the client is cut off
        wait_for(lambda: "the client stopped reading" in g.log_text(), timeout=30, what="the client cut off")
        self.assertTrue(up.aborted.wait(30), "the upstream stream was not cancelled")
        s.settimeout(10)
        got = 0
        try:
            while True:  # what was sent before the cut, then the end
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                got += len(chunk)
        except ConnectionResetError:
            pass
        self.assertGreater(got, 0)
        self.assertGatewayServes(g)

    def test_a_stopping_gateway_finishes_the_turn_and_closes_its_websockets(self):
        g = self.one("slow_stream,ms=100,deltas=10")
        idle = self.ws(g)
        busy = self.ws(g)
        busy.send_json(create([user("hi")]))
        self.assertEqual(busy.recv_json()["type"], "response.created")
        stopper = threading.Thread(target=g.stop)
        stopper.start()
        self.assertEqual(idle.wait_close(), 1001)  # at once: nothing runs on it
        events = [busy.recv_json()]
        while events[-1]["type"] not in TERMINAL:
            events.append(busy.recv_json())
        self.assertEqual(events[-1]["type"], "response.completed")  # the turn in progress ends whole
        try:
            busy.wait_close()
        except (Closed, OSError):
            pass  # the gateway may be gone before its close frame
        stopper.join(20)
        self.assertFalse(stopper.is_alive())
        self.assertEqual(g.proc.returncode, 0)

    def test_a_websocket_counts_against_the_connection_cap_until_it_closes(self):
        g = self.one(env={"SWITCHYARD_MAX_CONNECTIONS": "2", "SWITCHYARD_CLIENT_IDLE_TIMEOUT_S": "1"})
        c = self.ws(g)
        events = c.turn(create([user("hi")]))  # its loopback connection takes the second place and keeps it
        self.assertEqual(events[-1]["type"], "response.completed")
        kept = self.ws(g)
        self.assertEqual(kept.status, 503, kept.body)
        self.assertEqual(json.loads(kept.body)["error"]["code"], "too_many_connections")
        # the second place once the idle timeout closed the kept connection (and a sweep, 100 ms)
        other = wait_for(lambda: (lambda w: w if w.status == 101 else None)(self.ws(g)), what="a second place")
        third = self.ws(g)
        self.assertEqual(third.status, 503, third.body)
        self.assertEqual(json.loads(third.body)["error"]["code"], "too_many_connections")
        c.send_close(1000)
        self.assertEqual(c.wait_close(), 1000)
        c.close()
        other.close()
        third.close()
        wait_for(lambda: self.ws(g).status == 101, what="the places given back")

    # --- the loopback connection, kept for the socket's life

    def test_turns_on_one_websocket_share_one_loopback_connection(self):
        g = self.one()
        c = self.ws(g)
        before = loopback_ports(g.port) | {c.sock.getsockname()[1]}
        first = c.turn(create([user("one")], client_metadata={"x-openai-subagent": "review"}))
        self.assertEqual(first[-1]["type"], "response.completed", first)
        for i in range(5):
            events = c.turn(create([user(f"turn {i}")]))
            self.assertEqual(events[-1]["type"], "response.completed", events)
        self.assertEqual(len(loopback_ports(g.port) - before), 1, "one loopback connection for six turns")
        reqs = self.mock.requests()
        self.assertEqual(len(reqs), 6)
        self.assertEqual(reqs[0]["headers"].get("x-openai-subagent"), "review")
        for r in reqs[1:]:  # one turn's headers are its own
            self.assertNotIn("x-openai-subagent", r["headers"], r)
        self.assertEqual(len(g.wait_request_logs(6)), 6)  # each turn one request of the HTTP path

    def test_a_kept_connection_closed_by_the_server_between_turns_does_not_fail_the_next(self):
        g = self.one(env={"SWITCHYARD_CLIENT_IDLE_TIMEOUT_S": "1"})
        c = self.ws(g)
        before = loopback_ports(g.port) | {c.sock.getsockname()[1]}
        for text in ("one", "two"):
            self.assertEqual(c.turn(create([user(text)]))[-1]["type"], "response.completed")
        self.assertEqual(len(loopback_ports(g.port) - before), 1)
        kept, = loopback_ports(g.port) - before
        # the server's idle timeout closes the kept connection; the gateway sees it go (its client end
        # closed too: neither open nor half-closed)
        wait_for(lambda: not loopback_client_open(g.port, kept), what="the kept connection closed at both ends")
        self.assertEqual(c.turn(create([user("three")]))[-1]["type"], "response.completed")
        self.assertEqual(len(loopback_ports(g.port) - before), 2)
        # the idle timeout in the very loop turn the next request goes out on
        # the kept connection: the gateway is stopped past the timeout and the
        # message waits for it, so both are due together (the request first)
        # the idle timeout is back on the kept connection once its answer is out (the turn's request
        # over: its REQUEST_FINAL; the client saw response.completed before the loopback answer ended)
        # and conn_limit's sweep (every 100 ms) has seen it: that re-arming shows nowhere, so a pause
        # of five sweeps stands for it
        wait_for(lambda: g.trace_text().count("REQUEST_FINAL") >= 3, what="the third turn's request over")
        time.sleep(0.5)
        os.kill(g.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(1.5)
            c.send_json(create([user("four")]))
        finally:
            os.kill(g.proc.pid, signal.SIGCONT)
        events = [c.recv_json()]
        while events[-1]["type"] not in TERMINAL:
            events.append(c.recv_json())
        self.assertEqual(events[-1]["type"], "response.completed", events)
        self.assertIn("closed under the turn: sending it again", g.log_text())
        self.assertEqual(len(self.mock.requests()), 4)  # nothing served twice
        self.assertEqual(len(loopback_ports(g.port) - before), 3)

    def test_closing_mid_turn_on_the_kept_connection_cancels_the_upstream_transfer(self):
        g = self.one("slow_stream,ms=200,deltas=6")  # 1.2 s a turn
        c = self.ws(g)
        before = loopback_ports(g.port) | {c.sock.getsockname()[1]}
        self.assertEqual(c.turn(create([user("one")]))[-1]["type"], "response.completed")
        c.send_json(create([user("two")]))
        self.assertEqual(c.recv_json()["type"], "response.created")
        # (counted before the close: a connection reset leaves no trace)
        self.assertEqual(len(loopback_ports(g.port) - before), 1, "the turn runs on the kept connection")
        c.send_close(1000)
        self.assertEqual(c.wait_close(), 1000)
        wait_for(lambda: len(self.mock.requests()) == 2 and self.mock.requests()[1]["aborted"],
                 what="the second upstream request aborted")
        self.assertFalse(self.mock.requests()[0]["aborted"])
        self.assertGatewayServes(g)

    def test_own_loopback_connections_take_no_share_of_the_address(self):
        # loopback clients held to a share of 2: each WebSocket holds one;
        # its loopback connection comes from the gateway's address, not its
        g = self.one(env={"SWITCHYARD_MAX_CONNECTIONS_PER_IP": "2", "SWITCHYARD_MAX_CONNECTIONS_PER_IP_LOOPBACK": "1"})
        a = self.ws(g)
        self.assertEqual(a.turn(create([user("a")]))[-1]["type"], "response.completed")
        b = self.ws(g)
        self.assertEqual(b.status, 101, b.body)
        for c in (b, a, b):
            events = c.turn(create([user("again")]))
            self.assertEqual(events[-1]["type"], "response.completed", events)
        third = self.ws(g)  # the share is still enforced
        self.assertEqual(third.status, 503, third.body)
        self.assertEqual(json.loads(third.body)["error"]["code"], "too_many_connections")

    def test_metrics_count_the_open_websocket_and_its_turns(self):
        g = self.one()

        def sample(text, name):
            for line in text.splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
            raise AssertionError(f"{name} not in /metrics")

        self.assertEqual(sample(admin_get(g, "/metrics").text, "switchyard_websockets_open"), 0)
        c = self.ws(g)
        self.assertEqual(c.turn(create([user("hi")], generate=False))[-1]["type"], "response.completed")
        self.assertEqual(c.turn(create([user("hi")]))[-1]["type"], "response.completed")
        text = admin_get(g, "/metrics").text
        self.assertEqual(sample(text, "switchyard_websockets_open"), 1)
        self.assertEqual(sample(text, 'switchyard_websocket_turns_total{kind="turn"}'), 1)
        self.assertEqual(sample(text, 'switchyard_websocket_turns_total{kind="warmup"}'), 1)
        c.send_close(1000)
        self.assertEqual(c.wait_close(), 1000)
        c.close()
        wait_for(lambda: sample(admin_get(g, "/metrics").text, "switchyard_websockets_open") == 0,
                 what="the socket no longer counted")

    def test_a_websocket_quiet_past_the_client_idle_timeout_stays_open(self):
        # the client idle timeout is for HTTP; a socket's idle limit is its own
        g = self.one(env={"SWITCHYARD_CLIENT_IDLE_TIMEOUT_S": "1"})
        c = self.ws(g)
        self.assertEqual(c.turn(create([user("one")]))[-1]["type"], "response.completed")
        time.sleep(2.5)
        self.assertEqual(c.turn(create([user("two")]))[-1]["type"], "response.completed")
        self.assertNotIn("the client stopped reading", g.log_text())

    def test_an_idle_connection_is_closed_with_1000(self):
        g = self.one(env={"SWITCHYARD_WS_IDLE_S": "1"})
        c = self.ws(g)
        self.assertEqual(c.wait_close(), 1000)

    def test_a_connection_past_its_age_is_closed_with_1001(self):
        g = self.one(env={"SWITCHYARD_WS_MAX_AGE_S": "2"})
        c = self.ws(g)
        events = c.turn(create([user("hi")]))
        self.assertEqual(events[-1]["type"], "response.completed")
        self.assertEqual(c.wait_close(), 1001)  # (within the client's 20 s timeout)
        self.assertEqual(c.close_reason, "connection lifetime reached")  # not a stopping gateway's 1001


if __name__ == "__main__":
    main()
