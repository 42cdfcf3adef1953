"""test_hostile_signals.py: signals at the worst moments. A burst of stop signals under
load (the first drains, the second hurries, the rest arrive while the gateway is
committing its request logs) must lose no row of a request whose answer reached its
client; reload and stop signals in the first milliseconds of start-up, before the
loop's handlers exist, must neither kill the gateway nor be lost."""

import http.client
import json
import os
import signal
import subprocess
import threading
import time

from harness import (GatewayTest, HOST, START_TIMEOUT, _live_procs, account, main,
                     switchyard_bin, wait_for)

RESP_BODY = {"model": "gpt-test", "input": "hi"}


def sigpipe_ignored(pid):
    """1 once the process has set SIGPIPE to SIG_IGN (serve does it early, before any of its
    start-up work): from then on the process runs our code, not the loader's."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigIgn:"):
                    return int(line.split()[1], 16) >> (signal.SIGPIPE - 1) & 1
    except OSError:
        pass
    return 0


class SignalTest(GatewayTest):

    def spawn(self, g):
        """Starts g's gateway on a port the kernel picks, without waiting for it to be ready;
        returns the process (g.ready() says when it is, and sets g.port)."""
        args = [switchyard_bin(), "serve", "--db", g.db_path, "--listen", f"{HOST}:0"]
        log = open(g.log_path, "ab")
        offset = log.tell()

        def ready():
            port = g._listening_port(offset)
            if port:
                g.port = port
            return port
        g.ready = ready
        g.proc = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=g.env, cwd=g.dir)
        log.close()
        _live_procs.append(g.proc)
        return g.proc

    def storm_during_start(self, g, sig):
        """Sends sig every half millisecond from the moment serve runs its own code until the
        gateway listens (or exits); returns how many were sent."""
        proc = self.spawn(g)
        wait_for(lambda: sigpipe_ignored(proc.pid) or proc.poll() is not None, timeout=START_TIMEOUT,
                 interval=0.0002, what="serve to start running")
        sent = 0
        deadline = time.monotonic() + START_TIMEOUT
        # the first burst goes whatever the port says: on a loaded machine the gateway may listen
        # (serve_open binds early) before this loop first looks, and a storm of none proves nothing
        first = True
        while proc.poll() is None and (first or not g.ready()) and time.monotonic() < deadline:
            first = False
            for _ in range(20):
                try:
                    proc.send_signal(sig)
                    sent += 1
                except ProcessLookupError:
                    break
                time.sleep(0.0005)
        return sent

    def test_the_service_manager_is_told_ready_after_the_handlers_and_stopping_at_the_drain(self):
        # systemd (Type=notify) sends no reload before READY=1: a SIGHUP in a process's first
        # milliseconds, before any of its code runs, kills it, and the packaged unit reloads with
        # kill -HUP (issue 33). READY=1 comes once the signal handlers are in (the listening line)
        import socket
        import tempfile
        d = tempfile.mkdtemp(prefix="sy-notify-")
        path = os.path.join(d, "notify.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        self.addCleanup(sock.close)
        sock.settimeout(30)
        g = self.gateway([account("a", self.mock.url("a"))], env={"NOTIFY_SOCKET": path}, start=False)
        g.start()
        self.assertEqual(sock.recv(256), b"READY=1")
        self.assertIn("switchyard listening on", g.log_text())  # written before the READY
        g.proc.send_signal(signal.SIGHUP)  # a reload now is handled, not fatal
        self.assertEqual(g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}).status, 200)
        g.proc.send_signal(signal.SIGTERM)
        self.assertEqual(sock.recv(256), b"STOPPING=1")
        self.assertEqual(g.proc.wait(timeout=30), 0)

    def test_a_sighup_storm_during_start_up_does_not_kill_the_gateway(self):
        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        sent = self.storm_during_start(g, signal.SIGHUP)
        self.assertGreater(sent, 0)
        self.assertIsNone(g.proc.poll(), f"the gateway died of SIGHUP during start-up (rc={g.proc.poll()})")
        wait_for(g.ready, what="the gateway to be ready")
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        # a SIGHUP held during start-up is a reload once the loop runs, not lost
        wait_for(lambda: "SIGHUP: policies reloaded" in g.log_text(), what="the held SIGHUP's reload")

    def test_a_sigterm_during_start_up_stops_the_gateway_cleanly_once_started(self):
        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        self.assertGreater(self.storm_during_start(g, signal.SIGTERM), 0)
        rc = g.proc.wait(timeout=30)
        self.assertEqual(rc, 0, f"killed by signal {-rc}" if rc < 0 else f"rc={rc}")
        self.assertIn("stopped", g.log_text())

    def test_a_burst_of_stop_signals_under_load_loses_no_answered_request_log(self):
        g = self.gateway([account("a", self.mock.url("a", "ok,gap=20"))],
                         env={"SWITCHYARD_LOG_LEVEL": "info"})
        answered = {"plain": 0, "stream": 0}
        lock = threading.Lock()
        stop = threading.Event()

        def plain_client():
            conn = http.client.HTTPConnection(HOST, g.port, timeout=30)
            while not stop.is_set():
                try:
                    conn.request("POST", "/v1/responses", json.dumps(RESP_BODY),
                                 {"Authorization": f"Bearer {g.key}", "Content-Type": "application/json"})
                    r = conn.getresponse()
                    body = r.read()
                except (OSError, http.client.HTTPException):
                    return
                if r.status == 200 and b"hello from a" in body:
                    with lock:
                        answered["plain"] += 1

        def stream_client():
            while not stop.is_set():
                conn = http.client.HTTPConnection(HOST, g.port, timeout=30)
                try:
                    conn.request("POST", "/v1/responses", json.dumps(dict(RESP_BODY, stream=True)),
                                 {"Authorization": f"Bearer {g.key}", "Content-Type": "application/json"})
                    r = conn.getresponse()
                    if r.status == 200:  # committed to the client: its row is owed, whatever happens next
                        with lock:
                            answered["stream"] += 1
                    r.read()
                except (OSError, http.client.HTTPException):
                    return
                finally:
                    conn.close()

        threads = [threading.Thread(target=plain_client) for _ in range(6)]
        threads += [threading.Thread(target=stream_client) for _ in range(4)]
        for t in threads:
            t.start()
        wait_for(lambda: answered["plain"] >= 200 and answered["stream"] >= 8, timeout=60,
                 what="load to build up")
        # a stop signal every 2 ms until the process is gone: the first drains, the second
        # hurries, the rest arrive while it closes its connections and commits
        sent = 0
        deadline = time.monotonic() + 30
        while g.proc.poll() is None and time.monotonic() < deadline:
            try:
                g.proc.send_signal(signal.SIGTERM)
                sent += 1
            except ProcessLookupError:
                break
            time.sleep(0.002)
        stop.set()
        for t in threads:
            t.join(30)
        rc = g.proc.wait(timeout=30)
        self.assertGreaterEqual(sent, 3)
        rows = g.request_logs()
        ok_plain = sum(1 for r in rows if not r["stream"] and r["status"] == 200)
        streams = sum(1 for r in rows if r["stream"])
        why = f"answered {answered}, rows: {ok_plain} plain 200, {streams} streams; rc={rc} after {sent} SIGTERMs"
        self.assertGreaterEqual(ok_plain, answered["plain"], why)
        self.assertGreaterEqual(streams, answered["stream"], why)
        self.assertEqual(rc, 0, why)


if __name__ == "__main__":
    main()
