"""test_controls.py: channel controls end to end: a platform key's own rules
(expiry, allowed models, requests per minute) answered before any upstream is
touched, the weighted strategy, per-account local rate limits, spend in the
request log and `switchyard usage`, budgets, and the per-account 60 s success
rate. Who served a request is read from x-switchyard-account and checked
against what the mock recorded. No timing assertions."""

import json
import os
import threading

from harness import Gateway, GatewayTest, account, admin_call, admin_get, main, wait_for

CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


def chat(model):
    return dict(CHAT_BODY, model=model)


class KeyRulesTest(GatewayTest):
    def gw_with_key(self, *rules):
        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        p = g.cli("key", "add", "--db", g.db_path, "--name", "ruled", *rules)
        key = [ln for ln in p.stdout.splitlines() if ln.strip()][-1].strip()
        g.start()
        return g, key

    def test_model_outside_allowed_patterns_gets_403_and_no_upstream_request(self):
        g, key = self.gw_with_key("--models", "gpt-5*, o3")
        err = self.assertOpenAIError(g.post("/v1/chat/completions", chat("gpt-4o"), key=key), 403)
        self.assertEqual(err["code"], "model_not_allowed")
        self.assertIn("gpt-4o", err["message"])
        self.assertEqual(self.mock.requests(), [])
        for model in ("gpt-5-codex", "o3"):
            r = g.post("/v1/chat/completions", chat(model), key=key)
            self.assertEqual(r.status, 200, r)
        self.assertEqual(len(self.mock.requests()), 2)

    def test_key_without_rules_still_serves_every_model(self):
        g, key = self.gw_with_key()
        self.assertEqual(g.post("/v1/chat/completions", chat("anything-at-all"), key=key).status, 200)

    def test_expired_key_gets_401_before_any_upstream(self):
        g, key = self.gw_with_key("--expires", "2020-01-31")
        err = self.assertOpenAIError(g.post("/v1/chat/completions", CHAT_BODY, key=key), 401)
        self.assertEqual(err["code"], "expired_api_key")
        self.assertIn("2020-02-01T00:00:00Z", err["message"])  # valid through the named day
        self.assertEqual(self.mock.requests(), [])
        # extended while the gateway runs: the next request is served
        g.cli("key", "update", "--db", g.db_path, "--name", "ruled", "--expires", "never")
        wait_for(lambda: g.post("/v1/chat/completions", CHAT_BODY, key=key).status == 200,
                 what="key update picked up")

    def test_key_rpm_limit_answers_429_with_retry_after(self):
        g, key = self.gw_with_key("--rpm", "2")
        for _ in range(2):
            self.assertEqual(g.post("/v1/chat/completions", CHAT_BODY, key=key).status, 200)
        r = g.post("/v1/chat/completions", CHAT_BODY, key=key)
        err = self.assertOpenAIError(r, 429)
        self.assertEqual(err["code"], "rate_limit_exceeded")
        self.assertGreaterEqual(int(r.headers.get("retry-after", "0")), 1)
        self.assertEqual(len(self.mock.requests()), 2)
        # another key is not limited by this one's budget of requests
        self.assertEqual(g.post("/v1/chat/completions", CHAT_BODY).status, 200)

    def test_a_refusal_by_a_keys_rule_is_a_request_in_the_log(self):
        # issue 34: "why does CI get 429s?" showed nowhere but a counter: each refusal is now a row
        g, key = self.gw_with_key("--models", "gpt-5*", "--rpm", "1")
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-4o"), key=key).status, 403)
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5"), key=key).status, 200)
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5"), key=key).status, 429)
        rows = g.wait_request_logs(3)
        refused = sorted((r["status"], r["error_class"], r["model"]) for r in rows if r["status"] != 200)
        self.assertEqual(refused, [(403, "model_not_allowed", "gpt-4o"), (429, "rate_limit_exceeded", "gpt-5")])
        keyed = g.query("SELECT k.name AS key FROM request_logs l JOIN platform_keys k ON k.id = l.platform_key_id"
                        " WHERE l.status = 429")
        self.assertEqual([r["key"] for r in keyed], ["ruled"])
        out = g.cli("logs", "--db", g.db_path, "--status", "429").stdout
        self.assertIn("key=ruled", out)
        self.assertIn("rate_limit_exceeded", out)
        # searchable: the dashboard's search finds them by the rule's code and the key
        found = json.loads(admin_get(g, "/admin/api/requests?q=model_not_allowed").body)["requests"]
        self.assertEqual([(r["status"], r["model"]) for r in found], [(403, "gpt-4o")])
        # and counted by key and reason (the key label bounded by the keys)
        metrics = g.get("/metrics").text
        self.assertIn('switchyard_key_refusals_total{key="ruled",reason="model_not_allowed"} 1\n', metrics)
        self.assertIn('switchyard_key_refusals_total{key="ruled",reason="rpm"} 1\n', metrics)

    def test_key_update_sets_and_clears_models(self):
        g, key = self.gw_with_key()
        g.cli("key", "update", "--db", g.db_path, "--name", "ruled", "--models", "o3")
        wait_for(lambda: g.post("/v1/chat/completions", chat("gpt-test"), key=key).status == 403,
                 what="model rule picked up")
        rows = json.loads(g.cli("key", "list", "--db", g.db_path, "--json").stdout)
        ruled = [k for k in rows if k["name"] == "ruled"][0]
        self.assertEqual(ruled["allowed_models"], "o3")
        g.cli("key", "update", "--db", g.db_path, "--name", "ruled", "--all-models")
        wait_for(lambda: g.post("/v1/chat/completions", chat("gpt-test"), key=key).status == 200,
                 what="model rule cleared")

    def test_key_rule_flags_are_validated(self):
        g = self.gateway([], start=False)
        for bad in (["--rpm", "-1"], ["--expires", "tomorrow"], ["--models", ""]):
            p = g.cli("key", "add", "--db", g.db_path, "--name", "x", *bad, check=False)
            self.assertEqual(p.returncode, 2, (bad, p.stderr))
        p = g.cli("key", "update", "--db", g.db_path, "--name", "nobody", "--rpm", "5", check=False)
        self.assertEqual(p.returncode, 1, p.stderr)


class WeightedTest(GatewayTest):
    def weighted_gateway(self, weights, env=None, scenarios=None, serve_args=()):
        g = Gateway([], env=env, serve_args=serve_args)
        self._gateways.append(g)
        self.addCleanup(g.cleanup)
        for i, (name, w) in enumerate(weights):
            scen = (scenarios or {}).get(name, "ok")
            g.cli("account", "add", "--db", g.db_path, "--name", name, "--base-url", self.mock.url(name, scen),
                  "--token", f"tok-{name}-0123456789", "--sort", str((i + 1) * 10), "--weight", str(w))
        g.start()
        return g

    def served(self, g, n, model="gpt-test"):
        out = []
        for _ in range(n):
            r = g.post("/v1/chat/completions", chat(model))
            self.assertEqual(r.status, 200, r)
            out.append(r.headers.get("x-switchyard-account"))
        return out

    def test_weighted_3_to_1_is_smooth_and_exact(self):
        g = self.weighted_gateway([("a", 3), ("b", 1)], env={"SWITCHYARD_ROUTE_STRATEGY": "weighted"})
        self.assertEqual(self.served(g, 8), ["a", "a", "b", "a"] * 2)
        self.assertEqual(self.mock.accounts_hit(), ["a", "a", "b", "a"] * 2)
        rows = g.wait_request_logs(8)
        self.assertEqual({r["route_strategy"] for r in rows}, {"weighted"})

    def test_weighted_state_is_per_model(self):
        g = self.weighted_gateway([("a", 1), ("b", 1)], serve_args=["--strategy", "weighted"])
        self.assertEqual(self.served(g, 2, "m1"), ["a", "b"])
        self.assertEqual(self.served(g, 1, "m2"), ["a"])  # its own rotation starts afresh

    def test_weighted_via_config_setting_and_listed(self):
        g = self.weighted_gateway([("a", 2), ("b", 1)])
        g.cli("config", "set", "route_strategy", "weighted", "--db", g.db_path)
        wait_for(lambda: (g.post("/v1/chat/completions", CHAT_BODY).status == 200 and
                          g.request_logs()[-1:] and g.request_logs()[-1]["route_strategy"] == "weighted"),
                 what="weighted strategy picked up")
        acc = json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)
        self.assertEqual({a["name"]: a["weight"] for a in acc}, {"a": 2, "b": 1})

    def test_weighted_via_admin_api_settings(self):
        g = self.weighted_gateway([("a", 3), ("b", 1)])
        r = admin_call(g, "POST", "/admin/api/settings", {"strategy": "weighted"})
        self.assertEqual(r.status, 200, r)
        wait_for(lambda: (g.post("/v1/chat/completions", CHAT_BODY).status == 200 and
                          g.request_logs()[-1:] and g.request_logs()[-1]["route_strategy"] == "weighted"),
                 what="weighted strategy picked up")
        self.assertEqual(admin_get(g, "/admin/api/overview").json()["strategy"], "weighted")

    def test_weighted_failing_heavy_account_is_skipped(self):
        g = self.weighted_gateway([("heavy", 5), ("light", 1)], env={"SWITCHYARD_ROUTE_STRATEGY": "weighted"},
                                  scenarios={"heavy": "status=500"})
        first = g.post("/v1/chat/completions", CHAT_BODY)
        self.assertEqual(first.status, 200, first)
        self.assertEqual(first.headers.get("x-switchyard-account"), "light")  # failed over
        heavy_hits = self.mock.accounts_hit().count("heavy")  # its 5xx is retried once, then it cools down
        self.assertIn(heavy_hits, (1, 2))
        # cooling down: every following request goes to the light account without trying heavy
        self.assertEqual(self.served(g, 3), ["light"] * 3)
        self.assertEqual(self.mock.accounts_hit().count("heavy"), heavy_hits)

    def test_weight_flag_is_validated(self):
        g = Gateway([])
        self._gateways.append(g)
        self.addCleanup(g.cleanup)
        p = g.cli("account", "add", "--db", g.db_path, "--name", "x", "--base-url", "http://127.0.0.1:9/v1",
                  "--token", "tok-x-0123456789", "--weight", "0", check=False)
        self.assertEqual(p.returncode, 2, p.stderr)

class AccountRateLimitTest(GatewayTest):
    def limited_gateway(self, specs, env=None):
        """specs: (name, extra account add flags). Weighted strategy, the first account weighs 100 and
        the others 1, so the first is picked whenever it is available (ordered's P2C is not fixed)."""
        g = Gateway([], env=dict({"SWITCHYARD_ROUTE_STRATEGY": "weighted"}, **(env or {})))
        self._gateways.append(g)
        self.addCleanup(g.cleanup)
        for i, (name, flags) in enumerate(specs):
            g.cli("account", "add", "--db", g.db_path, "--name", name, "--base-url", self.mock.url(name),
                  "--token", f"tok-{name}-0123456789", "--sort", str((i + 1) * 10),
                  "--weight", "100" if i == 0 else "1", *flags)
        g.start()
        return g

    def test_account_at_its_rpm_is_skipped_with_reason_in_trace(self):
        g = self.limited_gateway([("capped", ["--max-rpm", "2"]), ("spare", [])])
        served = [g.post("/v1/chat/completions", CHAT_BODY).headers.get("x-switchyard-account") for _ in range(4)]
        self.assertEqual(served[:2], ["capped", "capped"])
        self.assertEqual(served[2:], ["spare", "spare"])
        self.assertEqual(self.mock.accounts_hit().count("capped"), 2)  # never tried, not 429'd
        wait_for(lambda: "rate_limited_locally" in g.trace_text(), what="trace skip line")
        skip = [ln for ln in g.trace_text().splitlines() if "CANDIDATE_SKIP" in ln and "capped" in ln]
        self.assertTrue(skip and "rate_limited_locally" in skip[-1], skip)

    def test_only_account_at_its_rpm_gives_503_naming_the_local_limit(self):
        g = self.limited_gateway([("capped", ["--max-rpm", "1"])])
        self.assertEqual(g.post("/v1/chat/completions", CHAT_BODY).status, 200)
        err = self.assertOpenAIError(g.post("/v1/chat/completions", CHAT_BODY), 503)
        self.assertIn("rate_limited_locally", err["message"])
        self.assertIn("1 requests per minute", err["message"])
        self.assertEqual(len(self.mock.requests()), 1)

    def test_same_account_retry_does_not_pass_the_account_rpm(self):
        # a 429 with a short Retry-After and nobody else: the policy retries the
        # same account, but its one request of the minute is spent
        g = Gateway([])
        self._gateways.append(g)
        self.addCleanup(g.cleanup)
        g.cli("account", "add", "--db", g.db_path, "--name", "capped", "--base-url",
              self.mock.url("capped", "status=429,retry_after=1,times=1"), "--token", "tok-capped-0123456789",
              "--max-rpm", "1")
        g.start()
        err = self.assertOpenAIError(g.post("/v1/chat/completions", CHAT_BODY), 503)
        self.assertIn("rate_limited_locally", err["message"])
        self.assertEqual(len(self.mock.requests()), 1, "the retry went upstream past the account's rpm")

    def test_request_waits_for_the_only_account_at_its_rpm_when_the_refill_is_within_the_wait_budget(self):
        # 30 a minute: a burst of 30, then one more every 2 s, within a 5 s wait for capacity. Requests go
        # one after another until one has waited: 31 when the burst takes under 2 s, more when a loaded
        # machine takes longer and the refill serves the 31st at once (a waiting request's CANDIDATE_WAIT
        # line is queued before its answer, and written within 10 ms)
        g = self.limited_gateway([("capped", ["--max-rpm", "30"])], env={"SWITCHYARD_CAPACITY_WAIT_MS": "5000"})
        sent = 0
        while sent < 31 or "CANDIDATE_WAIT" not in g.trace_text():
            r = g.post("/v1/chat/completions", CHAT_BODY)
            self.assertEqual(r.status, 200, (sent, r))
            sent += 1
            self.assertLess(sent, 300, "no request waited for the rpm refill")
        self.assertEqual(len(self.mock.requests()), sent)
        wait = [ln for ln in g.trace_text().splitlines() if "CANDIDATE_WAIT" in ln]
        self.assertIn("account=capped", wait[0])

    def test_tokens_per_minute_counted_from_usage_after_the_fact(self):
        # the mock reports 7 input tokens and a few output tokens per answer: one answer spends 5 tpm
        g = self.limited_gateway([("tpm", ["--max-tpm", "5"]), ("spare", [])])
        first = g.post("/v1/chat/completions", CHAT_BODY)
        self.assertEqual(first.headers.get("x-switchyard-account"), "tpm")
        second = g.post("/v1/chat/completions", CHAT_BODY)
        self.assertEqual(second.headers.get("x-switchyard-account"), "spare")
        wait_for(lambda: "tokens per minute" in g.trace_text(), what="tpm skip in trace")

    def drain_policies(self, drain):
        d = self.policy_copy()
        path = os.path.join(d, "classify.lua")
        with open(path) as f:
            text = f.read()
        needle = "local function classify(ev)\n"
        self.assertIn(needle, text)
        # a 429 fails over without a cooldown, and empties the local bucket when drain is on
        with open(path, "w") as f:
            f.write(text.replace(needle, needle + '  if ev.status == 429 then return { action = "failover", '
                                                  f'class = "rate_limit", cooldown = 0, drain_bucket = {str(drain).lower()} }} end\n'))
        return d

    def test_429_drains_the_bucket_only_when_the_policy_says_so(self):
        for drain in (False, True):
            self.mock.reset()
            g = Gateway([], env={"SWITCHYARD_ROUTE_STRATEGY": "weighted"}, policies=self.drain_policies(drain))
            self._gateways.append(g)
            self.addCleanup(g.cleanup)
            g.cli("account", "add", "--db", g.db_path, "--name", "busy", "--base-url",
                  self.mock.url("busy", "status=429"), "--token", "tok-busy-0123456789", "--weight", "100",
                  "--max-rpm", "3")
            g.cli("account", "add", "--db", g.db_path, "--name", "spare", "--base-url", self.mock.url("spare"),
                  "--token", "tok-spare-0123456789")
            g.start()
            for _ in range(2):
                self.assertEqual(g.post("/v1/chat/completions", CHAT_BODY).headers.get("x-switchyard-account"),
                                 "spare")
            hits = self.mock.accounts_hit().count("busy")
            if drain:
                # drained by the first 429: skipped as rate limited, not tried again
                self.assertEqual(hits, 1)
                wait_for(lambda: "rate_limited_locally" in g.trace_text(), what="rate_limited_locally skip")
            else:
                # a 429 alone teaches the bucket nothing: 2 of 3 left, tried again
                self.assertEqual(hits, 2)
            g.stop()

    def test_limits_are_listed(self):
        g = self.limited_gateway([("x", ["--max-rpm", "30", "--max-tpm", "90000"])])
        acc = json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)[0]
        self.assertEqual((acc["max_rpm"], acc["max_tpm"]), (30, 90000))

class SpendTest(GatewayTest):
    MILLION = "ok,input_tokens=1000000,cached=400000"  # 600k uncached + 400k cached input, 3 output

    def test_cost_of_plain_and_streamed_requests_is_in_the_request_log(self):
        g = self.gateway([account("a", self.mock.url("a", self.MILLION))])
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5")).status, 200)
        self.assertEqual(g.post("/v1/responses", {"model": "gpt-5-mini", "input": "hi", "stream": True},
                                stream=True).status, 200)
        rows = g.wait_request_logs(2)
        by_model = {r["model"]: r for r in rows}
        chat_row, resp_row = by_model["gpt-5"], by_model["gpt-5-mini"]
        self.assertEqual(chat_row["cached_tokens"], 400000)
        # gpt-5: 1.25 / 0.125 / 10 USD per million
        self.assertAlmostEqual(chat_row["cost_usd"], 0.6 * 1.25 + 0.4 * 0.125 + 3 * 10 / 1e6, places=9)
        # gpt-5-mini: 0.25 / 0.025 / 2
        self.assertAlmostEqual(resp_row["cost_usd"], 0.6 * 0.25 + 0.4 * 0.025 + resp_row["output_tokens"] * 2 / 1e6,
                               places=9)

    def test_unknown_model_has_no_cost_and_usage_flags_it(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        self.assertEqual(g.post("/v1/chat/completions", chat("my-relay-model")).status, 200)
        row = g.wait_request_logs(1)[0]
        self.assertIsNone(row["cost_usd"])
        out = json.loads(g.cli("usage", "--db", g.db_path, "--json").stdout)
        self.assertEqual(out[0]["unpriced_requests"], 1)
        self.assertEqual(out[0]["cost_usd"], 0)

    def test_edited_price_list_prices_a_relay_model(self):
        d = self.policy_copy({"prices.lua": 'return { version = 1, price = function(model)\n'
                                            '  if model == "my-relay-model" then return { input = 2, output = 4 } end\n'
                                            'end }\n'})
        g = self.gateway([account("a", self.mock.url("a", self.MILLION))], policies=d)
        self.assertEqual(g.post("/v1/chat/completions", chat("my-relay-model")).status, 200)
        row = g.wait_request_logs(1)[0]
        # cached_input defaults to the input price
        self.assertAlmostEqual(row["cost_usd"], 1.0 * 2 + 3 * 4 / 1e6, places=9)

    def test_policy_dir_without_prices_lua_uses_the_bundled_price_list(self):
        d = self.policy_copy()
        os.unlink(os.path.join(d, "prices.lua"))  # a directory made before prices.lua existed
        g = self.gateway([account("a", self.mock.url("a", self.MILLION))], policies=d)
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5")).status, 200)
        self.assertAlmostEqual(g.wait_request_logs(1)[0]["cost_usd"], 0.6 * 1.25 + 0.4 * 0.125 + 3 * 10 / 1e6,
                               places=9)

    def test_usage_report_groups_by_key_account_model_and_day(self):
        g = self.gateway([account("a", self.mock.url("a", self.MILLION))])
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5")).status, 200)
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-4o")).status, 200)
        rows = g.wait_request_logs(2)

        def report(*args):
            return json.loads(g.cli("usage", "--db", g.db_path, "--json", *args).stdout)

        by_model = {r["group"]: r for r in report("--by", "model")}
        self.assertEqual(set(by_model), {"gpt-5", "gpt-4o"})
        self.assertEqual(by_model["gpt-5"]["requests"], len([r for r in rows if r["model"] == "gpt-5"]))
        self.assertEqual(by_model["gpt-4o"]["cached_tokens"], 400000)
        total = report()[0]
        self.assertEqual(total["requests"], len(rows))
        self.assertAlmostEqual(total["cost_usd"], sum(r["cost_usd"] for r in rows), places=5)
        self.assertEqual([r["group"] for r in report("--by", "account")], ["a"])
        self.assertEqual(report("--by", "key")[0]["group"], "e2e (1)")
        self.assertEqual(len(report("--by", "day")), 1)
        self.assertEqual(report("--since", "2999-01-01"), [])
        self.assertEqual(report("--since", "1d")[0]["requests"], len(rows))
        # the forms logs --since takes too: minutes, a date and time, unix seconds
        self.assertEqual(report("--since", "30m")[0]["requests"], len(rows))
        self.assertEqual(report("--since", "2999-01-01T00:00"), [])
        self.assertEqual(report("--since", "0")[0]["requests"], len(rows))
        text = g.cli("usage", "--db", g.db_path, "--by", "model").stdout
        self.assertIn("COST_USD", text)
        self.assertIn("gpt-4o", text)
        self.assertNotIn("*", text)  # every model priced: no mark, no footnote
        self.assertEqual(g.post("/v1/chat/completions", chat("my-relay-model")).status, 200)
        g.wait_request_logs(3)
        text = g.cli("usage", "--db", g.db_path, "--by", "model").stdout
        row = [ln for ln in text.splitlines() if ln.startswith("my-relay-model")][0]
        self.assertTrue(row.endswith(" *"), text)
        self.assertIn("* some of the row's requests had no price", text.splitlines()[-1])
        for bad in (["--by", "colour"], ["--since", "yesterday"]):
            self.assertEqual(g.cli("usage", "--db", g.db_path, *bad, check=False).returncode, 2)

class BudgetTest(GatewayTest):
    MILLION = SpendTest.MILLION  # one gpt-5 request costs about $0.80

    def test_key_over_budget_gets_429_insufficient_quota_and_it_survives_a_restart(self):
        g = self.gateway([account("a", self.mock.url("a", self.MILLION))], start=False)
        p = g.cli("key", "add", "--db", g.db_path, "--name", "capped", "--budget", "0.5")
        key = [ln for ln in p.stdout.splitlines() if ln.strip()][-1].strip()
        g.start()
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5"), key=key).status, 200)  # under: allowed
        err = self.assertOpenAIError(g.post("/v1/chat/completions", chat("gpt-5"), key=key), 429)
        self.assertEqual(err["type"], "insufficient_quota")
        self.assertEqual(err["code"], "insufficient_quota")
        self.assertIn("$0.50 monthly budget", err["message"])
        self.assertRegex(err["message"], r"resets at \d{4}-\d{2}-01T00:00:00Z")
        self.assertEqual(len(self.mock.requests()), 1)
        # other keys are not affected
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5")).status, 200)
        g.wait_request_logs(2)
        g.restart()
        self.assertOpenAIError(g.post("/v1/chat/completions", chat("gpt-5"), key=key), 429)
        # raising the budget lets it through again
        g.cli("key", "update", "--db", g.db_path, "--name", "capped", "--budget", "100")
        wait_for(lambda: g.post("/v1/chat/completions", chat("gpt-5"), key=key).status == 200,
                 what="raised budget picked up")

    def test_account_over_budget_is_skipped_with_reason(self):
        g = Gateway([], env={"SWITCHYARD_ROUTE_STRATEGY": "weighted"})
        self._gateways.append(g)
        self.addCleanup(g.cleanup)
        g.cli("account", "add", "--db", g.db_path, "--name", "paid", "--base-url", self.mock.url("paid", self.MILLION),
              "--token", "tok-paid-0123456789", "--weight", "100", "--budget", "0.5", "--budget-period", "30d")
        g.cli("account", "add", "--db", g.db_path, "--name", "spare", "--base-url", self.mock.url("spare"),
              "--token", "tok-spare-0123456789")
        g.start()
        served = [g.post("/v1/chat/completions", chat("gpt-5")).headers.get("x-switchyard-account") for _ in range(3)]
        self.assertEqual(served, ["paid", "spare", "spare"])
        wait_for(lambda: "over_budget" in g.trace_text(), what="over_budget skip in the trace")
        self.assertIn("30-day budget", g.trace_text())
        g.cli("account", "disable", "--db", g.db_path, "--name", "spare")
        wait_for(lambda: g.post("/v1/chat/completions", chat("gpt-5")).status == 503, what="spare disabled")
        err = self.assertOpenAIError(g.post("/v1/chat/completions", chat("gpt-5")), 503)
        self.assertIn("over_budget", err["message"])
        acc = {a["name"]: a for a in json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)}
        self.assertEqual((acc["paid"]["budget_usd"], acc["paid"]["budget_period"]), (0.5, "30d"))
        api = {a["name"]: a for a in admin_get(g, "/admin/api/accounts").json()["accounts"]}
        budget = api["paid"]["budget"]
        self.assertEqual((budget["usd"], budget["period"], budget["over"]), (0.5, "30d", True))
        self.assertGreater(budget["spent_usd"], 0.5)
        self.assertIsNone(api["spare"]["budget"])
        self.assertEqual((api["paid"]["weight"], api["spare"]["weight"]), (100, 1))

    def test_budget_policy_decides_when_a_key_is_over(self):
        # an overdraft rule: over at twice the budget. $0.50 budget, ~$0.80 a request: the second
        # request is still let through (spent 0.80 < 1.00; the bundled rule would refuse it)
        d = self.policy_copy({"budget.lua": 'return { version = 1, budget = function(b)\n'
                                            '  return b.spent >= b.usd * 2 and "over" or "ok"\n'
                                            'end }\n'})
        g = self.gateway([account("a", self.mock.url("a", self.MILLION))], policies=d, start=False)
        p = g.cli("key", "add", "--db", g.db_path, "--name", "capped", "--budget", "0.5")
        key = [ln for ln in p.stdout.splitlines() if ln.strip()][-1].strip()
        g.start()
        statuses = [g.post("/v1/chat/completions", chat("gpt-5"), key=key).status for _ in range(2)]
        self.assertEqual(statuses, [200, 200])
        # the bundled rule again (SIGHUP reload): the key is judged anew, with no request in between
        os.unlink(os.path.join(d, "budget.lua"))
        g.sighup()
        wait_for(lambda: "policies reloaded" in g.log_text(), what="policy reload")
        self.assertOpenAIError(g.post("/v1/chat/completions", chat("gpt-5"), key=key), 429)

    def test_concurrent_requests_of_a_key_near_its_budget_overrun_it_by_one_request_not_by_all_in_flight(self):
        # each request takes 1.5 s and costs about $0.80; the first one alone teaches the key its typical cost
        slow = "slow_headers,ms=1500,input_tokens=1000000,cached=400000"
        g = self.gateway([account("a", self.mock.url("a", slow))], start=False)
        p = g.cli("key", "add", "--db", g.db_path, "--name", "capped", "--budget", "4")
        key = [ln for ln in p.stdout.splitlines() if ln.strip()][-1].strip()
        g.start()
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5"), key=key).status, 200)
        cost = admin_get(g, "/admin/api/keys").json()["keys"]
        cost = next(k for k in cost if k["name"] == "capped")["budget"]["spent_usd"]
        self.assertAlmostEqual(cost, 0.8, delta=0.05)
        # a restart in between: the typical cost is read back from the request log with the spend, so the
        # first burst after a start reserves too (it reserved nothing before its first request ended)
        g.wait_request_logs(1)
        g.stop()
        g.start()
        results, lock = [], threading.Lock()

        def client():
            r = g.post("/v1/chat/completions", chat("gpt-5"), key=key)
            with lock:
                results.append(r)
        threads = [threading.Thread(target=client) for _ in range(12)]  # all in flight at once
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = sorted(r.status for r in results)
        ok = statuses.count(200)
        for r in results:
            if r.status != 200:
                err = self.assertOpenAIError(r, 429)
                self.assertEqual(err["code"], "insufficient_quota")
        g.wait_request_logs(13)
        spent = next(k for k in admin_get(g, "/admin/api/keys").json()["keys"] if k["name"] == "capped")
        spent = spent["budget"]["spent_usd"]
        print(f"\nbudget $4.00, 12 concurrent requests of ~${cost:.2f}: {ok} served, spent ${spent:.2f}")
        # $3.20 left: four reservations fit ($0.80 + 4 x $0.80 reaches $4.00); without them all 12 went
        # (spent ~$10.40)
        self.assertEqual(ok, 4, statuses)
        self.assertLessEqual(spent, 4 + cost + 0.01, "the overrun is at most the one request that crosses it")
        self.assertEqual(len(self.mock.requests("a")), 1 + ok)

    def test_budget_flags_are_validated(self):
        g = self.gateway([], start=False)
        g.cli("key", "add", "--db", g.db_path, "--name", "weekly", "--budget", "20", "--budget-period", "7d")
        self.assertIn("$20.00/7d", g.cli("key", "list", "--db", g.db_path).stdout)
        for bad in (["--budget", "-1"], ["--budget", "lots"], ["--budget", "5", "--budget-period", "week"]):
            p = g.cli("key", "add", "--db", g.db_path, "--name", "x", *bad, check=False)
            self.assertEqual(p.returncode, 2, (bad, p.stderr))

class SuccessRateTest(GatewayTest):
    # an order policy that trusts the last minute only: the higher 60 s success rate first (an account
    # with no attempts counts as healthy), ties by id
    ORDER_BY_60S = """
return { version = 1, order = function(cands, ctx)
  local list = {}
  for i = 1, #cands do list[i] = cands[i] end
  local function rate(c) return c.attempts_60s > 0 and c.success_rate_60s or 1 end
  table.sort(list, function(a, b)
    if rate(a) ~= rate(b) then return rate(a) > rate(b) end
    return a.id < b.id
  end)
  local ids = {}
  for i = 1, #list do
    ids[i] = list[i].id
    print(string.format("cand %s rate60=%.2f attempts60=%d", list[i].name, list[i].success_rate_60s,
                        list[i].attempts_60s))
  end
  return ids
end }
"""

    def policies_dir(self):
        d = self.policy_copy({"order.lua": self.ORDER_BY_60S})
        path = os.path.join(d, "classify.lua")
        with open(path) as f:
            text = f.read()
        # 5xx fail over at once (no same-account retry) and without a cooldown,
        # so the failing account stays a candidate
        for pat, rep in (('local SERVER_RETRIES = 1', 'local SERVER_RETRIES = 0'),
                         ('failover("server", 30)', 'failover("server", 0)')):
            self.assertIn(pat, text)
            text = text.replace(pat, rep)
        with open(path, "w") as f:
            f.write(text)
        return d

    def test_sixty_second_success_rate_reaches_order_and_account_list(self):
        g = self.gateway([account("flaky", self.mock.url("flaky", "status=500")), account("good", self.mock.url("good"))],
                         policies=self.policies_dir())
        for _ in range(3):
            r = g.post("/v1/chat/completions", CHAT_BODY)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.headers.get("x-switchyard-account"), "good")
        # first request: no history, flaky (lower id) tried first and failed; then the policy saw
        # flaky at 0 % and good at 100 % and never tried flaky again
        self.assertEqual(self.mock.accounts_hit(), ["flaky", "good", "good", "good"])
        self.assertIn("cand flaky rate60=0.00 attempts60=1", g.log_text())
        wait_for(lambda: json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)[1]
                 .get("attempts_60s") == 3, what="good's state written")
        acc = {a["name"]: a for a in json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)}
        self.assertEqual((acc["flaky"]["success_rate_60s"], acc["flaky"]["attempts_60s"]), (0, 1))
        self.assertEqual((acc["good"]["success_rate_60s"], acc["good"]["attempts_60s"]), (1, 3))
        self.assertGreaterEqual(acc["good"]["latency_60s_ms"], 0)
        text = g.cli("account", "list", "--db", g.db_path).stdout
        self.assertIn("OK_60S", text)
        self.assertIn("100%/3", text)
        # the admin API and /metrics show the same minute
        api = {a["name"]: a for a in admin_get(g, "/admin/api/accounts").json()["accounts"]}
        self.assertEqual((api["flaky"]["health"]["success_rate_60s"], api["flaky"]["health"]["attempts_60s"]), (0, 1))
        self.assertEqual((api["good"]["health"]["success_rate_60s"], api["good"]["health"]["attempts_60s"]), (1, 3))
        metrics = admin_get(g, "/metrics").text
        self.assertIn('switchyard_account_success_ratio_60s{account="flaky"} 0\n', metrics)
        self.assertIn('switchyard_account_success_ratio_60s{account="good"} 1\n', metrics)
        self.assertIn('switchyard_account_latency_60s_seconds{account="good"} ', metrics)

if __name__ == "__main__":
    main()
