"""test_hostile_signin.py: the dashboard's sign-in (POST/GET
/admin/api/accounts/login, src/accounts/signin.c, run inside the gateway)
against a hostile admin client and a hostile device-code authorization
server. Floods of starts (at most SIGNIN_MAX run; the next is a 503 in the
error shape), bodies oversized or not the JSON asked for, a client that
hangs up before its held POST is answered, device-code and poll answers
that are huge, slow, not JSON, or hold control characters, intervals and
expiries out of range, polling after the end and ids that are not ids, and
two sign-ins for one account name. The loop never blocks (the gateway
serves /health in the middle of it all), nothing crashes (run on the
sanitizer build too)."""

import json
import socket
import threading
import time

from harness import HOST, GatewayTest, ScriptedServer, admin_call, http_call, main, wait_for

DONE = ("approved", "denied", "expired", "failed")


class DeviceServer(ScriptedServer):
    """A device-code authorization server answering what a test names per
    path suffix: {"usercode": (status, body bytes, trickle s), "token": ...}.
    An answer may also be a callable returning that triple."""


def code_answer(**over):
    a = {"device_auth_id": "dev-1", "user_code": "ABCD-1234", "interval": "1", "expires_in": 600}
    a.update(over)
    return (200, json.dumps({k: v for k, v in a.items() if v is not None}).encode(), 0)


def plain(s):
    return isinstance(s, str) and not any(ord(ch) < 0x20 or ord(ch) == 0x7f for ch in s)


class HostileSignInTest(GatewayTest):

    def device(self, answers):
        d = DeviceServer(answers)
        self.addCleanup(d.close)
        return d

    def gw(self, d, timeout_ms=2000):
        base = self.mock.base()
        return self.gateway([], env={
            "SWITCHYARD_OAUTH_DEVICE_CODE_URL": f"{d.base()}/deviceauth/usercode",
            "SWITCHYARD_OAUTH_DEVICE_TOKEN_URL": f"{d.base()}/deviceauth/token",
            "SWITCHYARD_OAUTH_TOKEN_URL": f"{base}/oauth/ok/token",
            "SWITCHYARD_OAUTH_TIMEOUT_MS": str(timeout_ms),
            "SWITCHYARD_USAGE_POLL_S": "0"})

    def token(self, g):
        """An admin token the gateway knows (admin_call waits until it does)."""
        tok = g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]
        wait_for(lambda: http_call(g.port, "GET", "/admin/api/accounts", None,
                                   {"Authorization": f"Bearer {tok}"}).status == 200, what="the admin token known")
        return tok

    def start(self, g, body=None):
        return admin_call(g, "POST", "/admin/api/accounts/login", {} if body is None else body)

    def view(self, g, sid):
        r = admin_call(g, "GET", f"/admin/api/accounts/login?id={sid}")
        self.assertEqual(r.status, 200, r)
        return r.json()

    def until(self, g, sid, states=DONE, timeout=20):
        return wait_for(lambda: (lambda v: v if v["state"] in states else None)(self.view(g, sid)),
                        timeout=timeout, what=f"sign-in {sid} in {states}")

    def assertErrorShape(self, r, status, code=None):
        self.assertEqual(r.status, status, r)
        err = r.json()["error"]
        self.assertTrue(isinstance(err["message"], str) and err["message"] and isinstance(err["type"], str), err)
        self.assertIn("code", err)
        if code:
            self.assertEqual(err["code"], code, err)

    def assertViewIsPlain(self, v):
        for k in ("user_code", "verification_url", "error", "name", "account"):
            self.assertTrue(v[k] is None or plain(v[k]), (k, v))

    def assertHealthy(self, g):
        self.assertEqual(g.get("/health", key=None).status, 200)

    def test_hostile_device_code_answers_fail_or_are_bounded_and_the_loop_never_blocks(self):
        esc = "\x1b[31mEVIL\r\nSet-Cookie: x"
        cases = [
            ("huge", (200, b'{"device_auth_id":"d","user_code":"' + b"A" * (4 << 20) + b'"}', 0), "failed"),
            ("not json", (200, b"<html>sign in</html>", 0), "failed"),
            ("array", (200, b"[1,2,3]", 0), "failed"),
            ("nested", (200, b"[" * 100000, 0), "failed"),
            ("empty", (200, b"", 0), "failed"),
            ("controls in user_code", code_answer(user_code=esc), "failed"),
            ("controls in device_auth_id", code_answer(device_auth_id="a\nb"), "failed"),
            ("user_code a number", code_answer(user_code=42), "failed"),
            ("a 500 with escapes", (500, esc.encode(), 0), "failed"),
            ("slow", (200, code_answer()[1], 0.5), "failed"),
            ("verification_uri with controls", code_answer(verification_uri=esc, verification_url=esc), "pending"),
            ("interval 0", code_answer(interval=0), "pending"),
            ("interval enormous", code_answer(interval=1e300), "pending"),
            ("interval a huge string", code_answer(interval="9" * 400), "pending"),
            ("interval negative", code_answer(interval=-7), "pending"),
            ("expires_in negative", code_answer(expires_in=-100), "pending"),
            ("expires_in huge", code_answer(expires_in=1e300), "pending"),
            ("expires_in a string", code_answer(expires_in="soon"), "pending"),
        ]
        d = self.device({"token": (400, b'{"error":"authorization_pending"}', 0)})
        g = self.gw(d)
        for what, answer, want in cases:
            d.answers["usercode"] = answer
            r = self.start(g)
            self.assertEqual(r.status, 200, (what, r))
            v = r.json()
            self.assertEqual(v["state"], want, (what, v))
            if answer[2]:  # a trickle (minutes long): ended by the 2 s oauth timeout, not waited out
                self.assertIn("did not answer within 2000 ms", v["error"], (what, v))
            self.assertViewIsPlain(v)
            if want == "pending":
                self.assertTrue(1 <= v["interval_s"] <= 60, (what, v))
                self.assertTrue(time.time() < v["expires_at"] <= time.time() + 15 * 60 + 1, (what, v))
                # the verification page is the gateway's own (the server's is never shown)
                self.assertEqual(v["verification_url"], f"{d.base()}/codex/device", (what, v))
            else:
                self.assertTrue(v["error"], (what, v))
            self.assertHealthy(g)
        self.assertEqual(g.query("SELECT name FROM accounts"), [])

    def test_hostile_poll_answers_end_the_sign_in_and_store_nothing(self):
        esc = b'{"error":"\\u001b[31m\\r\\nevil","error_description":"\\u0007' + b"x" * 5000 + b'"}'
        cases = [
            ("huge", (200, b'{"authorization_code":"' + b"a" * (4 << 20) + b'"}', 0)),
            ("not json", (200, b"\x00\xff<html>", 0)),
            ("controls", (400, esc, 0)),
            ("slow", (400, b'{"error":"authorization_pending"}', 0.3)),
            ("approved without a verifier", (200, b'{"authorization_code":"ac","code_challenge":"x"}', 0)),
            ("a 500", (500, b"oops", 0)),
        ]
        d = self.device({"usercode": code_answer()})
        g = self.gw(d)
        for what, answer in cases:
            d.answers["token"] = answer
            v = self.start(g).json()
            self.assertEqual(v["state"], "pending", (what, v))
            done = self.until(g, v["id"], timeout=15)
            self.assertEqual(done["state"], "failed", (what, done))
            self.assertViewIsPlain(done)
            self.assertHealthy(g)
        self.assertEqual(g.query("SELECT name FROM accounts"), [])

    def test_a_flood_of_starts_is_bounded_and_refused_in_the_error_shape(self):
        # the device-code endpoint holds each start until the test lets it answer: at most
        # SIGNIN_MAX (8) run at once
        gate = threading.Event()
        self.addCleanup(gate.set)
        d = self.device({"usercode": lambda: (gate.wait(30), code_answer())[1],
                         "token": (400, b'{"error":"authorization_pending"}', 0)})
        g = self.gw(d, timeout_ms=10000)
        tok = self.token(g)
        results = []

        def one():  # one token for all (each new admin token replaces the last)
            results.append(http_call(g.port, "POST", "/admin/api/accounts/login", {},
                                     {"Authorization": f"Bearer {tok}"}))
        threads = [threading.Thread(target=one) for _ in range(14)]
        for t in threads:
            t.start()
        wait_for(lambda: len(d.hits) == 8, what="eight sign-ins asking the device-code endpoint")
        # the held POSTs do not hold the loop: it answers while all eight still wait for their code
        self.assertHealthy(g)
        for sid in range(1, 9):
            v = http_call(g.port, "GET", f"/admin/api/accounts/login?id={sid}", None,
                          {"Authorization": f"Bearer {tok}"}).json()
            self.assertEqual(v["state"], "starting", v)
        gate.set()
        for t in threads:
            t.join(30)
        ok = [r for r in results if r.status == 200]
        refused = [r for r in results if r.status != 200]
        self.assertEqual(len(ok), 8, [r.status for r in results])
        for r in refused:
            self.assertErrorShape(r, 503, "signin_unavailable")
        self.assertEqual({r.json()["state"] for r in ok}, {"pending"})
        # all eight are pending (running): a ninth is still refused until one ends
        self.assertErrorShape(self.start(g), 503, "signin_unavailable")

    def test_a_client_hanging_up_before_its_held_post_is_answered_leaves_the_sign_in_running(self):
        d = self.device({"usercode": (200, code_answer()[1], 0.01),
                         "token": (400, b'{"error":"authorization_pending"}', 0)})
        g = self.gw(d, timeout_ms=10000)
        tok = self.token(g)
        body = b"{}"
        for i in range(4):
            s = socket.create_connection((HOST, g.port))
            s.sendall(b"POST /admin/api/accounts/login HTTP/1.1\r\nHost: " + f"{HOST}:{g.port}".encode() + b"\r\nAuthorization: Bearer " + tok.encode()
                      + b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n" + body)
            # hung up once the sign-in is under way (it asks the device-code endpoint), before its answer
            wait_for(lambda: len(d.hits) == i + 1, what=f"sign-in {i + 1} started")
            s.close()

        def view(sid):
            return http_call(g.port, "GET", f"/admin/api/accounts/login?id={sid}", None,
                             {"Authorization": f"Bearer {tok}"}).json()
        # their codes came: the held answers were written into the void, the sign-ins go on
        for sid in range(1, 5):
            v = wait_for(lambda: (lambda v: v if v["state"] != "starting" else None)(view(sid)),
                         what=f"sign-in {sid}'s code")
            self.assertEqual(v["state"], "pending", v)
        self.assertHealthy(g)

    def test_bodies_that_are_not_a_start_are_400s_in_the_error_shape(self):
        d = self.device({"usercode": code_answer(), "token": (400, b'{"error":"authorization_pending"}', 0)})
        g = self.gw(d)
        for body in (b"not json", b"[]", b'"x"', b"null", b"[" * 100000, b'{"name":7}', b'{"name":["a"]}',
                     b'{"name":"a\\u0000b"}', b'{"name":"a\\nb"}', b'{"name":"' + b"n" * 300 + b'"}',
                     b'{"name":"\xff"}', b'{"name":"a"' + b" " * 10):
            r = self.start(g, body)
            self.assertErrorShape(r, 400)
        r = self.start(g, b'{"name":"' + b"n" * (8 << 20) + b'"}')  # past the admin body limit
        self.assertIn(r.status, (400, 413), r)
        self.assertErrorShape(r, r.status)
        self.assertEqual(d.hits, [])  # none of them reached the authorization server
        self.assertHealthy(g)

    def test_polling_after_the_end_and_ids_that_are_not_ids(self):
        g = self.gw(self.device({"usercode": (500, b"no", 0)}))
        v = self.start(g).json()
        self.assertEqual(v["state"], "failed", v)
        for _ in range(3):  # the outcome stays readable, unchanged
            self.assertEqual(self.view(g, v["id"]), v)
        for q in ("id=0", "id=-1", "id=abc", "id=1e3", "id=99999999999999999999999", "id=", "id=1&id=2", "x=1"):
            r = admin_call(g, "GET", f"/admin/api/accounts/login?{q}")
            self.assertIn(r.status, (200, 400, 404), (q, r))
            if r.status != 200:
                self.assertErrorShape(r, r.status)
        self.assertErrorShape(admin_call(g, "GET", "/admin/api/accounts/login?id=2"), 404, "unknown_signin")

    def test_two_sign_ins_for_one_name_store_one_account_and_say_so(self):
        base = self.mock.base()
        g = self.gateway([], env={
            "SWITCHYARD_OAUTH_DEVICE_CODE_URL": f"{base}/oauth/ok,user=bob,approve_after=1/deviceauth/usercode",
            "SWITCHYARD_OAUTH_DEVICE_TOKEN_URL": f"{base}/oauth/ok,user=bob,approve_after=1/deviceauth/token",
            "SWITCHYARD_OAUTH_TOKEN_URL": f"{base}/oauth/ok/token",
            "SWITCHYARD_USAGE_POLL_S": "0"})
        a = self.start(g, {"name": "same"}).json()
        b = self.start(g, {"name": "same"}).json()
        self.assertEqual((a["state"], b["state"]), ("pending", "pending"))
        da, db = self.until(g, a["id"]), self.until(g, b["id"])
        self.assertEqual(sorted([da["state"], db["state"]]), ["approved", "approved"], (da, db))
        self.assertEqual(sorted([da["updated"], db["updated"]]), [False, True], (da, db))
        self.assertEqual(g.query("SELECT name FROM accounts"), [{"name": "same"}])


if __name__ == "__main__":
    main()
