"""harness.py: the e2e test harness (stdlib only).

Starts the mock upstream (tests/mock_upstream.c) and the gateway on loopback
ports, creates each test's database through the gateway CLI, and talks HTTP to
both. Environment (set by ctest, see tests/CMakeLists.txt):

  SWITCHYARD_BIN     the gateway binary
  MOCK_UPSTREAM_BIN  the mock upstream binary
  SWITCHYARD_SRC     the source tree (for policies/ and the like)
  SWITCHYARD_E2E_KEEP=1 keeps each test's temp dir (db, logs) for inspection

Tests never assert on timings; timeouts here only stop a hang.
"""

import atexit
import contextlib
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST = "127.0.0.1"
START_TIMEOUT = 20.0      # seconds for a process to start listening
REQUEST_TIMEOUT = 60.0    # seconds for one HTTP exchange (only against hangs)
WAIT_TIMEOUT = 20.0       # seconds for wait_for() conditions

_live_procs = []

# lines a sanitizer build prints when it finds something (ASan/LSan/UBSan/TSan)
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer", "ERROR: UndefinedBehaviorSanitizer")


def sanitizer_report(text):
    """The text from the first sanitizer report in text on, or None."""
    at = [text.find(m) for m in SANITIZER_MARKERS if m in text]
    if not at:
        return None
    start = text.rfind("\n", 0, min(at)) + 1
    return text[start:start + 4000]


def _kill_leftovers():
    for p in _live_procs:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(timeout=5)
            except Exception:
                pass


atexit.register(_kill_leftovers)


def env_path(name, fallback_rel=None):
    """Path from an env var; else (outside ctest) a guess in a build dir."""
    v = os.environ.get(name)
    if v:
        # absolute: the harness runs processes in directories of their own
        # (a gateway in its temp dir), where a path relative to the shell's is wrong
        return os.path.abspath(v)
    if fallback_rel:
        src = source_dir()
        for build in ("build", "build-release", "build-debug", "build-asan"):
            cand = os.path.join(src, build, fallback_rel)
            if os.path.exists(cand):
                return cand
    raise RuntimeError(f"{name} is not set (run through ctest, or export it)")


def source_dir():
    v = os.environ.get("SWITCHYARD_SRC")
    return os.path.abspath(v) if v else os.path.abspath(
        os.path.join(os.path.dirname(__file__), "..", ".."))


def npm_package(spec, cache_name, check_rel):
    """Installs the npm package spec (e.g. "pkg@1.2.3") into .cache/<cache_name>
    of the source tree on first use. Returns (path of check_rel inside that
    cache, None), or (None, why) when npm or the registry is unavailable.

    ctest runs test files in parallel and several of them need the same
    package: the install is serialised by an flock on .cache/<cache_name>.lock
    and only counts once a marker naming spec is written after npm finished,
    so nobody runs a half-installed package (ETXTBSY, a missing optional
    platform dependency)."""
    import fcntl
    root = os.path.join(source_dir(), ".cache")
    cache = os.path.join(root, cache_name)
    path = os.path.join(cache, check_rel)
    marker = os.path.join(cache, ".installed")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, cache_name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(marker) as f:
                if f.read().strip() == spec and os.path.exists(path):
                    return path, None
        except OSError:
            pass
        npm = shutil.which("npm")
        if not npm:
            return None, "npm is not installed"
        os.makedirs(cache, exist_ok=True)
        p = subprocess.run([npm, "install", "--prefix", cache, "--no-audit", "--no-fund", spec],
                           capture_output=True, text=True, timeout=240)
        if p.returncode != 0 or not os.path.exists(path):
            return None, f"npm install {spec} failed: {p.stderr.strip()[-400:]}"
        with open(marker + ".tmp", "w") as f:
            f.write(spec + "\n")
        os.replace(marker + ".tmp", marker)
        return path, None


def admin_call(g, method, path, body=None):
    """A call on the admin surface with a fresh admin token (`switchyard admin token`), once the
    gateway knows the token; returns the first answer that is not 401."""
    tok = g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]
    return wait_for(lambda: (lambda r: r if r.status != 401 else None)(
        http_call(g.port, method, path, body, {"Authorization": f"Bearer {tok}"})), what=f"{path} with the new token")


def admin_get(g, path):
    r = admin_call(g, "GET", path)
    assert r.status == 200, r
    return r


def switchyard_bin():
    return env_path("SWITCHYARD_BIN", "switchyard")


def faulty_bin():
    """The gateway built with libcurl failures on demand (tests/support/fault_curl.c)."""
    return env_path("SWITCHYARD_FAULTY_BIN", os.path.join("tests", "switchyard_faulty"))


def mock_bin():
    return env_path("MOCK_UPSTREAM_BIN", os.path.join("tests", "mock_upstream"))


def free_port():
    """A port that was free a moment ago (the caller retries on a clash)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def closed_port():
    """A loopback port held bound but not listening for the length of the block: a connection to
    it is refused, and no other process (a gateway of another test, the README's run.sh) can
    take it meanwhile. For "nothing answers there" without guessing at a port."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((HOST, 0))
        yield s.getsockname()[1]
    finally:
        s.close()


def port_accepts(port):
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def vm_kib(pid, field):
    """A /proc/PID/status figure in KiB (VmRSS, VmHWM, ...), 0 if absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def wait_for(pred, timeout=WAIT_TIMEOUT, interval=0.05, what="condition"):
    """Polls pred() until it returns something truthy; returns that value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def _stop_proc(proc, sig=signal.SIGTERM, timeout=10.0):
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.send_signal(sig)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _tail(path, n=60):
    try:
        with open(path, "r", errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(none)"


# ---------------------------------------------------------------- HTTP


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers          # dict, lower-case names
        self.body = body                # bytes

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<Response {self.status} {self.body[:300]!r}>"


def parse_sse(raw):
    """Parses an event stream into [{"event": name or None, "data": str, "json": obj or None}]."""
    text = raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    events = []
    for block in text.split("\n\n"):
        name, data, has_data = None, [], False
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
                has_data = True
        if not has_data:
            continue
        d = "\n".join(data)
        try:
            obj = json.loads(d)
        except ValueError:
            obj = None
        events.append({"event": name, "data": d, "json": obj})
    return events


def event_type(ev):
    """The responses-API event type: the event: field, else the data's "type"."""
    if ev["event"]:
        return ev["event"]
    if isinstance(ev["json"], dict):
        t = ev["json"].get("type")
        if isinstance(t, str):
            return t
    return None


def is_error_event(ev):
    """An error in an SSE stream: `event: error`, response.failed, or a data object with "error"."""
    t = event_type(ev)
    if t in ("error", "response.failed"):
        return True
    j = ev["json"]
    return isinstance(j, dict) and "error" in j and j.get("error") is not None and "choices" not in j


def response_text(events):
    """Concatenated text deltas of a responses-API stream."""
    return "".join(e["json"].get("delta", "") for e in events
                   if event_type(e) == "response.output_text.delta" and isinstance(e["json"], dict))


def chat_text(events):
    out = []
    for e in events:
        j = e["json"]
        if isinstance(j, dict):
            for ch in j.get("choices") or []:
                c = (ch.get("delta") or {}).get("content")
                if c:
                    out.append(c)
    return "".join(out)


class RawUpstream:
    """A loopback upstream written by hand, for answers the C mock cannot give. Each
    connection is served in its own thread: one request is read (its head, and its body
    by Content-Length) and handed to answer(conn, head, body), which writes what it
    likes; the connection is closed after. `ended` counts connections over (answered
    or cut by the other side)."""

    def __init__(self):
        self.ended = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def url(self, path="/v1"):
        return f"http://{HOST}:{self.port}{path}"

    def answer(self, conn, head, body):
        raise NotImplementedError

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_request(conn):
        data = b""
        while b"\r\n\r\n" not in data:
            b = conn.recv(65536)
            if not b:
                raise ConnectionError("the request ended inside its head")
            data += b
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(ln.split(b":")[1]) for ln in head.split(b"\r\n")
                       if ln.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            b = conn.recv(65536)
            if not b:
                raise ConnectionError("the request ended inside its body")
            body += b
        return head, body

    def _handle(self, conn):
        with conn:
            try:
                head, body = self._read_request(conn)
                self.answer(conn, head, body)
            except OSError:
                pass
            finally:
                self.ended += 1

    def close(self):
        self.sock.close()


class ScriptedServer:
    """A loopback HTTP server answering each POST with what a test names for its path's last
    segment: answers = {"token": (status, body bytes, trickle seconds between bytes or 0)}, or a
    callable returning that triple; anything else 404. `hits` lists the segments asked, in order.
    For authorization servers, token endpoints and the like that answer the hostile things a
    test wants."""

    def __init__(self, answers):
        self.answers = dict(answers)
        self.hits = []
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                which = self.path.rsplit("/", 1)[-1]
                srv.hits.append(which)
                a = srv.answers.get(which, (404, b"{}", 0))
                status, body, trickle = a() if callable(a) else a
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    if trickle:
                        for b in body:
                            self.wfile.write(bytes([b]))
                            self.wfile.flush()
                            time.sleep(trickle)
                    else:
                        self.wfile.write(body)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def base(self):
        return f"http://{HOST}:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class StreamResult:
    """A whole streamed answer: status, headers, raw bytes, parsed events.
    truncated is True when the connection ended before the body did."""

    def __init__(self, status, headers, raw, truncated):
        self.status = status
        self.headers = headers
        self.raw = raw
        self.truncated = truncated
        self.events = parse_sse(raw)

    def types(self):
        return [event_type(e) for e in self.events]

    def __repr__(self):
        return f"<StreamResult {self.status} truncated={self.truncated} {self.raw[:400]!r}>"


class OpenStream:
    """An HTTP response being read incrementally (for early client close)."""

    def __init__(self, conn, resp):
        self.conn = conn
        self.resp = resp
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.getheaders()}
        self.raw = b""

    def read_some(self):
        """Next bytes (b"" at the end of the body)."""
        try:
            b = self.resp.read1(65536)
        except (http.client.IncompleteRead, ConnectionError, OSError):
            b = b""
        self.raw += b
        return b

    def read_until(self, pred, timeout=REQUEST_TIMEOUT):
        """Reads until pred(raw_so_far) holds; False if the body ended first."""
        deadline = time.monotonic() + timeout
        while not pred(self.raw):
            if time.monotonic() > deadline:
                raise AssertionError("timed out reading the stream")
            if not self.read_some():
                return pred(self.raw)
        return True

    def close(self):
        """Drops the connection (RST if unread data is pending)."""
        sock = self.conn.sock
        try:
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                sock.close()
        except OSError:
            pass
        self.conn.close()


def _request(port, method, path, body=None, headers=None, timeout=REQUEST_TIMEOUT):
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    hdrs = dict(headers or {})
    if body is not None and not isinstance(body, (bytes, bytearray)):
        body = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    conn.request(method, path, body=body, headers=hdrs)
    return conn, conn.getresponse()


def http_call(port, method, path, body=None, headers=None, timeout=REQUEST_TIMEOUT):
    conn, resp = _request(port, method, path, body, headers, timeout)
    try:
        data = resp.read()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
    finally:
        conn.close()


# ---------------------------------------------------------------- mock upstream


class Mock:
    """The mock upstream process. url(name, scenario) is an account base_url."""

    def __init__(self):
        self.proc = None
        self.port = None
        self.start()

    def start(self):
        self.errfile = tempfile.NamedTemporaryFile(prefix="mock-upstream-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([mock_bin(), "--port", "0"], stdout=subprocess.PIPE,
                                     stderr=self.errfile, stdin=subprocess.DEVNULL)
        _live_procs.append(self.proc)
        deadline = time.monotonic() + START_TIMEOUT
        line = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                line = self.proc.stdout.readline()
                if line.startswith(b"listening on "):
                    self.port = int(line.split()[2])
                    return
                if not line:
                    break
            if self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"mock upstream did not start (got {line!r}); stderr:\n{_tail(self.errfile.name)}")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """Stops the mock; returns the text of its stderr."""
        _stop_proc(self.proc)
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()
        text = self.stderr_text()
        try:
            os.unlink(self.errfile.name)
        except OSError:
            pass
        return text

    def stderr_text(self):
        try:
            with open(self.errfile.name, "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def base(self):
        return f"http://{HOST}:{self.port}"

    def url(self, name, scenario="ok", v1=True):
        """http://127.0.0.1:P/acct/<name>/<scenario>/v1 (v1=False: ChatGPT-style, no /v1)."""
        u = f"{self.base()}/acct/{name}/{scenario}"
        return u + "/v1" if v1 else u

    def requests(self, account=None):
        r = http_call(self.port, "GET", "/_requests", timeout=10)
        assert r.status == 200, r
        recs = r.json()
        if account is not None:
            recs = [x for x in recs if x["account"] == account]
        return recs

    def accounts_hit(self):
        """Account names of the recorded requests, in arrival order."""
        return [x["account"] for x in self.requests()]

    def reset(self):
        r = http_call(self.port, "POST", "/_reset", timeout=10)
        assert r.status == 200, r

    def set_usage(self, name, payload, status=200):
        """What account name's usage endpoint answers (until the next reset)."""
        body = payload if isinstance(payload, (str, bytes)) else json.dumps(payload)
        body = body.encode() if isinstance(body, str) else body
        r = http_call(self.port, "POST", f"/_usage/{name}?status={status}", body, timeout=10)
        assert r.status == 200, r

    def usage_polls(self, account=None):
        """The usage endpoint requests recorded since the last reset (not in requests())."""
        r = http_call(self.port, "GET", "/_usage_polls", timeout=10)
        assert r.status == 200, r
        recs = r.json()
        return [x for x in recs if account is None or x["account"] == account]

    def call(self, name, scenario, endpoint, body, v1=True):
        """Calls the mock directly (what the gateway would get)."""
        path = f"/acct/{name}/{scenario}" + ("/v1/" if v1 else "/") + endpoint
        return http_call(self.port, "POST", path, body)

    def blobs_sent(self, account=None):
        """The encrypted_content values the recorded /responses requests carried
        (to account, or to any): dicts with prefix (first 16 chars), by (the
        account that minted it, None if the mock never did), own, len, item,
        item_type, and n/account of the request that carried it."""
        return [dict(b, n=r["n"], account=r["account"]) for r in self.requests(account)
                for b in r.get("blobs") or []]

    def stored(self, name, resp_id, scenario="ok", v1=True, method="GET"):
        """GET (or method="DELETE") /responses/{resp_id} on account name."""
        path = f"/acct/{name}/{scenario}" + ("/v1/" if v1 else "/") + f"responses/{resp_id}"
        return http_call(self.port, method, path)


# ---------------------------------------------------------------- gateway


class PyUpstream:
    """A scriptable upstream in this process, for what the C mock cannot do:
    record whole request bodies, change behaviour mid-test, hold a request
    until the test releases it. base_url() is an OpenAI-style base URL.

    fail_status: answer every request with this status (None = 200);
    hold_next: the next request waits until release() (held is set once it arrived);
    drop_idle: after each answer, wait a moment and close the connection without saying so
    (no Connection: close), as servers do with idle kept-alive connections. connections counts
    the TCP connections accepted."""

    def __init__(self, name):
        self.name = name
        self.lock = threading.Lock()
        self.records = []          # {"path", "body" (bytes), "headers"}
        self.fail_status = None
        self.hold_next = False
        self.drop_idle = False
        self.connections = 0
        self.held = threading.Event()
        self.released = threading.Event()
        up = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                with up.lock:
                    up.connections += 1

            def _body(self):
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            self.rfile.readline()
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_POST(self):
                body = self._body()
                with up.lock:
                    up.records.append({"path": self.path, "body": body,
                                       "headers": {k.lower(): v for k, v in self.headers.items()}})
                    n = len(up.records)
                    hold, up.hold_next = up.hold_next, False
                    status = up.fail_status
                if hold:
                    up.held.set()
                    up.released.wait(60)
                if status:
                    out = json.dumps({"error": {"message": "The server had an error while processing "
                                                "your request.", "type": "server_error",
                                                "param": None, "code": None}}).encode()
                else:
                    out = json.dumps(up._answer(self.path, body, n)).encode()
                self.send_response(status or 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
                if up.drop_idle:
                    self.wfile.flush()
                    time.sleep(0.05)  # the client has parked the connection by now
                    self.close_connection = True

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _answer(self, path, body, n):
        try:
            model = json.loads(body).get("model", "gpt-test")
        except ValueError:
            model = "gpt-test"
        text = f"hello from {self.name}"
        if path.endswith("/chat/completions"):
            return {"id": f"chatcmpl-{self.name}-{n}", "object": "chat.completion", "created": 0,
                    "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}
        return {"id": f"resp_{self.name}_{n}", "object": "response", "created_at": 0,
                "status": "completed", "model": model, "error": None,
                "output": [{"id": f"msg_{self.name}_{n}", "type": "message", "status": "completed",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}}

    def base_url(self):
        return f"http://{HOST}:{self.server.server_address[1]}/v1"

    def count(self):
        with self.lock:
            return len(self.records)

    def release(self):
        self.released.set()

    def close(self):
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


class Gateway:
    """One gateway with its own temp dir, database and logs."""

    # the model poll (GET {base}/models of every account, at start) is off unless a test turns it
    # on (test_model_catalog.py): other tests count the requests their mock upstream got
    DEFAULT_ENV = {"SWITCHYARD_LOG_LEVEL": "debug", "SWITCHYARD_MODEL_POLL_S": "0"}
    PASS_ENV = {"SWITCHYARD_BIN", "MOCK_UPSTREAM_BIN", "SWITCHYARD_SRC", "SWITCHYARD_CODEX_VERSION"}

    def __init__(self, accounts=(), env=None, policies=None, key_name="e2e", serve_args=()):
        self.serve_args = list(serve_args)  # extra `switchyard serve` arguments
        self.dir = tempfile.mkdtemp(prefix="sy-e2e-")
        self.db_path = os.path.join(self.dir, "switchyard.db")
        self.log_path = os.path.join(self.dir, "gateway.log")
        self.trace_path = os.path.join(self.dir, "gateway-trace.log")
        # the gateway's own settings come from the test alone, never from the caller's shell
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("SWITCHYARD_") or k in self.PASS_ENV or k.startswith("SWITCHYARD_E2E_")}
        self.env.update(self.DEFAULT_ENV)
        self.env.update(env or {})
        self.policies = policies
        self.proc = None
        self.port = None
        self.preexec = None  # optional callable run in the child before exec (e.g. a low RLIMIT_NOFILE)
        self.bin = None  # the binary `serve` runs (default switchyard_bin(); e.g. faulty_bin())
        self.accounts = {}
        self.cli_runs = []
        for a in accounts:
            self.add_account(**a)
        self.key = self.add_key(key_name)

    # --- CLI

    def cli(self, *args, check=True):
        p = subprocess.run([switchyard_bin(), *args], capture_output=True, text=True,
                           timeout=60, env=self.env, stdin=subprocess.DEVNULL)
        # kept for the secrets test; the command line itself holds the token, so it is not kept
        self.cli_runs.append((" ".join(args[:2]), p.returncode, p.stdout, p.stderr))
        if check and p.returncode != 0:
            raise AssertionError(f"switchyard {args[0]} {args[1] if len(args) > 1 else ''} "
                                 f"failed rc={p.returncode}: {p.stderr.strip()}")
        return p

    def add_account(self, name, base_url, token, kind=None, sort=None, chatgpt_id=None, args=()):
        extra = list(args)  # further `account add` flags, e.g. ["--model-map", "{...}"]
        args = ["account", "add", "--db", self.db_path, "--name", name,
                "--base-url", base_url, "--token", token]
        if kind is not None:
            args += ["--kind", kind]
        if chatgpt_id is not None:
            args += ["--chatgpt-account-id", chatgpt_id]
        if sort is not None:
            args += ["--sort", str(sort)]
        args += extra
        self.cli(*args)
        self.accounts[name] = token

    def add_key(self, name):
        p = self.cli("key", "add", "--db", self.db_path, "--name", name)
        lines = [ln.strip() for ln in p.stdout.splitlines() if ln.strip()]
        if not lines:
            raise AssertionError("`key add` printed no key")
        return lines[-1]

    # --- process

    def start(self, port=None):
        """Starts `serve` and waits until it is ready: its "listening on" line, written once the
        signal handlers are in. Without port it listens on port 0 and the kernel picks one (read
        back from that line), so no test races another for a port guessed free; with port (a
        restart on the same address) a clash is tried once."""
        args = [self.bin or switchyard_bin(), "serve", "--db", self.db_path, "--listen", f"{HOST}:{port or 0}"]
        if self.policies:
            args += ["--policies", self.policies]
        args += self.serve_args
        log = open(self.log_path, "ab")
        offset = log.tell()
        self.proc = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                     env=self.env, cwd=self.dir, preexec_fn=self.preexec)
        log.close()
        _live_procs.append(self.proc)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            listening = self._listening_port(offset)
            if listening:
                self.port = listening
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        last = f"rc={self.proc.poll()}\n{_tail(self.log_path)}"
        _stop_proc(self.proc, signal.SIGKILL)
        raise AssertionError(f"gateway did not start listening: {last}")

    def _listening_port(self, offset):
        """The port of the "switchyard listening on http://HOST:PORT" line logged past offset."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return None
        m = re.search(r"switchyard listening on http://\S+:(\d+) \(", text)
        return int(m.group(1)) if m else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        _stop_proc(self.proc)

    def kill9(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def restart(self):
        """Stops (if running) and starts again on the same db, same port if it is free."""
        self.stop()
        try:
            return self.start(port=self.port)
        except AssertionError:
            return self.start()

    def sighup(self):
        self.proc.send_signal(signal.SIGHUP)

    def cleanup(self):
        """Stops the gateway and removes its dir; fails on a sanitizer report in its log."""
        self.stop()
        report = sanitizer_report(self.log_text())
        if not os.environ.get("SWITCHYARD_E2E_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
        if report:
            raise AssertionError(f"sanitizer report in the gateway log:\n{report}")

    # --- HTTP

    def _headers(self, key, headers):
        h = {}
        if key is not None:
            h["Authorization"] = f"Bearer {key}"
        h.update(headers or {})
        return h

    def request(self, method, path, body=None, key="default", headers=None, timeout=REQUEST_TIMEOUT):
        key = self.key if key == "default" else key
        return http_call(self.port, method, path, body, self._headers(key, headers), timeout)

    def post(self, path, body, key="default", stream=False, headers=None, timeout=REQUEST_TIMEOUT):
        """POST a JSON body (dict, or raw bytes). stream=True returns a StreamResult."""
        if stream:
            return self.stream(path, body, key=key, headers=headers, timeout=timeout)
        return self.request("POST", path, body, key, headers, timeout)

    def get(self, path, key="default", headers=None, timeout=REQUEST_TIMEOUT):
        return self.request("GET", path, None, key, headers, timeout)

    def open_stream(self, path, body, key="default", headers=None, timeout=REQUEST_TIMEOUT):
        key = self.key if key == "default" else key
        conn, resp = _request(self.port, "POST", path, body, self._headers(key, headers), timeout)
        return OpenStream(conn, resp)

    def stream(self, path, body, key="default", headers=None, timeout=REQUEST_TIMEOUT):
        """Reads a whole streamed answer."""
        s = self.open_stream(path, body, key, headers, timeout)
        truncated = False
        try:
            while True:
                try:
                    b = s.resp.read1(65536)
                except (http.client.IncompleteRead, ConnectionError) as e:
                    if isinstance(e, http.client.IncompleteRead):
                        s.raw += e.partial
                    truncated = True
                    break
                if not b:
                    break
                s.raw += b
        finally:
            s.conn.close()
        return StreamResult(s.status, s.headers, s.raw, truncated)

    # --- files

    def log_text(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def trace_text(self):
        try:
            with open(self.trace_path, "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def db(self):
        """A fresh sqlite connection to the gateway db (rows as sqlite3.Row); close it after use."""
        c = sqlite3.connect(self.db_path, timeout=10)
        c.row_factory = sqlite3.Row
        return c

    def query(self, sql, args=()):
        c = self.db()
        try:
            return [dict(r) for r in c.execute(sql, args).fetchall()]
        finally:
            c.close()

    def request_logs(self):
        """request_logs rows (dicts) in insertion order; [] while the table does not exist."""
        try:
            return self.query("SELECT * FROM request_logs ORDER BY rowid")
        except sqlite3.OperationalError:
            return []

    def wait_request_logs(self, n, timeout=WAIT_TIMEOUT):
        """Waits until at least n request_logs rows exist (the writer thread is async)."""
        return wait_for(lambda: (lambda rows: rows if len(rows) >= n else None)(self.request_logs()),
                        timeout=timeout, what=f"{n} request_logs row(s)")

    def account_id(self, name):
        rows = self.query("SELECT id FROM accounts WHERE name = ?", (name,))
        return rows[0]["id"] if rows else None

    def log_account_name(self, row):
        """The account a request_logs row names (account_name, else via account_id)."""
        if row.get("account_name"):
            return row["account_name"]
        if row.get("account_id"):
            rows = self.query("SELECT name FROM accounts WHERE id = ?", (row["account_id"],))
            return rows[0]["name"] if rows else None
        return None

    def diagnostics(self):
        return (f"--- gateway log ({self.log_path}) ---\n{_tail(self.log_path)}\n"
                f"--- trace ({self.trace_path}) ---\n{_tail(self.trace_path, 40)}")


# ---------------------------------------------------------------- test base


def account(name, base_url, token=None, kind=None, sort=None, chatgpt_id=None, args=()):
    """Account spec for GatewayTest.gateway(); token defaults to a unique-looking secret;
    args: further `switchyard account add` flags."""
    spec = {"name": name, "base_url": base_url, "token": token or f"tok-{name}-{os.urandom(6).hex()}",
            "kind": kind, "sort": sort, "args": tuple(args)}
    if chatgpt_id is not None:
        spec["chatgpt_id"] = chatgpt_id
    return spec


class GatewayTest(unittest.TestCase):
    """Base class: one mock per test class (reset before each test), gateways per test."""

    mock = None

    @classmethod
    def setUpClass(cls):
        cls.mock = Mock()

    @classmethod
    def tearDownClass(cls):
        if cls.mock:
            report = sanitizer_report(cls.mock.stop())
            if report:
                raise AssertionError(f"sanitizer report from the mock upstream:\n{report}")

    def setUp(self):
        if not self.mock.alive():
            err = self.mock.stop()[-3000:]
            type(self).mock = Mock()
            self.fail(f"mock upstream had died; its stderr:\n{err}")
        self.mock.reset()
        self._gateways = []

    def tearDown(self):
        if not self.mock.alive():
            self.fail(f"mock upstream died during the test; its stderr:\n{self.mock.stderr_text()[-3000:]}")

    def policy_copy(self, overrides=None):
        """A temp copy of the bundled policies/ (removed after the test), with
        overrides {file name: text} written over it; returns its path."""
        d = tempfile.mkdtemp(prefix="sy-pol-")
        self.addCleanup(shutil.rmtree, d, True)
        pdir = os.path.join(d, "policies")
        shutil.copytree(os.path.join(source_dir(), "policies"), pdir)
        for name, text in (overrides or {}).items():
            with open(os.path.join(pdir, name), "w") as f:
                f.write(text)
        return pdir

    def gateway(self, accounts=(), env=None, policies=None, start=True):
        """A gateway over the given account specs (see account()); sort defaults to list order."""
        specs = []
        for i, a in enumerate(accounts):
            a = dict(a)
            if a.get("sort") is None:
                a["sort"] = (i + 1) * 10
            specs.append(a)
        g = Gateway(specs, env=env, policies=policies)
        self._gateways.append(g)
        self.addCleanup(g.cleanup)
        if start:
            g.start()
        return g

    # --- assertions shared by the test files

    def assertOpenAIError(self, resp, status=None):
        """resp is an HTTP error whose body is {"error":{"message","type","code"}}; returns the error dict."""
        if status is not None:
            self.assertEqual(resp.status, status, resp)
        try:
            body = resp.json()
        except ValueError:
            self.fail(f"error body is not JSON: {resp.body[:300]!r}")
        self.assertIsInstance(body, dict, resp)
        err = body.get("error")
        self.assertIsInstance(err, dict, f"no error object in {body}")
        for k in ("message", "type", "code"):
            self.assertIn(k, err, f"error lacks {k!r}: {err}")
        self.assertIsInstance(err["message"], str)
        self.assertTrue(err["message"], f"empty error message: {err}")
        self.assertIsInstance(err["type"], str)
        self.assertTrue(err["type"], f"empty error type: {err}")
        self.assertTrue(err["code"] is None or isinstance(err["code"], (str, int)), err)
        ctype = resp.headers.get("content-type", "")
        self.assertIn("application/json", ctype, f"error content-type {ctype!r}")
        return err


# ---------------------------------------------------------------- runner


class _Result(unittest.TextTestResult):
    def _dump(self, test):
        for g in getattr(test, "_gateways", []) or []:
            self.stream.write("\n" + g.diagnostics() + "\n")
        mock = getattr(test, "mock", None)
        if mock is not None:
            err = mock.stderr_text().strip()
            if err:
                self.stream.write(f"--- mock stderr ---\n{err[-3000:]}\n")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._dump(test)

    def addError(self, test, err):
        super().addError(test, err)
        self._dump(test)


def main():
    """Runs the calling file's tests; argv words filter test names (substring).
    Prints "N passed, N failed" last and exits 1 on any failure."""
    module = sys.modules["__main__"]
    suite = unittest.TestLoader().loadTestsFromModule(module)
    filters = [a for a in sys.argv[1:] if not a.startswith("-")]

    def flatten(s):
        for t in s:
            if isinstance(t, unittest.TestSuite):
                yield from flatten(t)
            else:
                yield t

    tests = [t for t in flatten(suite) if not filters or any(f in t.id() for f in filters)]
    runner = unittest.TextTestRunner(verbosity=2, resultclass=_Result, stream=sys.stdout)
    result = runner.run(unittest.TestSuite(tests))
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    passed = max(0, result.testsRun - failed - len(result.skipped) - len(result.expectedFailures))
    sys.stdout.flush()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
