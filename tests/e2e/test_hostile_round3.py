"""test_hostile_round3.py: the newest surfaces under a hostile client and a
hostile authorization server. The Responses WebSocket: handshakes that are
not quite one, frames that break RFC 6455 (unmasked, reserved bits, unknown
opcodes, oversized or fragmented control frames, a continuation with no
start, text that is not UTF-8, a 2^63 length, close frames with codes that
may not be sent), floods of pings and empty frames from a client that never
reads (bounded by back-pressure, not by buffering), a turn sent over a
running one, and a client that vanishes mid-turn (the upstream transfer and
the account's slot released). Compressed request bodies: stacked, repeated,
truncated and trailing-garbage encodings, and valid compression of invalid
JSON. The sign-in: callback floods and oversized or repeated parameters, a
callback after the sign-in is over, and token answers that are huge, slow,
not JSON, or hold control characters. Every refusal is the ecosystem's error
shape; the gateway never crashes, hangs or leaks (run on the sanitizer build
too)."""

import base64
import json
import os
import socket
import struct
import threading
import time
import urllib.parse
import zlib

from harness import HOST, GatewayTest, ScriptedServer, account, admin_get, http_call, main, vm_kib, wait_for
from test_compressed_bodies import fnv1a, gzip, raw_deflate, zstd
from test_login_flow import Login, get as login_get
from test_websocket import TERMINAL, Closed, WsClient, create, user


def metric(g, line_start):
    """The value of the gateway's /metrics line starting with line_start (a name and its labels)."""
    for ln in http_call(g.port, "GET", "/metrics").text.splitlines():
        if ln.startswith(line_start + " "):
            return float(ln.split()[-1])
    raise AssertionError(f"no {line_start} in /metrics")


def frame(opcode, payload=b"", fin=True, mask=True, rsv=0, length=None):
    """One frame as a hostile client writes it: any opcode, reserved bits,
    unmasked, or a declared length that is not the payload's."""
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | (rsv << 4) | opcode])
    mbit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


class WebSocketFramesTest(GatewayTest):

    def ws(self, g, **kw):
        c = WsClient(g.port, kw.pop("key", g.key), **kw)
        self.addCleanup(c.close)
        self.assertEqual(c.status, 101, c.body)
        return c

    def one(self, scenario="ok", env=None):
        return self.gateway([account("a", self.mock.url("a", scenario))], env=env)

    def assertServes(self, g):
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"})
        self.assertEqual(r.status, 200, r)
        c = self.ws(g)
        self.assertEqual(c.turn(create([user("hi")]))[-1]["type"], "response.completed")

    def assertClosedWith(self, c, code):
        try:
            got = c.wait_close()
        except (Closed, OSError) as e:
            self.fail(f"no close frame ({e}); wanted {code}")
        self.assertEqual(got, code)

    def test_unmasked_reserved_unknown_and_bad_control_frames_close_with_1002(self):
        g = self.one()
        for bad in (frame(1, b'{"type":"response.create"}', mask=False),
                    frame(1, b"{}", rsv=4),
                    frame(3, b"x"), frame(11, b"x"),
                    frame(9, b"p" * 126),
                    frame(9, b"p", fin=False),
                    frame(0, b"orphan continuation"),
                    frame(1, b"x", length=1 << 63),
                    bytes([0x81, 0x80 | 126, 0, 5]) + b"mask" + b"hello"):  # a length not in its shortest form
            c = self.ws(g)
            c.sock.sendall(bad)
            self.assertClosedWith(c, 1002)
        self.assertEqual(self.mock.requests(), [])
        self.assertServes(g)

    def test_text_that_is_not_utf8_closes_with_1007(self):
        g = self.one()
        for raw in (b'{"type":"response.create","model":"\xff"}', b"\xc3", b'"\xed\xa0\x80"'):
            c = self.ws(g)
            c.sock.sendall(frame(1, raw))
            self.assertClosedWith(c, 1007)
        # split in the middle of a character across fragments is still UTF-8
        c = self.ws(g)
        raw = json.dumps(create([user("h\u00e9llo")]), ensure_ascii=False).encode()
        cut = raw.index("\u00e9".encode()) + 1
        c.sock.sendall(frame(1, raw[:cut], fin=False) + frame(0, raw[cut:]))
        events = [c.recv_json()]
        while events[-1]["type"] not in TERMINAL:
            events.append(c.recv_json())
        self.assertEqual(events[-1]["type"], "response.completed")

    def test_close_frames_with_codes_that_may_not_be_sent_are_answered_1002(self):
        g = self.one()
        for payload in (b"\x03", struct.pack("!H", 999), struct.pack("!H", 1005), struct.pack("!H", 1006),
                        struct.pack("!H", 1015), struct.pack("!H", 5000)):
            c = self.ws(g)
            c.sock.sendall(frame(8, payload))
            self.assertClosedWith(c, 1002)
        c = self.ws(g)
        c.sock.sendall(frame(8, struct.pack("!H", 1000) + b"\xff\xfe"))
        self.assertClosedWith(c, 1007)
        self.assertServes(g)

    def test_data_after_the_close_frame_is_dropped(self):
        g = self.one()
        c = self.ws(g)
        c.sock.sendall(frame(8, struct.pack("!H", 1000)) + frame(1, json.dumps(create([user("hi")])).encode()))
        self.assertClosedWith(c, 1000)
        # the gateway is done with the socket: a turn from the frame after the close would have been counted
        wait_for(lambda: metric(g, "switchyard_websockets_open") == 0, what="the closed socket gone")
        self.assertEqual(metric(g, 'switchyard_websocket_turns_total{kind="turn"}'), 0)
        self.assertEqual(self.mock.requests(), [])

    def test_a_message_just_over_the_limit_closes_with_1009_and_one_at_it_is_served(self):
        g = self.one(env={"SWITCHYARD_MAX_BODY": "65536"})
        c = self.ws(g)
        c.sock.sendall(frame(1, b"x" * 65536 + b"x"))
        self.assertClosedWith(c, 1009)
        c = self.ws(g)  # a declared length far over the limit: closed on its first bytes, nothing allocated
        c.sock.sendall(frame(1, b"", length=1 << 40) + b"xxxx")
        self.assertClosedWith(c, 1009)
        c = self.ws(g)  # over the limit in fragments
        c.sock.sendall(frame(1, b"x" * 40000, fin=False) + frame(0, b"x" * 40000))
        self.assertClosedWith(c, 1009)
        c = self.ws(g)
        msg = create([user("hi")])
        raw = json.dumps(msg).encode()
        msg["instructions"] = "x" * (65536 - len(raw) + len("be brief"))
        raw = json.dumps(msg).encode()
        self.assertEqual(len(raw), 65536)
        c.sock.sendall(frame(1, raw))
        ev = c.recv_json()
        self.assertNotEqual(ev["type"], "error", ev)

    def test_json_that_is_not_a_response_create_is_an_error_event(self):
        g = self.one()
        c = self.ws(g)
        for raw in (b"[]", b'"response.create"', b"42", b"null", b'{"type":"response.cancel"}',
                    b'{"type":42}', b'{}', b"[" * 100000, b'{"type":"response.create","input":' + b"[" * 5000,
                    b'{"type":"response.create","model":{"a":1}}', b""):
            c.sock.sendall(frame(1, raw))
            ev = c.recv_json()
            self.assertEqual((ev["type"], ev["status"]), ("error", 400), (raw[:40], ev))
            self.assertIsInstance(ev["error"]["message"], str)
        self.assertEqual(c.turn(create([user("hi")]))[-1]["type"], "response.completed")
        self.assertEqual(len(self.mock.requests()), 1)

    def test_a_turn_sent_over_a_running_one_is_refused_and_the_first_finishes(self):
        g = self.one("slow_stream,ms=100,deltas=5")
        c = self.ws(g)
        c.send_json(create([user("one")]))
        self.assertEqual(c.recv_json()["type"], "response.created")
        c.send_json(create([user("two")]))
        events, refused = [], None
        while not events or events[-1]["type"] not in ("response.completed", "response.failed"):
            ev = c.recv_json()
            if ev["type"] == "error":
                refused = ev
                continue
            events.append(ev)
        self.assertEqual(refused["error"]["code"], "response_in_progress", refused)
        self.assertEqual(len(self.mock.requests()), 1)

    def test_a_client_vanishing_mid_turn_cancels_the_upstream_and_frees_the_slot(self):
        g = self.one("slow_stream,ms=200,deltas=50")
        for how in ("fin", "rst"):
            self.mock.reset()
            c = self.ws(g)
            c.send_json(create([user("hi")]))
            self.assertEqual(c.recv_json()["type"], "response.created")
            if how == "rst":
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.sock.close()
            wait_for(lambda: self.mock.requests() and self.mock.requests()[0]["aborted"], what=f"upstream aborted ({how})")
            wait_for(lambda: admin_get(g, "/admin/api/accounts").json()["accounts"][0]["inflight"] == 0,
                     what=f"the account's slot released ({how})")
            wait_for(lambda: "switchyard_websockets_open 0" in admin_get(g, "/metrics").text, what="socket gone")

    def test_messages_being_received_count_in_the_body_budget_and_the_one_passing_it_is_closed_1013(self):
        # wslay allocates a frame's declared length on its first bytes: two sockets each part-way
        # through a 60 000-byte message would hold 120 000 bytes of a 100 000-byte budget
        g = self.one(env={"SWITCHYARD_MAX_BODY": "65536", "SWITCHYARD_MAX_BODIES_IN_FLIGHT": "100000"})
        msg = create([user("hi")])
        msg["instructions"] = "x" * (60000 - len(json.dumps(msg).encode()) + len("be brief"))
        raw = json.dumps(msg).encode()
        self.assertEqual(len(raw), 60000)
        first = self.ws(g)
        whole = frame(1, raw)
        first.sock.sendall(whole[:1000])
        wait_for(lambda: g.get("/health", key=None).json()["request_bodies"]["bytes_in_flight"] == 60000,
                 what="the first message counted as it arrives")
        second = self.ws(g)
        second.sock.sendall(frame(1, raw)[:1000])
        self.assertClosedWith(second, 1013)
        # an HTTP body that would pass the budget beside it is refused too
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "y" * 50000})
        self.assertEqual((r.status, r.json()["error"]["code"]), (503, "body_budget_exceeded"), r)
        first.sock.sendall(whole[1000:])
        events = [first.recv_json()]
        while events[-1]["type"] not in TERMINAL:
            events.append(first.recv_json())
        self.assertEqual(events[-1]["type"], "response.completed")
        wait_for(lambda: g.get("/health", key=None).json()["request_bodies"]["bytes_in_flight"] == 0,
                 what="the budget released after the turn")
        third = self.ws(g)
        self.assertEqual(third.turn(msg)[-1]["type"], "response.completed")
        # a socket that goes mid-message gives its share back
        fourth = self.ws(g)
        fourth.sock.sendall(whole[:1000])
        wait_for(lambda: g.get("/health", key=None).json()["request_bodies"]["bytes_in_flight"] == 60000,
                 what="the fourth message counted")
        fourth.sock.close()
        wait_for(lambda: g.get("/health", key=None).json()["request_bodies"]["bytes_in_flight"] == 0,
                 what="the budget released when the socket goes")

    def test_fragments_passing_the_body_limit_together_close_with_1009(self):
        # wslay, not buffering the message, checks each frame's length only: the sum is checked here
        g = self.one(env={"SWITCHYARD_MAX_BODY": "65536"})
        c = self.ws(g)
        c.sock.sendall(frame(1, b"x" * 40000, fin=False) + frame(0, b"y" * 40000))
        self.assertClosedWith(c, 1009)
        wait_for(lambda: g.get("/health", key=None).json()["request_bodies"]["bytes_in_flight"] == 0,
                 what="the budget released")
        self.assertServes(g)

    def test_large_messages_at_once_stay_within_the_body_budget_in_memory_not_only_in_the_count(self):
        # issue 33: a message was held as wslay's frame, wslay's flattened copy, the body made from
        # it, the turn's recorded input and the loopback request's buffer, while the budget counted
        # one copy: with the budget at B the process peaked near 3.5 B. Now what is held is what is
        # counted (docs/security.md), so the peak stays within a small multiple of B.
        budget = 48 << 20
        size = 10 << 20
        g = self.one("slow_headers,ms=1500", env={"SWITCHYARD_MAX_BODIES_IN_FLIGHT": str(budget)})
        self.assertEqual(self.ws(g).turn(create([user("hi")]))[-1]["type"], "response.completed")
        hwm0 = vm_kib(g.proc.pid, "VmHWM")
        msg = create([user("x" * size)])
        raw = json.dumps(msg).encode()
        socks = [self.ws(g, timeout=60) for _ in range(8)]
        outcomes = [None] * len(socks)

        def one_turn(i):
            c = socks[i]
            try:
                c.send_frame(1, raw)
                while True:
                    ev = c.recv_json()
                    if ev["type"] == "error":
                        outcomes[i] = ("error", ev["status"], ev["error"].get("code"))
                        return
                    if ev["type"] in TERMINAL:
                        outcomes[i] = (ev["type"],)
                        return
            except (Closed, OSError):
                outcomes[i] = ("closed", c.close_code)

        threads = [threading.Thread(target=one_turn, args=(i,)) for i in range(len(socks))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        grew = (vm_kib(g.proc.pid, "VmHWM") - hwm0) * 1024
        print(f"  8 x {size >> 20} MiB messages, budget {budget >> 20} MiB: peak RSS grew by {grew >> 20} MiB "
              f"({grew / budget:.2f} x the budget); outcomes {sorted(map(str, outcomes))}")
        served = [o for o in outcomes if o == ("response.completed",)]
        refused = [o for o in outcomes if o in (("closed", 1013), ("error", 503, "body_budget_exceeded"))]
        self.assertTrue(served, outcomes)
        self.assertTrue(refused, outcomes)
        self.assertEqual(len(served) + len(refused), len(socks), outcomes)
        wait_for(lambda: g.get("/health", key=None).json()["request_bodies"]["bytes_in_flight"] == 0,
                 what="the budget released after the turns")
        if os.environ.get("ASAN_OPTIONS"):
            return  # ASan keeps freed memory in quarantine and pads allocations
        # before: 2.9 to 3.9 B here (138 to 188 MiB), the copies uncounted; now about 1.2 B (59 MiB)
        self.assertLess(grew, 2 * budget, "message bodies held far past the body budget")

    def test_a_message_left_half_sent_is_closed_1008_at_the_request_time_limit_and_its_budget_freed(self):
        # an HTTP body must arrive whole within the request clock; a WebSocket message likewise,
        # or a client holds its share of the body budget for the socket's life (up to an hour)
        g = self.one(env={"SWITCHYARD_CLIENT_REQUEST_TIMEOUT_S": "2"})
        raw = json.dumps(create([user("hi")])).encode() + b" " * 5000
        s = self.ws(g)
        s.sock.sendall(frame(1, raw)[:1000])
        wait_for(lambda: g.get("/health", key=None).json()["request_bodies"]["bytes_in_flight"] == len(raw),
                 what="the message counted as it arrives")
        self.assertClosedWith(s, 1008)
        wait_for(lambda: g.get("/health", key=None).json()["request_bodies"]["bytes_in_flight"] == 0,
                 what="the budget released at the time limit")
        # a message sent whole, however slowly its turn runs, is not cut
        self.assertEqual(self.ws(g).turn(create([user("hi")]))[-1]["type"], "response.completed")

    def test_a_ping_flood_from_a_client_that_never_reads_is_held_back_not_buffered(self):
        g = self.one()
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(5)
        s.connect((HOST, g.port))
        self.addCleanup(s.close)
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall((f"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                   f"Authorization: Bearer {g.key}\r\n\r\n").encode())
        ping = frame(9, b"p" * 125)
        batch = ping * 512
        rss0 = vm_kib(g.proc.pid, "VmRSS")
        sent = 0
        s.setblocking(False)
        deadline = time.monotonic() + 20
        while sent < (48 << 20) and time.monotonic() < deadline:
            try:
                sent += s.send(batch)
            except BlockingIOError:
                time.sleep(0.01)
        grown = vm_kib(g.proc.pid, "VmRSS") - rss0
        # the gateway stops reading the client once what it owes it passes the high water mark
        self.assertLess(sent, 24 << 20, "the gateway kept reading a client that reads nothing")
        self.assertLess(grown, 40 << 10, f"the gateway grew by {grown} KiB")  # a sanitizer build keeps freed blocks
        s.close()
        self.assertServes(g)

    def test_a_flood_of_empty_frames_is_bounded_and_the_socket_keeps_serving(self):
        g = self.one()
        c = self.ws(g)
        raw = json.dumps(create([user("hi")])).encode()
        c.sock.sendall(frame(1, b"", fin=False) + frame(0, b"", fin=False) * 20000 + frame(0, raw))
        events = [c.recv_json()]
        while events[-1]["type"] not in TERMINAL:
            events.append(c.recv_json())
        self.assertEqual(events[-1]["type"], "response.completed")


class WebSocketHandshakeTest(GatewayTest):

    def one(self, env=None):
        return self.gateway([account("a", self.mock.url("a", "ok"))], env=env)

    def raw(self, g, text, body=b""):
        s = socket.create_connection((HOST, g.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(text.encode() + body)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1]) if lines[0] else 0
        hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        n = int(hdrs.get("content-length", "0"))
        while len(rest) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        return status, hdrs, rest[:n], s

    def head(self, g, path="/v1/responses", method="GET", extra="", key=True, ws_key="dGhlIHNhbXBsZSBub25jZQ=="):
        lines = [f"{method} {path} HTTP/1.1", "Host: x", "Upgrade: websocket", "Connection: Upgrade",
                 "Sec-WebSocket-Version: 13"]
        if ws_key is not None:
            lines.append(f"Sec-WebSocket-Key: {ws_key}")
        if key:
            lines.append(f"Authorization: Bearer {g.key}")
        return "\r\n".join(lines) + "\r\n" + extra + "\r\n"

    def assertJsonError(self, status, body, want):
        self.assertEqual(status, want, body)
        err = json.loads(body)["error"]
        self.assertTrue(err["message"] and err["type"], err)

    def test_handshakes_missing_or_bending_a_part_are_refused_with_json(self):
        g = self.one()
        for ws_key, extra, want in ((None, "", 400), ("", "", 400), ("dGhlIHNhbXBsZSBub25jZQ", "", 400),
                                    ("dGhlIHNhbXBsZSBub25jZR==", "", 400), ("!!!!!!!!!!!!!!!!!!!!!!==", "", 400),
                                    ("dGhlIHNhbXBsZSBub25jZQ==x", "", 400)):
            status, _, body, _ = self.raw(g, self.head(g, ws_key=ws_key, extra=extra))
            self.assertJsonError(status, body, want)
        status, hdrs, body, _ = self.raw(g, self.head(g).replace("Version: 13", "Version: 13, 8"))
        self.assertJsonError(status, body, 426)
        status, _, body, _ = self.raw(g, self.head(g).replace("Connection: Upgrade", "Connection: keep-alive"))
        self.assertJsonError(status, body, 400)

    def test_an_upgrade_on_another_path_or_method_is_served_as_plain_http(self):
        g = self.one()
        status, _, body, _ = self.raw(g, self.head(g, path="/v1/chat/completions"))
        self.assertJsonError(status, body, 405)
        status, _, body, _ = self.raw(g, self.head(g, path="/v1/nope"))
        self.assertJsonError(status, body, 404)
        status, _, body, _ = self.raw(g, self.head(g, method="DELETE"))
        self.assertJsonError(status, body, 405)
        raw = json.dumps({"model": "gpt-test", "input": "hi"}).encode()
        status, _, body, _ = self.raw(g, self.head(g, method="POST", extra=f"Content-Length: {len(raw)}\r\n"), raw)
        self.assertEqual(status, 200, body)

    def test_an_upgrade_that_carries_a_body_is_refused(self):
        g = self.one()
        raw = frame(1, json.dumps(create([user("hi")])).encode())
        status, _, body, _ = self.raw(g, self.head(g, extra=f"Content-Length: {len(raw)}\r\n"), raw)
        self.assertJsonError(status, body, 400)
        status, _, body, _ = self.raw(g, self.head(g, extra="Transfer-Encoding: chunked\r\n"),
                                      b"%x\r\n" % len(raw) + raw + b"\r\n0\r\n\r\n")
        self.assertJsonError(status, body, 400)
        # refused whole: no turn began and no request is in flight (one that had finished would be
        # in the mock's record, written before its answer)
        self.assertEqual(metric(g, 'switchyard_websocket_turns_total{kind="turn"}'), 0)
        self.assertEqual(g.get("/health", key=None).json()["active_requests"], 0)
        self.assertEqual(self.mock.requests(), [])

    def test_frames_sent_with_the_handshake_are_served_after_it(self):
        g = self.one()
        raw = frame(1, json.dumps(create([user("hi")])).encode())
        s = socket.create_connection((HOST, g.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(self.head(g).encode() + raw)
        buf = b""
        deadline = time.monotonic() + 10
        while b"response.completed" not in buf and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        self.assertIn(b"101 Switching Protocols", buf)
        self.assertIn(b"response.completed", buf)


class CompressedBodiesTest(GatewayTest):
    """Raw requests: the headers and framing exactly as written here."""

    BODY = json.dumps({"model": "gpt-test", "input": "hi"}).encode()

    def one(self, env=None):
        return self.gateway([account("a", self.mock.url("a", "ok"))], env=env)

    def send(self, g, body, headers, chunked=False, length=None):
        s = socket.create_connection((HOST, g.port), timeout=10)
        self.addCleanup(s.close)
        head = ["POST /v1/responses HTTP/1.1", "Host: x", f"Authorization: Bearer {g.key}",
                "Content-Type: application/json", "Connection: close"] + headers
        if chunked:
            head.append("Transfer-Encoding: chunked")
            mid = len(body) // 2
            wire = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:mid], body[mid:]) if p) + b"0\r\n\r\n"
        else:
            head.append(f"Content-Length: {len(body) if length is None else length}")
            wire = body
        s.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + wire)
        buf = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        head, _, rest = buf.partition(b"\r\n\r\n")
        return int(head.split()[1]) if head else 0, rest

    def assertError(self, got, status, code=None):
        self.assertEqual(got[0], status, got)
        body = got[1]
        if b"\r\n" in body[:8]:  # chunked answer: its first chunk holds it all
            body = body.split(b"\r\n", 2)[1]
        err = json.loads(body)["error"]
        self.assertTrue(err["message"] and err["type"], err)
        if code:
            self.assertEqual(err["code"], code, err)

    def test_stacked_repeated_and_cased_codings_are_undone_in_order(self):
        g = self.one()
        for body, headers in ((zstd(gzip(self.BODY)), ["Content-Encoding: gzip, zstd"]),
                              (zstd(gzip(self.BODY)), ["Content-Encoding: gzip", "Content-Encoding: zstd"]),
                              (gzip(self.BODY), ["Content-Encoding: GZip"]),
                              (gzip(self.BODY), ["Content-Encoding: identity, gzip, identity"]),
                              (gzip(self.BODY), ["Content-Encoding: ,, gzip ,"])):
            self.mock.reset()
            got = self.send(g, body, headers)
            self.assertEqual(got[0], 200, (headers, got))
            rec, = self.mock.requests()
            self.assertEqual(rec["body_hash"], fnv1a(self.BODY), headers)

    def test_unknown_parametered_and_too_many_codings_get_415(self):
        g = self.one()
        for value in ("br", "gzip;q=1", "gzip zstd", "gzip, gzip, gzip, gzip, gzip", "x" * 6000, "\x01gzip"):
            self.assertError(self.send(g, gzip(self.BODY), [f"Content-Encoding: {value}"]), 415,
                             "unsupported_content_encoding")
        self.assertEqual(self.mock.requests(), [])

    def test_truncated_or_trailing_garbage_or_empty_compressed_bodies_get_400(self):
        g = self.one()
        z, gz = zstd(self.BODY), gzip(self.BODY)
        for body, coding in ((z[:-3], "zstd"), (z + b"garbage", "zstd"), (z + b"\x00" * 8, "zstd"),
                             (gz[:-5], "gzip"), (gz + b"garbage", "gzip"), (b"", "gzip"), (b"", "zstd"),
                             (raw_deflate(self.BODY) + b"junk", "deflate"), (zlib_wrap(self.BODY)[:-2], "deflate")):
            self.assertError(self.send(g, body, [f"Content-Encoding: {coding}"]), 400, "invalid_body_encoding")
        self.assertEqual(self.mock.requests(), [])

    def test_valid_compression_of_invalid_json_gets_the_json_400(self):
        g = self.one()
        for plain in (b"{not json", b"[" * 100000, b"\xff\xfe", b'{"model":"gpt-test","input":"\xc3"}'):
            for coding, enc in (("zstd", zstd), ("gzip", gzip)):
                got = self.send(g, enc(plain), [f"Content-Encoding: {coding}"])
                self.assertError(got, 400)
        self.assertEqual(self.mock.requests(), [])

    def test_a_bomb_one_byte_over_the_limit_gets_413_and_one_at_it_passes_decoding(self):
        limit = 65536
        g = self.one(env={"SWITCHYARD_MAX_BODY": str(limit)})
        pad = b'{"model":"gpt-test","input":"hi","metadata":{"pad":"'
        at = pad + b"x" * (limit - len(pad) - 3) + b'"}}'
        self.assertEqual(len(at), limit)
        over = pad + b"x" * (limit - len(pad) - 2) + b'"}}'
        for coding, enc in (("zstd", zstd), ("gzip", gzip), ("deflate", zlib_wrap)):
            self.mock.reset()
            self.assertError(self.send(g, enc(over), [f"Content-Encoding: {coding}"]), 413, "request_too_large")
            got = self.send(g, enc(at), [f"Content-Encoding: {coding}"])
            self.assertNotEqual(got[0], 413, (coding, got))
        # two stages, the inner one over the limit
        self.assertError(self.send(g, gzip(gzip(over)), ["Content-Encoding: gzip, gzip"]), 413, "request_too_large")

    def test_chunked_compressed_bodies_are_decoded(self):
        g = self.one()
        got = self.send(g, zstd(self.BODY), ["Content-Encoding: zstd"], chunked=True)
        self.assertEqual(got[0], 200, got)
        rec, = self.mock.requests()
        self.assertEqual(rec["body_hash"], fnv1a(self.BODY))

    def test_a_content_length_longer_than_the_compressed_body_is_cut_off_not_decoded(self):
        g = self.one(env={"SWITCHYARD_CLIENT_REQUEST_TIMEOUT_S": "1"})
        body = zstd(self.BODY)
        got = self.send(g, body, ["Content-Encoding: zstd"], length=len(body) + 10)
        self.assertError(got, 408)
        self.assertEqual(self.mock.requests(), [])


class TokenEndpoint(ScriptedServer):
    """A token endpoint that answers the exchange with exactly what a test names:
    (status, body bytes, trickle seconds between bytes or 0)."""

    def __init__(self, status, body, trickle=0.0):
        super().__init__({"token": (status, body, trickle)})

    def url(self):
        return f"{self.base()}/oauth/token"


def jwt(claims):
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return f"{enc({'alg': 'none'})}.{enc(claims)}.sig"


class SignInTest(GatewayTest):

    def env(self, token_url=None, spec="ok,user=alice"):
        base = self.mock.base()
        return {"SWITCHYARD_OAUTH_AUTHORIZE_URL": f"{base}/oauth/{spec}/authorize",
                "SWITCHYARD_OAUTH_TOKEN_URL": token_url or f"{base}/oauth/ok/token",
                "SWITCHYARD_OAUTH_TIMEOUT_MS": "3000"}

    def login(self, g, env):
        lg = Login(g, env, ["--name", "alice", "--no-browser", "--port", "0", "--timeout", "30"])
        self.addCleanup(lg.kill)
        return lg

    def location(self, lg):
        status, headers, body = login_get(lg.auth_url())
        self.assertEqual(status, 302, body)
        return headers["location"]

    def accounts(self, g):
        return g.query("SELECT name, token, refresh_token, id_token, chatgpt_account_id, email FROM accounts")

    def test_hostile_token_answers_end_the_sign_in_in_bounded_time_and_store_nothing(self):
        good = {"access_token": jwt({"exp": int(time.time()) + 3600}), "refresh_token": "rt_1",
                "id_token": jwt({"email": "a@example.com"}), "expires_in": 3600}
        answers = [
            ("huge", 200, b'{"access_token":"' + b"a" * (4 << 20) + b'"}', 0),
            ("not json", 200, b"<html>hello</html>", 0),
            ("json not an object", 200, b"[1,2,3]", 0),
            ("crlf in the token", 200, json.dumps(dict(good, access_token="tok\r\nX-Evil: 1")).encode(), 0),
            ("no refresh token", 200, json.dumps(dict(good, refresh_token=None)).encode(), 0),
            ("an error with control characters", 400, b'{"error":"bad\u001b[31m\r\ncode"}', 0),
            ("a 500 of html", 500, b"<html>" + b"x" * 200000, 0),
            ("trickled past the timeout", 200, json.dumps(good).encode(), 0.05),
        ]
        for what, status, body, trickle in answers:
            ep = TokenEndpoint(status, body, trickle)
            self.addCleanup(ep.close)
            g = self.gateway([], start=False)
            lg = self.login(g, self.env(ep.url()))
            cb_status, _, cb_body = login_get(self.location(lg), connect_host="127.0.0.1")
            self.assertEqual(cb_status, 502, (what, cb_body))
            rc, out, err = lg.finish()
            if trickle:  # ended by the exchange's time limit (3 s), not by the whole trickle (~13 s)
                self.assertIn("timed out", err, (what, err))
            self.assertEqual(rc, 1, (what, err))
            self.assertIn("nothing was stored", err, what)
            self.assertNotIn("\x1b", err, what)
            self.assertEqual(self.accounts(g), [], what)
            self.assertEqual(len(ep.hits), 1, what)

    def test_an_id_token_that_is_no_jwt_is_stored_without_claims_never_as_garbage(self):
        # the tokens work; the claims (account id, e-mail) are read from the id token or left out
        for id_token in ("not-a-jwt", "a.b.c", jwt({"email": "x\r\ny@example.com", "https://api.openai.com/auth":
                                                   {"chatgpt_account_id": "acct\r\nX-Evil: 1"}})):
            ep = TokenEndpoint(200, json.dumps({"access_token": "at_ok", "refresh_token": "rt_ok",
                                                "id_token": id_token, "expires_in": 3600}).encode())
            self.addCleanup(ep.close)
            g = self.gateway([], start=False)
            lg = self.login(g, self.env(ep.url()))
            cb_status, _, _ = login_get(self.location(lg), connect_host="127.0.0.1")
            rc, out, err = lg.finish()
            self.assertEqual((cb_status, rc), (200, 0), err)
            row, = self.accounts(g)
            self.assertEqual(row["token"], "at_ok")
            for k in ("chatgpt_account_id", "email"):
                self.assertFalse(row[k] and ("\r" in row[k] or "\n" in row[k]), row)

    def test_repeated_callback_parameters_are_refused_and_the_sign_in_goes_on(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env())
        location = self.location(lg)
        u = urllib.parse.urlsplit(location)
        q = dict(urllib.parse.parse_qsl(u.query))
        # (one error with the genuine state would end the sign-in: a denial; two are no answer)
        for extra in ([("state", "x" * 43)], [("code", "forged")], [("error", "a"), ("error", "b")],
                      [("state", q["state"])]):
            pairs = list(q.items()) + extra
            forged = urllib.parse.urlunsplit((u.scheme, u.netloc, u.path, urllib.parse.urlencode(pairs), ""))
            status, _, _ = login_get(forged, connect_host="127.0.0.1")
            self.assertEqual(status, 400, extra)
        self.assertIsNone(lg.proc.poll())
        status, _, _ = login_get(location, connect_host="127.0.0.1")
        self.assertEqual(status, 200)
        rc, _, err = lg.finish()
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(self.accounts(g)), 1)

    def test_oversized_and_malformed_callbacks_are_refused_and_the_sign_in_goes_on(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env())
        location = self.location(lg)
        port = urllib.parse.urlsplit(location).port
        for raw in (b"GET /auth/callback?" + b"a" * 20000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n",
                    b"GET " + location.split(str(port), 1)[1].encode() + b"&" + b"b" * 9000 +
                    b" HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % port,
                    b"\x00\x01\x02\r\n\r\n", b"GET\r\n\r\n", b"G" * 20000):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            try:
                s.sendall(raw)
                answer = s.recv(65536)
            except OSError:
                answer = b""
            s.close()
            self.assertFalse(answer.startswith(b"HTTP/1.1 200"), answer[:80])
        self.assertIsNone(lg.proc.poll())
        status, _, _ = login_get(location, connect_host="127.0.0.1")
        self.assertEqual(status, 200)
        self.assertEqual(lg.finish()[0], 0)

    def test_idle_connections_do_not_hold_off_the_genuine_callback(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env())
        location = self.location(lg)
        port = urllib.parse.urlsplit(location).port
        idle = []
        for _ in range(12):  # a local process holding connections open, sending nothing
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            self.addCleanup(s.close)
            idle.append(s)
        status, _, _ = login_get(location, connect_host="127.0.0.1")
        self.assertEqual(status, 200)
        # served beside them: none was answered (timed out, 408) to make room for it first; each is
        # still open or closed unanswered as the command ends
        for s in idle:
            s.setblocking(False)
            try:
                got = s.recv(4096)
            except BlockingIOError:
                got = b""
            except OSError:
                got = b""
            self.assertEqual(got, b"", "an idle connection was answered before the genuine callback was served")
        self.assertEqual(lg.finish()[0], 0)

    def test_a_callback_after_the_sign_in_finds_nobody_listening(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env())
        location = self.location(lg)
        self.assertEqual(login_get(location, connect_host="127.0.0.1")[0], 200)
        self.assertEqual(lg.finish()[0], 0)
        with self.assertRaises(OSError):
            login_get(location, connect_host="127.0.0.1")
        self.assertEqual(len(self.oauth_exchanges()), 1)

    def oauth_exchanges(self):
        return [r for r in self.mock.requests() if r["endpoint"] == "oauth_token"]


def zlib_wrap(data):
    c = zlib.compressobj(6, zlib.DEFLATED, 15)
    return c.compress(data) + c.flush()


if __name__ == "__main__":
    main()
