"""test_hostile_token_endpoint.py: a token endpoint that is broken or hostile. A 200 whose
access token is already expired, or whose expires_in is no number a login can live by
(1e300, an undefined cast before), must not make the gateway refresh every second; one
that trickles its answer a byte at a time must neither hold a client's request nor a
stopping gateway for as long as it trickles. The endpoint is written here (a thread of
the test) so that each answer is exactly the one named."""

import json
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import HOST, GatewayTest, main, wait_for
from test_oauth import auth_json, jwt


class TokenEndpoint:
    """POST /token answers per mode: "expired" (a JWT access token whose exp has passed),
    "huge_expiry" (an opaque token with expires_in 1e300), "trickle" (a 200 whose body
    comes one byte every `trickle_s`). `calls` counts the requests; `finished` the answers
    sent whole; `cut` the answers whose client went away first."""

    def __init__(self, mode, trickle_s=0.5, trickle_bytes=200):
        self.mode = mode
        self.calls = 0
        self.finished = 0
        self.cut = 0
        ep = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                ep.calls += 1
                n = ep.calls
                if ep.mode == "expired":
                    access = jwt({"exp": int(time.time()) - 100, "sub": "x"})
                    body = {"access_token": access, "refresh_token": f"rt_x_{n + 1}", "expires_in": -100}
                elif ep.mode == "huge_expiry":
                    body = {"access_token": f"opaque-{n}", "refresh_token": f"rt_x_{n + 1}"}
                else:
                    body = {"access_token": jwt({"exp": int(time.time()) + 3600}), "refresh_token": "rt_x_2",
                            "expires_in": 3600}
                out = json.dumps(body).encode()
                if ep.mode == "huge_expiry":
                    out = out[:-1] + b',"expires_in":1e300}'
                if ep.mode == "trickle":
                    out = out + b" " * trickle_bytes  # trailing whitespace: still one JSON document
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                try:
                    if ep.mode == "trickle":
                        for i in range(len(out)):
                            self.wfile.write(out[i:i + 1])
                            self.wfile.flush()
                            time.sleep(trickle_s)
                    else:
                        self.wfile.write(out)
                    ep.finished += 1
                except OSError:
                    ep.cut += 1

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self):
        return f"http://{HOST}:{self.server.server_address[1]}/token"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class TokenEndpointTest(GatewayTest):

    def login_gateway(self, ep, env=None):
        """A gateway with one chatgpt login "x" (its access token expired a minute ago, so the
        first refresh starts at once) whose requests go to the mock's ok scenario."""
        self.addCleanup(ep.close)
        e = {"SWITCHYARD_OAUTH_TOKEN_URL": ep.url(), "SWITCHYARD_USAGE_POLL_S": "0"}
        e.update(env or {})
        g = self.gateway([], env=e, start=False)
        path = os.path.join(g.dir, "x-auth.json")
        with open(path, "w") as f:
            json.dump(dict(auth_json("x", -60), name="x"), f)
        g.cli("account", "import", "--db", g.db_path, path)
        g.cli("account", "update", "--db", g.db_path, "--name", "x", "--base-url",
              self.mock.url("x", "ok", v1=False))
        g.start()
        return g

    def test_an_already_expired_token_backs_off_instead_of_refreshing_every_second(self):
        ep = TokenEndpoint("expired")
        g = self.login_gateway(ep, {"SWITCHYARD_OAUTH_RETRY_MIN_S": "2", "SWITCHYARD_OAUTH_RETRY_MAX_S": "600"})
        wait_for(lambda: ep.calls >= 1, what="the first refresh")
        time.sleep(9)  # every tick (1 s) asked again before; backing off 2, 4, 8 s asks 3 times at most
        self.assertLessEqual(ep.calls, 3, f"{ep.calls} refreshes in ~9 s")
        self.assertIn("result=short_lived", g.trace_text())
        self.assertTrue(g.running())

    def test_expires_in_1e300_is_no_expiry_and_no_refresh_loop(self):
        ep = TokenEndpoint("huge_expiry")
        g = self.login_gateway(ep)
        wait_for(lambda: "result=ok" in g.trace_text(), what="the refresh")
        time.sleep(4)
        self.assertEqual(ep.calls, 1, f"{ep.calls} refreshes")
        row = g.query("SELECT token, token_expires_at FROM accounts WHERE name = 'x'")[0]
        self.assertEqual(row["token"], "opaque-1")
        # an unusable expires_in is no expiry (refreshed after 8 days like any unknown one)
        self.assertIn(row["token_expires_at"], (0, None), row)
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"})
        self.assertEqual(r.status, 200, r)

    def test_a_trickling_token_endpoint_ends_the_waiting_request_at_the_refresh_deadline(self):
        ep = TokenEndpoint("trickle", trickle_s=0.5, trickle_bytes=400)  # ~4 min to send it all
        g = self.login_gateway(ep, {"SWITCHYARD_OAUTH_TIMEOUT_MS": "2000"})
        wait_for(lambda: ep.calls >= 1, what="the refresh to start")
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}, timeout=60)
        self.assertGreaterEqual(r.status, 500, r)
        self.assertOpenAIError(r)
        self.assertEqual(ep.finished, 0, "the request waited for the whole trickle")
        wait_for(lambda: "did not answer within 2000ms" in g.log_text(), what="the refresh's deadline in the log")
        self.assertEqual(self.mock.requests(), [], "the expired token was sent upstream")

    def test_sigterm_does_not_wait_for_a_trickling_refresh(self):
        ep = TokenEndpoint("trickle", trickle_s=0.5, trickle_bytes=400)
        g = self.login_gateway(ep)  # the default deadline (20 s) is longer than a stop may wait for it
        wait_for(lambda: ep.calls >= 1, what="the refresh to start")
        g.proc.send_signal(signal.SIGTERM)
        rc = g.proc.wait(timeout=15)
        self.assertEqual(rc, 0)
        self.assertEqual(ep.finished, 0)
        self.assertIn("did not answer before the gateway stopped", g.log_text())


if __name__ == "__main__":
    main()
