#!/usr/bin/env python3
"""streams.py: hold N streamed requests open through the gateway at once and
report the gateway's memory while they are all open.

Each client sends POST /v1/chat/completions with "stream": true and
"bench_hold_ms" (bench/fast_upstream.c then streams one delta a second and
ends the stream after that many ms). The driver waits until every client has
its response headers and first data event (so each stream is committed and
passing through the gateway), samples /proc/PID/status (VmRSS, VmHWM) at that
moment and every 100 ms until the first stream ends, then reads every stream
to its end and checks it ended with "data: [DONE]". VmHWM is reset first
(/proc/PID/clear_refs, "5"), so hwm_kib is this phase's peak.

Prints one line:
  STREAMS n=N open_at_once=N completed=N failed=N rss_kib=N hwm_kib=N
          rss_peak_kib=N idle_rss_kib=N open_s=F
Standard library only; loopback only; bounded by --timeout.
"""
import argparse
import asyncio
import json
import sys
import time


def read_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


async def one_stream(host, port, key, body, opened, ready, results):
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as e:
        results.append((f"connect: {e}", ""))
        if not opened.done():
            opened.set_result(False)
        return
    req = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    writer.write(req)
    await writer.drain()
    buf = b""
    state = "fail"
    try:
        while b"\r\n\r\n" not in buf:
            chunk = await reader.read(65536)
            if not chunk:
                raise EOFError("closed before headers")
            buf += chunk
        head, _, buf = buf.partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        if b" 200 " not in status + b" ":
            raise RuntimeError(status.decode(errors="replace"))
        while b"data: " not in buf:
            chunk = await reader.read(65536)
            if not chunk:
                raise EOFError("closed before the first event")
            buf += chunk
        if not opened.done():
            opened.set_result(True)
        await ready.wait()
        # chunked transfer: the final zero-length chunk ends the body
        while not buf.endswith(b"\r\n0\r\n\r\n"):
            chunk = await reader.read(65536)
            if not chunk:
                break
            buf += chunk
        state = "ok" if b"data: [DONE]" in buf else "truncated"
    except Exception as e:  # noqa: BLE001 - any failure is reported, not raised
        state = f"error: {e}"
        if not opened.done():
            opened.set_result(False)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass
    results.append((state, ""))


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--key", required=True)
    ap.add_argument("--pid", type=int, required=True, help="gateway pid, for /proc/PID/status")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--hold-ms", type=int, default=8000)
    ap.add_argument("--timeout", type=float, default=40.0)
    a = ap.parse_args()

    idle = read_status(a.pid)
    try:  # reset VmHWM to the current RSS, so it tells this phase's peak
        with open(f"/proc/{a.pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    body = json.dumps({
        "model": "gpt-bench", "stream": True, "bench_hold_ms": a.hold_ms, "bench_gap_ms": 1000,
        "messages": [{"role": "user", "content": "hold this stream open"}],
    }).encode()
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()
    results = []
    opens = [loop.create_future() for _ in range(a.n)]
    t0 = time.monotonic()
    tasks = []
    for i in range(a.n):
        tasks.append(asyncio.ensure_future(one_stream(a.host, a.port, a.key, body, opens[i], ready, results)))
        if i % 50 == 49:
            await asyncio.sleep(0.01)  # stay under the listen backlog
    done, _ = await asyncio.wait(opens, timeout=min(a.timeout, a.hold_ms / 1000.0 - 1.0))
    open_s = time.monotonic() - t0
    open_now = sum(1 for f in opens if f.done() and f.result())
    st = read_status(a.pid)
    peak = st.get("VmRSS", 0)
    ready.set()
    # keep sampling while the streams are still open (until the first ends)
    while not results and time.monotonic() - t0 < a.hold_ms / 1000.0:
        await asyncio.sleep(0.1)
        peak = max(peak, read_status(a.pid).get("VmRSS", 0))
    await asyncio.wait(tasks, timeout=a.timeout)
    hwm = read_status(a.pid).get("VmHWM", 0)
    ok = sum(1 for s, _ in results if s == "ok")
    bad = [s for s, _ in results if s != "ok"]
    print(f"STREAMS n={a.n} open_at_once={open_now} completed={ok} failed={a.n - ok} "
          f"rss_kib={st.get('VmRSS', 0)} hwm_kib={hwm} rss_peak_kib={peak} "
          f"idle_rss_kib={idle.get('VmRSS', 0)} open_s={open_s:.2f}")
    if bad:
        print("first failures:", bad[:3], file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
