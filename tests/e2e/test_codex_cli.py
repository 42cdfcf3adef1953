"""test_codex_cli.py: the product tried as a new user would: the real Codex
CLI (npm @openai/codex) pointed at the gateway through a custom model
provider completes a prompt while the first accounts of the pool are
exhausted (one answers 429, one sends a quota error inside its 200 stream,
one rejects its token), and the headers Codex sends (session, thread, window,
turn metadata, beta features) reach the upstream. Codex is installed from the npm registry into .cache/codex of the
source tree on first use; if npm or the registry is unavailable the test is
skipped and says why."""

import json
import os
import shutil
import subprocess
import tempfile

from harness import GatewayTest, account, main, npm_package, wait_for
from test_oauth import auth_json

CODEX_VERSION = os.environ.get("SWITCHYARD_CODEX_VERSION", "0.171.0")


def codex_bin():
    return npm_package(f"@openai/codex@{CODEX_VERSION}", "codex", os.path.join("node_modules", ".bin", "codex"))


class CodexCliTest(GatewayTest):

    def run_codex(self, exe, g, prompt="say hello"):
        """Runs `codex exec` against gateway g; returns the CompletedProcess."""
        home = tempfile.mkdtemp(prefix="sy-codex-home-")
        self.addCleanup(shutil.rmtree, home, True)
        with open(os.path.join(home, "config.toml"), "w") as f:
            f.write('model = "gpt-test"\n'
                    'model_provider = "switchyard"\n'
                    '[model_providers.switchyard]\n'
                    'name = "switchyard"\n'
                    f'base_url = "http://127.0.0.1:{g.port}/v1"\n'
                    'env_key = "SWITCHYARD_KEY"\n'
                    'wire_api = "responses"\n')
        env = dict(os.environ, CODEX_HOME=home, SWITCHYARD_KEY=g.key, NO_COLOR="1")
        work = tempfile.mkdtemp(prefix="sy-codex-work-")
        self.addCleanup(shutil.rmtree, work, True)
        return subprocess.run([exe, "exec", "--skip-git-repo-check", prompt], cwd=work, env=env,
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


if __name__ == "__main__":
    main()
