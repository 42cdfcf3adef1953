"""test_error_messages.py: a failed request is found by what it was told.
The request log keeps a short, sanitized error message per failed request
(the upstream's error the client got, or the gateway's own reply) and per
failed attempt (in its attempts record): `switchyard logs --search` and the
admin API's q find a request by it, `logs` and the admin API's rows show it,
the dashboard's detail view shows it; a key or token an upstream quotes is
stored redacted; a success stores none (docs/operating.md, "switchyard
logs")."""

import json
import os
import shutil
import subprocess
import tempfile

from harness import GatewayTest, account, http_call, main, npm_package, source_dir, switchyard_bin

PLAYWRIGHT_VERSION = os.environ.get("SWITCHYARD_PLAYWRIGHT_VERSION", "1.61.1")
CHROMIUM = "/usr/bin/chromium"
CTX_MSG = ("context_length_exceeded: This model's maximum context length is 8192 tokens. However, your messages "
           "resulted in 9000 tokens. Please reduce the length of the messages.")
MOCK_KEY = "sk-proj-Zq9XkWm3Pb8VrT5nLc2YhF7gD4sA1eJ6"  # what the mock's err=invalid_api_key quotes


def chat(model="gpt-5"):
    return {"model": model, "messages": [{"role": "user", "content": "hi"}]}


def admin_token(g):
    return g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]


def get(g, tok, path):
    return http_call(g.port, "GET", path, None, {"Authorization": f"Bearer {tok}"})


def log_lines(out):
    return [ln for ln in out.splitlines() if " #" in ln]


class ErrorMessageTest(GatewayTest):

    def test_a_context_length_error_is_found_by_its_message_and_shown(self):
        g = self.gateway([account("a", self.mock.url("a", "ctxlen"))], start=False)
        tok = admin_token(g)
        g.start()
        self.assertEqual(g.post("/v1/chat/completions", chat()).status, 400)
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-ok")).status, 400)
        g.wait_request_logs(2)
        rows = g.request_logs()
        self.assertEqual([r["error_message"] for r in rows], [CTX_MSG, CTX_MSG])
        # found by the code and by the message's words, which no other field holds
        out = g.cli("logs", "--db", g.db_path, "--search", "context_length").stdout
        self.assertEqual(len(log_lines(out)), 2, out)
        out = g.cli("logs", "--db", g.db_path, "--search", "MAXIMUM context 8192", "--model", "gpt-5").stdout
        lines = log_lines(out)
        self.assertEqual(len(lines), 1, out)
        self.assertTrue(lines[0].endswith(" message: " + CTX_MSG), lines[0])
        self.assertNotIn('"', lines[0].split(" message: ")[0])  # the returned attempt's message is the row's: once
        # the admin API: found by q, shown in the rows and the detail, the attempt's message with it
        found = get(g, tok, "/admin/api/requests?q=9000+tokens&model=gpt-5").json()["requests"]
        self.assertEqual([r["id"] for r in found], [rows[0]["id"]])
        self.assertEqual(found[0]["error_message"], CTX_MSG)
        d = get(g, tok, f"/admin/api/request?id={rows[0]['id']}").json()["request"]
        self.assertEqual(d["error_message"], CTX_MSG)
        self.assertEqual(d["tried"][0]["message"], CTX_MSG)
        self.assertEqual(d["tried"][0]["outcome"], "returned")

    def test_a_success_stores_no_message_and_a_failed_attempt_keeps_its_own(self):
        """a's usage limit fails the request over to b, which serves it: the row has no
        message (it succeeded), its attempts record has a's, and the search finds it."""
        g = self.gateway([account("a", self.mock.url("a", "quota429")), account("b", self.mock.url("b", "ok"))],
                         start=False)
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "a")
        g.start()
        self.assertEqual(g.post("/v1/chat/completions", chat()).status, 200)
        rows = g.wait_request_logs(1)
        self.assertIsNone(rows[0]["error_message"])
        tried = json.loads(rows[0]["attempts_json"])
        self.assertEqual([t["outcome"] for t in tried], ["failover", "ok"])
        self.assertTrue(tried[0]["message"].startswith("usage_limit_reached: "), tried[0])
        self.assertNotIn("message", tried[1])
        out = g.cli("logs", "--db", g.db_path, "--search", "usage limit").stdout
        lines = log_lines(out)
        self.assertEqual(len(lines), 1, out)
        self.assertIn('a(failover quota 429', lines[0])
        self.assertIn('"usage_limit_reached: ', lines[0])
        self.assertNotIn(" message: ", lines[0])

    def test_the_gateways_own_reply_is_the_message_when_no_account_can_serve(self):
        g = self.gateway([account("a", self.mock.url("a", "status=503"))])
        r = g.post("/v1/chat/completions", chat())
        self.assertEqual(r.status, 503)
        rows = g.wait_request_logs(1)
        self.assertTrue(rows[0]["error_message"].startswith("no_available_account: all upstream accounts are "
                                                            "unavailable: a: HTTP 503"), rows[0]["error_message"])
        self.assertEqual(r.json()["error"]["message"], rows[0]["error_message"][len("no_available_account: "):])
        out = g.cli("logs", "--db", g.db_path, "--search", "no_available_account").stdout
        self.assertEqual(len(log_lines(out)), 1, out)

    def test_the_attempts_messages_of_one_request_are_bounded(self):
        """Fourteen accounts that all fail: the first attempts carry their messages, the
        later ones only once the record's messages stay within about 1 KiB; the row's own
        message is the gateway's reply, at most 300 bytes."""
        g = self.gateway([account(f"a{i:02d}", self.mock.url(f"a{i:02d}", "status=500")) for i in range(14)])
        self.assertEqual(g.post("/v1/chat/completions", chat()).status, 503)
        row = g.wait_request_logs(1)[0]
        tried = json.loads(row["attempts_json"])
        self.assertGreaterEqual(len(tried), 14)  # (a 500 may be retried on the same account)
        said = [t["message"] for t in tried if "message" in t]
        self.assertTrue(said and all(m.startswith("server_error: ") for m in said), said)
        self.assertEqual([("message" in t) for t in tried], [True] * len(said) + [False] * (len(tried) - len(said)))
        self.assertLess(len(said), len(tried))
        self.assertLessEqual(sum(len(json.dumps(m)) + len(',"message":') for m in said), 1024)
        self.assertLessEqual(len(row["error_message"].encode()), 300)
        self.assertTrue(row["error_message"].startswith("no_available_account: "), row["error_message"])

    def test_a_key_or_token_an_upstream_quotes_is_stored_redacted(self):
        """The API's 401 quoting a key, and an upstream that echoes the Authorization it got
        (the account's own token): the messages are kept, the secrets are not."""
        quoting = account("quoting", self.mock.url("quoting", "status=401,err=invalid_api_key"))
        echoing = account("echoing", self.mock.url("echoing", "reflect_auth=400"))
        g = self.gateway([quoting, echoing], start=False)
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "echoing")
        two = g.add_key("two")
        g.cli("key", "prefer", "--db", g.db_path, "--name", "two", "--account", "quoting")
        g.start()
        self.assertEqual(g.post("/v1/chat/completions", chat()).status, 400)  # the echo goes back (scrubbed)
        self.assertNotEqual(g.post("/v1/chat/completions", chat(), key=two).status, 200)
        rows = g.wait_request_logs(2)
        dump = "\n".join(str(r) for r in rows) + "\n".join(
            g.cli("logs", "--db", g.db_path).stdout.splitlines())
        for secret in (MOCK_KEY, MOCK_KEY[:12], echoing["token"], quoting["token"]):
            self.assertNotIn(secret, dump)
        said = [r["error_message"] or "" for r in rows] + [
            t.get("message", "") for r in rows for t in json.loads(r["attempts_json"] or "[]")]
        self.assertTrue(any(m.startswith("echo: bad credentials: Bearer [redacted]") for m in said), said)
        self.assertTrue(any("Incorrect API key provided: [redacted]. You can find your API key" in m for m in said),
                        said)
        out = g.cli("logs", "--db", g.db_path, "--search", "incorrect api key").stdout
        self.assertEqual(len(log_lines(out)), 1, out)

    def test_the_dashboard_detail_shows_the_error_message_and_the_translation_an_attempt_used(self):
        if not os.access(CHROMIUM, os.X_OK):
            self.skipTest(f"{CHROMIUM} is not installed (scripts/install-deps.sh installs Debian's chromium)")
        node = shutil.which("node")
        if not node:
            self.skipTest("node is not installed")
        pkg, why = npm_package(f"playwright-core@{PLAYWRIGHT_VERSION}", f"playwright-{PLAYWRIGHT_VERSION}",
                               os.path.join("node_modules", "playwright-core", "package.json"))
        if not pkg:
            self.skipTest(why)
        # a ChatGPT login: the chat requests are translated (docs/clients.md), which the detail says
        g = self.gateway([account("a", self.mock.url("a", "ctxlen", v1=False), kind="chatgpt")], start=False)
        tok = admin_token(g)
        g.start()
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-ok")).status, 400)
        self.assertEqual(g.post("/v1/chat/completions", chat()).status, 400)
        rows = g.wait_request_logs(2)
        shots = os.path.join(os.path.dirname(switchyard_bin()), "screenshots")
        os.makedirs(shots, exist_ok=True)
        profile = tempfile.mkdtemp(prefix="sy-chromium-")
        self.addCleanup(shutil.rmtree, profile, True)
        env = dict(os.environ, PLAYWRIGHT_CORE=os.path.dirname(pkg), GATEWAY_URL=f"http://127.0.0.1:{g.port}",
                   ADMIN_TOKEN=tok, SCREENSHOT_DIR=shots, USER_DATA_DIR=profile, CHROMIUM=CHROMIUM,
                   SEARCH_WORDS="maximum context gpt-5")
        env.pop("ASAN_OPTIONS", None)  # the browser is not ours
        drv = subprocess.run([node, os.path.join(source_dir(), "tests", "e2e", "dashboard_message_driver.js")],
                             capture_output=True, text=True, env=env, timeout=240)
        steps = [json.loads(ln) for ln in drv.stdout.splitlines() if ln.strip()]
        self.assertEqual([s for s in steps if s["step"] == "error"], [], drv.stderr[-2000:])
        self.assertEqual(drv.returncode, 0, drv.stderr[-2000:])
        d = next(s for s in steps if s["step"] == "detail")
        self.assertEqual(d["found"], [rows[1]["id"]])  # the search box finds it by the message's words
        self.assertEqual(d["message"], CTX_MSG)
        self.assertEqual(d["attempt_messages"], [CTX_MSG])
        self.assertEqual(d["dialects"], ["chat>responses"])
        self.assertTrue(d["fits"])
        self.assertEqual(d["errors"], [], "\n".join(d["errors"]))


if __name__ == "__main__":
    main()
