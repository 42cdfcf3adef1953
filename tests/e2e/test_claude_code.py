"""test_claude_code.py: the product tried as a new user would: the real
Claude Code (npm @anthropic-ai/claude-code, `claude -p`) pointed at the
gateway (ANTHROPIC_BASE_URL and a platform key as ANTHROPIC_AUTH_TOKEN)
completes a prompt from a pool of OpenAI accounts: a ChatGPT login (its
Messages requests translated to the backend's Responses API and adapted to
its rules, which the mock enforces as strictly as the backend) while the
first account of the pool is rate limited; and a tool loop (the mock's
tool_call=1 asks for a function call until the input ends with its output)
runs to its end. Claude Code's own model names reach the accounts through
--model-map (docs/claude.md, "Model names"). Claude Code is installed from
the npm registry into .cache/claude of the source tree on first use; without
npm or the registry the test is skipped and says why."""

import json
import os
import shutil
import subprocess
import tempfile

from harness import GatewayTest, account, main, npm_package

CLAUDE_VERSION = os.environ.get("SWITCHYARD_CLAUDE_VERSION", "2.1.332")
# Claude Code's main and small model, named as Claude models and mapped onto the pool's model
# (a version's default names change: the test names them, as docs/claude.md's recipe does)
MAIN, SMALL = "claude-sonnet-4-5", "claude-haiku-4-5"
MAP = json.dumps({MAIN: "gpt-test", SMALL: "gpt-test"})


def claude_bin():
    return npm_package(f"@anthropic-ai/claude-code@{CLAUDE_VERSION}", "claude",
                       os.path.join("node_modules", ".bin", "claude"))


class ClaudeCodeTest(GatewayTest):

    def run_claude(self, exe, g, prompt="say hello", model=MAIN, extra=(), home=None, work=None):
        """claude -p PROMPT against gateway g; home and work are Claude Code's home and working
        directory (fresh ones when None: give the same ones again to go on with a session)."""
        if home is None:
            home = tempfile.mkdtemp(prefix="sy-claude-home-")
            self.addCleanup(shutil.rmtree, home, True)
        if work is None:
            work = tempfile.mkdtemp(prefix="sy-claude-work-")
            self.addCleanup(shutil.rmtree, work, True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_") and not k.startswith("CLAUDE")}
        env.update(HOME=home, CLAUDE_CONFIG_DIR=os.path.join(home, ".claude"), NO_COLOR="1",
                   ANTHROPIC_BASE_URL=f"http://127.0.0.1:{g.port}", ANTHROPIC_AUTH_TOKEN=g.key,
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1",
                   DISABLE_ERROR_REPORTING="1", API_TIMEOUT_MS="60000")
        env["ANTHROPIC_MODEL"] = model
        env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] = env["ANTHROPIC_SMALL_FAST_MODEL"] = SMALL
        args = [exe, "-p", prompt, "--output-format", "json", *extra]
        return subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)

    def result(self, p):
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out[-3000:])
        return json.loads(p.stdout.strip().splitlines()[-1])

    def messages_posts(self, name):
        return [r for r in self.mock.requests(name) if r["method"] == "POST"]

    def test_claude_code_completes_a_prompt_on_a_chatgpt_login_while_the_first_account_is_rate_limited(self):
        exe, why = claude_bin()
        if not exe:
            self.skipTest(why)
        g = self.gateway([account("spent", self.mock.url("spent", "status=429,retry_after=600"),
                                  args=["--model-map", MAP]),
                          account("cg", self.mock.url("cg", "ok", v1=False), kind="chatgpt",
                                  args=["--model-map", MAP])])
        res = self.result(self.run_claude(exe, g))
        self.assertFalse(res.get("is_error"), res)
        self.assertIn("hello from cg", res["result"], res)
        posts = self.messages_posts("cg")
        self.assertTrue(posts)
        self.assertEqual([r.get("violations") or [] for r in posts], [[] for _ in posts])
        self.assertEqual({r["model"] for r in posts}, {"gpt-test"})  # the map applied
        self.assertTrue(all(r["model"] in (MAIN, SMALL) for r in g.wait_request_logs(len(posts))))
        rows = g.wait_request_logs(len(posts))
        self.assertTrue(all(r["endpoint"] == "/v1/messages" for r in rows), [r["endpoint"] for r in rows])
        dialects = {a.get("dialect") for r in rows for a in json.loads(r["attempts_json"]) if a["account"] == "cg"}
        self.assertEqual(dialects, {"messages>responses"})

    def test_claude_code_on_anthropic_accounts_natively_and_across_a_running_out_between_turns(self):
        # two Anthropic keys (the mock as strict as api.anthropic.com): the first serves the
        # first turn natively, then runs out (a 429 from its second request on); the session's
        # next turn (claude -p --continue) goes on on the second key
        exe, why = claude_bin()
        if not exe:
            self.skipTest(why)
        g = self.gateway([account("k1", self.mock.url("k1", "status=429,anthropic=1,ok_first=1,retry_after=600"),
                                  kind="anthropic"),
                          account("k2", self.mock.url("k2", "ok,anthropic=1"), kind="anthropic")])
        home = tempfile.mkdtemp(prefix="sy-claude-home-")
        self.addCleanup(shutil.rmtree, home, True)
        work = tempfile.mkdtemp(prefix="sy-claude-work-")
        self.addCleanup(shutil.rmtree, work, True)
        res = self.result(self.run_claude(exe, g, home=home, work=work))
        self.assertIn("hello from k1", res["result"], res)
        for q in self.messages_posts("k1"):
            self.assertEqual((q["authorization"], q["x_api_key"]), (None, g.accounts["k1"]))
            self.assertEqual(q.get("violations") or [], [])
        res = self.result(self.run_claude(exe, g, prompt="and again", home=home, work=work, extra=("--continue",)))
        self.assertIn("hello from k2", res["result"], res)
        posts = self.messages_posts("k2")
        self.assertTrue(any("hello from k1" in (q.get("body") or "") for q in posts),
                        "the second turn carried the first one's answer")
        self.assertTrue(any("assistant" in (q.get("roles") or []) for q in posts), [q.get("roles") for q in posts])
        self.assertEqual([q.get("violations") or [] for q in self.messages_posts("k2")],
                         [[] for _ in self.messages_posts("k2")])

    def test_claude_code_runs_a_tool_loop_to_its_end(self):
        exe, why = claude_bin()
        if not exe:
            self.skipTest(why)
        g = self.gateway([account("a", self.mock.url("a", "ok,tool_call=1"))])
        p = self.run_claude(exe, g, prompt="what is the weather in Paris? use the tool", model="gpt-test",
                            extra=("--allowedTools", "Bash", "--max-turns", "4"))
        res = self.result(p)
        self.assertFalse(res.get("is_error"), res)
        sent = [json.loads(r["body"]) for r in self.messages_posts("a") if r.get("body")]
        outs = [i for b in sent for i in b.get("input", []) if isinstance(i, dict)
                and i.get("type") == "function_call_output"]
        self.assertTrue(outs, "the tool's output went back to the account")


if __name__ == "__main__":
    main()
