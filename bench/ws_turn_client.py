"""ws_turn_client.py: the client of bench/ws_turn.sh (stdlib only). Runs the
same streamed Responses turn N times, one after another, on one connection:

  direct  POST <upstream>/responses, SSE (keep-alive HTTP/1.1, chunked)
  http    POST <gateway>/v1/responses, SSE (keep-alive HTTP/1.1, chunked)
  ws      response.create messages over one WebSocket to <gateway>/v1/responses

and measures each turn from sending it to its first event and to its last
(response.completed), with raw sockets and the same parsing cost on every
path (so the difference between two paths is the proxy's). For the gateway
paths it also reads the gateway's utime+stime (/proc/PID/stat, all threads)
before and after: CPU per turn.

  python3 ws_turn_client.py run MODE PORT PATH KEY N [GATEWAY_PID]
      -> prints one line: RESULT mode n p50_first p99_first p50_last p99_last cpu_per_turn sys_per_turn (µs)
  python3 ws_turn_client.py drive MODE PORT PATH KEY N
      -> N turns, nothing measured (the callgrind runs)
"""

import base64
import json
import os
import socket
import struct
import sys
import time

HOST = "127.0.0.1"
INPUT = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello."}]}]
BODY = json.dumps({"model": "gpt-bench", "stream": True, "input": INPUT}).encode()
WS_MSG = json.dumps({"type": "response.create", "model": "gpt-bench", "stream": True, "store": False,
                     "input": INPUT}).encode()
TERMINAL = (b'"response.completed"', b'"response.failed"', b'"response.incomplete"', b'"type":"error"')
HZ = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])  # utime, stime (fields 14 and 15)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection((HOST, port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def more(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise SystemExit("connection closed")
        self.buf += chunk

    def until(self, sep):
        while True:
            i = self.buf.find(sep)
            if i >= 0:
                out, self.buf = self.buf[:i], self.buf[i + len(sep):]
                return out
            self.more()

    def take(self, n):
        while len(self.buf) < n:
            self.more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


class HttpTurns(Conn):
    """Streamed POSTs on one keep-alive connection; the body is chunked SSE."""

    def __init__(self, port, path, key):
        super().__init__(port)
        hdrs = f"POST {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/json\r\n"
        if key:
            hdrs += f"Authorization: Bearer {key}\r\n"
        self.req = (hdrs + f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY

    def turn(self):
        t0 = time.perf_counter_ns()
        self.sock.sendall(self.req)
        head = self.until(b"\r\n\r\n").decode("latin-1")
        status = int(head.split(" ", 2)[1])
        if status != 200 or "chunked" not in head.lower():
            raise SystemExit(f"unexpected answer: {head!r}")
        first = last = None
        sse = b""
        while True:
            size = int(self.until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                self.until(b"\r\n")
                break
            sse += self.take(size)
            self.take(2)
            while b"\n\n" in sse:
                ev, sse = sse.split(b"\n\n", 1)
                if b"data:" not in ev:
                    continue
                now = time.perf_counter_ns()
                if first is None:
                    first = now
                if any(t in ev for t in TERMINAL):
                    last = now
        if first is None or last is None:
            raise SystemExit("a turn without its events")
        return first - t0, last - t0


class WsTurns(Conn):
    """response.create messages on one WebSocket (masked frames)."""

    def __init__(self, port, path, key):
        super().__init__(port)
        wkey = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {HOST}:{port}", "Upgrade: websocket", "Connection: Upgrade",
                 f"Sec-WebSocket-Key: {wkey}", "Sec-WebSocket-Version: 13",
                 "OpenAI-Beta: responses_websockets=2026-02-06", f"Authorization: Bearer {key}"]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = self.until(b"\r\n\r\n").decode("latin-1")
        if int(head.split(" ", 2)[1]) != 101:
            raise SystemExit(f"no upgrade: {head!r}")
        n = len(WS_MSG)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack("!H", n))
        mask = os.urandom(4)
        self.frame = head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(WS_MSG))

    def message(self):
        b0, b1 = self.take(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self.take(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self.take(8))[0]
        payload = self.take(n)
        op = b0 & 0x0F
        if op == 8:
            raise SystemExit("closed by the gateway")
        if not b0 & 0x80:
            raise SystemExit("a fragmented message (not expected from the gateway)")
        return op, payload

    def turn(self):
        t0 = time.perf_counter_ns()
        self.sock.sendall(self.frame)
        first = None
        while True:
            op, payload = self.message()
            if op != 1:
                continue  # a ping: not expected on a busy connection
            now = time.perf_counter_ns()
            if first is None:
                first = now
            if any(t in payload for t in TERMINAL):
                return first - t0, now - t0


def pct(sorted_vals, q):
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


def main():
    what, mode, port, path, key, n = sys.argv[1:7]
    port, n = int(port), int(n)
    pid = int(sys.argv[7]) if len(sys.argv) > 7 and sys.argv[7] else 0
    c = (WsTurns if mode == "ws" else HttpTurns)(port, path, key)
    for _ in range(20 if what == "run" else 0):  # warm-up: connections, caches
        c.turn()
    ticks0 = cpu_ticks(pid) if pid else (0, 0)
    firsts, lasts = [], []
    for _ in range(n):
        f, l = c.turn()
        firsts.append(f)
        lasts.append(l)
    ticks1 = cpu_ticks(pid) if pid else (0, 0)
    c.sock.close()
    if what != "run":
        return
    firsts.sort()
    lasts.sort()
    us = lambda ns: ns / 1000.0
    cpu = [(ticks1[i] - ticks0[i]) * 1e6 / HZ / n if pid else float("nan") for i in (0, 1)]
    print(f"RESULT {mode} {n} {us(pct(firsts, .5)):.1f} {us(pct(firsts, .99)):.1f} "
          f"{us(pct(lasts, .5)):.1f} {us(pct(lasts, .99)):.1f} {cpu[0] + cpu[1]:.1f} {cpu[1]:.1f}", flush=True)


if __name__ == "__main__":
    main()
