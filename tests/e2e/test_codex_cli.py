"""test_codex_cli.py: the product tried as a new user would: the real Codex
CLI (npm @openai/codex) pointed at the gateway through a custom model
provider completes a prompt while the first accounts of the pool are
exhausted (one answers 429, one sends a quota error inside its 200 stream,
one rejects its token), and the headers Codex sends (session, thread, window,
turn metadata, beta features) reach the upstream; and a session whose turn
holds encrypted reasoning and a tool call moves to another account in the
middle of the turn (between the function call and its follow-up), and back,
each account receiving only its own blobs and turn states (the mock's
tool_call=1: a function call until the input ends with its output; Codex
0.171 runs it with its exec_command tool). Codex is installed from the npm
registry into .cache/codex of the source tree on first use; if npm or the
registry is unavailable the test is skipped and says why."""

import json
import os
import shutil
import subprocess
import tempfile
import threading

from harness import GatewayTest, account, main, npm_package, source_dir, wait_for
from test_oauth import auth_json

CODEX_VERSION = os.environ.get("SWITCHYARD_CODEX_VERSION", "0.171.0")


def codex_bin():
    return npm_package(f"@openai/codex@{CODEX_VERSION}", "codex", os.path.join("node_modules", ".bin", "codex"))


class CodexCliTest(GatewayTest):

    def run_codex(self, exe, g, prompt="say hello", home=None, work=None, args=("exec",), websockets=False,
                  retries=None):
        """Runs `codex exec` (or the subcommand args, e.g. ("exec", "resume",
        "--last")) against gateway g; home and work are Codex's home and
        working directory (fresh ones when None: give the same ones again to
        go on with a session); websockets: the provider has supports_websockets
        = true (Codex talks over the gateway's Responses WebSocket); retries: the
        provider's request_max_retries and stream_max_retries (None: Codex's
        defaults; 0: a turn the gateway fails is not sent again). Returns the
        CompletedProcess."""
        if home is None:
            home = tempfile.mkdtemp(prefix="sy-codex-home-")
            self.addCleanup(shutil.rmtree, home, True)
        if work is None:
            work = tempfile.mkdtemp(prefix="sy-codex-work-")
            self.addCleanup(shutil.rmtree, work, True)
        with open(os.path.join(home, "config.toml"), "w") as f:
            f.write('model = "gpt-test"\n'
                    'model_provider = "switchyard"\n'
                    '[model_providers.switchyard]\n'
                    'name = "switchyard"\n'
                    f'base_url = "http://127.0.0.1:{g.port}/v1"\n'
                    'env_key = "SWITCHYARD_KEY"\n'
                    'wire_api = "responses"\n'
                    + ('supports_websockets = true\n' if websockets else '')
                    + (f'request_max_retries = {retries}\nstream_max_retries = {retries}\n'
                       if retries is not None else ''))
        env = dict(os.environ, CODEX_HOME=home, SWITCHYARD_KEY=g.key, NO_COLOR="1")
        return subprocess.run([exe, *args, "--skip-git-repo-check", prompt], cwd=work, env=env,
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    def test_codex_completes_a_prompt_through_an_imported_login_whose_access_token_expired(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        g = self.gateway(env={"SWITCHYARD_OAUTH_TOKEN_URL": f"{self.mock.base()}/oauth/ok/token"}, start=False)
        path = os.path.join(g.dir, "auth.json")
        with open(path, "w") as f:
            json.dump(auth_json("late", -3600), f)
        g.cli("account", "import", "--db", g.db_path, path)
        g.cli("account", "update", "--db", g.db_path, "--name", "late@example.com",
              "--base-url", self.mock.url("late", "ok,auth=1", v1=False))
        g.start()
        p = self.run_codex(exe, g)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out[-3000:])
        self.assertIn("hello from late", p.stdout, out[-3000:])
        oauth = [r for r in self.mock.requests() if r["endpoint"] == "oauth_token"]
        self.assertEqual([r["refresh_token"] for r in oauth], ["rt_late_1"])
        fresh = g.query("SELECT token FROM accounts WHERE name = 'late@example.com'")[0]["token"]
        served = {r["authorization"] for r in self.mock.requests("late") if r["endpoint"] == "responses"}
        self.assertEqual(served, {"Bearer " + fresh})

    def test_codex_completes_a_prompt_while_first_accounts_are_exhausted(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        # The ordered strategy may swap the first three (health P2C), so the
        # working account is fourth: it is only reached by failing over.
        g = self.gateway([account("spent", self.mock.url("spent", "status=429,retry_after=600")),
                          account("quota", self.mock.url("quota", "quota_stream")),
                          account("gone", self.mock.url("gone", "status=401")),
                          account("fresh", self.mock.url("fresh", "ok"))])
        p = self.run_codex(exe, g)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out[-3000:])
        self.assertIn("hello from fresh", p.stdout, out[-3000:])
        hits = [r["account"] for r in self.mock.requests() if r["endpoint"] == "responses"]
        self.assertEqual(sorted(hits[:3]), ["gone", "quota", "spent"], hits)
        self.assertEqual(hits[3], "fresh", hits)
        self.assertNotIn("usage_limit_reached", p.stdout, "the quota error reached Codex")
        def logged():
            return g.query("SELECT account_name, status, attempts FROM request_logs "
                           "WHERE endpoint = '/v1/responses' ORDER BY id")
        wait_for(logged, what="the request log row")
        rows = logged()
        self.assertEqual((rows[0]["account_name"], rows[0]["status"], rows[0]["attempts"]), ("fresh", 200, 4))


    def test_codex_headers_reach_the_upstream_and_its_session_is_tracked(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        g = self.gateway([account("a", self.mock.url("a", "ok,primary=12,turn_state=ts-a")),
                          account("b", self.mock.url("b", "ok,primary=34,turn_state=ts-b"))])
        p = self.run_codex(exe, g)
        self.assertEqual(p.returncode, 0, (p.stdout + p.stderr)[-3000:])
        reqs = [r for r in self.mock.requests() if r["endpoint"] == "responses"]
        self.assertTrue(reqs, "codex sent no request")
        h = reqs[0]["headers"]
        # what Codex 0.171 sends on a turn, passed on as it came
        for name in ("session-id", "thread-id", "x-client-request-id", "x-codex-window-id",
                     "x-codex-turn-metadata", "x-codex-beta-features"):
            self.assertIn(name, h, f"{name} did not reach the upstream: {sorted(h)}")
        self.assertEqual(h["originator"], "codex_exec")
        self.assertTrue(h["user-agent"].startswith("codex_exec/"), h["user-agent"])
        self.assertIn(h["session-id"], h["x-codex-turn-metadata"])
        self.assertEqual(h["authorization"], f"Bearer {g.accounts[reqs[0]['account']]}")
        # the session id Codex sent is the one the gateway keeps its account by
        text = wait_for(lambda: (lambda t: t if "AFFINITY" in t else None)(g.trace_text()), what="AFFINITY")
        self.assertIn(f"session={h['session-id']} account={reqs[0]['account']}", text)

    def test_codex_completes_a_session_over_the_gateways_websocket(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        # a tool call makes the session two requests: the follow-up continues the first response
        g = self.gateway([account("a", self.mock.url("a", "ok,tool_call=1"))])
        p = self.run_codex(exe, g, websockets=True)
        self.codex_ok(p, "hello from a")
        log = g.log_text()
        self.assertIn("websocket: a Responses connection opened", log)
        # Codex 0.171: a warm-up (generate: false, answered by the gateway), then turns that
        # each continue the last response over the socket (previous_response_id + new items)
        self.assertIn("websocket: a warm-up", log)
        self.assertIn("continuing the last response: sent whole", log)
        reqs = self.responses()
        self.assertGreaterEqual(len(reqs), 2, reqs)
        for r in reqs:  # sent whole: the upstream never sees the socket's previous_response_id
            self.assertIsNone(r["previous_response_id"], r)
            self.assertTrue(r["stream"], r)
        self.assertGreater(reqs[-1]["input_items"], reqs[0]["input_items"], reqs)
        self.assertEqual(reqs[-1]["last_input_type"], "function_call_output", reqs[-1])

    def test_codex_runs_a_tool_through_a_relay_that_speaks_chat_completions_only(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        # the relay is not declared: its 404 to /responses teaches the gateway, which translates
        g = self.gateway([account("rl", self.mock.url("rl", "ok,tool_call=1,speaks=chat"))])
        p = self.run_codex(exe, g)
        self.codex_ok(p, "hello from rl")
        chats = [r for r in self.mock.requests("rl") if r["endpoint"] == "chat/completions"]
        self.assertEqual(len(chats), 2, [(r["endpoint"], r.get("refused")) for r in self.mock.requests("rl")])
        first, follow = (json.loads(r["body"]) for r in chats)
        self.assertTrue(first["stream"])
        self.assertTrue(any(t["function"]["name"] == "exec_command" for t in first["tools"]), first["tools"])
        self.assertEqual(first["messages"][0]["role"], "system")   # Codex's instructions
        # the follow-up: the call Codex ran as an assistant tool call, its output as a tool message
        roles = [m["role"] for m in follow["messages"]]
        self.assertEqual(roles[-2:], ["assistant", "tool"])
        call = follow["messages"][-2]["tool_calls"][0]
        self.assertEqual(call["function"]["name"], "exec_command")
        self.assertEqual(follow["messages"][-1]["tool_call_id"], call["id"])
        self.assertIn("hi", follow["messages"][-1]["content"])      # what `echo hi` printed
        wait_for(lambda: "DIALECT_LEARNED" in g.trace_text(), what="the learned dialect")

    # --- a conversation moves between accounts with its reasoning and tool calls

    def responses(self, account=None):
        return [r for r in self.mock.requests(account) if r["endpoint"] == "responses"]

    def codex_ok(self, p, final):
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out[-3000:])
        self.assertIn(final, p.stdout, out[-3000:])

    def assertOnlyOwnBlobs(self):
        """Every request every account received carried only blobs that account minted."""
        for r in self.responses():
            foreign = [(b["by"], b["item_type"]) for b in r["blobs"] if not b["own"]]
            self.assertEqual(foreign, [], f"request {r['n']} to {r['account']} carried blobs of others")

    def assertToolTurnMovedAtoB(self, g):
        """The turn's first request served by a (reasoning + a function call), its follow-up (a's
        reasoning, the call and its output) refused by a and sent on to b without a's blob."""
        a = self.responses("a")
        self.assertEqual(len(a), 2, [(r["n"], r["scenario"]) for r in a])
        call = a[0]["tool_call"]
        self.assertTrue(call, "a answered its first request without a function call")
        self.assertEqual(a[1]["scenario"], "status", a[1])       # the follow-up: a answered 429
        self.assertEqual(a[1]["tool_outputs"], [call])
        # the follow-up as Codex sent it: a's own reasoning item, the call and its output
        self.assertEqual([(bl["by"], bl["item_type"]) for bl in a[1]["blobs"]], [("a", "reasoning")])
        self.assertEqual(a[1]["input_types"][-3:], ["reasoning", "function_call", "function_call_output"])
        b = self.responses("b")
        self.assertEqual(len(b), 1, b)
        self.assertEqual([bl for bl in b[0]["blobs"] if bl["by"] == "a"], [], "a's blob reached b")
        self.assertEqual(b[0]["refused"], None)
        self.assertEqual(b[0]["tool_outputs"], [call])
        self.assertEqual(b[0]["last_input_type"], "function_call_output")
        self.assertEqual(b[0]["input_types"][-2:], ["function_call", "function_call_output"])
        self.assertNotIn("reasoning", b[0]["input_types"])
        self.assertEqual(b[0]["tool_call"], None)                 # b answered with the final message
        text = wait_for(lambda: (lambda t: t if "BLOBS_STRIPPED" in t else None)(g.trace_text()),
                        what="a BLOBS_STRIPPED line")
        self.assertIn("account=b from=a dropped=1 text=0 strip_retry=0", text)
        return a, b

    def test_codex_session_with_reasoning_and_a_tool_call_moves_to_another_account_mid_turn(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=1,reasoning=1,tool_call=1")),
                          account("b", self.mock.url("b", "ok,reasoning=1,tool_call=1"))])
        p = self.run_codex(exe, g)
        self.codex_ok(p, "hello from b")
        self.assertToolTurnMovedAtoB(g)
        self.assertOnlyOwnBlobs()

    def test_codex_turn_state_stays_with_its_account_when_the_turn_moves(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=1,reasoning=1,tool_call=1,"
                                                          "turn_state=ts-a")),
                          account("b", self.mock.url("b", "ok,reasoning=1,tool_call=1,turn_state=ts-b"))])
        p = self.run_codex(exe, g)
        self.codex_ok(p, "hello from b")
        a, b = self.assertToolTurnMovedAtoB(g)
        # Codex sent a's turn state back within the turn; a got it, b never did
        self.assertEqual(a[1]["headers"].get("x-codex-turn-state"), "ts-a")
        self.assertNotIn("x-codex-turn-state", b[0]["headers"])
        text = wait_for(lambda: (lambda t: t if "CONVERSATION_MOVE" in t else None)(g.trace_text()),
                        what="a CONVERSATION_MOVE line")
        self.assertRegex(text, r"CONVERSATION_MOVE .*from=a to=b by=x-codex-turn-state stripped=turn_state")

    def test_codex_conversation_moved_twice_gives_each_account_only_its_own_blobs(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        # a serves its 1st request and from its 3rd on, b its 1st and from its 3rd on: turn 1
        # moves a -> b between the function call and its follow-up, turn 2 (codex exec resume)
        # comes to b, which fails, and goes back to a. A 429 rests no time here, so a can
        # take turn 2 back.
        with open(os.path.join(source_dir(), "policies", "cooldown.lua")) as f:
            cooldown = f.read()
        self.assertIn("local LADDER = { 45, 300, 1800, 7200 }", cooldown)
        pol = self.policy_copy({"cooldown.lua": cooldown.replace("local LADDER = { 45, 300, 1800, 7200 }",
                                                                 "local LADDER = { 0, 0, 0, 0 }")})
        spec = "status=429,ok_first=1,times=2,reasoning=1,tool_call=1"
        g = self.gateway([account("a", self.mock.url("a", spec)), account("b", self.mock.url("b", spec))],
                         policies=pol)
        home = tempfile.mkdtemp(prefix="sy-codex-home-")
        self.addCleanup(shutil.rmtree, home, True)
        work = tempfile.mkdtemp(prefix="sy-codex-work-")
        self.addCleanup(shutil.rmtree, work, True)
        p = self.run_codex(exe, g, home=home, work=work)
        self.codex_ok(p, "hello from b")
        self.assertToolTurnMovedAtoB(g)
        turn1 = len(self.responses())
        p = self.run_codex(exe, g, "say hello again", home=home, work=work, args=("exec", "resume", "--last"))
        self.codex_ok(p, "hello from a")
        reqs = self.responses()[turn1:]
        # turn 2: b refused it (429) with its own blob in hand, a took it without b's blob,
        # answered with a function call, and the follow-up stayed on a
        self.assertEqual([(r["account"], r["scenario"]) for r in reqs],
                         [("b", "status"), ("a", "ok"), ("a", "ok")], reqs)
        self.assertEqual(sorted(bl["by"] for bl in reqs[0]["blobs"]), ["b"])   # the 429'd try held b's
        back = reqs[1]
        self.assertEqual([bl["by"] for bl in back["blobs"]], ["a"])            # a's own from turn 1, b's gone
        self.assertTrue(back["tool_call"])
        self.assertEqual(reqs[2]["tool_outputs"][-1], back["tool_call"])
        self.assertOnlyOwnBlobs()
        # the gateway knew b minted the blob it kept from a (turn 2's follow-up, on a by affinity)
        wait_for(lambda: "account=a from=b dropped=1" in g.trace_text(), what="turn 2's strip of b's blob in the trace")

    # --- the turn in which the move happens (busy accounts, limits mid-answer)

    def test_codex_turn_waits_for_the_slot_of_a_busy_account_instead_of_failing(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        # a is out of quota; b takes one request at a time and its first answer takes 2.5 s.
        # Another client's request holds b's slot when Codex's turn comes: the turn waits
        # for the slot (Codex does not retry here: a 503 would end it)
        g = self.gateway([account("a", self.mock.url("a", "quota429")),
                          account("b", self.mock.url("b", "slow_headers,ms=2500,times=1"),
                                  args=["--max-concurrency", "1"])])
        other = {}
        t = threading.Thread(target=lambda: other.setdefault("r", g.post("/v1/responses", {
            "model": "gpt-test", "input": "hi"})))
        t.start()
        wait_for(lambda: any(r["account"] == "b" for r in self.mock.requests()), what="b to take the first request")
        p = self.run_codex(exe, g, retries=0)
        t.join(30)
        self.codex_ok(p, "hello from b")
        self.assertEqual(other["r"].status, 200, other["r"])
        wait_for(lambda: "reason=busy" in g.trace_text(), what="the turn's wait for b's slot in the trace")

    def test_codex_turn_whose_account_hits_its_usage_limit_mid_answer_is_finished_on_another(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        # a writes two deltas, then ends the stream with response.failed usage_limit_reached
        g = self.gateway([account("a", self.mock.url("a", "late_error,failed=1,after=2")),
                          account("b", self.mock.url("b"))])
        p = self.run_codex(exe, g, retries=0)
        self.codex_ok(p, "hello from b")  # a's text, then b's continuation (its repeat taken out), one message
        self.assertNotIn("usage limit", (p.stdout + p.stderr).lower())
        self.assertEqual([r["account"] for r in self.responses()], ["a", "b"])
        aid = g.account_id("a")
        wait_for(lambda: g.query("SELECT 1 FROM account_state WHERE account_id = ? AND last_error = 'quota' "
                                 "AND cooldown_until > 0", (aid,)), what="a's cooldown")

    def test_codex_retries_a_turn_whose_account_hits_its_usage_limit_after_a_tool_call(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        # a sends a function call, then response.failed usage_limit_reached: the call is
        # Codex's already, so the answer cannot be continued. The stream ends in the
        # shape Codex retries; its retry goes to b (a rests), which finishes the turn
        g = self.gateway([account("a", self.mock.url("a", "late_error,failed=1,tool_call=1,after=0")),
                          account("b", self.mock.url("b", "ok,tool_call=1"))])
        p = self.run_codex(exe, g)
        self.codex_ok(p, "hello from b")
        out = (p.stdout + p.stderr).lower()
        self.assertNotIn("usage limit", out)
        self.assertEqual(len(self.responses("a")), 1, "the cooled account got the retry")
        b = self.responses("b")
        self.assertEqual(b[-1]["last_input_type"], "function_call_output", b[-1])
        wait_for(lambda: "TURN_RETRY" in g.trace_text(), what="the TURN_RETRY trace line")

    def test_codex_retries_a_turn_cut_by_a_limit_after_a_tool_call_over_the_websocket(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        g = self.gateway([account("a", self.mock.url("a", "late_error,failed=1,tool_call=1,after=0")),
                          account("b", self.mock.url("b", "ok,tool_call=1"))])
        p = self.run_codex(exe, g, websockets=True)
        self.codex_ok(p, "hello from b")
        self.assertNotIn("usage limit", (p.stdout + p.stderr).lower())
        self.assertEqual(len(self.responses("a")), 1, "the cooled account got the retry")
        self.assertIn("websocket: a Responses connection opened", g.log_text())

    def test_codex_shows_a_usage_limit_when_the_whole_pool_is_out_of_quota(self):
        exe, why = codex_bin()
        if not exe:
            self.skipTest(why)
        g = self.gateway([account("a", self.mock.url("a", "quota429,resets=7200")),
                          account("b", self.mock.url("b", "quota429,resets=3600"))])
        p = self.run_codex(exe, g)
        out = p.stdout + p.stderr
        self.assertNotEqual(p.returncode, 0, out[-3000:])
        self.assertIn("usage limit", out.lower(), out[-3000:])
        # Codex took it as a spent plan: no retry of the turn (a 503 is retried several times)
        self.assertEqual(sorted(self.mock.accounts_hit()), ["a", "b"], out[-2000:])

if __name__ == "__main__":
    main()
