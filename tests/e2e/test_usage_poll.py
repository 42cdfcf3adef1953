"""test_usage_poll.py: ChatGPT accounts' usage polling, end to end. The mock's
usage endpoint ({base up to /backend-api}/wham/usage, or {base}/api/codex/usage)
answers what a test set with Mock.set_usage (Codex's payload shape: plan_type,
rate_limit.primary_window / secondary_window with used_percent,
limit_window_seconds, reset_after_seconds, reset_at; credits). Covered: a poll
at start with the account's credentials, a poll soon after a 429, the
periodic poll, the guard using polled windows, a quota-exhausted account
resting exactly until its window resets (from the poll or from the 429's own
rate-limit headers), a poll answered 401 being recorded, and `account list`
showing both windows."""

import json
import time

from harness import GatewayTest, account, main, wait_for

RESP = {"model": "gpt-test", "input": "hi"}
BALANCED = {"SWITCHYARD_ROUTE_STRATEGY": "balanced"}


def payload(plan="plus", primary=10, secondary=20, primary_reset_at=None, secondary_reset_at=None,
            credits=None):
    now = int(time.time())
    return {
        "plan_type": plan,
        "rate_limit": {
            "allowed": True, "limit_reached": False,
            "primary_window": {"used_percent": primary, "limit_window_seconds": 18000,
                               "reset_after_seconds": 3600,
                               "reset_at": primary_reset_at or now + 3600},
            "secondary_window": {"used_percent": secondary, "limit_window_seconds": 604800,
                                 "reset_after_seconds": 86400,
                                 "reset_at": secondary_reset_at or now + 86400},
        },
        "credits": credits if credits is not None else {"has_credits": False, "unlimited": False, "balance": "0"},
    }


class UsagePollTest(GatewayTest):

    def codex_url(self, name, scenario="ok"):
        """A base URL shaped like ChatGPT's: .../backend-api/codex."""
        return self.mock.url(name, scenario, v1=False) + "/backend-api/codex"

    def cg(self, name, scenario="ok", plain=False, chatgpt_id=None):
        base = self.mock.url(name, scenario, v1=False) if plain else self.codex_url(name, scenario)
        return account(name, base, kind="chatgpt", chatgpt_id=chatgpt_id)

    def state(self, g, name, cond="1"):
        rows = g.query(f"SELECT s.* FROM account_state s JOIN accounts a ON a.id = s.account_id "
                       f"WHERE a.name = ? AND {cond}", (name,))
        return rows[0] if rows else None

    def wait_polled(self, g, name):
        return wait_for(lambda: self.state(g, name, "s.usage_polled_at > 0"), what=f"{name}'s usage poll")

    def test_chatgpt_accounts_are_polled_at_start_with_their_credentials(self):
        r1, r2 = int(time.time()) + 4000, int(time.time()) + 300000
        self.mock.set_usage("cg1", payload("pro", 12, 34, r1, r2,
                                           {"has_credits": True, "unlimited": False, "balance": "5.50"}))
        self.mock.set_usage("cg2", payload("plus", 1, 2))
        g = self.gateway([self.cg("cg1", chatgpt_id="acc-1"), self.cg("cg2", plain=True),
                          account("k", self.mock.url("k"))])
        polls = wait_for(lambda: (lambda p: p if len(p) >= 2 else None)(self.mock.usage_polls()),
                         what="two usage polls")
        by = {p["account"]: p for p in polls}
        self.assertEqual(set(by), {"cg1", "cg2"})  # the api_key account is not polled
        self.assertEqual(by["cg1"]["path"], "/acct/cg1/ok/backend-api/wham/usage")
        self.assertEqual(by["cg2"]["path"], "/acct/cg2/ok/api/codex/usage")
        self.assertEqual(by["cg1"]["method"], "GET")
        self.assertEqual(by["cg1"]["authorization"], f"Bearer {g.accounts['cg1']}")
        self.assertEqual(by["cg2"]["authorization"], f"Bearer {g.accounts['cg2']}")
        self.assertEqual(by["cg1"]["chatgpt_account_id"], "acc-1")

        st = self.wait_polled(g, "cg1")
        self.assertEqual((st["plan_type"], st["primary_used_pct"], st["secondary_used_pct"]), ("pro", 12, 34))
        self.assertEqual((st["primary_window_s"], st["secondary_window_s"]), (18000, 604800))
        self.assertEqual((st["primary_reset_at"], st["secondary_reset_at"]), (r1, r2))
        self.assertEqual((st["has_credits"], st["credits_unlimited"], st["credits_balance"]), (1, 0, 5.5))
        self.assertEqual(st["usage_poll_status"], 200)
        self.wait_polled(g, "cg2")

        text = g.cli("account", "list", "--db", g.db_path).stdout
        line = next(ln for ln in text.splitlines() if " cg1 " in ln)
        self.assertIn("12% in 1h", line)   # 4000 s to the 5 h window's reset
        self.assertIn("34% in 3d", line)   # 300000 s to the weekly reset
        self.assertIn("pro", line)
        self.assertIn("5H_WINDOW", text)
        rows = json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)
        j = next(r for r in rows if r["name"] == "cg1")
        self.assertEqual(j["plan_type"], "pro")
        self.assertEqual((j["primary"]["used_percent"], j["primary"]["reset_at"], j["primary"]["window_s"]),
                         (12, r1, 18000))
        self.assertEqual((j["secondary"]["used_percent"], j["secondary"]["reset_at"]), (34, r2))
        self.assertEqual(j["credits"], {"has_credits": True, "unlimited": False, "balance": 5.5})
        # the account still serves through its ChatGPT-shaped base URL
        r = g.post("/v1/responses", RESP)
        self.assertEqual(r.status, 200, r)

    def test_an_account_is_polled_again_soon_after_a_429(self):
        self.mock.set_usage("cg1", payload())
        g = self.gateway([self.cg("cg1", "status=429"), account("b", self.mock.url("b"))], env=BALANCED)
        self.wait_polled(g, "cg1")
        self.assertEqual(len(self.mock.usage_polls("cg1")), 1)
        r = g.post("/v1/responses", RESP)
        self.assertEqual(r.headers.get("x-switchyard-account"), "b")
        self.assertEqual(self.mock.accounts_hit(), ["cg1", "b"])
        wait_for(lambda: len(self.mock.usage_polls("cg1")) >= 2, what="a second poll after the 429")

    def test_polls_repeat_at_the_configured_interval(self):
        self.mock.set_usage("cg1", payload())
        self.gateway([self.cg("cg1")], env={"SWITCHYARD_USAGE_POLL_S": "1"})
        wait_for(lambda: len(self.mock.usage_polls("cg1")) >= 3, what="three polls one second apart")

    def test_the_poll_interval_is_a_database_setting_a_running_gateway_follows(self):
        self.mock.set_usage("cg1", payload())
        g = self.gateway([self.cg("cg1")])
        self.wait_polled(g, "cg1")
        g.cli("config", "set", "usage_poll_s", "1", "--db", g.db_path)
        wait_for(lambda: len(self.mock.usage_polls("cg1")) >= 3, what="polls at the new interval")
        self.assertIn("usage poll interval (s) is now 1 (database setting)", g.log_text())
        bad = g.cli("config", "set", "usage_poll_s", "soon", "--db", g.db_path, check=False)
        self.assertEqual(bad.returncode, 2, bad.stderr)

    def test_the_guard_reserves_an_account_whose_polled_window_is_nearly_spent(self):
        self.mock.set_usage("cg1", payload(primary=97))
        self.mock.set_usage("cg2", payload(primary=10))
        g = self.gateway([self.cg("cg1"), self.cg("cg2")], env=BALANCED)
        self.wait_polled(g, "cg1")
        self.wait_polled(g, "cg2")
        # round-robin alone would alternate cg1, cg2, cg1
        who = [g.post("/v1/responses", RESP).headers.get("x-switchyard-account") for _ in range(3)]
        self.assertEqual(who, ["cg2"] * 3)
        self.assertEqual(self.mock.accounts_hit(), ["cg2"] * 3)

    def test_a_guard_policy_sees_the_polled_plan_and_decides_again_when_it_changes(self):
        pol = self.policy_copy({"guard.lua": 'return { version = 1, guard = function(a)\n'
                                             '  if a.plan_type == "free" then return "exclude" end\n'
                                             '  return "normal" end }\n'})
        self.mock.set_usage("cg1", payload("plus"))
        self.mock.set_usage("cg2", payload("plus"))
        g = self.gateway([self.cg("cg1"), self.cg("cg2")], env=dict(BALANCED, SWITCHYARD_USAGE_POLL_S="1"),
                         policies=pol)
        self.wait_polled(g, "cg1")
        who = lambda: g.post("/v1/responses", RESP).headers.get("x-switchyard-account")
        self.assertEqual([who(), who()], ["cg1", "cg2"])
        self.mock.set_usage("cg1", payload("free"))
        wait_for(lambda: self.state(g, "cg1", "s.plan_type = 'free'"), what="the next poll of cg1")
        # the kept verdict ("normal") is dropped because the plan changed
        self.assertEqual([who(), who()], ["cg2", "cg2"])
        text = wait_for(lambda: (lambda t: t if t.count("REQUEST_FINAL") >= 4 else None)(g.trace_text()),
                        what="four REQUEST_FINAL lines")
        self.assertIn('account=cg1 reason="excluded by the quota guard"', text)

    def test_a_quota_exhausted_account_rests_until_its_polled_window_resets(self):
        reset = int(time.time()) + 5000
        self.mock.set_usage("cg1", payload(primary=100, primary_reset_at=reset))
        g = self.gateway([self.cg("cg1", "quota429,resets=1")])
        self.wait_polled(g, "cg1")
        r = g.post("/v1/responses", RESP)
        self.assertOpenAIError(r, 429)  # a spent plan: usage_limit_reached, back when the window resets
        self.assertAlmostEqual(r.json()["error"]["resets_at"], reset, delta=1)
        self.assertEqual(r.json()["error"]["plan_type"], "plus")
        st = wait_for(lambda: self.state(g, "cg1", "s.cooldown_until > 0"), what="the cooldown")
        # the ladder would say 45 s; the spent window resets at `reset`
        self.assertAlmostEqual(st["cooldown_until"], reset, delta=1)
        self.assertEqual(st["ladder_step"], 1)

    def test_a_429s_own_rate_limit_headers_set_the_rest(self):
        reset = int(time.time()) + 6000
        g = self.gateway([account("a", self.mock.url("a", f"status=429,secondary=100,secondary_reset_at={reset}")),
                          account("b", self.mock.url("b"))], env=BALANCED)
        self.assertEqual(g.post("/v1/responses", RESP).headers.get("x-switchyard-account"), "b")
        st = wait_for(lambda: self.state(g, "a", "s.cooldown_until > 0"), what="a's cooldown")
        self.assertAlmostEqual(st["cooldown_until"], reset, delta=1)

    def test_a_poll_answered_401_is_recorded(self):
        self.mock.set_usage("cg1", {"error": {"message": "token expired", "type": "invalid_request_error",
                                              "code": "token_expired"}}, status=401)
        g = self.gateway([self.cg("cg1")])
        st = self.wait_polled(g, "cg1")
        self.assertEqual(st["usage_poll_status"], 401)
        self.assertEqual(st["primary_used_pct"], -1)  # nothing learnt
        wait_for(lambda: "rejected its token (HTTP 401)" in g.log_text(), what="the 401 log line")
        self.assertNotIn(g.accounts["cg1"], g.log_text())
        line = next(ln for ln in g.cli("account", "list", "--db", g.db_path).stdout.splitlines() if " cg1 " in ln)
        self.assertIn("(poll 401)", line)


if __name__ == "__main__":
    main()
