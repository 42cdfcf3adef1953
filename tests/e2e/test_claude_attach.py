"""test_claude_attach.py: `switchyard claude attach | detach | status` (docs/claude.md).
attach finds the gateway serving the database as `codex attach` does and writes
ANTHROPIC_BASE_URL and ANTHROPIC_AUTH_TOKEN (a platform key of its own, and the
models when asked) into the env of Claude Code's settings.json; the key it wrote
opens POST /v1/messages as Claude Code sends it (a bearer token) against the
mock upstream; every other byte of the file stays; attach twice changes
nothing; detach removes a file attach created and gives an existing one back
byte for byte, keeping what changed meanwhile; status says where the file
points and whether that gateway answers and takes the key; a file Claude Code
could not read is refused untouched; a kill half-way is put right by the next
command. Every run has a HOME and CLAUDE_CONFIG_DIR of its own, never the
caller's."""

import json
import os
import shutil
import subprocess
import tempfile
import urllib.parse

from harness import GatewayTest, account, closed_port, http_call, main, switchyard_bin, wait_for

ORIGINAL = ('{\n'
            '  "model": "opus",\n'
            '  "env": {\n'
            '    "DISABLE_TELEMETRY": "1",\n'
            '    "ANTHROPIC_BASE_URL": "https://proxy.example.com"\n'
            '  },\n'
            '  "permissions": {\n'
            '    "allow": ["Bash(npm run test:*)"],\n'
            '    "deny": ["Read(./.env)"]\n'
            '  },\n'
            '  "hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "true"}]}]}\n'
            '}\n')

MSG = {"model": "gpt-test", "max_tokens": 256, "messages": [{"role": "user", "content": "hi"}]}


class ClaudeAttachTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.home = tempfile.mkdtemp(prefix="sy-claude-home-")
        self.addCleanup(shutil.rmtree, self.home, True)
        self.cfg_dir = os.path.join(self.home, ".claude")
        os.mkdir(self.cfg_dir, 0o700)
        self.settings = os.path.join(self.cfg_dir, "settings.json")

    def sy(self, g, *args, env=None, check=True, config_dir=False):
        """`switchyard claude ...` with HOME the test's (and CLAUDE_CONFIG_DIR when config_dir)."""
        e = {k: v for k, v in g.env.items() if k != "CLAUDE_CONFIG_DIR"}
        e["HOME"] = self.home
        if config_dir:
            e["CLAUDE_CONFIG_DIR"] = self.cfg_dir
        e.update(env or {})
        p = subprocess.run([switchyard_bin(), "claude", *args, "--db", g.db_path], capture_output=True, text=True,
                           timeout=60, env=e, stdin=subprocess.DEVNULL, cwd=g.dir)
        if check and p.returncode != 0:
            raise AssertionError(f"claude {' '.join(args)} rc={p.returncode}\n{p.stdout}{p.stderr}")
        return p

    def write(self, text, mode=0o644):
        with open(self.settings, "w", newline="") as f:
            f.write(text)
        os.chmod(self.settings, mode)

    def read(self):
        with open(self.settings, "r", newline="") as f:
            return f.read()

    def env_of(self):
        return json.loads(self.read()).get("env", {})

    def keys(self, g):
        return g.query("SELECT name, prefix, revoked FROM platform_keys WHERE name = 'claude-code' ORDER BY id")

    def wait_key(self, g, token, live=True):
        """A running gateway reloads keys on its next tick: wait until it (no longer) takes token."""
        def state():
            st = g.get("/v1/models", key=token).status
            return st == 200 if live else st == 401
        wait_for(state, what=f"the gateway to {'accept' if live else 'refuse'} the attach's key")

    def messages_as_claude_code(self, env):
        """POST /v1/messages?beta=true where ANTHROPIC_BASE_URL points, with the bearer token."""
        url = urllib.parse.urlsplit(env["ANTHROPIC_BASE_URL"])
        self.assertEqual(url.path, "", "the gateway's root: Claude Code appends /v1/messages itself")
        headers = {"Authorization": f"Bearer {env['ANTHROPIC_AUTH_TOKEN']}", "anthropic-version": "2023-06-01"}
        return http_call(url.port, "POST", "/v1/messages?beta=true", MSG, headers)

    # ------------------------------------------------------------------ attach into a missing file

    def test_attach_into_a_missing_file_the_key_works_and_detach_removes_the_file(self):
        g = self.gateway([account("fresh", self.mock.url("fresh", "ok"))])
        self.assertTrue(self.sy(g, "status", config_dir=True).stdout.startswith("direct: "))
        p = self.sy(g, "attach", config_dir=True)  # the gateway found beside the database, no --gateway
        self.assertTrue(p.stdout.startswith(f"attached: {self.settings} -> http://127.0.0.1:{g.port} "), p.stdout)
        self.assertEqual(os.stat(self.settings).st_mode & 0o777, 0o600)
        self.assertTrue(self.read().startswith('{\n  "env": {\n    "ANTHROPIC_BASE_URL": '), self.read())
        env = self.env_of()
        self.assertEqual(sorted(env), ["ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"])
        self.assertEqual(env["ANTHROPIC_BASE_URL"], f"http://127.0.0.1:{g.port}")
        token = env["ANTHROPIC_AUTH_TOKEN"]
        self.assertTrue(token.startswith("sy-"), token)
        self.assertEqual([(k["name"], k["revoked"]) for k in self.keys(g)], [("claude-code", 0)])
        self.wait_key(g, token)

        r = self.messages_as_claude_code(env)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["content"], [{"type": "text", "text": "hello from fresh"}])
        self.assertEqual([q["account"] for q in self.mock.requests() if q.get("endpoint") == "responses"], ["fresh"])

        st = self.sy(g, "status", config_dir=True)
        self.assertTrue(st.stdout.startswith("attached: "), st.stdout)
        self.assertIn(f"gateway: http://127.0.0.1:{g.port} answers", st.stdout)
        self.assertIn("key: valid there (GET /v1/models answered 200)", st.stdout)
        self.assertIn("model: Claude Code's default", st.stdout)

        d = self.sy(g, "detach", config_dir=True).stdout
        self.assertIn("removed the file attach created", d)
        self.assertNotIn("byte for byte", d)
        self.assertFalse(os.path.exists(self.settings))
        self.assertEqual(os.listdir(self.cfg_dir), [], "no record, temp or lock file left in Claude's directory")
        self.assertEqual([k["revoked"] for k in self.keys(g)], [1])
        self.wait_key(g, token, live=False)
        self.assertTrue(self.sy(g, "status", config_dir=True).stdout.startswith("direct: "))
        p = self.sy(g, "detach", config_dir=True)
        self.assertTrue(p.stdout.startswith("not attached: "), p.stdout)

    # ------------------------------------------------------------------ attach into an existing file

    def test_attach_into_an_existing_file_keeps_every_other_member_and_detach_gives_it_back(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        self.write(ORIGINAL, 0o644)
        p = self.sy(g, "attach", "--model", "gpt-test", "--small-model", "gpt-test-mini")
        self.assertIn("model: gpt-test (ANTHROPIC_MODEL)", p.stdout)
        self.assertIn("mode 0644", p.stdout)  # told that the file others can read now holds a key
        after = self.read()
        self.assertEqual(os.stat(self.settings).st_mode & 0o777, 0o644, "an existing file keeps its mode")
        doc, orig = json.loads(after), json.loads(ORIGINAL)
        for k in ("model", "permissions", "hooks"):
            self.assertEqual(doc[k], orig[k])
        self.assertEqual(list(doc), list(orig), "no member moved or was added at the top level")
        env = doc["env"]
        self.assertEqual(env["DISABLE_TELEMETRY"], "1")
        self.assertEqual(env["ANTHROPIC_BASE_URL"], f"http://127.0.0.1:{g.port}")
        self.assertEqual((env["ANTHROPIC_MODEL"], env["ANTHROPIC_DEFAULT_HAIKU_MODEL"],
                          env["ANTHROPIC_SMALL_FAST_MODEL"]), ("gpt-test", "gpt-test-mini", "gpt-test-mini"))
        # every line of the original outside env is still there, as it was
        for line in ORIGINAL.splitlines():
            if "ANTHROPIC_BASE_URL" not in line:
                self.assertIn(line, after.splitlines())
        self.wait_key(g, env["ANTHROPIC_AUTH_TOKEN"])
        self.assertEqual(self.messages_as_claude_code(env).status, 200)

        # attach again: nothing changes, the same key stays
        p = self.sy(g, "attach", "--model", "gpt-test", "--small-model", "gpt-test-mini")
        self.assertTrue(p.stdout.startswith("already attached: "), p.stdout)
        self.assertEqual(self.read(), after)
        self.assertEqual([k["revoked"] for k in self.keys(g)], [0])
        # attach again without the models: the members it set stay; the first original is kept
        self.assertTrue(self.sy(g, "attach").stdout.startswith("already attached: "))

        d = self.sy(g, "detach").stdout
        self.assertIn("restored the original byte for byte", d)
        self.assertEqual(self.read(), ORIGINAL)
        self.assertEqual(os.stat(self.settings).st_mode & 0o777, 0o644)
        self.assertEqual(sorted(os.listdir(self.cfg_dir)), ["settings.json"])
        self.assertEqual([k["revoked"] for k in self.keys(g)], [1])

    def test_detach_after_edits_gives_back_what_attach_set_and_keeps_the_rest(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        self.write(ORIGINAL)
        self.sy(g, "attach", "--model", "gpt-test")
        # Claude Code rewrites the file while attached (JSON.stringify(..., null, 2)): the user
        # changed the model setting, added a variable, and picked a model of their own
        doc = json.loads(self.read())
        doc["model"] = "sonnet"
        doc["env"]["MY_VAR"] = "x"
        doc["env"]["ANTHROPIC_MODEL"] = "my-own-model"
        doc["theme"] = "dark"
        self.write(json.dumps(doc, indent=2))
        st = self.sy(g, "status", check=False).stdout
        self.assertTrue(st.startswith("drifted: "), st)
        self.assertIn("ANTHROPIC_MODEL: now my-own-model (attach wrote gpt-test)", st)
        d = self.sy(g, "detach").stdout
        self.assertIn("kept ANTHROPIC_MODEL: you changed it while attached", d)
        got = json.loads(self.read())
        want = json.loads(ORIGINAL)
        want["model"] = "sonnet"
        want["theme"] = "dark"
        want["env"]["MY_VAR"] = "x"
        want["env"]["ANTHROPIC_MODEL"] = "my-own-model"
        self.assertEqual(got, want)  # ANTHROPIC_BASE_URL is the original's again, the token gone

    def test_attach_to_a_gateway_on_a_new_port_keeps_the_key(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        self.write(ORIGINAL)
        self.sy(g, "attach")
        token = self.env_of()["ANTHROPIC_AUTH_TOKEN"]
        old_port = g.port
        while g.port == old_port:  # port 0: almost always another port at once
            g.stop()
            g.start()
        st = self.sy(g, "status", check=False)
        self.assertEqual(st.returncode, 1, "Claude Code cannot work: status must say so in its exit code")
        self.assertTrue(st.stdout.startswith(f"attached, but no gateway answers at http://127.0.0.1:{old_port}: "),
                        st.stdout)
        p = self.sy(g, "attach")
        self.assertTrue(p.stdout.startswith("attached (same key): "), p.stdout)
        env = self.env_of()
        self.assertEqual((env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_AUTH_TOKEN"]),
                         (f"http://127.0.0.1:{g.port}", token))
        self.wait_key(g, token)
        self.assertEqual(self.messages_as_claude_code(env).status, 200)
        self.sy(g, "detach")
        self.assertEqual(self.read(), ORIGINAL)  # the first attach's original, not the file of the second

    # ------------------------------------------------------------------ refusals

    def test_a_settings_file_claude_code_cannot_read_is_refused_and_left_unchanged(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        for bad, why in (('{\n  "env": {\n    "A": "1",\n  }\n}\n', "not valid JSON"),
                         ('{"env": ["ANTHROPIC_BASE_URL=x"]}', '"env" is not an object'),
                         ('{"env": {}, "env": {"A": "1"}}', 'two "env" members')):
            self.write(bad)
            p = self.sy(g, "attach", check=False)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn(why, p.stderr)
            self.assertIn("left untouched", p.stderr)
            self.assertEqual(self.read(), bad)
            self.assertEqual(sorted(os.listdir(self.cfg_dir)), ["settings.json"])
            self.assertEqual(self.keys(g), [], "no key made for a refused attach")
            self.assertTrue(self.sy(g, "status").stdout.startswith("direct: "))

    def test_attach_refuses_when_no_gateway_answers_or_the_one_answering_serves_another_database(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        other = self.gateway([account("b", self.mock.url("b"))], start=False)  # never started
        with closed_port() as port:
            p = self.sy(other, "attach", check=False, env={"SWITCHYARD_LISTEN": f"127.0.0.1:{port}"})
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"no gateway answers at http://127.0.0.1:{port}", p.stderr)
        # g answers at the listen address, but it serves another database: its keys are not these
        p = self.sy(other, "attach", check=False, env={"SWITCHYARD_LISTEN": f"127.0.0.1:{g.port}"})
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"a gateway answers at http://127.0.0.1:{g.port}, but it does not serve", p.stderr)
        self.assertFalse(os.path.exists(self.settings))
        # --gateway names it on purpose; --offline skips the check
        p = self.sy(other, "attach", "--gateway", "127.0.0.1:1", "--offline")
        self.assertTrue(p.stdout.startswith("attached: "), p.stdout)
        self.assertEqual(self.env_of()["ANTHROPIC_BASE_URL"], "http://127.0.0.1:1")
        p = self.sy(other, "attach", "--model", "x", "--gateway", "nope://x", check=False)
        self.assertEqual(p.returncode, 2)
        p = self.sy(other, "detach", "--model", "x", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--model applies to attach only", p.stderr)

    def test_bare_and_unknown_subcommands_print_the_short_usage(self):
        g = self.gateway([], start=False)
        for args in ([], ["bogus"]):
            p = subprocess.run([switchyard_bin(), "claude", *args], capture_output=True, text=True, timeout=30,
                               env=dict(g.env, HOME=self.home), stdin=subprocess.DEVNULL)
            self.assertEqual(p.returncode, 2)
            self.assertTrue(p.stderr.lstrip().startswith(("usage: switchyard claude attach",
                                                          "switchyard claude: unknown command")), p.stderr)
            self.assertNotIn("commands:", p.stderr)  # not the whole help
        h = subprocess.run([switchyard_bin(), "--help"], capture_output=True, text=True, timeout=30, env=g.env)
        lines = h.stdout.splitlines()
        at = [i for i, ln in enumerate(lines) if ln.strip().startswith(("codex status", "claude attach"))]
        self.assertEqual(len(at), 2, h.stdout)
        self.assertEqual(at[1], at[0] + 1, "claude's lines follow codex's")

    # ------------------------------------------------------------------ a kill half-way

    def test_a_kill_half_way_through_attach_is_put_right_by_the_next_command(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        self.write(ORIGINAL)
        # killed after the record, before the file: rolled back, the key revoked
        p = self.sy(g, "attach", check=False, env={"SWITCHYARD_TEST_CRASH_AT": "claude_attach_after_record"})
        self.assertEqual(p.returncode, -9)
        self.assertEqual(self.read(), ORIGINAL)
        st = self.sy(g, "status").stdout
        self.assertIn("recovered: rolled back an interrupted attach", st)
        self.assertIn("direct: ", st)
        self.assertEqual([k["revoked"] for k in self.keys(g)], [1])
        # killed after the rename, before the record said so: the attach is finished
        p = self.sy(g, "attach", check=False, env={"SWITCHYARD_TEST_CRASH_AT": "claude_attach_after_rename"})
        self.assertEqual(p.returncode, -9)
        self.assertNotEqual(self.read(), ORIGINAL)
        d = self.sy(g, "detach").stdout
        self.assertIn("recovered: finished an interrupted attach", d)
        self.assertIn("restored the original byte for byte", d)
        self.assertEqual(self.read(), ORIGINAL)
        # killed inside detach, after the file was given back: the next command finishes it
        self.sy(g, "attach")
        p = self.sy(g, "detach", check=False, env={"SWITCHYARD_TEST_CRASH_AT": "claude_detach_after_rename"})
        self.assertEqual(p.returncode, -9)
        self.assertEqual(self.read(), ORIGINAL)
        st = self.sy(g, "status").stdout
        self.assertIn("recovered: finished an interrupted detach", st)
        self.assertIn("direct: ", st)
        self.assertEqual([k["revoked"] for k in self.keys(g)], [1, 1, 1])
        self.assertEqual(sorted(os.listdir(self.cfg_dir)), ["settings.json"])


if __name__ == "__main__":
    main()
