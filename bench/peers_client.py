#!/usr/bin/env python3
"""peers_client.py: the two measurements of bench/peers.sh that wrk cannot make.

  ttfb  C clients, each on one kept-alive connection, send streamed requests
        back to back for S seconds; for each, the time from sending it to the
        first byte of the response body (the first SSE event: what a user
        sees as the first token). Prints
          TTFB n=N p50_us=N p99_us=N errors=N
  hold  opens N connections at once, sends a streamed request on each and
        waits until every one has its first body byte (all N streams open
        through the proxy), then reads the proxy's VmRSS (and before the
        first connection: idle_rss_kib) from /proc/PID/status, a few times
        over a second, and drops every connection. Prints
          HOLD n=N open=N idle_rss_kib=N rss_kib=N open_s=F

The target is --url (http://127.0.0.1:PORT/path), with --headers ("Name: value"
lines, as bench/post.lua's BENCH_HEADERS) and --body. Standard library only; loopback only; every wait
is bounded (--timeout).
"""
import argparse
import asyncio
import sys
import time
from urllib.parse import urlsplit


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def build_request(url, headers, body):
    u = urlsplit(url)
    lines = [f"POST {u.path or '/'} HTTP/1.1", f"Host: {u.hostname}:{u.port}",
             "Content-Type: application/json", "Accept: text/event-stream",
             f"Content-Length: {len(body)}"]
    lines += headers
    return u.hostname, u.port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def read_head(reader, buf):
    """Reads until the end of the response head; returns (head, rest)."""
    while b"\r\n\r\n" not in buf:
        chunk = await reader.read(65536)
        if not chunk:
            raise EOFError("closed before the response head")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n", 1)[0] + b" ":
        raise ValueError(head.split(b"\r\n", 1)[0].decode(errors="replace"))
    return head.lower(), rest


async def first_body_bytes(reader, rest):
    """Returns rest, or once it is empty the next bytes read: the first of
    the response body."""
    while not rest:
        rest = await reader.read(65536)
        if not rest:
            raise EOFError("closed before the first body byte")
    return rest


async def read_body_end(reader, head, rest):
    """Reads the rest of one response (chunked or Content-Length); returns
    the bytes after it (none are expected: one request at a time)."""
    if b"transfer-encoding: chunked" in head:
        while not rest.endswith(b"0\r\n\r\n"):
            chunk = await reader.read(65536)
            if not chunk:
                raise EOFError("closed inside a chunked body")
            rest += chunk
        return b""
    n = 0
    for line in head.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            n = int(line.split(b":", 1)[1])
    while len(rest) < n:
        chunk = await reader.read(65536)
        if not chunk:
            raise EOFError("closed inside a body")
        rest += chunk
    return rest[n:]


async def ttfb_client(host, port, req, deadline, samples, errors):
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        errors.append("connect")
        return
    try:
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            writer.write(req)
            head, rest = await read_head(reader, b"")
            rest = await first_body_bytes(reader, rest)
            samples.append(time.perf_counter() - t0)
            await read_body_end(reader, head, rest)
    except (OSError, EOFError, ValueError) as e:
        errors.append(str(e))
    finally:
        writer.close()


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] if xs else 0.0


async def run_ttfb(a, host, port, req):
    samples, errors = [], []
    deadline = time.monotonic() + a.seconds
    await asyncio.wait_for(asyncio.gather(*(ttfb_client(host, port, req, deadline, samples, errors)
                                            for _ in range(a.clients))), a.seconds + a.timeout)
    print("TTFB n=%d p50_us=%d p99_us=%d errors=%d"
          % (len(samples), 1e6 * percentile(samples, 50), 1e6 * percentile(samples, 99), len(errors)))
    if errors:
        print("first error: %s" % errors[0], file=sys.stderr)


async def hold_one(host, port, req, opened, conns):
    reader, writer = await asyncio.open_connection(host, port)
    conns.append(writer)
    writer.write(req)
    _, rest = await read_head(reader, b"")
    await first_body_bytes(reader, rest)
    opened.append(1)


async def run_hold(a, host, port, req):
    idle = vm_rss_kib(a.pid)
    conns, opened = [], []
    t0 = time.monotonic()
    results = await asyncio.wait_for(asyncio.gather(*(hold_one(host, port, req, opened, conns) for _ in range(a.n)),
                                                    return_exceptions=True), a.timeout)
    open_s = time.monotonic() - t0
    rss = 0
    for _ in range(10):  # the largest of a few samples: the proxy may still be settling
        rss = max(rss, vm_rss_kib(a.pid))
        await asyncio.sleep(0.1)
    for w in conns:
        w.transport.abort()
    errs = [r for r in results if isinstance(r, BaseException)]
    print("HOLD n=%d open=%d idle_rss_kib=%d rss_kib=%d open_s=%.2f" % (a.n, len(opened), idle, rss, open_s))
    if errs:
        print("first error: %r" % errs[0], file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("ttfb", "hold"))
    ap.add_argument("--url", required=True)
    ap.add_argument("--headers", default="", help='"Name: value" lines, newline-separated')
    ap.add_argument("--body", required=True)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--pid", type=int)
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    headers = [h.strip() for h in a.headers.split("\n") if h.strip()]
    host, port, req = build_request(a.url, headers, a.body.encode())
    if a.mode == "ttfb":
        asyncio.run(run_ttfb(a, host, port, req))
    else:
        if not a.pid:
            ap.error("hold needs --pid")
        asyncio.run(run_hold(a, host, port, req))


if __name__ == "__main__":
    main()
