"""test_login_flow.py: `switchyard account login`, the ChatGPT sign-in run by
the gateway itself (docs/accounts.md, "Logging in from the gateway"), against
the mock's authorization server (/oauth/<spec>/authorize, .../token,
.../deviceauth/usercode, .../deviceauth/token; tests/e2e/README.md). The test
plays the browser: it fetches the printed authorize URL, reads where the
server redirects, and follows that to the command's loopback callback."""

import http.client
import json
import os
import select
import subprocess
import time
import urllib.parse

from harness import GatewayTest, admin_call, main, sanitizer_report, switchyard_bin, wait_for

CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"


class Login:
    """A running `switchyard account login`: its output read line by line."""

    def __init__(self, g, env, args):
        e = dict(g.env)
        e.update(env)
        e.pop("DISPLAY", None)
        e.pop("WAYLAND_DISPLAY", None)
        self.proc = subprocess.Popen([switchyard_bin(), "account", "login", "--db", g.db_path, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     env=e)
        self.lines = []
        self.partial = b""

    def wait_line(self, pred, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for l in self.lines:
                if pred(l):
                    return l
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:  # raw reads: a buffered readline would hide lines from select
                data = os.read(self.proc.stdout.fileno(), 65536)
                if not data:
                    break
                *done, self.partial = (self.partial + data).split(b"\n")
                self.lines += [l.decode().strip() for l in done]
        raise AssertionError(f"no such line in {self.lines}")

    def auth_url(self):
        return self.wait_line(lambda l: "/authorize?" in l)

    def finish(self, timeout=30):
        out, err = self.proc.communicate(timeout=timeout)
        self.lines += (self.partial + out).decode().splitlines()
        self.partial = b""
        err = err.decode()
        report = sanitizer_report(err)
        assert not report, f"sanitizer report from account login:\n{report}"
        return self.proc.returncode, "\n".join(self.lines), err

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def get(url, headers=None, method="GET", connect_host=None):
    """One request (redirects not followed): (status, headers, body)."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(connect_host or u.hostname, u.port, timeout=20)
    path = u.path + ("?" + u.query if u.query else "")
    c.putrequest(method, path, skip_host=True)
    h = {"Host": u.netloc}
    h.update(headers or {})
    for k, v in h.items():
        c.putheader(k, v)
    c.endheaders()
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def callback(location, **over):
    """The redirect's Location with query values replaced (over: name=value)."""
    u = urllib.parse.urlsplit(location)
    q = dict(urllib.parse.parse_qsl(u.query))
    q.update(over)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, u.path, urllib.parse.urlencode(q), ""))


class LoginFlowTest(GatewayTest):

    def env(self, spec="ok,user=alice", token_spec="ok"):
        base = self.mock.base()
        return {"SWITCHYARD_OAUTH_AUTHORIZE_URL": f"{base}/oauth/{spec}/authorize",
                "SWITCHYARD_OAUTH_TOKEN_URL": f"{base}/oauth/{token_spec}/token",
                "SWITCHYARD_OAUTH_DEVICE_CODE_URL": f"{base}/oauth/{spec}/deviceauth/usercode",
                "SWITCHYARD_OAUTH_DEVICE_TOKEN_URL": f"{base}/oauth/{spec}/deviceauth/token"}

    def login(self, g, env, *args):
        lg = Login(g, env, list(args))
        self.addCleanup(lg.kill)
        return lg

    def oauth(self, endpoint):
        return [r for r in self.mock.requests() if r["endpoint"] == endpoint]

    def accounts(self, g):
        return g.query("SELECT name, kind, token, refresh_token, id_token, chatgpt_account_id, email, plan_type,"
                       " token_expires_at, login_error FROM accounts")

    def authorize(self, url):
        """Plays the browser at the authorization server: the redirect's Location."""
        status, headers, body = get(url)
        self.assertEqual(status, 302, body)
        return headers["location"]

    def to_callback(self, location, headers=None, method="GET"):
        """Follows a redirect to the loopback callback (localhost: the command listens on 127.0.0.1)."""
        return get(location, headers, method, connect_host="127.0.0.1")

    # --- the browser flow

    def test_browser_sign_in_stores_the_login_which_serves_and_refreshes(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env(token_spec="ok,ttl=6"), "--name", "alice", "--no-browser", "--port", "0")
        url = lg.auth_url()
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
        self.assertEqual(q["client_id"], CODEX_CLIENT_ID)
        self.assertEqual(q["response_type"], "code")
        self.assertEqual(q["code_challenge_method"], "S256")
        self.assertEqual(len(q["code_challenge"]), 43)
        self.assertEqual(q["id_token_add_organizations"], "true")
        self.assertEqual(q["codex_cli_simplified_flow"], "true")
        self.assertIn("offline_access", q["scope"].split())
        self.assertRegex(q["redirect_uri"], r"^http://localhost:\d+/auth/callback$")
        self.assertGreaterEqual(len(q["state"]), 43)
        status, _, body = self.to_callback(self.authorize(url))
        self.assertEqual(status, 200, body)
        self.assertIn(b"Signed in", body)
        rc, out, err = lg.finish()
        self.assertEqual(rc, 0, err)
        self.assertIn("added account alice", out)
        ex = self.oauth("oauth_token")
        self.assertEqual([(r["grant_type"], r["client_id"], r["account"]) for r in ex],
                         [("authorization_code", CODEX_CLIENT_ID, "alice")])
        rows = self.accounts(g)
        self.assertEqual(len(rows), 1, rows)
        a = rows[0]
        self.assertEqual((a["name"], a["kind"], a["chatgpt_account_id"], a["email"], a["plan_type"]),
                         ("alice", "chatgpt", "acct-alice", "alice@example.com", "pro"))
        self.assertTrue(a["token"] and a["id_token"] and a["refresh_token"].startswith("rt_alice_"), a)
        self.assertGreater(a["token_expires_at"], time.time())
        # it serves, through an upstream that checks the bearer
        g.cli("account", "update", "--db", g.db_path, "--name", "alice",
              "--base-url", self.mock.url("alice", "ok,auth=1", v1=False))
        g.env.update({"SWITCHYARD_OAUTH_TOKEN_URL": self.env(token_spec="ok,ttl=3600")["SWITCHYARD_OAUTH_TOKEN_URL"],
                      "SWITCHYARD_USAGE_POLL_S": "0"})
        g.start()
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}, key=g.key)
        self.assertEqual(r.status, 200, r)
        self.assertIn("hello from alice", r.text)
        # and the gateway refreshes it (the 6 s token at half its life) with the refresh token it got
        refresh = wait_for(lambda: [x for x in self.oauth("oauth_token") if x["grant_type"] == "refresh_token"],
                           timeout=15, what="a refresh")
        self.assertEqual(refresh[0]["refresh_token"], a["refresh_token"])
        wait_for(lambda: g.query("SELECT refresh_token FROM accounts")[0]["refresh_token"] != a["refresh_token"],
                 timeout=10, what="the refreshed login stored")
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "again"}, key=g.key)
        self.assertEqual(r.status, 200, r)

    def test_denied_sign_in_ends_with_a_clear_error_and_stores_nothing(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env("ok,user=alice,deny=1"), "--name", "alice", "--no-browser", "--port", "0")
        location = self.authorize(lg.auth_url())
        self.assertIn("error=access_denied", location)
        status, _, _ = self.to_callback(location)
        self.assertEqual(status, 400)
        rc, out, err = lg.finish()
        self.assertEqual(rc, 1)
        self.assertIn("the sign-in was denied (access_denied", err)
        self.assertIn("nothing was stored", err)
        self.assertEqual(self.accounts(g), [])
        self.assertEqual(self.oauth("oauth_token"), [])

    def test_callback_with_another_state_is_refused_and_its_code_never_exchanged(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env(), "--name", "alice", "--no-browser", "--port", "0")
        location = self.authorize(lg.auth_url())
        for forged in (callback(location, state="A" * 43), callback(location, state="")):
            status, _, _ = self.to_callback(forged)
            self.assertEqual(status, 400)
        # a denial with the wrong state does not end the sign-in either
        status, _, _ = self.to_callback(callback(location, state="x" * 43, error="access_denied"))
        self.assertEqual(status, 400)
        self.assertEqual(self.oauth("oauth_token"), [])
        self.assertIsNone(lg.proc.poll())
        self.assertEqual(self.accounts(g), [])
        # the genuine callback still completes it
        status, _, _ = self.to_callback(location)
        self.assertEqual(status, 200)
        rc, out, err = lg.finish()
        self.assertEqual(rc, 0, err)
        self.assertIn("refused a callback whose state is not this sign-in's", err)
        self.assertEqual(len(self.oauth("oauth_token")), 1)

    def test_callback_from_another_origin_or_path_is_refused(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env(), "--name", "alice", "--no-browser", "--port", "0")
        location = self.authorize(lg.auth_url())
        port = urllib.parse.urlsplit(location).port
        refusals = [
            ({"Origin": "http://evil.example"}, "GET", location, 403),           # a script on another site
            ({"Host": f"evil.example:{port}"}, "GET", location, 403),            # DNS rebinding
            ({}, "POST", location, 405),
            ({}, "GET", location.replace("/auth/callback", "/auth/other"), 404),
        ]
        for headers, method, url, want in refusals:
            status, _, _ = self.to_callback(url, headers, method)
            self.assertEqual(status, want, (headers, method, url))
        self.assertEqual(self.oauth("oauth_token"), [])
        self.assertIsNone(lg.proc.poll())
        status, _, _ = self.to_callback(location)
        self.assertEqual(status, 200)
        rc, _, err = lg.finish()
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(self.accounts(g)), 1)

    def test_browser_sign_in_nobody_completes_ends_at_the_timeout(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env(), "--no-browser", "--port", "0", "--timeout", "1")
        lg.auth_url()
        rc, _, err = lg.finish()
        self.assertEqual(rc, 1)
        self.assertIn("did not come back within 1 s", err)
        self.assertEqual(self.accounts(g), [])

    def test_sign_in_of_a_stored_login_updates_that_account(self):
        g = self.gateway([], start=False)
        for _ in range(2):
            lg = self.login(g, self.env(), "--name", "alice", "--no-browser", "--port", "0")
            self.to_callback(self.authorize(lg.auth_url()))
            rc, out, err = lg.finish()
            self.assertEqual(rc, 0, err)
        self.assertIn("updated the account", out)
        rows = self.accounts(g)
        self.assertEqual(len(rows), 1, rows)
        ex = self.oauth("oauth_token")
        self.assertEqual(len(ex), 2)

    # --- the device flow

    def test_device_sign_in_polls_until_approved_and_stores_the_login(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env("ok,user=bob,approve_after=2"), "--device", "--name", "bob")
        line = lg.wait_line(lambda l: "enter the code" in l)
        self.assertIn("MOCK-", line)
        self.assertTrue(any(f"{self.mock.base()}/codex/device" in l for l in lg.lines), lg.lines)
        rc, out, err = lg.finish()
        self.assertEqual(rc, 0, err)
        self.assertIn("added account bob", out)
        self.assertEqual(len(self.oauth("oauth_device_poll")), 2)
        self.assertEqual([r["client_id"] for r in self.oauth("oauth_device_code")], [CODEX_CLIENT_ID])
        ex = self.oauth("oauth_token")
        self.assertEqual([(r["grant_type"], r["account"]) for r in ex], [("authorization_code", "bob")])
        a = self.accounts(g)[0]
        self.assertEqual((a["name"], a["email"], a["chatgpt_account_id"]), ("bob", "bob@example.com", "acct-bob"))
        self.assertTrue(a["refresh_token"].startswith("rt_bob_"))

    def test_device_sign_in_denied_stores_nothing(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env("ok,user=bob,approve_after=1,deny=1"), "--device")
        rc, _, err = lg.finish()
        self.assertEqual(rc, 1)
        self.assertIn("the sign-in was denied", err)
        self.assertEqual(self.accounts(g), [])
        self.assertEqual(self.oauth("oauth_token"), [])

    def test_device_code_that_expires_ends_the_sign_in(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env("ok,user=bob,expires=2"), "--device")
        rc, _, err = lg.finish()
        self.assertEqual(rc, 1)
        self.assertIn("the device code expired", err)
        self.assertGreaterEqual(len(self.oauth("oauth_device_poll")), 2)
        self.assertEqual(self.accounts(g), [])

    def test_device_sign_in_is_bounded_by_the_timeout(self):
        g = self.gateway([], start=False)
        lg = self.login(g, self.env("ok,user=bob"), "--device", "--timeout", "2")
        rc, out, err = lg.finish()
        self.assertEqual(rc, 1)
        self.assertIn("within 2 s (--timeout", out)  # what bounds the wait, not the code's 15 minutes
        self.assertNotIn("minutes", out)
        self.assertIn("not approved within --timeout 2 s", err)
        self.assertEqual(self.accounts(g), [])

    # --- the dashboard's "Add ChatGPT account": the device flow run by the gateway (admin API)

    def signin(self, g, spec, body=None):
        """Starts a sign-in through the admin API (the gateway's env carries the endpoints); its first view."""
        r = admin_call(g, "POST", "/admin/api/accounts/login", body or {})
        self.assertEqual(r.status, 200, r)
        return r.json()

    def signin_until(self, g, sid, states, timeout=20):
        def look():
            r = admin_call(g, "GET", f"/admin/api/accounts/login?id={sid}")
            self.assertEqual(r.status, 200, r)
            v = r.json()
            return v if v["state"] in states else None
        return wait_for(look, timeout=timeout, what=f"sign-in {sid} in {states}")

    def test_dashboard_sign_in_approved_adds_an_account_that_serves(self):
        env = dict(self.env("ok,user=carol,approve_after=2"), SWITCHYARD_USAGE_POLL_S="0")
        g = self.gateway([], env=env)
        v = self.signin(g, "carol", {"name": "carol"})
        self.assertEqual(v["state"], "pending", v)
        self.assertRegex(v["user_code"], r"^MOCK-")
        self.assertEqual(v["verification_url"], f"{self.mock.base()}/codex/device")
        self.assertEqual(v["name"], "carol")
        self.assertGreater(v["expires_at"], time.time())
        done = self.signin_until(g, v["id"], ("approved", "denied", "expired", "failed"))
        self.assertEqual((done["state"], done["account"], done["updated"], done["error"]),
                         ("approved", "carol", False, None), done)
        self.assertEqual(len(self.oauth("oauth_device_poll")), 2)
        self.assertEqual([(r["grant_type"], r["account"]) for r in self.oauth("oauth_token")],
                         [("authorization_code", "carol")])
        rows = self.accounts(g)
        self.assertEqual([(a["name"], a["kind"], a["email"], a["chatgpt_account_id"]) for a in rows],
                         [("carol", "chatgpt", "carol@example.com", "acct-carol")])
        self.assertTrue(rows[0]["refresh_token"].startswith("rt_carol_"))
        # the running gateway's pool has it, and it serves (through an upstream that checks the bearer)
        wait_for(lambda: [a for a in admin_call(g, "GET", "/admin/api/accounts").json()["accounts"]
                          if a["name"] == "carol"], what="carol in /admin/api/accounts")
        g.cli("account", "update", "--db", g.db_path, "--name", "carol",
              "--base-url", self.mock.url("carol", "ok,auth=1", v1=False))
        r = wait_for(lambda: (lambda r: r if r.status == 200 else None)(
            g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}, key=g.key)), what="carol serving")
        self.assertIn("hello from carol", r.text)
        # a second sign-in of the same login updates that account instead of adding one
        self.mock.reset()
        v2 = self.signin(g, "carol")
        done = self.signin_until(g, v2["id"], ("approved", "denied", "expired", "failed"))
        self.assertEqual((done["state"], done["account"], done["updated"]), ("approved", "carol", True), done)
        self.assertEqual(len(self.accounts(g)), 1)

    def test_dashboard_sign_in_sets_the_sort_and_models_of_the_account_it_adds(self):
        g = self.gateway([], env=dict(self.env("ok,user=dora,approve_after=1"), SWITCHYARD_USAGE_POLL_S="0"))
        v = self.signin(g, "dora", {"name": "dora", "sort": -7, "models": " gpt-5, o3,gpt-5"})
        done = self.signin_until(g, v["id"], ("approved", "denied", "expired", "failed"))
        self.assertEqual((done["state"], done["account"], done["updated"]), ("approved", "dora", False), done)
        listed = {a["name"]: a for a in json.loads(g.cli("account", "list", "--json", "--db", g.db_path).stdout)}
        self.assertEqual((listed["dora"]["sort"], listed["dora"]["models"]), (-7, "gpt-5,o3"))  # as account add --models
        a = wait_for(lambda: {a["name"]: a for a in admin_call(g, "GET", "/admin/api/accounts").json()["accounts"]}
                     .get("dora"), what="dora in /admin/api/accounts")
        self.assertEqual((a["sort"], a["models"]["override"]), (-7, "gpt-5,o3"))
        # a list of names does as well; a second sign-in of the same login keeps the account's settings
        self.mock.reset()
        v = self.signin(g, "dora", {"sort": 3, "models": ["o3"]})
        done = self.signin_until(g, v["id"], ("approved", "denied", "expired", "failed"))
        self.assertEqual((done["state"], done["account"], done["updated"]), ("approved", "dora", True), done)
        self.assertEqual(g.query("SELECT sort, models FROM accounts WHERE name = 'dora'"),
                         [{"sort": -7, "models": "gpt-5,o3"}])

    def test_dashboard_sign_in_denied_stores_nothing(self):
        g = self.gateway([], env=self.env("ok,user=bob,approve_after=1,deny=1"))
        v = self.signin(g, "bob")
        done = self.signin_until(g, v["id"], ("approved", "denied", "expired", "failed"))
        self.assertEqual(done["state"], "denied", done)
        self.assertIn("the sign-in was denied", done["error"])
        self.assertIsNone(done["account"])
        self.assertEqual(self.accounts(g), [])
        self.assertEqual(self.oauth("oauth_token"), [])

    def test_dashboard_sign_in_whose_code_expires_ends_expired(self):
        g = self.gateway([], env=self.env("ok,user=bob,expires=2"))
        v = self.signin(g, "bob")
        done = self.signin_until(g, v["id"], ("approved", "denied", "expired", "failed"))
        self.assertEqual(done["state"], "expired", done)
        self.assertIn("expired", done["error"])
        self.assertGreaterEqual(len(self.oauth("oauth_device_poll")), 2)
        self.assertEqual(self.accounts(g), [])

    def test_dashboard_sign_in_refuses_bad_input_and_unknown_ids(self):
        env = dict(self.env("ok,user=bob"))
        env["SWITCHYARD_OAUTH_DEVICE_CODE_URL"] = f"{self.mock.base()}/oauth/nope/deviceauth/usercode"
        g = self.gateway([], env=env)
        r = admin_call(g, "POST", "/admin/api/accounts/login", {"name": 7})
        self.assertEqual(r.status, 400, r)
        self.assertIn("'name'", r.json()["error"]["message"])
        for body, field in (({"sort": 1.5}, "'sort'"), ({"sort": "3"}, "'sort'"), ({"sort": 2 ** 31}, "'sort'"),
                            ({"models": "gpt 5"}, "'models'"), ({"models": ["a,b"]}, "'models'"),
                            ({"models": 7}, "'models'")):
            r = admin_call(g, "POST", "/admin/api/accounts/login", body)
            self.assertEqual(r.status, 400, (body, r))
            err = r.json()["error"]
            self.assertEqual((err["type"], err["code"]), ("invalid_request_error", "invalid_value"), err)
            self.assertIn(field, err["message"])
        self.assertEqual(self.oauth("oauth_device_code"), [])  # refused before any sign-in started
        r = admin_call(g, "GET", "/admin/api/accounts/login?id=99")
        self.assertEqual(r.status, 404, r)
        r = admin_call(g, "GET", "/admin/api/accounts/login")
        self.assertEqual(r.status, 400, r)
        r = admin_call(g, "DELETE", "/admin/api/accounts/login")
        self.assertEqual(r.status, 405, r)
        # the authorization server refuses: the sign-in fails with its words, nothing stored
        v = self.signin(g, "bob")
        self.assertEqual(v["state"], "failed", v)
        self.assertIn("HTTP 500", v["error"])
        self.assertEqual(self.accounts(g), [])


if __name__ == "__main__":
    main()
