"""test_codex_attach.py: `switchyard codex attach | detach | status` and
`serve --codex-attach` with the real Codex CLI (installed like
test_codex_cli.py does). After attach, `codex exec` completes a prompt
through the gateway with nothing else set up (no -c, no variable); after
detach config.toml is byte-identical; what the user changed while attached
survives detach; a clean stop of `serve --codex-attach` hands the file back,
and a kill -9 (also half-way through the attach) is put right by the next
start or command."""

import os
import shutil
import subprocess
import tempfile

from harness import GatewayTest, account, main, switchyard_bin, wait_for
from test_codex_cli import codex_bin

ORIGINAL = ('# my Codex settings\n'
            'model = "gpt-test"  # the mock answers any model\n'
            '\n'
            '[projects."/home/me/src/app.v2"]\n'
            'trust_level = "trusted"\n'
            '\n'
            '[tui]\n'
            'notifications = false\n')


class CodexAttachTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.exe, why = codex_bin()
        if not self.exe:
            self.skipTest(why)
        self.home = tempfile.mkdtemp(prefix="sy-codex-home-")
        self.addCleanup(shutil.rmtree, self.home, True)
        self.cfg = os.path.join(self.home, "config.toml")
        with open(self.cfg, "w", newline="") as f:
            f.write(ORIGINAL)
        os.chmod(self.cfg, 0o640)

    def read_cfg(self):
        with open(self.cfg, "r", newline="") as f:
            return f.read()

    def sy(self, g, *args, check=True):
        return g.cli("codex", *args, "--db", g.db_path, "--codex-home", self.home, check=check)

    def attach_token(self):
        for line in self.read_cfg().splitlines():
            if line.startswith("experimental_bearer_token = "):
                return line.split('"')[1]
        return None

    def wait_key(self, g, token, live):
        """A running gateway reloads keys on its next tick: wait until it (no longer) takes token."""
        def state():
            st = g.get("/v1/models", key=token).status
            return st != 401 if live else st == 401
        wait_for(state, what=f"the gateway to {'accept' if live else 'refuse'} the attach's key")

    def wait_attached(self, g):
        """serve attaches once it listens: wait for it."""
        wait_for(lambda: "codex: attached" in g.log_text(), what="serve --codex-attach to attach")
        self.assertTrue(self.sy(g, "status").stdout.startswith("attached, verified: "), g.log_text()[-2000:])

    def codex_exec(self, prompt="say hello"):
        """Runs the real Codex CLI with only CODEX_HOME set: no key, no -c."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPENAI_", "SWITCHYARD_", "CODEX_"))}
        env.update(CODEX_HOME=self.home, NO_COLOR="1")
        work = tempfile.mkdtemp(prefix="sy-codex-work-")
        self.addCleanup(shutil.rmtree, work, True)
        p = subprocess.run([self.exe, "exec", "--skip-git-repo-check", prompt], cwd=work, env=env,
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        return p, p.stdout + p.stderr

    def test_codex_completes_a_prompt_after_attach_and_detach_gives_the_file_back(self):
        g = self.gateway([account("fresh", self.mock.url("fresh", "ok"))])
        self.sy(g, "attach", "--gateway", f"http://127.0.0.1:{g.port}")
        status = self.sy(g, "status").stdout
        self.assertTrue(status.startswith("attached, verified: "), status)
        token = self.attach_token()
        self.assertTrue(token and token.startswith("sy-"), self.read_cfg())
        self.wait_key(g, token, live=True)
        p, out = self.codex_exec()
        self.assertEqual(p.returncode, 0, out[-3000:])
        self.assertIn("hello from fresh", p.stdout, out[-3000:])
        self.assertEqual([r["account"] for r in self.mock.requests() if r["endpoint"] == "responses"], ["fresh"])
        d = self.sy(g, "detach").stdout
        self.assertIn("byte for byte", d)
        self.assertEqual(self.read_cfg(), ORIGINAL)
        self.assertEqual(os.stat(self.cfg).st_mode & 0o777, 0o640)
        self.assertTrue(self.sy(g, "status").stdout.startswith("direct: "))
        keys = g.query("SELECT name, revoked FROM platform_keys WHERE name = 'codex-attach'")
        self.assertEqual([(k["name"], k["revoked"]) for k in keys], [("codex-attach", 1)])
        self.wait_key(g, token, live=False)  # the revoked key no longer opens the gateway

    def test_attach_refuses_another_databases_gateway_at_the_listen_address(self):
        # issue 34: run for a database no gateway serves, attach fell back to the listen address,
        # where another database's gateway answered, printed "attached" and Codex got only 401s
        served = self.gateway([account("fresh", self.mock.url("fresh", "ok"))])
        other = self.gateway([account("other", self.mock.url("other", "ok"))], start=False)
        other.env["SWITCHYARD_LISTEN"] = f"127.0.0.1:{served.port}"
        before = self.read_cfg()
        p = self.sy(other, "attach", check=False)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn(f"a gateway answers at http://127.0.0.1:{served.port}", p.stderr)
        self.assertIn(f"does not serve {other.db_path}", p.stderr)
        self.assertEqual(self.read_cfg(), before, "nothing was changed")
        self.assertEqual(other.query("SELECT count(*) AS n FROM platform_keys WHERE name = 'codex-attach'")[0]["n"], 0)
        # the database's own gateway, found beside it: attached
        other.start()
        self.assertEqual(self.sy(other, "attach").returncode, 0)
        self.assertIn(f"127.0.0.1:{other.port}", self.read_cfg())

    def test_detach_removes_a_config_attach_created_and_says_so(self):
        g = self.gateway([account("fresh", self.mock.url("fresh", "ok"))])
        os.remove(self.cfg)
        self.sy(g, "attach", "--gateway", f"http://127.0.0.1:{g.port}")
        self.assertTrue(os.path.exists(self.cfg))
        d = self.sy(g, "detach").stdout
        self.assertIn("removed the file attach created", d)
        self.assertNotIn("byte for byte", d)
        self.assertFalse(os.path.exists(self.cfg))

    def test_edits_made_while_attached_survive_detach(self):
        g = self.gateway([account("fresh", self.mock.url("fresh", "ok"))])
        self.sy(g, "attach", "--gateway", f"http://127.0.0.1:{g.port}")
        self.wait_key(g, self.attach_token(), live=True)
        attached = self.read_cfg()
        # the user changes the model, adds a key and a new MCP server while attached
        edited = attached.replace('model = "gpt-test"', 'model = "gpt-test-2"')
        edited = 'approval_policy = "never"\n' + edited
        edited += '\n[mcp_servers.added_while_attached]\ncommand = "true"\n'
        with open(self.cfg, "w", newline="") as f:
            f.write(edited)
        self.assertTrue(self.sy(g, "status").stdout.startswith("attached, verified: "))
        p, out = self.codex_exec()
        self.assertEqual(p.returncode, 0, out[-3000:])
        self.assertIn("hello from fresh", p.stdout, out[-3000:])
        self.sy(g, "detach")
        want = ('approval_policy = "never"\n' + ORIGINAL.replace('model = "gpt-test"', 'model = "gpt-test-2"')
                + '\n[mcp_servers.added_while_attached]\ncommand = "true"\n')
        self.assertEqual(self.read_cfg(), want)

    def test_an_existing_switchyard_provider_is_taken_over_and_given_back(self):
        g = self.gateway([account("fresh", self.mock.url("fresh", "ok"))])
        original = (ORIGINAL + '\n[model_providers.switchyard]\nname = "my old gateway"\n'
                    'base_url = "http://127.0.0.1:9/v1"\nenv_key = "SY_UNSET_VARIABLE"\n')
        with open(self.cfg, "w", newline="") as f:
            f.write(original)
        self.sy(g, "attach", "--gateway", f"http://127.0.0.1:{g.port}")
        # Codex requires an env_key's variable even with a bearer token: out while attached
        self.assertNotIn('env_key', self.read_cfg())
        self.assertIn('name = "switchyard"', self.read_cfg())
        self.wait_key(g, self.attach_token(), live=True)
        p, out = self.codex_exec()
        self.assertEqual(p.returncode, 0, out[-3000:])
        self.assertIn("hello from fresh", p.stdout, out[-3000:])
        self.sy(g, "detach")
        self.assertEqual(self.read_cfg(), original)

    def test_serve_codex_attach_hands_the_file_back_on_sigterm(self):
        g = self.gateway([account("fresh", self.mock.url("fresh", "ok"))], start=False)
        g.serve_args = ["--codex-attach", self.home]
        g.start()
        self.wait_attached(g)
        p, out = self.codex_exec()
        self.assertEqual(p.returncode, 0, out[-3000:])
        self.assertIn("hello from fresh", p.stdout, out[-3000:])
        g.stop()
        self.assertEqual(self.read_cfg(), ORIGINAL)
        self.assertTrue(self.sy(g, "status").stdout.startswith("direct: "))

    def test_after_kill9_of_serve_the_next_start_or_detach_puts_it_right(self):
        g = self.gateway([account("fresh", self.mock.url("fresh", "ok"))], start=False)
        g.serve_args = ["--codex-attach", self.home]
        g.start()
        self.wait_attached(g)
        g.kill9()
        self.assertNotEqual(self.read_cfg(), ORIGINAL)  # left attached by the kill
        g.start(port=g.port)                            # same address: attach is a no-op
        wait_for(lambda: "codex: already attached" in g.log_text(), what="the no-op attach")
        p, out = self.codex_exec()
        self.assertEqual(p.returncode, 0, out[-3000:])
        g.stop()
        self.assertEqual(self.read_cfg(), ORIGINAL)
        # killed half-way through the attach (after the rename, before the journal update):
        # the next `detach` finishes the attach it finds, then hands the file back
        g.env["SWITCHYARD_TEST_CRASH_AT"] = "attach_after_rename"
        g.proc = subprocess.Popen([switchyard_bin(), "serve", "--db", g.db_path, "--listen",
                                   f"127.0.0.1:{g.port}", "--codex-attach", self.home],
                                  env=g.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        self.assertEqual(g.proc.wait(timeout=60), -9)
        del g.env["SWITCHYARD_TEST_CRASH_AT"]
        self.assertNotEqual(self.read_cfg(), ORIGINAL)
        d = self.sy(g, "detach").stdout
        self.assertIn("recovered: finished an interrupted attach", d)
        self.assertEqual(self.read_cfg(), ORIGINAL)
        keys = g.query("SELECT revoked FROM platform_keys WHERE name = 'codex-attach'")
        self.assertEqual([k["revoked"] for k in keys], [1, 1])

    def test_attach_refuses_a_config_it_cannot_parse_and_leaves_it_untouched(self):
        g = self.gateway([account("fresh", self.mock.url("fresh", "ok"))], start=False)
        bad = ORIGINAL + 'model_reasoning_effort = high\n'
        with open(self.cfg, "w", newline="") as f:
            f.write(bad)
        p = self.sy(g, "attach", "--gateway", "http://127.0.0.1:1", "--offline", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("line 9", p.stderr)
        self.assertIn("left untouched", p.stderr)
        self.assertEqual(self.read_cfg(), bad)
        self.assertTrue(self.sy(g, "status").stdout.startswith("direct: "))


if __name__ == "__main__":
    main()
