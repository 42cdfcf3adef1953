"""test_dashboard.py: the dashboard in a real browser. Debian's headless
Chromium, driven by playwright-core from npm (installed on first use into
.cache/playwright-VERSION of the source tree, like the Codex test), signs in with
the admin token, sees a 429 failover appear within 2 s, presses reset on
the cooled account and sees the next request served by it, keeps working
in a narrow window, and shows a clear state when the gateway stops.
Screenshots go to the build directory (screenshots/). The test is skipped,
saying why, only when Chromium or npm cannot be had."""

import json
import os
import shutil
import subprocess
import tempfile

from harness import GatewayTest, PyUpstream, account, main, npm_package, source_dir, switchyard_bin

PLAYWRIGHT_VERSION = os.environ.get("SWITCHYARD_PLAYWRIGHT_VERSION", "1.61.1")  # the last for Debian 12's node 18
CHROMIUM = "/usr/bin/chromium"


def playwright_core():
    pkg, why = npm_package(f"playwright-core@{PLAYWRIGHT_VERSION}", f"playwright-{PLAYWRIGHT_VERSION}",
                           os.path.join("node_modules", "playwright-core", "package.json"))
    return (os.path.dirname(pkg), None) if pkg else (None, why)


class DashboardTest(GatewayTest):

    def test_dashboard_shows_a_failover_and_reset_sends_the_next_request_to_the_account(self):
        if not os.access(CHROMIUM, os.X_OK):
            self.skipTest(f"{CHROMIUM} is not installed (scripts/install-deps.sh installs Debian's chromium)")
        node = shutil.which("node")
        if not node:
            self.skipTest("node is not installed")
        mod, why = playwright_core()
        if not mod:
            self.skipTest(why)
        up = PyUpstream("a")
        self.addCleanup(up.close)
        up.fail_status = 429
        g = self.gateway([account("a", up.base_url()), account("b", self.mock.url("b", "ok")),
                          account("c", self.mock.url("c", "ok,primary=37,secondary=81"))], start=False)
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "a")
        tok = g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]
        # c reports usage windows; one request through it gives the bars figures
        probe = g.add_key("probe")
        g.cli("key", "prefer", "--db", g.db_path, "--name", "probe", "--account", "c")
        g.start()
        self.assertEqual(g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}, key=probe)
                         .headers["x-switchyard-account"], "c")
        shots = os.path.join(os.path.dirname(switchyard_bin()), "screenshots")
        os.makedirs(shots, exist_ok=True)
        profile = tempfile.mkdtemp(prefix="sy-chromium-")
        self.addCleanup(shutil.rmtree, profile, True)
        env = dict(os.environ, PLAYWRIGHT_CORE=mod, GATEWAY_URL=f"http://127.0.0.1:{g.port}", ADMIN_TOKEN=tok,
                   PLATFORM_KEY=g.key, SCREENSHOT_DIR=shots, USER_DATA_DIR=profile, CHROMIUM=CHROMIUM)
        env.pop("ASAN_OPTIONS", None)  # the browser is not ours
        drv = subprocess.Popen([node, os.path.join(source_dir(), "tests", "e2e", "dashboard_driver.js")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
        self.addCleanup(lambda: (drv.poll() is None and drv.kill(), drv.wait()))
        steps = {}

        def step(name):
            line = drv.stdout.readline()
            if not line:
                self.fail(f"the browser driver ended before '{name}': {drv.stderr.read()[-3000:]}")
            got = json.loads(line)
            if got["step"] == "error":
                self.fail(f"browser driver failed before '{name}': {got['message']}")
            self.assertEqual(got["step"], name, got)
            steps[name] = got
            return got

        def reply():
            drv.stdin.write("go\n")
            drv.stdin.flush()

        s = step("signed-in")
        self.assertEqual(s["stored"]["session"], [tok])  # the token lives in sessionStorage only
        self.assertEqual(s["stored"]["local"], [])
        s = step("failover-seen")
        self.assertEqual(s["first"]["status"], 200)
        self.assertIn(s["first"]["account"], ("b", "c"))  # whichever the order policy put after a
        self.assertLessEqual(s["seen_ms"], 2000)
        self.assertRegex(s["countdown"], r"^\d+s$")
        self.assertIn("a failover rate_limit 429", s["attempts"])
        self.assertIn(s["first"]["account"] + " ok 200", s["attempts"])
        print(f"failover appeared on the page {s['seen_ms']} ms after the request returned")
        step("upstream-a-fixed?")
        up.fail_status = None
        reply()
        s = step("reset-served")
        self.assertEqual(s["after"], {"status": 200, "account": "a"})
        self.assertIn("admin: reset_cooldown a", g.log_text())
        self.assertEqual(step("focus-kept")["focused"], "disable:b")
        s = step("narrow")
        self.assertTrue(s["resetVisible"], s)
        self.assertLessEqual(s["overflow"], 0, "the narrow page scrolls sideways")
        self.assertEqual(s["errors"], [], "\n".join(s["errors"]))
        on_c = g.query("SELECT count(*) AS n FROM request_logs r WHERE r.account_name = 'c' OR EXISTS"
                       " (SELECT 1 FROM json_each(r.attempts_json) j WHERE json_extract(j.value, '$.account') = 'c')")
        self.assertGreaterEqual(on_c[0]["n"], 1)  # the probe request at least
        self.assertEqual(step("filtered")["rows"], on_c[0]["n"])
        step("stop-gateway?")
        g.stop()
        reply()
        s = step("stopped-shown")
        self.assertIn("Gateway unreachable", s["banner"])
        self.assertEqual(s["pill"], "unreachable")
        self.assertTrue(s["stale"])
        self.assertEqual(drv.wait(timeout=60), 0, drv.stderr.read()[-2000:])
        for name in ("dashboard.png", "dashboard-narrow.png", "dashboard-stopped.png"):
            self.assertGreater(os.path.getsize(os.path.join(shots, name)), 10000, name)
        print(f"screenshots in {shots}")


if __name__ == "__main__":
    main()
