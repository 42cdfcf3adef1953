"""test_upstream_h2c.py: SWITCHYARD_UPSTREAM_H2C, http:// upstreams spoken to in cleartext
HTTP/2 by prior knowledge, their streams sharing one connection; and with the setting off,
the same upstream spoken to in HTTP/1.1 as before. The upstream is bench/h2c_upstream.cjs
(Node.js's built-in http2; it serves HTTP/1.1 on the same port and counts the requests of
each protocol and its HTTP/2 sessions). Skipped only when node is not installed."""

import os
import resource
import shutil
import subprocess

from harness import (GatewayTest, HOST, account, chat_text, http_call, main, source_dir, wait_for)

CHAT = {"model": "gpt-bench", "messages": [{"role": "user", "content": "hi"}]}
TEXT = "Hello from the fast mock upstream, bench."


class H2cUpstream:
    """bench/h2c_upstream.cjs on a free port."""

    def __init__(self, node):
        script = os.path.join(source_dir(), "bench", "h2c_upstream.cjs")
        self.proc = subprocess.Popen([node, script, "--host", HOST, "--port", "0"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.close()
            raise AssertionError(f"h2c_upstream did not start: {line!r}")
        self.port = int(line.split()[2])

    def base_url(self):
        return f"http://{HOST}:{self.port}/v1"

    def stats(self):
        r = http_call(self.port, "GET", "/_stats")
        assert r.status == 200, r
        return r.json()

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class UpstreamH2cTest(GatewayTest):
    def setUp(self):
        super().setUp()
        node = shutil.which("node")
        if not node:
            self.skipTest("node is not installed: the h2c upstream (bench/h2c_upstream.cjs) needs it")
        self.up = H2cUpstream(node)
        self.addCleanup(self.up.close)

    def h2c_gateway(self, on):
        env = {"SWITCHYARD_UPSTREAM_H2C": "1"} if on else {}
        return self.gateway([account("h2", self.up.base_url())], env=env)

    def test_h2c_plain_and_streamed_requests_go_over_http2(self):
        g = self.h2c_gateway(True)
        r = g.post("/v1/chat/completions", CHAT)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["choices"][0]["message"]["content"], TEXT)
        s = g.post("/v1/chat/completions", dict(CHAT, stream=True), stream=True)
        self.assertEqual(s.status, 200)
        self.assertFalse(s.truncated)
        self.assertEqual(chat_text(s.events), TEXT)
        self.assertIn(b"data: [DONE]", s.raw)
        # a held stream: deltas written one by one, 100 ms apart, relayed as they come
        h = g.post("/v1/chat/completions", dict(CHAT, stream=True, bench_hold_ms=400, bench_interval_ms=100),
                   stream=True)
        self.assertEqual(h.status, 200)
        self.assertEqual(h.raw.count(b'"bench_t":'), 3, h.raw)
        self.assertIn(b"data: [DONE]", h.raw)
        st = self.up.stats()
        self.assertEqual((st["requests_h2"], st["requests_h1"]), (3, 0), st)
        # three requests one after another: the later two reused the first one's connection
        self.assertEqual(st["h2_sessions_total"], 1, st)

    def test_h2c_concurrent_streams_share_a_connection(self):
        g = self.h2c_gateway(True)
        n = 24
        body = dict(CHAT, stream=True, bench_hold_ms=120000, bench_interval_ms=60000)
        streams = [g.open_stream("/v1/chat/completions", body) for _ in range(n)]
        try:
            for s in streams:
                self.assertEqual(s.status, 200)
                self.assertTrue(s.read_until(lambda raw: b'"content":"Hello"' in raw))
            st = self.up.stats()
            self.assertEqual(st["streams_open"], n, st)
            self.assertEqual(st["requests_h2"], n, st)
            self.assertLess(st["h2_sessions_total"], n, st)
            self.assertEqual(st["h2_sessions_open"], 1, st)
        finally:
            for s in streams:
                s.close()
        # the clients went away: the shared connection stays and carries the next request;
        # each of their upstream streams was reset (libcurl 7.88 sends the resets with the
        # connection's next frames, here that request's: docs/configuration.md)
        wait_for(lambda: g.query("SELECT COUNT(*) AS n FROM request_logs")[0]["n"] >= n,
                 what="the gateway to log the closed streams")
        r = g.post("/v1/chat/completions", CHAT)
        self.assertEqual(r.status, 200, r)
        wait_for(lambda: self.up.stats()["streams_open"] == 0, what="the upstream streams to be reset")
        st = self.up.stats()
        self.assertEqual((st["h2_sessions_total"], st["h2_sessions_open"], st["requests_h2"]), (1, 1, n + 1), st)

    def test_h2c_off_speaks_http1_to_the_same_upstream(self):
        g = self.h2c_gateway(False)
        r = g.post("/v1/chat/completions", CHAT)
        self.assertEqual(r.status, 200, r)
        s = g.post("/v1/chat/completions", dict(CHAT, stream=True), stream=True)
        self.assertEqual(chat_text(s.events), TEXT)
        st = self.up.stats()
        self.assertEqual((st["requests_h1"], st["requests_h2"], st["h2_sessions_total"]), (2, 0, 0), st)

    def test_h2c_connection_cap_budgets_one_descriptor_per_client(self):
        def low_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (1064, 1064))
        caps = []
        for on in (False, True):
            g = self.gateway([account("h2", self.up.base_url())], start=False,
                             env={"SWITCHYARD_UPSTREAM_H2C": "1" if on else "0"})
            g.preexec = low_limit
            g.start()
            caps.append(g.get("/health", key=None).json()["connections"]["cap"])
        # HTTP/1.1: (1064 - 64) / 2; h2c: (1064 - 64) less a fiftieth
        self.assertEqual(caps, [500, 980])

    def test_h2c_setting_rejects_values_other_than_0_and_1(self):
        g = self.gateway([account("h2", self.up.base_url())], env={"SWITCHYARD_UPSTREAM_H2C": "yes"}, start=False)
        with self.assertRaises(AssertionError):
            g.start()
        self.assertIn("SWITCHYARD_UPSTREAM_H2C=yes", g.log_text())


if __name__ == "__main__":
    main()
