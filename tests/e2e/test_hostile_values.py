"""test_hostile_values.py: values from outside that try to become something else. An
import file, a token endpoint, a usage endpoint or a client hands the gateway a name, an
id, a plan or a model holding CR LF, ESC or bytes that are not UTF-8, aiming at a header
line of its own upstream, a forged line in gateway-trace.log or in `switchyard logs`, an
escape sequence on the operator's terminal, or a JSON or Prometheus document its reader
rejects. The rule (docs/architecture.md, "Outside values"): refuse control characters
at entry, escape at output, cut on character boundaries."""

import base64
import json
import os
import re
import sqlite3
import time

from harness import GatewayTest, account, admin_get, http_call, main, wait_for

ESC = "\x1b"
CUT = "\u00e9" * 100  # 200 bytes of a two-byte character: a cut at 127 bytes falls inside one


def b64(obj):
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def jwt(payload):
    return b64({"alg": "none", "typ": "JWT"}) + "." + b64(payload) + ".test"


def auth_json(name, exp_in=3600, account_id=None, id_claims=None):
    """A Codex auth.json for login <name>."""
    idt = {"email": f"{name}@example.com",
           "https://api.openai.com/auth": {"chatgpt_account_id": f"acct-{name}", "chatgpt_plan_type": "plus"}}
    idt.update(id_claims or {})
    tokens = {"id_token": jwt(idt), "access_token": jwt({"exp": int(time.time()) + exp_in, "sub": name}),
              "refresh_token": f"rt_{name}_1"}
    if account_id is not None:
        tokens["account_id"] = account_id
    return {"OPENAI_API_KEY": None, "last_refresh": "2025-01-01T00:00:00Z", "tokens": tokens}


def no_control(text):
    """The first control character in text (but LF, which ends lines), or None."""
    m = re.search(r"[\x00-\x09\x0b-\x1f\x7f\x80-\x9f]", text)
    return m.group(0) if m else None


LABEL_VALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*'
                    r'(\{(?:[a-zA-Z_][a-zA-Z0-9_]*=' + LABEL_VALUE + r')(?:,[a-zA-Z_][a-zA-Z0-9_]*=' + LABEL_VALUE +
                    r')*,?\})? (?:[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|Inf|NaN))(?: -?[0-9]+)?$')


def exposition_errors(body):
    """What a strict reader of the Prometheus text format (0.0.4) finds wrong in body: the
    document must be UTF-8; each line a comment (# HELP / # TYPE) or a sample whose label
    values escape only backslash, double quote and newline."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        return [f"not UTF-8: {e}"]
    errors = []
    for i, line in enumerate(text.split("\n")):
        if not line:
            continue
        if line.startswith("#"):
            if not re.match(r"^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$", line) and not line.startswith("# "):
                errors.append(f"line {i + 1}: bad comment {line!r}")
            continue
        if not SAMPLE.match(line):
            errors.append(f"line {i + 1}: not a sample {line!r}")
    return errors


class HostileValuesTest(GatewayTest):

    def token_url(self, scenario="ok"):
        return f"{self.mock.base()}/oauth/{scenario}/token"

    def write_login(self, g, fname, auth):
        path = os.path.join(g.dir, fname)
        with open(path, "w") as f:
            json.dump(auth, f)
        return path

    def injected(self):
        """Recorded upstream requests that carried a header of the attacker's choosing."""
        return [r for r in self.mock.requests() + self.mock.usage_polls()
                if "x-injected" in json.dumps(r.get("headers") or {}).lower()]

    # ---- 1. header injection upstream

    def test_imported_account_id_with_crlf_is_refused_and_never_sent_as_a_header(self):
        g = self.gateway([account("plain", self.mock.url("plain"))], start=False)
        base = self.mock.url("evil", "ok", v1=False)
        cases = {
            "entry": auth_json("evil", account_id="acct-evil\r\nX-Injected: 1"),
            "claim": auth_json("evil", id_claims={"https://api.openai.com/auth": {
                "chatgpt_account_id": "acct-evil\r\nX-Injected: 1", "chatgpt_plan_type": "plus"}}),
        }
        for what, auth in cases.items():
            path = self.write_login(g, f"{what}.json", dict(auth, name="evil", base_url=base))
            p = g.cli("account", "import", "--db", g.db_path, path, check=False)
            self.assertNotEqual(p.returncode, 0, (what, p.stdout))
            self.assertIn("account_id: contains a control character", p.stderr, what)
            self.assertIn("nothing was imported", p.stderr, what)
        self.assertEqual(g.query("SELECT count(*) AS n FROM accounts WHERE name = 'evil'")[0]["n"], 0)
        # `account add` and `account update` refuse it the same way
        p = g.cli("account", "add", "--db", g.db_path, "--name", "evil", "--base-url", base, "--token", "t",
                  "--kind", "chatgpt", "--chatgpt-account-id", "acct\r\nX-Injected: 1", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("chatgpt_account_id contains a control character", p.stderr)
        # a row written before the check (an older gateway) never reaches the wire as a header
        g.cli("account", "add", "--db", g.db_path, "--name", "old", "--base-url", base, "--token", "t",
              "--kind", "chatgpt", "--chatgpt-account-id", "acct-old", "--sort", "1")
        with sqlite3.connect(g.db_path) as db:
            db.execute("UPDATE accounts SET chatgpt_account_id = ? WHERE name = 'old'", ("acct-old\r\nX-Injected: 1",))
        g.start()
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}, key=g.key)
        self.assertNotEqual(r.status, 200, r)  # not sent: no failover for a request the gateway itself refused
        # the usage poll of the ChatGPT account at start carries the header too: both refused, the request
        # and the poll (which runs on its own: its refusal is the sign it was tried) before "nothing sent"
        refusal = "refused to send a request: its ChatGPT-Account-Id header holds a control character"
        wait_for(lambda: g.log_text().count(refusal) >= 2, what="the request's and the usage poll's refusals")
        self.assertEqual(self.injected(), [])
        self.assertEqual([x for x in self.mock.requests() if x["account"] == "evil"], [])

    def test_refreshed_id_token_with_crlf_claims_is_left_out_and_never_sent_as_a_header(self):
        g = self.gateway([], start=False,
                         env={"SWITCHYARD_OAUTH_TOKEN_URL": self.token_url("ok,hostile_claims=1"),
                              "SWITCHYARD_USAGE_POLL_S": "0"})
        path = self.write_login(g, "alice.json", dict(auth_json("alice", exp_in=-60), name="alice"))
        g.cli("account", "import", "--db", g.db_path, path)
        g.cli("account", "update", "--db", g.db_path, "--name", "alice",
              "--base-url", self.mock.url("alice", "ok,auth=1", v1=False))
        g.start()
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}, key=g.key)
        self.assertEqual(r.status, 200, r)  # the new tokens are kept: the refresh token they replace is spent
        self.assertEqual(len([x for x in self.mock.requests() if x["endpoint"] == "oauth_token"]), 1)
        row = g.query("SELECT refresh_token, chatgpt_account_id, email, plan_type FROM accounts"
                      " WHERE name = 'alice'")[0]
        self.assertEqual(row["refresh_token"], "rt_alice_2")
        self.assertEqual((row["chatgpt_account_id"], row["email"], row["plan_type"]),
                         ("acct-alice", "alice@example.com", "plus"))
        sent = [x["chatgpt_account_id"] for x in self.mock.requests("alice") if x["endpoint"] == "responses"]
        self.assertEqual(sent, ["acct-alice"])
        self.assertEqual(self.injected(), [])
        wait_for(lambda: "claim contains a control character: left out" in g.log_text(), what="the warning")
        self.assertIsNone(no_control(g.log_text()))

    def test_usage_plan_type_with_control_characters_is_left_out_of_status_and_account_list(self):
        self.mock.set_usage("cg", {"plan_type": "pro" + ESC + "[2J\nFAKE ROW", "rate_limit": {}})
        base = self.mock.url("cg", "ok", v1=False) + "/backend-api/codex"
        g = self.gateway([account("cg", base, kind="chatgpt", chatgpt_id="acct-cg")])
        wait_for(lambda: g.query("SELECT s.usage_polled_at FROM account_state s JOIN accounts a"
                                 " ON a.id = s.account_id WHERE a.name = 'cg' AND s.usage_polled_at > 0"),
                 what="the usage poll")
        plan = g.query("SELECT s.plan_type FROM account_state s JOIN accounts a ON a.id = s.account_id"
                       " WHERE a.name = 'cg'")[0]["plan_type"]
        self.assertNotIn(ESC, plan or "")
        listing = g.cli("account", "list", "--db", g.db_path).stdout
        self.assertNotIn(ESC, listing)
        self.assertNotIn("FAKE ROW", listing)

    # ---- 2. log and terminal injection

    def test_client_model_with_newline_cannot_forge_a_trace_line(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        forged = "gpt-test\n2030-01-01T00:00:00.000Z REQUEST_FINAL req=999999 account=x status=200"
        for model in (forged, "gpt-test\r" + ESC + "[2J", "gpt\x00nul", "gpt" + ESC + "]0;title\x07"):
            r = g.post("/v1/responses", {"model": model, "input": "hi"}, key=g.key)
            err = self.assertOpenAIError(r, 400)
            self.assertIn("'model' must not contain control characters", err["message"])
        self.assertEqual([x for x in self.mock.requests() if x["endpoint"] == "responses"], [])
        # a client header with an ESC (evhttp keeps it) reaches the trace escaped, and is not sent upstream
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}, key=g.key,
                   headers={"session_id": "s1" + ESC + "[31mred"})
        self.assertEqual(r.status, 200, r)
        wait_for(lambda: "REQUEST_FINAL" in g.trace_text(), what="the trace")
        trace = g.trace_text()
        self.assertNotIn("req=999999", trace)
        self.assertIsNone(no_control(trace), trace[-2000:])
        for line in trace.splitlines():
            self.assertRegex(line, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z [A-Z_]+ ")
        self.assertIn("session=s1\\x1b[31mred", trace)
        sent = [x.get("headers") or {} for x in self.mock.requests() if x["endpoint"] == "responses"]
        self.assertTrue(sent and all(ESC not in json.dumps(h, ensure_ascii=False) for h in sent), sent)

    def test_logs_usage_status_and_account_list_escape_what_the_database_holds(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}, key=g.key)
        self.assertEqual(r.status, 200, r)
        g.wait_request_logs(1)
        g.stop()
        # rows from before the entry checks, or written by hand: the output escapes them
        hostile = "gpt\nFAKE #999 /v1/responses" + ESC + "[2J\x9b31m"
        with sqlite3.connect(g.db_path) as db:
            db.execute("UPDATE request_logs SET model = ?, account_name = ?", (hostile, "a" + ESC + "[31m"))
            db.execute("UPDATE accounts SET name = ?, email = ?", ("a" + ESC + "]0;x\x07", "e@x" + ESC + "[2J"))
        outputs = {
            "logs": g.cli("logs", "--db", g.db_path).stdout,
            "usage": g.cli("usage", "--by", "model", "--db", g.db_path).stdout,
            "usage account": g.cli("usage", "--by", "account", "--db", g.db_path).stdout,
            "account list": g.cli("account", "list", "--db", g.db_path).stdout,
            "status": g.cli("status", "--db", g.db_path, "--url", "http://127.0.0.1:1").stdout,
        }
        for what, out in outputs.items():
            self.assertIsNone(no_control(out), (what, out))
            self.assertNotIn("\nFAKE", out, what)
        self.assertIn("gpt\\x0aFAKE #999 /v1/responses\\x1b[2J\\xc2\\x9b31m", outputs["logs"])
        self.assertEqual(len(outputs["logs"].strip().splitlines()), 1, outputs["logs"])
        self.assertIn("gpt\\x0aFAKE", outputs["usage"])

    # ---- 3. valid UTF-8 out of the gateway

    def test_admin_api_json_stays_valid_utf8_with_names_cut_mid_character(self):
        g = self.gateway([account(CUT, self.mock.url("u"))])
        r = g.post("/v1/responses", {"model": CUT, "input": "hi"}, key=g.key)
        self.assertEqual(r.status, 200, r)
        g.wait_request_logs(1)
        row = g.query("SELECT model, account_name FROM request_logs")[0]
        for v in (row["model"], row["account_name"]):  # stored cut on a character: valid text, a prefix
            self.assertTrue(CUT.startswith(v) and len(v.encode()) <= 127, v)
        for path in ("/admin/api/requests", "/admin/api/accounts", "/admin/api/stats"):
            body = admin_get(g, path).body
            text = body.decode("utf-8")  # strict: raises on a byte that is not UTF-8
            json.loads(text)
            self.assertNotIn("\ufffd", text, path)

    def test_admin_api_json_stays_valid_utf8_with_invalid_bytes_in_the_database(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}, key=g.key)
        self.assertEqual(r.status, 200, r)
        g.wait_request_logs(1)
        with sqlite3.connect(g.db_path) as db:
            db.execute("UPDATE request_logs SET model = CAST(X'6770742dc3' AS TEXT),"
                       " account_name = CAST(X'61ff' AS TEXT)")
        for path in ("/admin/api/requests", "/admin/api/stats"):
            text = admin_get(g, path).body.decode("utf-8")
            json.loads(text)
            self.assertIn("\ufffd", text, path)

    def test_metrics_exposition_is_valid_with_hostile_labels(self):
        g = self.gateway([account("a", self.mock.url("a", "status=500")), account("b", self.mock.url("b"))],
                         start=False)
        with sqlite3.connect(g.db_path) as db:
            # names no entry lets in today, as an older database may hold them
            db.execute("UPDATE accounts SET name = CAST(X'615c22ff0d0a1b5b324ac29b' AS TEXT) WHERE name = 'a'")
            db.execute("UPDATE accounts SET name = ? WHERE name = 'b'", (CUT[:63] + "\n\"q\"\\",))
        g.start()
        for _ in range(3):
            g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}, key=g.key)
        r = g.get("/metrics", key=None)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(exposition_errors(r.body), [])
        text = r.body.decode("utf-8")
        self.assertIn('account="a\\\\\\"\ufffd\ufffd\\n\ufffd[2J\ufffd"', text)
        self.assertIn('account="' + CUT[:63] + '\\n\\"q\\"\\\\"', text)

    def test_the_exposition_checker_catches_what_prometheus_rejects(self):
        good = b'# HELP x y\n# TYPE x counter\nx{a="b\\"c\\\\d\\ne"} 1\nx 2\n'
        self.assertEqual(exposition_errors(good), [])
        self.assertNotEqual(exposition_errors(b'x{a="\xc3"} 1\n'), [])
        self.assertNotEqual(exposition_errors(b'x{a="b"c"} 1\n'), [])
        self.assertNotEqual(exposition_errors(b'x{a="b\nc"} 1\n'), [])
        self.assertNotEqual(exposition_errors(b'x{a="b\\tc"} 1\n'), [])


if __name__ == "__main__":
    main()
