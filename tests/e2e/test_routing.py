"""test_routing.py: which account serves a request, end to end: the balanced
(strict round-robin) and ordered strategies and the three ways to pick one
(environment, `serve --strategy`, `switchyard config set` on a running gateway),
accounts added while the gateway runs, a key's preferred account, per-account
concurrency limits, the quota guard's reserve, model mapping, the aggregate
circuit breaker and the key rotation modes.

Who served a request is read from the x-switchyard-account header and checked
against what the mock upstream recorded. Accounts are added in list order with
sort 10, 20, ... (so ids and sort agree). Tests never assert timings: anything
the gateway does "within a second" is polled for."""

import json
import os
import re
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import harness
from harness import HOST, Gateway, GatewayTest, PyUpstream, main, wait_for

RESP_BODY = {"model": "gpt-test", "input": "hi"}
RESP_STREAM = dict(RESP_BODY, stream=True)
CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
# 5xx cools an account for 30 s: longer than any test here. The long Retry-After makes it fail
# over at once instead of the same-account retry a bare 5xx gets (test_recovery.py).
LONG_500 = "status=500,retry_after=3600"


# ---------------------------------------------------------------- helpers


def acct(name, base_url, kind=None, max_concurrency=None, model_map=None, chatgpt_id=None):
    """Account spec for RoutingTest.gw()."""
    return {"name": name, "base_url": base_url, "kind": kind, "max_concurrency": max_concurrency,
            "model_map": model_map, "chatgpt_id": chatgpt_id}


def add_account(g, name, base_url, sort, kind=None, max_concurrency=None, model_map=None,
                chatgpt_id=None):
    """`switchyard account add` with the options harness.Gateway.add_account lacks."""
    token = f"tok-{name}-{os.urandom(6).hex()}"
    args = ["account", "add", "--db", g.db_path, "--name", name, "--base-url", base_url,
            "--token", token, "--sort", str(sort)]
    if kind:
        args += ["--kind", kind]
    if max_concurrency is not None:
        args += ["--max-concurrency", str(max_concurrency)]
    if model_map is not None:
        args += ["--model-map", model_map if isinstance(model_map, str) else json.dumps(model_map)]
    if chatgpt_id:
        args += ["--chatgpt-account-id", chatgpt_id]
    g.cli(*args)
    g.accounts[name] = token


def served(r):
    """The account that produced a response (x-switchyard-account)."""
    return r.headers.get("x-switchyard-account")


def log_count(g, needle):
    return g.log_text().count(needle)


def wait_log(g, needle, before, what=None, timeout=harness.WAIT_TIMEOUT):
    """Waits until needle occurs in the gateway log more than `before` times."""
    return wait_for(lambda: log_count(g, needle) > before, timeout=timeout,
                    what=what or f"the gateway log to say {needle!r}")


POOL_RELOADED = "pool: reloaded"


def count_closes(up):
    """Counts the connections a PyUpstream's server has closed (its handler done, the socket shut):
    a list whose [0] grows by one for each."""
    closed, lock = [0], threading.Lock()
    shutdown = up.server.shutdown_request

    def counted(request):
        shutdown(request)
        with lock:
            closed[0] += 1
    up.server.shutdown_request = counted
    return closed


class RoutingTest(GatewayTest):

    def gw(self, accounts, env=None, policies=None, serve_args=(), start=True, keys=()):
        """A gateway over acct() specs (sort 10, 20, ... in list order); extra platform keys
        named in `keys` are added before start (g.extra_keys[name])."""
        g = Gateway((), env=env, policies=policies, serve_args=serve_args)
        self._gateways.append(g)
        self.addCleanup(g.cleanup)
        for i, a in enumerate(accounts):
            add_account(g, a["name"], a["base_url"], (i + 1) * 10, kind=a["kind"],
                        max_concurrency=a["max_concurrency"], model_map=a["model_map"],
                        chatgpt_id=a["chatgpt_id"])
        g.extra_keys = {k: g.add_key(k) for k in keys}
        if start:
            g.start()
        return g

    def oks(self, names, scenario="ok", **kw):
        return [acct(n, self.mock.url(n, scenario), **kw) for n in names]

    def send(self, g, n, body=RESP_BODY, path="/v1/responses", key="default"):
        """n requests in sequence, each must be 200; returns the serving accounts."""
        out = []
        for _ in range(n):
            r = g.post(path, body, key=key)
            self.assertEqual(r.status, 200, r)
            out.append(served(r))
        return out

    def assertRotation(self, seq, cycle):
        """seq follows cycle strictly, starting anywhere in it."""
        self.assertTrue(seq and seq[0] in cycle, seq)
        start = cycle.index(seq[0])
        expected = [cycle[(start + i) % len(cycle)] for i in range(len(seq))]
        self.assertEqual(seq, expected, "not a strict round-robin")

    def pyup(self, name):
        up = PyUpstream(name)
        self.addCleanup(up.close)
        return up

    def wait_pool_reload(self, g, before):
        wait_log(g, POOL_RELOADED, before, "the running gateway to reload its account pool")

    # ------------------------------------------------------------ balanced

    def test_balanced_via_env_is_strict_round_robin(self):
        g = self.gw(self.oks("abc"), env={"SWITCHYARD_ROUTE_STRATEGY": "balanced"})
        seq = self.send(g, 6)
        self.assertEqual(seq, ["a", "b", "c", "a", "b", "c"])
        self.assertEqual(self.mock.accounts_hit(), seq, "the upstream saw a different order")
        self.assertIn("strategy balanced", g.log_text())
        rows = g.wait_request_logs(6)
        self.assertEqual({r["route_strategy"] for r in rows}, {"balanced"}, rows)

    def test_balanced_cursor_is_per_key_and_model(self):
        g = self.gw(self.oks("abc"), env={"SWITCHYARD_ROUTE_STRATEGY": "balanced"}, keys=("k2",))
        other = dict(RESP_BODY, model="other-model")
        seq = []
        for _ in range(3):
            seq.append(self.send(g, 1)[0])                            # key 1, gpt-test
            seq.append(self.send(g, 1, body=other)[0])                # key 1, other-model
            seq.append(self.send(g, 1, key=g.extra_keys["k2"])[0])    # key 2, gpt-test
        self.assertEqual(seq, ["a"] * 3 + ["b"] * 3 + ["c"] * 3,
                         "each key+model should have its own round-robin cursor")

    def test_balanced_keeps_rotating_over_the_available_accounts(self):
        # a fails (and cools down); the rotation goes on strictly between the others. The cursor is
        # the account tried last (b after a -> b), so b and c alternate: b, c, b, c, ...
        g = self.gw([acct("a", self.mock.url("a", LONG_500)), acct("b", self.mock.url("b")),
                     acct("c", self.mock.url("c"))], env={"SWITCHYARD_ROUTE_STRATEGY": "balanced"})
        seq = self.send(g, 5)
        self.assertEqual(seq, ["b", "c", "b", "c", "b"])
        self.assertEqual(self.mock.accounts_hit(), ["a"] + seq, "a was tried while cooling down")

    def test_balanced_via_strategy_rr_flag(self):
        for flag in ("rr", "round_robin", "balanced"):
            with self.subTest(strategy=flag):
                self.mock.reset()
                names = [n + flag for n in "wxyz"]   # ordered would never use the 4th
                g = self.gw(self.oks(names), serve_args=["--strategy", flag])
                seq = self.send(g, 8)
                self.assertEqual(seq, names * 2)
                self.assertIn("strategy balanced", g.log_text())
                g.cleanup()

    def test_balanced_via_config_set_on_running_gateway(self):
        names = ["a", "b", "c", "d"]
        g = self.gw(self.oks(names))
        # ordered (the default): the 4th account is never among the first three tried
        seq = self.send(g, 8)
        self.assertNotIn("d", seq, "ordered strategy used the 4th account")
        before = log_count(g, "route strategy is now balanced")
        p = g.cli("config", "set", "--db", g.db_path, "route_strategy", "balanced")
        self.assertEqual(p.returncode, 0, p.stderr)
        wait_log(g, "route strategy is now balanced", before,
                 "the running gateway to switch to the balanced strategy")
        seq = self.send(g, 8)
        self.assertRotation(seq, names)
        self.assertEqual(self.mock.accounts_hit()[-8:], seq)

    def test_config_unset_route_strategy_returns_to_default(self):
        names = ["a", "b", "c", "d"]
        g = self.gw(self.oks(names))
        g.cli("config", "set", "--db", g.db_path, "route_strategy", "rr")
        wait_log(g, "route strategy is now balanced", 0)
        self.assertRotation(self.send(g, 4), names)
        before = log_count(g, POOL_RELOADED)
        g.cli("config", "unset", "--db", g.db_path, "route_strategy")
        self.wait_pool_reload(g, before)
        # back on the compiled-in default (ordered): the 4th account gets nothing
        seq = self.send(g, 8)
        self.assertNotIn("d", seq, "after `config unset route_strategy` the gateway still round-robins "
                                   f"(expected the default, ordered): {seq}")

    def test_config_unset_rotation_returns_to_default(self):
        g = self.rotation_gateway(None, start=False)
        g.cli("config", "set", "--db", g.db_path, "rotation", "aggregate_api_rotation")
        g.start()
        self.assertEqual({s[0] for s in self.send(g, 4)}, {"g"})
        before = log_count(g, POOL_RELOADED)
        g.cli("config", "unset", "--db", g.db_path, "rotation")
        self.wait_pool_reload(g, before)
        seq = self.send(g, 4)
        self.assertEqual({s[0] for s in seq}, {"a"},
                         "after `config unset rotation` the gateway still uses aggregate_api_rotation "
                         f"(expected the default, hybrid_rotation: accounts first): {seq}")

    def test_env_strategy_wins_over_config_setting(self):
        names = ["a", "b", "c", "d"]
        g = self.gw(self.oks(names), env={"SWITCHYARD_ROUTE_STRATEGY": "ordered"}, start=False)
        g.cli("config", "set", "--db", g.db_path, "route_strategy", "balanced")
        g.start()
        seq = self.send(g, 8)
        self.assertNotIn("d", seq, "the database setting overrode SWITCHYARD_ROUTE_STRATEGY")
        self.assertIn("strategy ordered", g.log_text())

    # ------------------------------------------------------------ ordered

    def test_ordered_first_accounts_get_traffic_and_new_lower_sort_is_picked_up(self):
        g = self.gw(self.oks("abcde"))
        seq = self.send(g, 12)
        self.assertTrue(set(seq) <= {"a", "b", "c"}, f"ordered used accounts past the first three: {seq}")
        # an account added with a lower sort while the gateway runs goes to the front
        add_account(g, "new", self.mock.url("new"), sort=1)

        def new_served():
            r = g.post("/v1/responses", RESP_BODY)
            self.assertEqual(r.status, 200, r)
            return served(r) == "new"

        wait_for(new_served, interval=0.1, what="the new lower-sort account to get traffic")
        seq = self.send(g, 12)
        self.assertTrue(set(seq) <= {"new", "a", "b"},
                        f"after adding a sort-1 account, the 4th by sort (c) still got traffic: {seq}")

    # ------------------------------------------------------------ preferred

    def test_preferred_account_goes_first(self):
        for strategy in ("ordered", "balanced"):
            with self.subTest(strategy=strategy):
                self.mock.reset()
                names = [strategy + n for n in "abcd"]
                g = self.gw(self.oks(names), env={"SWITCHYARD_ROUTE_STRATEGY": strategy}, start=False)
                p = g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", names[3])
                self.assertIn("now prefers account " + names[3], p.stdout)
                g.start()
                self.assertEqual(self.send(g, 6), [names[3]] * 6, "the preferred account was not first")
                self.assertEqual(self.mock.accounts_hit(), [names[3]] * 6)
                g.cleanup()

    def test_preferred_account_set_and_cleared_while_running(self):
        names = list("abcd")
        g = self.gw(self.oks(names))
        self.assertNotIn("d", self.send(g, 4))
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "d")

        def d_served():
            r = g.post("/v1/responses", RESP_BODY)
            self.assertEqual(r.status, 200, r)
            return served(r) == "d"

        wait_for(d_served, interval=0.1, what="the new preferred account to get traffic")
        self.assertEqual(self.send(g, 4), ["d"] * 4)
        before = log_count(g, POOL_RELOADED)
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--clear")
        self.wait_pool_reload(g, before)
        self.assertNotIn("d", self.send(g, 8), "the cleared preference still routes to d")

    # ------------------------------------------------------------ concurrency

    SLOW = "slow_stream,ms=300,deltas=400"   # two minutes of deltas; the test closes it early

    def hold_stream(self, g, expect_account):
        """Opens a streamed request and reads until its first text; returns the open stream."""
        st = g.open_stream("/v1/responses", RESP_STREAM)
        self.addCleanup(st.close)
        self.assertEqual(st.status, 200)
        self.assertEqual(st.headers.get("x-switchyard-account"), expect_account,
                         "precondition: the first request goes to the preferred account")
        self.assertTrue(st.read_until(lambda raw: b"response.output_text.delta" in raw),
                        f"stream ended before any text: {st.raw[:300]!r}")
        return st

    def concurrent_case(self, first, limit_account_spec):
        """`first` (preferred, slow stream) serves one stream; returns who serves a second request
        sent while that stream is open. Accounts: the spec, then b (ok)."""
        g = self.gw([limit_account_spec, acct("b", self.mock.url("b"))], start=False)
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", first)
        g.start()
        st = self.hold_stream(g, first)
        # the second request streams too (a slow account would take minutes to finish it)
        st2 = g.open_stream("/v1/responses", RESP_STREAM)
        self.addCleanup(st2.close)
        self.assertEqual(st2.status, 200)
        who = st2.headers.get("x-switchyard-account")
        st2.close()
        st.close()
        return g, who

    def test_max_concurrency_one_sends_concurrent_request_to_next_account(self):
        g, who = self.concurrent_case("a", acct("a", self.mock.url("a", self.SLOW), max_concurrency=1))
        self.assertEqual(who, "b", "a second request went to an account at its concurrency limit")
        self.assertEqual(self.mock.accounts_hit(), ["a", "b"])
        text = wait_for(lambda: (lambda t: t if t.count("REQUEST_FINAL") >= 1 else None)(g.trace_text()),
                        what="a REQUEST_FINAL trace event")
        skips = [ln for ln in text.splitlines() if "CANDIDATE_SKIP" in ln and "account=a " in ln]
        self.assertTrue(any("concurrency limit" in ln for ln in skips), text[-2000:])

    def test_without_a_limit_the_preferred_account_takes_concurrent_requests(self):
        # control for the test above: api_key accounts default to no limit
        g, who = self.concurrent_case("a", acct("a", self.mock.url("a", self.SLOW)))
        self.assertEqual(who, "a", "an api_key account without --max-concurrency was treated as limited")

    def test_chatgpt_account_defaults_to_concurrency_one(self):
        spec = acct("cg", self.mock.url("cg", self.SLOW, v1=False), kind="chatgpt", chatgpt_id="acc-1")
        g, who = self.concurrent_case("cg", spec)
        self.assertEqual(who, "b", "a chatgpt account took a second concurrent request")
        listed = {a["name"]: a for a in json.loads(g.cli("account", "list", "--db", g.db_path,
                                                          "--json").stdout)}
        self.assertEqual(listed["cg"]["max_concurrency"], 1)
        self.assertEqual(listed["b"]["max_concurrency"], 0)

    # ------------------------------------------------------------ upstream connections

    def test_upstream_closing_idle_connections_is_survived(self):
        # the gateway keeps an idle upstream connection on its loop between requests; when the
        # server closes it, the next request must still go through on a new connection
        up = self.pyup("idle")
        up.drop_idle = True
        closed = count_closes(up)
        g = self.gw([acct("idle", up.base_url())])
        for i in range(4):
            r = g.post("/v1/responses", RESP_BODY)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.headers.get("x-switchyard-attempts"), "1")
            # the next request goes once the server has closed this connection, not while it may
            wait_for(lambda: closed[0] > i, what="the upstream to close its idle connection")
        self.assertEqual(up.count(), 4)
        self.assertEqual(up.connections, 4, "a closed connection was reused, or one was opened per retry")

    def test_upstream_connection_is_reused(self):
        up = self.pyup("keep")
        g = self.gw([acct("keep", up.base_url())])
        self.assertEqual(self.send(g, 4), ["keep"] * 4)
        self.assertEqual(up.connections, 1, "the kept-alive upstream connection was not reused")

    # ------------------------------------------------------------ quota guard

    def test_quota_guard_holds_nearly_used_accounts_in_reserve(self):
        # balanced would alternate a, b, c; the guard takes a and b out of the normal pool once they
        # report their usage (a: 5-hour window 97 % used, b: weekly window 92 % used)
        g = self.gw([acct("a", self.mock.url("a", "ok,primary=97")),
                     acct("b", self.mock.url("b", "ok,secondary=92")),
                     acct("c", self.mock.url("c"))], env={"SWITCHYARD_ROUTE_STRATEGY": "balanced"})
        seq = self.send(g, 2)
        self.assertEqual(seq, ["a", "b"])
        seq = self.send(g, 6)
        self.assertEqual(seq, ["c"] * 6, "an account reporting < 5 % / < 10 % left was not held in reserve")
        # with only reserve accounts left, they are still used
        before = log_count(g, POOL_RELOADED)
        g.cli("account", "disable", "--db", g.db_path, "--name", "c")
        self.wait_pool_reload(g, before)
        seq = self.send(g, 4)
        self.assertTrue(set(seq) <= {"a", "b"}, seq)
        self.assertEqual(self.mock.accounts_hit()[-4:], seq)

    def test_quota_guard_is_asked_once_per_usage_not_per_request(self):
        # this guard excludes an account the second time it is asked about the same usage: the
        # gateway keeps a verdict until the account's usage changes, so it is never asked twice
        pdir = self.policy_copy()
        with open(os.path.join(pdir, "guard.lua"), "w") as f:
            f.write('local asked = {}\n'
                    'local function guard(acct)\n'
                    '  local k = acct.name .. "/" .. tostring(acct.primary_used_pct)\n'
                    '  if asked[k] then return "exclude" end\n'
                    '  asked[k] = true\n'
                    '  return "normal"\n'
                    'end\n'
                    'return { version = 1, guard = guard }\n')
        g = self.gw([acct("solo", self.mock.url("solo"))], policies=pdir)
        self.assertEqual(self.send(g, 4), ["solo"] * 4, "the guard was asked again without a usage change")

    def test_quota_guard_reserve_only_pool_is_used(self):
        g = self.gw([acct("a", self.mock.url("a", "ok,primary=97"))])
        self.assertEqual(self.send(g, 3), ["a"] * 3, "a reserve-only pool must still serve")

    # ------------------------------------------------------------ model mapping

    def test_model_map_rewrites_model_only(self):
        up = self.pyup("m")
        g = self.gw([acct("m", up.base_url(), model_map={"gpt-test": "upstream-model"})])
        body = {"model": "gpt-test", "messages": [{"role": "system", "content": "be brief"},
                                                  {"role": "user", "content": "h\u00e9llo \u2713 \"q\"\n"}],
                "temperature": 0.7, "max_tokens": 64, "top_p": 1, "stop": ["\n\n", "END"],
                "metadata": {"nested": {"list": [1, 2.5, True, None, {"k": "v"}]}},
                "user": "u-1", "big": 12345678901234}
        r = g.post("/v1/chat/completions", body)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["choices"][0]["message"]["content"], "hello from m")
        self.assertEqual(up.count(), 1)
        sent = up.records[0]["body"]
        got = json.loads(sent, object_pairs_hook=lambda pairs: pairs)
        want = json.loads(json.dumps(dict(body, model="upstream-model")), object_pairs_hook=lambda pairs: pairs)
        self.assertEqual(got, want, f"the body changed beyond the model: {sent[:500]!r}")
        # a model the map does not name goes through byte for byte
        raw = json.dumps(dict(body, model="not-mapped"), separators=(", ", " : ")).encode()
        r = g.post("/v1/chat/completions", raw, headers={"Content-Type": "application/json"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(up.records[1]["body"], raw, "an unmapped model's body was rewritten")

    def test_model_map_seen_by_upstream_and_not_applied_to_other_accounts(self):
        g = self.gw([acct("m", self.mock.url("m"), model_map={"gpt-test": "upstream-model"})])
        for path, body in (("/v1/responses", RESP_BODY), ("/v1/responses", RESP_STREAM),
                           ("/v1/chat/completions", CHAT_BODY)):
            self.mock.reset()
            r = g.post(path, body, stream=body.get("stream", False))
            self.assertEqual(r.status, 200, r)
            recs = self.mock.requests()
            self.assertEqual([(x["account"], x["model"]) for x in recs], [("m", "upstream-model")])
        g.cleanup()
        self.mock.reset()
        g = self.gw([acct("a", self.mock.url("a", LONG_500), model_map='{"gpt-test":"upstream-model"}'),
                     acct("b", self.mock.url("b"))])
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(served(r), "b")
        recs = self.mock.requests()
        self.assertEqual([(x["account"], x["model"]) for x in recs],
                         [("a", "upstream-model"), ("b", "gpt-test")],
                         "the failover retry must carry the client's model, not a's mapping")

    # ------------------------------------------------------------ aggregate circuit breaker

    def short_server_cooldown_policies(self, seconds=1):
        pdir = self.policy_copy()
        path = os.path.join(pdir, "classify.lua")
        with open(path) as f:
            src = f.read()
        new, n = re.subn(r'failover\("server", 30\)', f'failover("server", {seconds})', src)
        self.assertGreaterEqual(n, 1, "could not find the server cooldown in classify.lua")
        # and no same-account retry first: each 5xx is one failure of the account
        new, n = re.subn(r'local SERVER_RETRIES = 1', 'local SERVER_RETRIES = 0', new)
        self.assertEqual(n, 1, "could not find SERVER_RETRIES in classify.lua")
        with open(path, "w") as f:
            f.write(new)
        # and the breaker stays open as long as the cooldown
        path = os.path.join(pdir, "breaker.lua")
        with open(path) as f:
            src = f.read()
        new, n = re.subn(r'local OPEN_SECONDS = 60', f'local OPEN_SECONDS = {seconds}', src)
        self.assertEqual(n, 1, "could not find OPEN_SECONDS in breaker.lua")
        with open(path, "w") as f:
            f.write(new)
        return pdir

    def test_aggregate_circuit_breaker_cools_down_then_probes(self):
        agg = self.pyup("agg")
        agg.fail_status = 500
        pdir = self.short_server_cooldown_policies(1)
        g = self.gw([acct("agg", agg.base_url(), kind="aggregate"), acct("b", self.mock.url("b"))],
                    env={"SWITCHYARD_ROTATION": "hybrid_aggregate_first_rotation"}, policies=pdir)

        # four failures in a row (each request fails over to b; agg rests 1 s after each)
        def four_failures():
            r = g.post("/v1/responses", RESP_BODY)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(served(r), "b", r.headers)
            return agg.count() >= 4

        wait_for(four_failures, interval=0.1, what="the aggregate account to fail four times")
        self.assertEqual(agg.count(), 4)
        wait_for(lambda: "account agg: circuit open after 4 failures in a row" in g.log_text(),
                 what="the log to say the circuit opened")
        agg_id = g.account_id("agg")
        st = wait_for(lambda: g.query("SELECT * FROM account_state WHERE account_id = ? AND "
                                      "last_error = 'server' AND cooldown_until > 0", (agg_id,)),
                      what="agg's cooldown to be stored")[0]
        self.assertAlmostEqual(st["cooldown_until"] - st["updated_at"], 1.0, delta=0.01,
                               msg=f"agg should rest classify's 1 s: {st}")

        # after the cooldown the next request probes it; hold that probe in flight
        agg.fail_status = None
        agg.hold_next = True
        results = []

        def until_probe():
            while True:
                r = g.post("/v1/responses", RESP_BODY)
                results.append(r)
                if r.status != 200 or served(r) == "agg":
                    return
                time.sleep(0.05)

        t = threading.Thread(target=until_probe, daemon=True)
        t.start()
        self.assertTrue(agg.held.wait(harness.WAIT_TIMEOUT), "agg was never probed after its cooldown")
        self.assertEqual(agg.count(), 5, "agg was tried while cooling down")
        # while the probe is in flight the circuit is half-open: nothing else goes to agg
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(served(r), "b", "a second request went to a half-open aggregate")
        self.assertEqual(agg.count(), 5)
        agg.release()
        t.join(harness.REQUEST_TIMEOUT)
        self.assertFalse(t.is_alive())
        self.assertTrue(all(x.status == 200 for x in results), results)
        self.assertEqual(served(results[-1]), "agg", results[-1].headers)
        self.assertEqual(results[-1].json()["output"][0]["content"][0]["text"], "hello from agg")
        # the breaker closes after 2 successful probes
        self.assertEqual(self.send(g, 1), ["agg"])
        wait_for(lambda: "account agg: probe succeeded, circuit closed" in g.log_text(),
                 what="the log to say the circuit closed")
        text = wait_for(lambda: (lambda t: t if "half-open" in t else None)(g.trace_text()),
                        what="a CANDIDATE_SKIP naming the half-open circuit")
        lines = text.splitlines()
        self.assertTrue(any("CANDIDATE_SKIP" in ln and "account=agg " in ln for ln in lines
                            if "half-open" in ln), text[-2000:])
        failovers = [ln for ln in lines if "CANDIDATE_SKIP" in ln and "account=agg " in ln
                     and "status=500" in ln]
        self.assertEqual(len(failovers), 4, failovers)
        self.assertTrue(all("cooldown_s=1" in ln for ln in failovers), failovers)
        # closed again: agg (aggregate first) serves the next requests
        self.assertEqual(self.send(g, 2), ["agg", "agg"])

    # ------------------------------------------------------------ rotation modes

    def rotation_gateway(self, mode, acct_scenario="ok", agg_scenario="ok", tag="", start=True):
        accts = [acct(f"a1{tag}", self.mock.url(f"a1{tag}", acct_scenario)),
                 acct(f"a2{tag}", self.mock.url(f"a2{tag}", acct_scenario)),
                 acct(f"g1{tag}", self.mock.url(f"g1{tag}", agg_scenario), kind="aggregate"),
                 acct(f"g2{tag}", self.mock.url(f"g2{tag}", agg_scenario), kind="aggregate")]
        env = {"SWITCHYARD_ROTATION": mode} if mode else None
        return self.gw(accts, env=env, start=start)

    def test_rotation_modes_choose_the_groups(self):
        cases = {
            # mode: (which group serves while everything is ok)
            "aggregate_api_rotation": "g",
            "account_rotation": "a",
            "hybrid_aggregate_first_rotation": "g",
            "hybrid_rotation": "a",
            None: "a",     # default: hybrid_rotation
        }
        for mode, group in cases.items():
            with self.subTest(mode=mode):
                self.mock.reset()
                tag = "-" + (mode or "default")
                g = self.rotation_gateway(mode, tag=tag)
                seq = self.send(g, 6)
                self.assertEqual({s[0] for s in seq}, {group}, seq)
                self.assertEqual({x[0] for x in self.mock.accounts_hit()}, {group})
                g.cleanup()

    def test_rotation_modes_when_the_first_group_fails(self):
        # the group tried first fails with 500 (cooling 30 s); what is tried next?
        cases = [
            # mode, failing group, expected 200?, expected upstream hits (groups, in order)
            ("aggregate_api_rotation", "g", False, ["g", "g"]),
            ("account_rotation", "a", False, ["a", "a"]),
            ("hybrid_aggregate_first_rotation", "g", True, ["g", "g", "a"]),
            ("hybrid_rotation", "a", True, ["a", "a", "g"]),
        ]
        for mode, failing, ok, hits in cases:
            with self.subTest(mode=mode):
                self.mock.reset()
                g = self.rotation_gateway(mode, acct_scenario=LONG_500 if failing == "a" else "ok",
                                          agg_scenario=LONG_500 if failing == "g" else "ok",
                                          tag="-" + mode)
                r = g.post("/v1/responses", RESP_BODY)
                self.assertEqual([x[0] for x in self.mock.accounts_hit()], hits)
                if ok:
                    self.assertEqual(r.status, 200, r)
                else:
                    err = self.assertOpenAIError(r, 503)
                    other = "a" if failing == "g" else "g"
                    self.assertIn("left out by the order policy", err["message"])
                    for i in (1, 2):
                        self.assertIn(f"{other}{i}-{mode}", err["message"])
                g.cleanup()

    def test_rotation_set_with_config_on_running_gateway(self):
        g = self.rotation_gateway(None)
        self.assertEqual({s[0] for s in self.send(g, 4)}, {"a"})
        before = log_count(g, "rotation mode is now aggregate_api_rotation")
        g.cli("config", "set", "--db", g.db_path, "rotation", "aggregate_api_rotation")
        wait_log(g, "rotation mode is now aggregate_api_rotation", before)
        self.assertEqual({s[0] for s in self.send(g, 4)}, {"g"})


if __name__ == "__main__":
    main()
