"""test_retention.py: the files on disk stay bounded (issue 24, "Logs you
can search": retention and rotation). The request logs are swept by the
store's writer thread past request_log_max_rows (the oldest first) and past
request_log_max_days; gateway-trace.log rotates past trace_max_bytes and
keeps trace_files rotated files. Settings come from the environment or
`switchyard config set` on a running gateway, as the others do."""

import glob
import os
import sqlite3
import time

from harness import GatewayTest, account, http_call, main, wait_for

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


class RetentionTest(GatewayTest):

    def rows(self, g):
        return g.query("SELECT count(*) AS n, min(id) AS lo, max(id) AS hi FROM request_logs")[0]

    def test_request_logs_past_max_rows_are_swept_oldest_first_when_the_setting_changes(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        for _ in range(1100):
            self.assertEqual(g.post("/v1/chat/completions", CHAT).status, 200)
        g.wait_request_logs(1100)
        self.assertEqual(self.rows(g)["n"], 1100)  # the default keeps a million
        g.cli("config", "set", "--db", g.db_path, "request_log_max_rows", "1000")
        wait_for(lambda: self.rows(g)["n"] == 1000, what="the sweep down to 1000 rows")
        r = self.rows(g)
        self.assertEqual(r["hi"] - r["lo"], 999, "the newest 1000 are kept")
        self.assertIn("request log rows kept is now 1000", g.log_text())
        bad = g.cli("config", "set", "--db", g.db_path, "request_log_max_rows", "999", check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("1000 to 1000000000", bad.stderr)

    def test_request_logs_older_than_max_days_are_swept_at_the_next_commit(self):
        g = self.gateway([account("a", self.mock.url("a"))], env={"SWITCHYARD_REQUEST_LOG_MAX_DAYS": "7"}, start=False)
        g.start()
        self.assertEqual(g.post("/v1/chat/completions", CHAT).status, 200)
        g.wait_request_logs(1)
        g.stop()
        db = sqlite3.connect(g.db_path)
        old = time.time() - 8 * 86400
        cols = "endpoint, model, stream, account_name, status, attempts, latency_ms, route_strategy, error_class"
        db.execute(f"INSERT INTO request_logs(ts, {cols}) SELECT ?, {cols} FROM request_logs", (old,))
        db.execute(f"INSERT INTO request_logs(ts, {cols}) SELECT ?, {cols} FROM request_logs WHERE ts > ?",
                   (time.time() - 6 * 86400, old + 1))
        db.commit()
        db.close()
        self.assertEqual(self.rows(g)["n"], 3)
        t0 = time.time()
        g.start()
        self.assertEqual(g.post("/v1/chat/completions", CHAT).status, 200)
        # the limits are set as the gateway starts, and the writer sweeps at its first commit: with this
        # request's row, or before it when that row comes later than the writer's first window (a loaded
        # machine). Both awaited: the 8-day-old row gone and the new row in.
        wait_for(lambda: g.query("SELECT count(*) AS n FROM request_logs WHERE ts < ?",
                                 (time.time() - 7 * 86400,))[0]["n"] == 0, what="the 8-day-old row swept")
        wait_for(lambda: g.query("SELECT count(*) AS n FROM request_logs WHERE ts >= ?", (t0,))[0]["n"] == 1,
                 what="the new request's row")
        self.assertEqual(self.rows(g)["n"], 3, "the 6-day-old row, the first one and the new one stay")

    def test_health_and_status_show_the_disk_the_gateway_uses(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        self.assertEqual(g.post("/v1/chat/completions", CHAT).status, 200)

        def disk():
            d = http_call(g.port, "GET", "/health").json()["disk"]
            return d if d["db_bytes"] > 0 and d["trace_bytes"] > 0 else None
        d = wait_for(disk, what="the writer's and the trace's figures")
        self.assertGreater(d["free_bytes"], 0)
        out = g.cli("status", "--db", g.db_path).stdout
        self.assertRegex(out, r"disk: database [0-9.]+ [kMG]B \(\+ WAL [0-9.]+ [kMG]B\), trace logs [0-9.]+ [kMG]B; "
                              r"[0-9.]+ [kMG]B free")

    def test_trace_log_rotates_past_trace_max_bytes_and_keeps_trace_files(self):
        g = self.gateway([account("a", self.mock.url("a"))],
                         env={"SWITCHYARD_TRACE_MAX_BYTES": "65536", "SWITCHYARD_TRACE_FILES": "2"})
        n = 0
        while len(glob.glob(g.trace_path + ".2")) == 0 or n < 600:
            self.assertEqual(g.post("/v1/chat/completions", CHAT).status, 200)
            n += 1
            self.assertLess(n, 5000, "the trace never rotated twice")
        # the trace thread writes (and rotates: renames, then opens the new file) up to 10 ms after the
        # events; the last request's REQUEST_FINAL is the last line, so once it is in the live file no
        # rotation is under way while the files are listed (req ids count the proxied requests from 1)
        wait_for(lambda: f"REQUEST_FINAL req={n} " in g.trace_text(), what="the last request's trace line")
        files = sorted(glob.glob(g.trace_path + "*"))
        self.assertEqual(files, [g.trace_path, g.trace_path + ".1", g.trace_path + ".2"], "trace_files = 2 kept")
        for f in files[1:]:
            self.assertLessEqual(os.path.getsize(f), 65536)
            with open(f) as fh:
                text = fh.read()
            self.assertTrue(text.endswith("\n"), "a rotation never splits a line")
            self.assertIn("REQUEST_FINAL", text)
        self.assertEqual(os.stat(g.trace_path).st_mode & 0o777, 0o600)


if __name__ == "__main__":
    main()
