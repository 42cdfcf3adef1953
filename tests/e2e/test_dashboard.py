"""test_dashboard.py: the dashboard in a real browser. Debian's headless
Chromium, driven by playwright-core from npm (installed on first use into
.cache/playwright-VERSION of the source tree, like the Codex test), signs in with
the admin token, sees a 429 failover appear within 2 s, presses reset on
the cooled account and sees the next request served by it, signs in a
ChatGPT account with "Add ChatGPT account" (a code, then the account it
added, in the pool, with the sort and models typed in the form), keeps working in a narrow window, and shows a clear
state when the gateway stops; and,
with 70-character account, key and model names and a held account, fits
1024, 1280, 1440 and 1920 px (every card and every scrolling table in it as
wide as its content, a cut name opened whole by a click, the held account's
fix shown whole without hovering) and a phone without sideways scrolling,
shows spend today and against the budget, hides revoked keys until asked,
searches and opens a request.
Screenshots go to the build directory (screenshots/). The test is skipped,
saying why, only when Chromium or npm cannot be had."""

import json
import os
import shutil
import subprocess
import tempfile

from harness import (GatewayTest, PyUpstream, account, http_call, main, npm_package, source_dir, switchyard_bin,
                     wait_for)

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
        oauth = f"{self.mock.base()}/oauth/ok,user=dash,approve_after=1"  # the sign-in's authorization server
        g = self.gateway([account("a", up.base_url()), account("b", self.mock.url("b", "ok")),
                          account("c", self.mock.url("c", "ok,primary=37,secondary=81"))], start=False,
                         env={"SWITCHYARD_USAGE_POLL_S": "0", "SWITCHYARD_OAUTH_TOKEN_URL": f"{oauth}/token",
                              "SWITCHYARD_OAUTH_DEVICE_CODE_URL": f"{oauth}/deviceauth/usercode",
                              "SWITCHYARD_OAUTH_DEVICE_TOKEN_URL": f"{oauth}/deviceauth/token"})
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
        s = step("signed-in-account")  # the "Add ChatGPT account" button: a code, then the account
        self.assertRegex(s["code"], r"^MOCK-\d+$")
        self.assertEqual(s["link"], f"{self.mock.base()}/codex/device")
        self.assertIn("added account dash", s["outcome"])
        self.assertEqual(g.query("SELECT kind, email, sort, models FROM accounts WHERE name = 'dash'"),
                         [{"kind": "chatgpt", "email": "dash@example.com", "sort": -4, "models": "gpt-5,o3"}])
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

    def test_dashboard_fits_from_1024_px_shows_spend_searches_and_opens_a_request(self):
        """Long account, key and model names and a held account at 1024, 1280, 1440 and
        1920 px and on a phone: no sideways scrolling, no card (nor a table in it) wider than
        its box, the pool's buttons on screen, names cut with the whole name on hover and a
        click away, the held account's fix whole without hover; spend today and against the
        budget; revoked keys on request; the search box; a click on a request opens its
        detail."""
        if not os.access(CHROMIUM, os.X_OK):
            self.skipTest(f"{CHROMIUM} is not installed (scripts/install-deps.sh installs Debian's chromium)")
        node = shutil.which("node")
        if not node:
            self.skipTest("node is not installed")
        mod, why = playwright_core()
        if not mod:
            self.skipTest(why)
        long_acct = "customer-production-eu-west-openai-primary-account-with-a-very-long-name"
        long_model = "gpt-5-2025-12-04-with-an-extraordinarily-long-snapshot-name-for-layout"  # priced as gpt-5
        usage = "ok,input_tokens=1000000,cached=400000"
        # refuses its key once (401 invalid_api_key): held as key_refused, with a fix that names it
        held = "customer-staging-us-east-api-key-account-that-the-upstream-refused-now"
        g = self.gateway([account(long_acct, self.mock.url("long", usage), args=["--budget", "10"]),
                          account("b" * 60, self.mock.url("b", "ok")),
                          account(held, self.mock.url("held", "status=401,times=1"))], start=False)
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", long_acct)
        laptop = g.add_key("laptop-of-the-operations-team-with-a-long-descriptive-key-name")
        g.cli("key", "prefer", "--db", g.db_path, "--name", "laptop-of-the-operations-team-with-a-long-descriptive-key-name",
              "--account", "b" * 60)
        probe = g.add_key("held-probe")
        g.cli("key", "prefer", "--db", g.db_path, "--name", "held-probe", "--account", held)
        g.add_key("revoked-by-codex-detach")
        g.cli("key", "revoke", "--db", g.db_path, "--name", "revoked-by-codex-detach")
        tok = g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]
        g.start()
        for _ in range(3):
            self.assertEqual(g.post("/v1/responses", {"model": long_model, "input": "hi"}).status, 200)
        for _ in range(2):
            self.assertEqual(g.post("/v1/responses", {"model": "o3", "input": "hi"}, key=laptop).status, 200)
        self.assertEqual(g.post("/v1/responses", {"model": "o3", "input": "hi"}, key=probe).status, 200)
        wait_for(lambda: g.query("SELECT hold FROM accounts WHERE name = ?", (held,))[0]["hold"] == "key_refused",
                 what="the refused account held")
        g.wait_request_logs(6)
        r = http_call(g.port, "GET", "/admin/api/accounts", headers={"Authorization": f"Bearer {tok}"})
        fix = {a["name"]: a for a in r.json()["accounts"]}[held]["hold"]["fix"]
        self.assertIn(f"--name {held} --token", fix)
        shots = os.path.join(os.path.dirname(switchyard_bin()), "screenshots")
        os.makedirs(shots, exist_ok=True)
        profile = tempfile.mkdtemp(prefix="sy-chromium-")
        self.addCleanup(shutil.rmtree, profile, True)
        env = dict(os.environ, PLAYWRIGHT_CORE=mod, GATEWAY_URL=f"http://127.0.0.1:{g.port}", ADMIN_TOKEN=tok,
                   SCREENSHOT_DIR=shots, USER_DATA_DIR=profile, CHROMIUM=CHROMIUM, LONG_ACCOUNT=long_acct,
                   HELD_ACCOUNT=held, SEARCH_WORD="o3")
        env.pop("ASAN_OPTIONS", None)
        drv = subprocess.run([node, os.path.join(source_dir(), "tests", "e2e", "dashboard_fit_driver.js")],
                             capture_output=True, text=True, env=env, timeout=240)
        steps = [json.loads(ln) for ln in drv.stdout.splitlines() if ln.strip()]
        errs = [s for s in steps if s["step"] == "error"]
        self.assertEqual(errs, [], drv.stderr[-2000:])
        self.assertEqual(drv.returncode, 0, drv.stderr[-2000:])
        widths = {s["width"]: s for s in steps if s["step"] == "width"}
        self.assertEqual(sorted(widths), [390, 1024, 1280, 1440, 1920])
        wide = []  # every card too narrow for its content, at every width (one failure tells all)
        for w, m in sorted(widths.items()):
            self.assertLessEqual(m["overflow"], 0, f"the page scrolls sideways at {w} px")
            self.assertEqual(len(m["buttons"]), 6, m)  # Disable and Reset of the three accounts
            for b in m["buttons"]:
                self.assertTrue(b["visible"] and b["onTop"], f"{b} at {w} px")
                self.assertGreaterEqual(b["left"], 0, f"{b} at {w} px")
                self.assertLessEqual(b["right"], w, f"{b} at {w} px")
            self.assertTrue(m["searchVisible"], f"the search box at {w} px")
            if w >= 1024:
                self.assertGreaterEqual(len(m["cards"]), 8, m["cards"])  # pool, spend x3, chart, keys, requests
                wide += [dict(c, width=w) for c in m["cards"] if c["scrollWidth"] > c["clientWidth"]]
            for n in m["names"]:  # every name cell carries the whole name on hover
                self.assertTrue(n["title"], n)
                self.assertLessEqual(n["right"], w, n)
            cut = [n for n in m["names"] if n["title"] == long_acct]
            self.assertTrue(cut and all(n["cut"] for n in cut), f"the long name is not cut at {w} px: {cut}")
        self.assertEqual(wide, [], "cards wider than their box:\n" + "\n".join(map(str, wide)))
        for w, m in sorted(widths.items()):  # the held account's fix: on the page whole, without a hover
            self.assertEqual([f["account"] for f in m["fixes"]], [held], f"the held account's fix at {w} px")
            f = m["fixes"][0]
            self.assertIn(fix, f["text"], f)
            self.assertTrue(f["shown"] and f["inView"], f"the fix is not in view at {w} px: {f}")
            self.assertLessEqual(f["scrollWidth"], f["clientWidth"], f"the fix is cut at {w} px: {f}")
        e = next(s for s in steps if s["step"] == "expand")  # a click opens a cut name whole
        self.assertTrue(e["closed"]["cut"], e)
        self.assertFalse(e["opened"]["cut"], e)
        self.assertEqual(e["opened"]["text"], long_acct)
        self.assertLessEqual(e["opened"]["overflow"], 0, e)
        self.assertTrue(e["again"]["cut"], e)
        cost = g.query("SELECT sum(cost_usd) AS c FROM request_logs WHERE account_id = ?",
                       (g.account_id(long_acct),))[0]["c"]
        s = next(s for s in steps if s["step"] == "spend")
        self.assertAlmostEqual(s["spent"], cost, places=4)
        self.assertEqual(s["usd"], 10)
        self.assertEqual(s["budget"], f"${cost:.2f} of $10.00")
        self.assertEqual(s["today"], f"${cost:.2f}")
        self.assertIn("monthly", s["title"])
        self.assertEqual(sorted(s["models"]), sorted([long_model, "o3"]))
        a = next(s for s in steps if s["step"] == "alerts")  # the Alerts card lists the hold
        held_rows = [r for r in a["rows"] if r["kind"] == "account_held"]
        self.assertEqual(len(held_rows), 1, a)
        self.assertEqual(held_rows[0]["outcome"], "unsent")
        self.assertIn(f"account {held} is held", held_rows[0]["message"])
        self.assertIn("no webhook", a["note"])
        self.assertGreaterEqual(int(a["raised"]), 1)
        r = next(s for s in steps if s["step"] == "revoked")
        self.assertNotIn("revoked-by-codex-detach", r["before"])
        self.assertIn("revoked-by-codex-detach", r["after"])
        s = next(s for s in steps if s["step"] == "search")
        o3 = g.query("SELECT id FROM request_logs WHERE model = 'o3' ORDER BY id DESC")
        self.assertEqual(s["found"], [row["id"] for row in o3])
        self.assertIn("No matching requests", s["none"])
        d = next(s for s in steps if s["step"] == "detail")
        row = g.query("SELECT * FROM request_logs WHERE id = ?", (d["id"],))[0]
        self.assertEqual(d["title"], f"Request #{d['id']}")
        self.assertEqual(d["facts"]["status"], str(row["status"]))
        self.assertEqual(d["facts"]["model"], row["model"])
        self.assertEqual(d["facts"]["input tokens"], str(row["input_tokens"]))
        self.assertEqual(d["facts"]["latency"], f"{round(row['latency_ms'])} ms")
        self.assertTrue(d["facts"]["cost"].startswith("$") or row["cost_usd"] is None, d["facts"])
        self.assertEqual(len(d["attempts"]), row["attempts"])
        self.assertTrue(d["fits"])
        self.assertEqual(d["errors"], [], "\n".join(d["errors"]))


if __name__ == "__main__":
    main()
