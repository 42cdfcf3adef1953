"""test_alerts.py: alerts reach the operator's webhook (obs/alert.c,
policies/alert.lua; docs/operating.md "Alerts") and never get in the way of
serving. A webhook receiver runs in this test (a threaded http.server that
records each POST and answers with a status, or holds it until the test lets go).

Proves: an event posts one Slack-compatible body (a refused key held as
key_refused, a pool with no account left), and the same event again within
the dedup window posts nothing more; a failing webhook is retried and then
dropped while requests go on unharmed; a slow webhook never delays a
request; no body carries a secret (upstream tokens, the platform key, the
admin token); the webhook URL can come from `switchyard config set`; a
policy of its own chooses its own body and headers."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import GatewayTest, account, admin_call, admin_get, http_call, main, wait_for

BODY = {"model": "gpt-test", "input": "hi"}
CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


class Webhook:
    """Records every POST (path, headers, body); answers `status`, or with held=True only once
    release() is called (a webhook slower than anything the test does)."""

    def __init__(self, status=200, held=False):
        self.status = status
        self.released = threading.Event()
        if not held:
            self.released.set()
        self.posts = []
        self.lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with hook.lock:
                    hook.posts.append({"path": self.path, "headers": dict(self.headers), "body": body})
                hook.released.wait(60)
                self.send_response(hook.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        # the path stands for the secret part of a real webhook URL
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T0/B0/WEBHOOKSECRET"

    def texts(self):
        with self.lock:
            return [json.loads(p["body"])["text"] for p in self.posts]

    def count(self):
        with self.lock:
            return len(self.posts)

    def release(self):
        self.released.set()

    def close(self):
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def metric(g, line_start):
    text = http_call(g.port, "GET", "/metrics").text
    for line in text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[-1])
    return None


class AlertsTest(GatewayTest):

    def webhook(self, **kw):
        w = Webhook(**kw)
        self.addCleanup(w.close)
        return w

    def refused_pool(self, hook, env=None):
        """a: an API key its upstream refuses (401 invalid_api_key, every time); b: fine."""
        env = dict({"SWITCHYARD_ALERT_WEBHOOK_URL": hook.url}, **(env or {}))
        return self.gateway([account("a", self.mock.url("a", "status=401")),
                             account("b", self.mock.url("b", "ok"))], env=env)

    def served_by_b(self, g):
        r = g.post("/v1/responses", BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["x-switchyard-account"], "b")

    def until_tried(self, g, name, n):
        """Requests (each served by b) until account name got n requests."""
        def step():
            self.served_by_b(g)
            return len(self.mock.requests(name)) >= n
        wait_for(step, what=f"{name} tried {n} times")

    def assertNoSecret(self, g, hook):
        secrets = dict(g.accounts, platform_key=g.key)
        tok = g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]
        secrets["admin_token"] = tok
        with hook.lock:
            bodies = [p["body"] for p in hook.posts]
        self.assertTrue(bodies)
        for body in bodies:
            for name, secret in secrets.items():
                self.assertNotIn(secret.encode(), body, f"{name} is in an alert body")
            self.assertNotIn(b"WEBHOOKSECRET", body)

    def test_a_refused_key_posts_one_alert_and_the_same_event_again_posts_nothing(self):
        hook = self.webhook()
        g = self.refused_pool(hook)
        self.served_by_b(g)
        wait_for(lambda: hook.count() >= 1, what="the alert post")
        post = hook.posts[0]
        self.assertEqual(post["path"], "/services/T0/B0/WEBHOOKSECRET")
        self.assertEqual(post["headers"].get("Content-Type"), "application/json")
        text = json.loads(post["body"])["text"]
        self.assertTrue(text.startswith("switchyard: account a is held out of the pool (key_refused: "), text)
        self.assertIn("`switchyard account update --name a --token ...`", text)
        # the same event again (reset, refused again, held again) within the window: no second post
        for _ in range(3):
            self.served_by_b(g)
        g.cli("account", "reset", "--db", g.db_path, "--name", "a")
        wait_for(lambda: g.query("SELECT hold FROM accounts WHERE name = 'a'")[0]["hold"] is None, what="reset")
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "a")
        self.until_tried(g, "a", 2)
        # the dedup is decided where the event is raised, before any post is queued (obs/alert.c
        # alert_raise): once the repeat counts as suppressed, no post of it can follow, so no sleep
        wait_for(lambda: metric(g, 'switchyard_alerts_total{result="suppressed"}') == 1, what="the repeat suppressed")
        self.assertEqual(hook.count(), 1, hook.texts())
        # "sent" is counted when the webhook's answer is read, after the hook recorded the post: awaited
        wait_for(lambda: metric(g, 'switchyard_alert_posts_total{result="sent"}') == 1, what="the post counted as sent")
        self.assertNoSecret(g, hook)

    def test_a_pool_with_no_account_left_posts_pool_exhausted(self):
        hook = self.webhook()
        g = self.gateway([account("a", self.mock.url("a", "status=429,retry_after=600"))],
                         env={"SWITCHYARD_ALERT_WEBHOOK_URL": hook.url})
        for _ in range(3):
            self.assertEqual(g.post("/v1/chat/completions", CHAT).status, 503)
        wait_for(lambda: any("no_available_account" in t for t in hook.texts()), what="the pool_exhausted post")
        texts = [t for t in hook.texts() if "no_available_account" in t]
        self.assertEqual(len(texts), 1, hook.texts())  # three 503s, one alert
        self.assertIn("no account could serve a request to /v1/chat/completions", texts[0])
        self.assertNoSecret(g, hook)

    def test_a_failing_webhook_is_retried_then_dropped_and_requests_go_on(self):
        hook = self.webhook(status=500)
        g = self.refused_pool(hook, env={"SWITCHYARD_ALERT_BACKOFF_MS": "100"})
        self.served_by_b(g)
        # the first try and 3 retries (100, 200, 400 ms apart), then given up
        wait_for(lambda: metric(g, 'switchyard_alert_posts_total{result="failed"}') == 1, what="the post given up")
        self.assertEqual(hook.count(), 4)
        self.assertEqual(len(set(p["body"] for p in hook.posts)), 1)  # the same post each time
        self.assertEqual(metric(g, 'switchyard_alert_posts_total{result="retried"}'), 3)
        self.assertEqual(metric(g, 'switchyard_alert_posts_total{result="sent"}'), 0)
        for _ in range(3):
            self.served_by_b(g)
        self.assertIn("alert: the webhook at http://127.0.0.1:", g.log_text())
        self.assertNotIn("WEBHOOKSECRET", g.log_text())  # the URL's path is its secret: never logged

    def test_a_slow_webhook_never_delays_a_request(self):
        # the webhook answers nothing until the test releases it: the requests are answered while their
        # alerts' post is still unanswered, which the gateway's own counters show (no stopwatch)
        hook = self.webhook(held=True)
        g = self.gateway([account("a", self.mock.url("a", "status=401")),
                          account("c", self.mock.url("c", "status=403,err=region")),
                          account("b", self.mock.url("b", "ok"))],
                         env={"SWITCHYARD_ALERT_WEBHOOK_URL": hook.url})
        def posts():
            return {r: metric(g, f'switchyard_alert_posts_total{{result="{r}"}}') for r in ("sent", "retried", "failed")}

        self.served_by_b(g)  # raises two alerts (a and c held)
        wait_for(lambda: hook.count() >= 1, what="the first post to arrive (and be held)")
        # answered while its alert's first try is in flight: neither answered nor timed out (the gateway
        # gives a try 10 s; a request that waited for it would find a retry counted by now)
        self.assertEqual(posts(), {"sent": 0, "retried": 0, "failed": 0}, "the request waited for its alert's post")
        for _ in range(5):  # and more while the post is held
            self.served_by_b(g)
        sent_failed = {k: v for k, v in posts().items() if k != "retried"}
        self.assertEqual(sent_failed, {"sent": 0, "failed": 0}, "the post was over before the requests")
        self.assertEqual(metric(g, "switchyard_active_requests"), 0)
        hook.release()
        wait_for(lambda: metric(g, 'switchyard_alert_posts_total{result="sent"}') == 2, what="both posts sent once released")

    def test_no_webhook_posts_nothing_and_the_setting_turns_it_on(self):
        hook = self.webhook()
        g = self.gateway([account("a", self.mock.url("a", "status=401")), account("b", self.mock.url("b", "ok"))],
                         start=False)
        g.cli("config", "set", "alert_webhook_url", "ftp://x/", "--db", g.db_path, check=False)
        self.assertEqual(g.cli("config", "get", "alert_webhook_url", "--db", g.db_path, check=False).returncode, 1)
        g.start()
        self.served_by_b(g)
        # whether it posts is decided where the event is raised (no webhook: nothing queued), so once it
        # counts as raised nothing more can come of it: no sleep before the count
        wait_for(lambda: metric(g, 'switchyard_alerts_total{result="raised"}') == 1, what="the event raised")
        self.assertEqual(hook.count(), 0)  # no webhook: nothing posted
        g.cli("config", "set", "alert_webhook_url", hook.url, "--db", g.db_path)
        g.cli("account", "add", "--db", g.db_path, "--name", "d", "--base-url", self.mock.url("d", "status=401"),
              "--token", "sk-d-" + "x" * 20)
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "d")
        self.until_tried(g, "d", 1)
        wait_for(lambda: hook.count() == 1, what="the post after the setting")
        self.assertIn("account d is held", hook.texts()[0])
        self.assertNotIn("WEBHOOKSECRET", g.log_text())

    def test_a_policy_of_its_own_chooses_the_body_and_headers(self):
        hook = self.webhook()
        alert = ("return function(ev)\n"
                 "  if ev.kind ~= 'account_held' then return nil end\n"
                 f"  return {{ url = '{hook.url}', headers = {{ ['X-Alert-Kind'] = ev.kind }},\n"
                 "           body = { kind = ev.kind, who = ev.subject, state = ev.state, tags = { 'sy', 'ops' } } }\n"
                 "end\n")
        g = self.gateway([account("a", self.mock.url("a", "status=401")), account("b", self.mock.url("b", "ok"))],
                         policies=self.policy_copy({"alert.lua": alert}))
        self.served_by_b(g)
        wait_for(lambda: hook.count() == 1, what="the post")
        post = hook.posts[0]
        self.assertEqual(json.loads(post["body"]),
                         {"kind": "account_held", "who": "a", "state": "key_refused", "tags": ["sy", "ops"]})
        self.assertEqual(post["headers"].get("X-Alert-Kind"), "account_held")
        self.assertEqual(post["headers"].get("Content-Type"), "application/json")


class AlertListTest(AlertsTest):
    """Issue 34: alerts you can see and test. /admin/api/alerts and `switchyard alerts` list each
    event with what became of it; `switchyard alerts test` posts one and says how it ended; only an
    event that could have been sent counts toward the dedup window."""

    def alerts(self, g, query=""):
        return json.loads(admin_get(g, "/admin/api/alerts" + query).body)

    def cli_ready(self, g):
        """The admin token made (into <db>.admin-token) and known to the gateway."""
        admin_get(g, "/admin/api/alerts")

    def test_events_are_listed_with_what_became_of_each_in_the_api_and_the_cli(self):
        hook = self.webhook()
        g = self.refused_pool(hook)
        self.served_by_b(g)
        wait_for(lambda: [a["outcome"] for a in self.alerts(g)["alerts"]] == ["sent"], what="the event listed as sent")
        # the same event again within the window: listed as suppressed, a storm folded into one row
        for _ in range(2):
            g.cli("account", "reset", "--db", g.db_path, "--name", "a")
            wait_for(lambda: g.query("SELECT hold FROM accounts WHERE name = 'a'")[0]["hold"] is None, what="reset")
            g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "a")
            n = len(self.mock.requests("a"))
            self.until_tried(g, "a", n + 1)
        doc = wait_for(lambda: (lambda d: d if d["alerts"][0]["count"] == 2 else None)(self.alerts(g)),
                       what="the repeats folded")
        self.assertTrue(doc["webhook"])
        self.assertEqual(doc["dedup_s"], 600)
        self.assertEqual([(a["kind"], a["subject"], a["state"], a["outcome"]) for a in doc["alerts"]],
                         [("account_held", "a", "key_refused", "suppressed"), ("account_held", "a", "key_refused", "sent")])
        self.assertIn("account a is held out of the pool", doc["alerts"][1]["message"])
        self.assertEqual(doc["stats"]["raised"], 3)
        self.assertEqual(doc["stats"]["suppressed"], 2)
        self.assertEqual(hook.count(), 1)
        self.assertNotIn("WEBHOOKSECRET", json.dumps(doc))
        # the CLI reads the same list with the token file, no environment needed
        out = g.cli("alerts", "--db", g.db_path).stdout
        self.assertIn("alerts go to the webhook", out)
        self.assertIn("3 raised, 1 sent, 0 failed, 2 suppressed", out)
        lines = [ln for ln in out.splitlines() if "account_held" in ln]
        self.assertEqual(len(lines), 2, out)
        self.assertIn("suppressed", lines[0])
        self.assertIn("(x2, last ", lines[0])
        self.assertIn("sent", lines[1])
        self.assertIn("account a is held", lines[1])
        # and the log says it once, when it was raised
        self.assertEqual(g.log_text().count("alert account_held (a, key_refused) raised: posted to 1 webhook(s)"), 1, g.log_text())
        listed = json.loads(g.cli("alerts", "--db", g.db_path, "--json").stdout)
        self.assertEqual(len(listed["alerts"]), 2)

    def test_events_before_a_webhook_was_set_do_not_suppress_the_first_after(self):
        # issue 34: events raised with no webhook counted toward the 10-minute window, so the first real
        # problems after setting it up were suppressed
        hook = self.webhook()
        g = self.gateway([account("a", self.mock.url("a", "status=401")), account("b", self.mock.url("b", "ok"))])
        self.served_by_b(g)
        wait_for(lambda: [a["outcome"] for a in self.alerts(g)["alerts"]] == ["unsent"], what="listed as unsent")
        self.assertFalse(self.alerts(g)["webhook"])
        self.assertIn("alert account_held (a, key_refused) raised: not sent, no webhook is set", g.log_text())
        g.cli("config", "set", "alert_webhook_url", hook.url, "--db", g.db_path)
        wait_for(lambda: self.alerts(g)["webhook"], what="the setting picked up")
        # the same event (a held as key_refused) again, within the window
        g.cli("account", "reset", "--db", g.db_path, "--name", "a")
        wait_for(lambda: g.query("SELECT hold FROM accounts WHERE name = 'a'")[0]["hold"] is None, what="reset")
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "a")
        self.until_tried(g, "a", 2)
        wait_for(lambda: hook.count() == 1, what="the first event after the webhook was set, posted")
        self.assertIn("account a is held", hook.texts()[0])
        wait_for(lambda: [a["outcome"] for a in self.alerts(g)["alerts"]] == ["sent", "unsent"], what="listed")
        self.assertEqual(metric(g, 'switchyard_alerts_total{result="unsent"}'), 1)
        self.assertEqual(metric(g, 'switchyard_alerts_total{result="suppressed"}'), 0)

    def test_alerts_test_posts_a_test_event_and_says_how_it_ended(self):
        hook = self.webhook()
        g = self.gateway([account("a", self.mock.url("a", "ok"))], env={"SWITCHYARD_ALERT_WEBHOOK_URL": hook.url})
        self.cli_ready(g)
        p = g.cli("alerts", "test", "--db", g.db_path)
        self.assertIn("sent: the webhook took it", p.stdout)
        self.assertEqual(hook.count(), 1)
        self.assertEqual(json.loads(hook.posts[0]["body"])["text"],
                         "switchyard: a test alert, sent by the operator (`switchyard alerts test`)")
        # a test is never deduplicated: a second one posts again
        g.cli("alerts", "test", "--db", g.db_path)
        self.assertEqual(hook.count(), 2)
        listed = [(a["kind"], a["outcome"]) for a in self.alerts(g)["alerts"]]
        self.assertEqual(listed, [("test", "sent"), ("test", "sent")])
        self.assertIn("admin: alert_test operator", g.log_text())

    def test_alerts_test_reports_a_failing_webhook_and_a_missing_one(self):
        hook = self.webhook(status=500)
        g = self.gateway([account("a", self.mock.url("a", "ok"))],
                         env={"SWITCHYARD_ALERT_WEBHOOK_URL": hook.url, "SWITCHYARD_ALERT_BACKOFF_MS": "50"})
        self.cli_ready(g)
        p = g.cli("alerts", "test", "--db", g.db_path, check=False)
        self.assertEqual(p.returncode, 1, p)
        self.assertIn("failed: HTTP 500 at http://127.0.0.1:", p.stderr)
        self.assertIn("after 4 tries", p.stderr)
        self.assertNotIn("WEBHOOKSECRET", p.stderr)
        self.assertEqual(hook.count(), 4)
        # no webhook at all: said so, exit 1, nothing posted
        g2 = self.gateway([account("a", self.mock.url("a", "ok"))])
        self.cli_ready(g2)
        p = g2.cli("alerts", "test", "--db", g2.db_path, check=False)
        self.assertEqual(p.returncode, 1, p)
        self.assertIn("not sent: no webhook is set", p.stderr)
        self.assertEqual([a["outcome"] for a in self.alerts(g2)["alerts"]], ["unsent"])
        # no gateway serving the database: said so
        g2.stop()
        p = g2.cli("alerts", "--db", g2.db_path, check=False)
        self.assertEqual(p.returncode, 1, p)
        self.assertIn("alerts live in the running gateway", p.stderr)


if __name__ == "__main__":
    main()
