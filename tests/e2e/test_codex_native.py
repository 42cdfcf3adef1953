"""test_codex_native.py: what Codex understands from the gateway (issue 22).

When every account that serves the Responses API is out for its plan's
usage (resting after a quota error or a 429, or a usage window spent), the
client gets the ChatGPT backend's own answer for a spent plan: HTTP 429 with
error.type usage_limit_reached, the plan and when the first account is back
(resets_at, resets_in_seconds, Retry-After), which Codex shows as a usage
limit instead of retrying. Other endpoints, and a pool out for any other
reason, keep the 503 no_available_account that names each account. The
choice is policies/exhausted.lua's."""

import time

from harness import GatewayTest, account, main, wait_for

RESP = {"model": "gpt-test", "input": "hi"}
CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


class PoolUsageLimitTest(GatewayTest):

    def test_a_pool_out_of_quota_answers_usage_limit_reached_with_the_soonest_reset(self):
        g = self.gateway([account("a", self.mock.url("a", "quota429,resets=7200")),
                          account("b", self.mock.url("b", "quota429,resets=600"))])
        before = time.time()
        r = g.post("/v1/responses", RESP)
        self.assertEqual(r.status, 429, r)
        err = r.json()["error"]
        self.assertEqual(err["type"], "usage_limit_reached")
        self.assertEqual(err["code"], "usage_limit_reached")
        self.assertIn("usage limit", err["message"])
        # b is back first: its own resets_in_seconds (600 s) outlasts the 45 s ladder step
        self.assertGreaterEqual(err["resets_at"], int(before) + 590)
        self.assertLessEqual(err["resets_at"], int(time.time()) + 611)
        self.assertGreater(err["resets_in_seconds"], 500)
        self.assertEqual(int(r.headers["retry-after"]), err["resets_in_seconds"])
        # streamed requests get the same answer before any stream starts
        s = g.post("/v1/responses", dict(RESP, stream=True))
        self.assertEqual(s.status, 429, s)
        self.assertEqual(s.json()["error"]["type"], "usage_limit_reached")
        text = wait_for(lambda: (lambda t: t if "POOL_USAGE_LIMIT" in t else None)(g.trace_text()),
                        what="a POOL_USAGE_LIMIT line")
        self.assertIn("accounts=2", text)

    def test_chat_completions_keep_the_503_naming_each_account(self):
        g = self.gateway([account("a", self.mock.url("a", "quota429"))])
        r = g.post("/v1/chat/completions", CHAT)
        self.assertOpenAIError(r, 503)
        self.assertEqual(r.json()["error"]["code"], "no_available_account")

    def test_a_pool_out_for_another_reason_keeps_the_503(self):
        g = self.gateway([account("a", self.mock.url("a", "quota429")),
                          account("b", self.mock.url("b", "status=500"))],
                         env={"SWITCHYARD_CAPACITY_WAIT_MS": "0"})
        r = g.post("/v1/responses", RESP)
        self.assertOpenAIError(r, 503)
        self.assertEqual(r.json()["error"]["code"], "no_available_account")
        self.assertIn("a:", r.json()["error"]["message"])



class PoolLimitsTest(GatewayTest):
    """What Codex shows as its limits describes the pool: the usage endpoint
    (/wham/usage, /api/codex/usage) and the x-codex-primary/secondary-*
    headers of every answer give the share of the pool's window spent (100
    minus the average left per account) and the soonest reset."""

    def test_usage_endpoint_and_headers_describe_a_pool_of_three_at_different_usage(self):
        g = self.gateway([account("a", self.mock.url("a", "ok,primary=20,secondary=10")),
                          account("b", self.mock.url("b", "ok,primary=60,secondary=30")),
                          account("c", self.mock.url("c", "ok,primary=100,primary_reset=600,secondary=50"))],
                         env={"SWITCHYARD_ROUTE_STRATEGY": "balanced"})
        for _ in range(3):
            self.assertEqual(g.post("/v1/responses", RESP).status, 200)
        before = time.time()
        for path in ("/wham/usage", "/api/codex/usage", "/backend-api/wham/usage"):
            r = g.get(path)
            self.assertEqual(r.status, 200, r)
            u = r.json()
            pw, sw = u["rate_limit"]["primary_window"], u["rate_limit"]["secondary_window"]
            self.assertEqual(pw["used_percent"], 60)           # 100 - (80 + 40 + 0) / 3
            self.assertEqual(sw["used_percent"], 30)           # 100 - (90 + 70 + 50) / 3
            self.assertEqual(pw["limit_window_seconds"], 300 * 60)
            self.assertLessEqual(pw["reset_after_seconds"], 601)  # c's reset comes first
            self.assertGreater(pw["reset_at"], before + 500)
            self.assertEqual(u["rate_limit"]["limit_reached"], False)
            self.assertEqual(u["pool"], {"accounts": 3, "reporting": 3})
        r = g.post("/v1/responses", RESP)
        self.assertEqual(r.headers.get("x-codex-primary-used-percent"), "60")
        self.assertEqual(r.headers.get("x-codex-secondary-used-percent"), "30")
        # the endpoint wants a platform key
        self.assertOpenAIError(g.get("/wham/usage", key=None), 401)
        self.assertOpenAIError(g.request("POST", "/wham/usage", {}), 405)

    def rate_event(self, r):
        ev = [e["json"] for e in r.events if e["event"] == "codex.rate_limits"]
        self.assertEqual(len(ev), 1, r)
        self.assertEqual(ev[0]["type"], "codex.rate_limits")
        return ev[0]

    def test_stream_rate_limits_event_tells_the_pool_numbers_of_the_headers(self):
        # each account's stream starts with a codex.rate_limits event of its
        # own numbers (mock rate_event=1); the client sees the pool's, equal
        # to the x-codex-* headers of the same answer (route/rate_event.h)
        spec = "ok,rate_event=1,primary=%d,secondary=%d,primary_reset=%d"
        g = self.gateway([account("a", self.mock.url("a", spec % (20, 10, 3600))),
                          account("b", self.mock.url("b", spec % (60, 30, 3600))),
                          account("c", self.mock.url("c", spec % (100, 50, 600)))],
                         env={"SWITCHYARD_ROUTE_STRATEGY": "balanced"})
        for _ in range(3):
            self.assertEqual(g.post("/v1/responses", RESP).status, 200)
        for _ in range(3):  # whichever account serves, the event is the pool's
            r = g.post("/v1/responses", dict(RESP, stream=True), stream=True)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.types()[0], "codex.rate_limits", r.types())
            self.assertEqual(r.types()[-1], "response.completed", r.types())
            ev = self.rate_event(r)
            rl = ev["rate_limits"]
            h = r.headers
            self.assertEqual(rl["primary"]["used_percent"], 60)  # 100 - (80 + 40 + 0) / 3
            self.assertEqual(rl["secondary"]["used_percent"], 30)
            for which in ("primary", "secondary"):
                w = rl[which]
                self.assertEqual(str(w["used_percent"]), h.get(f"x-codex-{which}-used-percent"))
                self.assertEqual(str(w["window_minutes"]), h.get(f"x-codex-{which}-window-minutes"))
                self.assertEqual(str(w["reset_at"]), h.get(f"x-codex-{which}-reset-at"))
            self.assertEqual((rl["allowed"], rl["limit_reached"]), (True, False))
            self.assertEqual((ev["plan_type"], ev["credits"]), ("plus", None))  # the rest as it came

    def test_a_limit_familys_own_rate_limits_event_passes_unchanged(self):
        g = self.gateway([account("a", self.mock.url("a", "ok,rate_event=codex_x,primary=20")),
                          account("b", self.mock.url("b", "ok,primary=80"))],
                         env={"SWITCHYARD_ROUTE_STRATEGY": "balanced"})
        self.assertEqual(g.post("/v1/responses", RESP).status, 200)
        self.assertEqual(g.post("/v1/responses", RESP).status, 200)
        for _ in range(4):  # balanced: a serves one of them
            r = g.post("/v1/responses", dict(RESP, stream=True), stream=True)
            if r.headers.get("x-switchyard-account") == "a":
                break
        self.assertEqual(r.headers.get("x-switchyard-account"), "a", r)
        self.assertEqual(r.headers.get("x-codex-primary-used-percent"), "50")  # the pool's
        ev = self.rate_event(r)
        self.assertEqual(ev["metered_limit_name"], "codex_x")
        self.assertEqual(ev["rate_limits"]["primary"]["used_percent"], 20)  # the account's, as sent

if __name__ == "__main__":
    main()
