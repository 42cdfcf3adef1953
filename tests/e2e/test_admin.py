"""test_admin.py: the admin surface end to end: who may use it (the admin
token, not a platform key; loopback only unless --admin-listen), each read
(/admin/api/overview, accounts, keys, requests with their attempts, stats,
timeline, policy) and each action (enable, disable, reset cooldown, prefer,
strategy and rotation, policy reload), /metrics checked by promtool, the
dashboard's files, and the `status` and `logs` commands.

Which account served is read from x-switchyard-account; waits poll for a
state, never a duration."""

import hashlib
import http.client
import json
import time
import os
import shutil
import socket
import subprocess

from harness import (GatewayTest, PyUpstream, Response, account, http_call, main, source_dir,
                     switchyard_bin, wait_for)

BODY = {"model": "gpt-test", "input": "hi"}


def admin_token(g):
    return g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]


def call(g, method, path, body=None, token=None, port=None, host=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if host:
        conn = http.client.HTTPConnection(host, port or g.port, timeout=30)
        conn.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                     headers=dict(headers, **({"Content-Type": "application/json"} if body is not None else {})))
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
    return http_call(port or g.port, method, path, body, headers)


def non_loopback_ip():
    """This machine's address on a non-loopback interface, or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route
        ip = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if ip.startswith("127.") else ip


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class AdminTest(GatewayTest):

    def pool(self, first_scenario="status=429"):
        """Accounts a (first: the key prefers it) and b; an admin token."""
        g = self.gateway([account("a", self.mock.url("a", first_scenario)),
                          account("b", self.mock.url("b", "ok,primary=40,secondary=70"))], start=False)
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "a")
        tok = admin_token(g)
        g.start()
        return g, tok

    def accounts(self, g, tok):
        r = call(g, "GET", "/admin/api/accounts", token=tok)
        self.assertEqual(r.status, 200, r)
        return {a["name"]: a for a in r.json()["accounts"]}

    # ------------------------------------------------------------ access

    def test_admin_api_wants_the_admin_token_and_refuses_a_platform_key(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        err = self.assertOpenAIError(call(g, "GET", "/admin/api/accounts", token="anything"), 401)
        self.assertIn("switchyard admin token", err["message"])  # none set yet: say how
        tok = admin_token(g)
        wait_for(lambda: call(g, "GET", "/admin/api/accounts", token=tok).status == 200,
                 what="the gateway to pick up the new admin token")
        self.assertEqual(self.assertOpenAIError(call(g, "GET", "/admin/api/accounts"), 401)["code"],
                         "missing_admin_token")
        self.assertEqual(self.assertOpenAIError(call(g, "GET", "/admin/api/accounts", token=tok + "x"), 401)["code"],
                         "invalid_admin_token")
        self.assertEqual(self.assertOpenAIError(call(g, "POST", "/admin/api/policy/reload", {}, token=g.key),
                                                403)["code"], "platform_key_not_admin")
        # the admin token is not a platform key either
        self.assertOpenAIError(g.post("/v1/responses", BODY, key=tok), 401)
        # asked again it is the same one (its file beside the database): looking does not rotate it
        self.assertEqual(admin_token(g), tok)
        path = g.db_path + ".admin-token"
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        with open(path) as f:
            self.assertEqual(f.read().strip(), tok)
        # rotation, asked for: the new token works and the old one stops
        new = g.cli("admin", "token", "--rotate", "--db", g.db_path).stdout.strip().splitlines()[-1]
        self.assertNotEqual(new, tok)
        wait_for(lambda: call(g, "GET", "/admin/api/keys", token=new).status == 200, what="the rotated token")
        self.assertOpenAIError(call(g, "GET", "/admin/api/keys", token=tok), 401)
        stored = g.query("SELECT hash FROM admin_token")
        self.assertEqual(len(stored), 1)
        self.assertNotIn(new, json.dumps(stored))
        self.assertNotIn(new, g.log_text())

    def test_admin_surface_refuses_non_loopback_clients(self):
        ip = non_loopback_ip()
        if not ip:
            self.skipTest("this machine has no non-loopback IPv4 address to connect from")
        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        tok = admin_token(g)
        g.serve_args = ["--listen", "0.0.0.0:0"]  # after the harness's own --listen: this one counts
        g.start()
        port = g.port
        for path in ("/admin/api/accounts", "/metrics", "/admin/"):
            r = call(g, "GET", path, token=tok, host=ip, port=port)
            self.assertEqual(self.assertOpenAIError(r, 403)["code"], "admin_loopback_only", path)
        # the API itself still serves that client, and loopback still gets the admin surface
        self.assertEqual(call(g, "POST", "/v1/responses", BODY, token=g.key, host=ip, port=port).status, 200)
        self.assertEqual(call(g, "GET", "/admin/api/accounts", token=tok, port=port).status, 200)

    def test_admin_listen_moves_the_admin_surface_to_its_own_address(self):
        ip = non_loopback_ip()
        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        tok = admin_token(g)
        # the admin listener takes no port 0 (0 means "on the gateway listener"): a port free a
        # moment ago, tried again on the rare clash with another process
        for attempt in range(5):
            aport = free_port()
            g.serve_args = ["--admin-listen", f"{'0.0.0.0' if ip else '127.0.0.1'}:{aport}"]
            try:
                g.start()
                break
            except AssertionError:
                if attempt == 4 or "cannot listen for the admin surface" not in g.log_text():
                    raise
        # not on the gateway listener any more
        self.assertOpenAIError(call(g, "GET", "/admin/api/accounts", token=tok), 404)
        self.assertOpenAIError(call(g, "GET", "/metrics"), 404)
        # on the admin listener, to any client that reaches it, still with the token
        host = ip or "127.0.0.1"
        self.assertEqual(call(g, "GET", "/admin/api/accounts", token=tok, host=host, port=aport).status, 200)
        self.assertOpenAIError(call(g, "GET", "/admin/api/accounts", host=host, port=aport), 401)
        self.assertEqual(call(g, "GET", "/metrics", host=host, port=aport).status, 200)
        self.assertOpenAIError(call(g, "POST", "/v1/responses", BODY, token=g.key, host=host, port=aport), 404)

    def assertAdminRoutesListed(self, r):
        err = self.assertOpenAIError(r, 404)
        self.assertEqual(err["code"], "unknown_url")
        self.assertIn("unknown admin API path", err["message"])
        for route in ("GET /admin/api/accounts", "GET /admin/api/overview", "POST /admin/api/accounts/enable",
                      "POST /admin/api/policy/reload"):
            self.assertIn(route, err["message"])
        self.assertNotIn("/v1/", err["message"])

    def test_a_mistyped_admin_api_path_lists_the_admin_routes(self):
        # issue 34: GET /admin/api/acounts was answered with the list of /v1 endpoints
        g = self.gateway([account("a", self.mock.url("a"))])
        tok = admin_token(g)
        for method, path in (("GET", "/admin/api/acounts"), ("POST", "/admin/api/accounts/enabel"),
                             ("GET", "/admin/api"), ("GET", "/admin/api/")):
            self.assertAdminRoutesListed(call(g, method, path, token=tok))
        self.assertIn("/v1/responses", self.assertOpenAIError(call(g, "GET", "/v1/respnses"), 404)["message"])
        # on an admin listener of its own too
        g.stop()
        for attempt in range(5):
            aport = free_port()
            g.serve_args = ["--admin-listen", f"127.0.0.1:{aport}"]
            try:
                g.start()
                break
            except AssertionError:
                if attempt == 4 or "cannot listen for the admin surface" not in g.log_text():
                    raise
        self.assertAdminRoutesListed(call(g, "GET", "/admin/api/acounts?x=1", token=tok, host="127.0.0.1", port=aport))
        self.assertIn("this is the admin listener",
                      self.assertOpenAIError(call(g, "GET", "/nothing", host="127.0.0.1", port=aport), 404)["message"])

    # ------------------------------------------------------------ reads

    def test_a_429_failover_shows_in_accounts_and_requests_with_its_attempts(self):
        g, tok = self.pool()
        r = g.post("/v1/responses", BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["x-switchyard-account"], "b")
        accts = self.accounts(g, tok)
        self.assertEqual(accts["a"]["state"], "cooling")
        self.assertGreater(accts["a"]["cooldown_remaining_s"], 0)
        self.assertEqual(accts["a"]["ladder_step"], 1)
        self.assertEqual(accts["a"]["last_error"], "rate_limit")
        self.assertEqual(accts["b"]["state"], "available")
        self.assertEqual(accts["b"]["inflight"], 0)
        for field in ("usage", "health", "breaker", "max_concurrency", "enabled"):
            self.assertIn(field, accts["a"])
        pw, sw = accts["b"]["usage"]["primary"], accts["b"]["usage"]["secondary"]
        self.assertEqual((pw["used_pct"], pw["window_s"], sw["used_pct"], sw["window_s"]), (40, 18000, 70, 604800))
        self.assertGreater(pw["resets_in_s"], 0)
        self.assertIsNone(accts["a"]["usage"]["primary"]["used_pct"])
        reqs = wait_for(lambda: call(g, "GET", "/admin/api/requests", token=tok).json()["requests"] or None,
                        what="the request in the API")
        q = reqs[0]
        self.assertEqual((q["status"], q["account"], q["attempts"], q["key"]), (200, "b", 2, "e2e"))
        self.assertEqual([(t["account"], t["outcome"], t["class"], t["status"]) for t in q["tried"]],
                         [("a", "failover", "rate_limit", 429), ("b", "ok", "", 200)])
        self.assertEqual(q["tried"][0]["model"], "gpt-test")
        # filters: by account (served by or tried on), failed only, key, status
        self.assertEqual(len(call(g, "GET", "/admin/api/requests?account=a", token=tok).json()["requests"]), 1)
        self.assertEqual(call(g, "GET", "/admin/api/requests?failed=1", token=tok).json()["requests"], [])
        self.assertEqual(len(call(g, "GET", "/admin/api/requests?key=e2e&status=200", token=tok).json()["requests"]), 1)
        self.assertEqual(call(g, "GET", "/admin/api/requests?key=other", token=tok).json()["requests"], [])

    def test_requests_page_back_and_filter_failed(self):
        g = self.gateway([account("a", self.mock.url("a", "status=400"))], start=False)
        tok = admin_token(g)
        g.start()
        for _ in range(5):
            self.assertEqual(g.post("/v1/responses", BODY).status, 400)
        g.wait_request_logs(5)
        page = call(g, "GET", "/admin/api/requests?limit=2&failed=true", token=tok).json()
        self.assertEqual(len(page["requests"]), 2)
        self.assertEqual(page["requests"][0]["tried"][0]["outcome"], "returned")
        ids = [q["id"] for q in page["requests"]]
        self.assertEqual(ids, sorted(ids, reverse=True))
        rest = call(g, "GET", f"/admin/api/requests?limit=10&before={page['next_before']}", token=tok).json()
        self.assertEqual([q["id"] for q in rest["requests"]], list(range(ids[-1] - 1, 0, -1)))
        self.assertIsNone(rest["next_before"])

    def test_a_filter_that_matches_little_pages_through_the_log_in_bounded_steps(self):
        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        tok = admin_token(g)
        g.start()
        self.assertEqual(g.post("/v1/responses", BODY, key=None).status, 401)  # creates nothing in the log
        # one failed request, then 25 000 good ones (written straight into the log; recent, so the
        # request log retention, 90 days by default, keeps them)
        c = g.db()
        row = ("INSERT INTO request_logs(ts, endpoint, model, stream, account_name, status, attempts, latency_ms,"
               " route_strategy, error_class) VALUES (?, '/v1/responses', 'm', 0, 'a', ?, 1, 1, 'ordered', '')")
        t0 = time.time() - 86400
        c.execute(row, (t0, 502))
        c.executemany(row, [(t0 + 1.0 + i / 1000, 200) for i in range(25000)])
        c.commit()
        c.close()
        page = call(g, "GET", "/admin/api/requests?failed=1&limit=5", token=tok).json()
        self.assertEqual(page["requests"], [])  # the newest 20 000 rows hold no failure
        self.assertEqual(page["next_before"], 25001 - 20000 + 1)
        page = call(g, "GET", f"/admin/api/requests?failed=1&limit=5&before={page['next_before']}", token=tok).json()
        self.assertEqual([(q["id"], q["status"]) for q in page["requests"]], [(1, 502)])
        self.assertIsNone(page["next_before"])
        # unfiltered pages are not bounded (they stop at the limit anyway)
        self.assertEqual(len(call(g, "GET", "/admin/api/requests?limit=3", token=tok).json()["requests"]), 3)

    def test_stats_timeline_keys_policy_and_overview(self):
        g, tok = self.pool()
        for _ in range(2):
            self.assertEqual(g.post("/v1/responses", BODY).status, 200)
        g.wait_request_logs(2)
        st = call(g, "GET", "/admin/api/stats", token=tok).json()
        by = {r["name"]: r for r in st["by_account"]}
        self.assertEqual((by["b"]["requests"], by["b"]["attempts"], by["b"]["total_tokens"] > 0), (2, 2, True))
        self.assertEqual((by["a"]["requests"], by["a"]["attempts"], by["a"]["failovers"]), (0, 1, 1))
        self.assertEqual([(r["name"], r["requests"], r["failovers"]) for r in st["by_key"]], [("e2e", 2, 1)])
        self.assertEqual([(r["name"], r["requests"]) for r in st["by_model"]], [("gpt-test", 2)])
        later = call(g, "GET", f"/admin/api/stats?since={st['until'] + 60}", token=tok).json()
        self.assertEqual(later["by_account"], [])
        tl = call(g, "GET", "/admin/api/timeline", token=tok).json()
        self.assertEqual((tl["bucket_s"], tl["source"]), (60, "memory"))
        self.assertEqual(sum(b["requests"] for b in tl["buckets"]), 2)
        self.assertEqual(sum(b["failovers"] for b in tl["buckets"]), 1)
        db = call(g, "GET", "/admin/api/timeline?minutes=120", token=tok).json()
        self.assertEqual(db["source"], "database")
        self.assertEqual([(sum(b["requests"] for b in x["buckets"]), sum(b["failovers"] for b in x["buckets"]))
                          for x in (tl, db)], [(2, 1), (2, 1)])
        self.assertOpenAIError(call(g, "GET", "/admin/api/timeline?bucket=0", token=tok), 400)
        keys = call(g, "GET", "/admin/api/keys", token=tok).json()["keys"]
        self.assertEqual([(k["name"], k["preferred_account"], k["revoked"]) for k in keys], [("e2e", "a", False)])
        self.assertTrue(g.key.startswith(keys[0]["prefix"]))
        pol = call(g, "GET", "/admin/api/policy", token=tok).json()
        self.assertEqual(pol["source"], "embedded")
        self.assertEqual(sorted(f["hook"] for f in pol["files"]),
                         ["alert", "breaker", "budget", "classify", "cooldown", "dialect", "exhausted", "first_token",
                          "guard", "order", "price", "strip"])
        with open(os.path.join(source_dir(), "policies", "order.lua"), "rb") as f:
            want = hashlib.sha256(f.read()).hexdigest()
        self.assertEqual([f["sha256"] for f in pol["files"] if f["hook"] == "order"], [want])
        ov = call(g, "GET", "/admin/api/overview", token=tok).json()
        self.assertEqual((ov["strategy"], ov["accounts"]["total"], ov["accounts"]["cooling"]), ("ordered", 2, 1))
        # a restart keeps the chart's hour (read back from the request log)
        g.restart()
        tl = call(g, "GET", "/admin/api/timeline", token=tok).json()
        self.assertEqual((sum(b["requests"] for b in tl["buckets"]), sum(b["failovers"] for b in tl["buckets"])), (2, 1))
        g.post("/v1/responses", BODY)
        tl = call(g, "GET", "/admin/api/timeline", token=tok).json()
        self.assertEqual(sum(b["requests"] for b in tl["buckets"]), 3)
        self.assertEqual((ov["since_start"]["requests"], ov["since_start"]["failovers"]), (2, 1))
        # nothing the API says holds an account token or the platform key
        blob = "".join(call(g, "GET", p, token=tok).text for p in
                       ("/admin/api/accounts", "/admin/api/keys", "/admin/api/requests", "/admin/api/stats",
                        "/admin/api/overview", "/admin/api/policy", "/metrics"))
        for secret in list(g.accounts.values()) + [g.key]:
            self.assertNotIn(secret, blob)

    # ------------------------------------------------------------ actions

    def test_reset_cooldown_sends_the_next_request_to_the_account(self):
        up = PyUpstream("a")
        self.addCleanup(up.close)
        up.fail_status = 429
        g = self.gateway([account("a", up.base_url()), account("b", self.mock.url("b", "ok"))], start=False)
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "a")
        tok = admin_token(g)
        g.start()
        self.assertEqual(g.post("/v1/responses", BODY).headers["x-switchyard-account"], "b")
        up.fail_status = None
        self.assertEqual(g.post("/v1/responses", BODY).headers["x-switchyard-account"], "b")  # a still cools
        r = call(g, "POST", "/admin/api/accounts/reset", {"account": "a"}, token=tok)
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.json()["account"]["state"], r.json()["account"]["ladder_step"]), ("available", 0))
        self.assertEqual(g.post("/v1/responses", BODY).headers["x-switchyard-account"], "a")
        self.assertIn("admin: reset_cooldown a", g.log_text())
        wait_for(lambda: g.query("SELECT cooldown_until FROM account_state s JOIN accounts a ON a.id = s.account_id"
                                 " WHERE a.name = 'a' AND cooldown_until = 0") or None, what="the reset persisted")

    def test_disable_enable_and_prefer_steer_the_next_request(self):
        g, tok = self.pool("ok")
        self.assertEqual(g.post("/v1/responses", BODY).headers["x-switchyard-account"], "a")
        reloads = g.log_text().count("pool: reloaded")
        self.assertEqual(call(g, "POST", "/admin/api/accounts/disable", {"account": "a"}, token=tok).status, 200)
        self.assertEqual(self.accounts(g, tok)["a"]["state"], "disabled")
        self.assertEqual(g.post("/v1/responses", BODY).headers["x-switchyard-account"], "b")
        wait_for(lambda: g.query("SELECT 1 FROM accounts WHERE name = 'a' AND enabled = 0") or None,
                 what="the disable written to the database")
        # its commit moved config_version: the pool reloads it from the database
        wait_for(lambda: g.log_text().count("pool: reloaded") > reloads, what="the reload of the written disable")
        self.assertEqual(g.post("/v1/responses", BODY).headers["x-switchyard-account"], "b")  # still, after reload
        self.assertEqual(call(g, "POST", "/admin/api/accounts/enable", {"account": "a"}, token=tok).status, 200)
        self.assertEqual(g.post("/v1/responses", BODY).headers["x-switchyard-account"], "a")
        key_id = call(g, "GET", "/admin/api/keys", token=tok).json()["keys"][0]["id"]
        r = call(g, "POST", "/admin/api/keys/prefer", {"key": key_id, "account": "b"}, token=tok)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(g.post("/v1/responses", BODY).headers["x-switchyard-account"], "b")
        wait_for(lambda: g.query("SELECT 1 FROM platform_keys WHERE preferred_account_id = ?",
                                 (g.account_id("b"),)) or None, what="the preference persisted")
        self.assertEqual(call(g, "POST", "/admin/api/keys/prefer", {"key": "e2e", "account": None}, token=tok).status, 200)
        self.assertIsNone(call(g, "GET", "/admin/api/keys", token=tok).json()["keys"][0]["preferred_account"])
        self.assertOpenAIError(call(g, "POST", "/admin/api/accounts/disable", {"account": "nope"}, token=tok), 404)
        self.assertOpenAIError(call(g, "POST", "/admin/api/accounts/disable", {}, token=tok), 400)
        self.assertOpenAIError(call(g, "GET", "/admin/api/accounts/disable", token=tok), 405)
        log = g.log_text()
        for line in ("admin: disable a", "admin: enable a", "admin: prefer key e2e -> b", "admin: prefer key e2e -> (none)"):
            self.assertIn(line, log)
        wait_for(lambda: "ADMIN_ACTION action=disable" in g.trace_text(), what="the disable in the trace")

    def test_settings_change_strategy_and_rotation(self):
        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b"))], start=False)
        tok = admin_token(g)
        g.start()
        r = call(g, "POST", "/admin/api/settings", {"strategy": "rr", "rotation": "account_rotation"}, token=tok)
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.json()["strategy"], r.json()["rotation"]), ("balanced", "account_rotation"))
        # round robin now: both accounts serve in turn
        served = {g.post("/v1/responses", BODY).headers["x-switchyard-account"] for _ in range(4)}
        self.assertEqual(served, {"a", "b"})
        wait_for(lambda: g.query("SELECT value FROM settings WHERE key = 'route_strategy' AND value = 'balanced'")
                 or None, what="the setting persisted")
        self.assertOpenAIError(call(g, "POST", "/admin/api/settings", {"strategy": "fastest"}, token=tok), 400)
        self.assertOpenAIError(call(g, "POST", "/admin/api/settings", b"not json", token=tok), 400)
        self.assertEqual(call(g, "GET", "/admin/api/overview", token=tok).json()["strategy"], "balanced")

    def test_policy_reload_swaps_good_policies_and_keeps_serving_on_bad_ones(self):
        pdir = self.policy_copy()
        g = self.gateway([account("a", self.mock.url("a"))], policies=pdir, start=False)
        tok = admin_token(g)
        g.start()
        with open(os.path.join(pdir, "order.lua"), "a") as f:
            f.write("\n-- edited\n")
        r = call(g, "POST", "/admin/api/policy/reload", {}, token=tok)
        self.assertEqual(r.status, 200, r)
        pol = call(g, "GET", "/admin/api/policy", token=tok).json()
        self.assertTrue(pol["last_reload"]["ok"])
        with open(os.path.join(pdir, "order.lua"), "w") as f:
            f.write("return function(c, ctx) return nil +\n")
        r = call(g, "POST", "/admin/api/policy/reload", {}, token=tok)
        self.assertEqual(self.assertOpenAIError(r, 422)["code"], "policy_reload_failed")
        pol = call(g, "GET", "/admin/api/policy", token=tok).json()
        self.assertFalse(pol["last_reload"]["ok"])
        self.assertIn("order.lua", pol["last_reload"]["error"])
        self.assertEqual(g.post("/v1/responses", BODY).status, 200)
        metrics = call(g, "GET", "/metrics").text
        self.assertIn('switchyard_policy_reloads_total{result="ok"} 1', metrics)
        self.assertIn('switchyard_policy_reloads_total{result="error"} 1', metrics)
        self.assertIn("admin: reload_policies", g.log_text())

    # ------------------------------------------------------------ metrics and page

    def test_metrics_pass_promtool_and_count_the_failover(self):
        promtool = shutil.which("promtool")
        if not promtool:
            self.skipTest("promtool is not installed (scripts/install-deps.sh installs it)")
        g, tok = self.pool()
        self.assertEqual(g.post("/v1/responses", BODY).status, 200)
        self.assertEqual(g.post("/v1/responses", BODY, key=None).status, 401)
        r = call(g, "GET", "/metrics")
        self.assertEqual(r.status, 200)
        self.assertTrue(r.headers["content-type"].startswith("text/plain; version=0.0.4"))
        text = r.text
        p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for line in ('switchyard_failovers_total{account="a",class="rate_limit"} 1',
                     'switchyard_upstream_attempts_total{account="b",outcome="ok",class="none"} 1',
                     'switchyard_requests_total{endpoint="/v1/responses",status="200"} 1',
                     'switchyard_requests_total{endpoint="/v1/responses",status="401"} 1',
                     'switchyard_accounts{state="cooling"} 1',
                     'switchyard_upstream_ttfb_seconds_count 2'):
            self.assertIn(line + "\n", text)
        self.assertRegex(text, r'switchyard_account_cooldown_seconds\{account="a"\} [1-9]')

    def test_dashboard_files_are_served_from_the_binary(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        r = call(g, "GET", "/admin")
        self.assertEqual((r.status, r.headers.get("location")), (302, "/admin/"))
        page = call(g, "GET", "/admin/")
        self.assertEqual(page.status, 200)
        self.assertIn("text/html", page.headers["content-type"])
        self.assertIn("default-src 'self'", page.headers["content-security-policy"])
        html = page.text
        self.assertNotIn("http://", html.replace("http://www.w3.org", ""))
        self.assertNotIn("https://", html)
        for asset in ("/admin/app.js", "/admin/app.css"):
            self.assertIn(asset.split("/")[-1], html)
            r = call(g, "GET", asset)
            self.assertEqual(r.status, 200, asset)
        self.assertOpenAIError(call(g, "GET", "/admin/nope.js"), 404)

    # ------------------------------------------------------------ CLI

    def test_status_asks_the_gateway_else_reads_the_database(self):
        g, tok = self.pool()
        g.post("/v1/responses", BODY)
        env = dict(g.env, SWITCHYARD_ADMIN_TOKEN=tok, SWITCHYARD_LISTEN=f"127.0.0.1:{g.port}")
        p = subprocess.run([switchyard_bin(), "status", "--db", g.db_path], env=env, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("(live)", p.stdout)
        rows = {ln.split()[0]: ln.split() for ln in p.stdout.splitlines()[2:]}
        self.assertEqual((rows["a"][2], rows["b"][2]), ("cooling", "available"))
        self.assertEqual(rows["b"][6], "0")  # in flight: only the live view knows
        p = subprocess.run([switchyard_bin(), "status", "--db", g.db_path, "--json"], env=env, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual([a["inflight"] for a in json.loads(p.stdout)["accounts"]], [0, 0])
        g.stop()
        p = subprocess.run([switchyard_bin(), "status", "--db", g.db_path], env=env, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("from the database", p.stdout)
        rows = {ln.split()[0]: ln.split() for ln in p.stdout.splitlines()[2:]}
        self.assertEqual((rows["a"][2], rows["a"][-1], rows["b"][2]), ("cooling", "rate_limit", "available"))
        p = subprocess.run([switchyard_bin(), "status", "--db", g.db_path, "--json"], env=env, capture_output=True,
                           text=True, timeout=30)
        doc = json.loads(p.stdout)
        self.assertEqual(doc["source"], "database")
        self.assertEqual([(a["name"], a["state"], a["last_error"]) for a in doc["accounts"]],
                         [("a", "cooling", "rate_limit"), ("b", "available", None)])

    def test_logs_print_each_request_with_its_attempts_and_follow(self):
        g, tok = self.pool()
        g.post("/v1/responses", BODY)
        g.wait_request_logs(1)
        out = g.cli("logs", "--db", g.db_path).stdout
        self.assertIn("tried: a(failover rate_limit 429", out)
        self.assertIn("> b(ok 200", out)
        self.assertEqual(g.cli("logs", "--db", g.db_path, "--failed").stdout, "")
        self.assertEqual(len(g.cli("logs", "--db", g.db_path, "--account", "a").stdout.splitlines()), 1)
        self.assertEqual(g.cli("logs", "--db", g.db_path, "--key", "nobody").stdout, "")
        f = subprocess.Popen([switchyard_bin(), "logs", "--db", g.db_path, "--follow", "--account", "b"],
                             stdout=subprocess.PIPE, text=True, env=g.env)
        self.addCleanup(lambda: (f.kill(), f.wait()))
        self.assertIn("account=b", f.stdout.readline())  # the existing one
        g.post("/v1/responses", BODY)
        line = f.stdout.readline()
        self.assertIn("account=b", line)
        self.assertIn(" #2 ", line)


if __name__ == "__main__":
    main()
