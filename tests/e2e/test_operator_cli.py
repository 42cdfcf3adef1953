"""test_operator_cli.py: the command line as an operator meets it (issue 24):
`--db` before the command as well as after it; `--help` lists every command
and each listed line answers its own `--help`; `status` finds the gateway
serving its database (the run file beside the database) and, when none
answers, says so and that it shows the database; a listen or database error
names its cause once; the admin API, the dashboard, /metrics and /health's
details refuse a Host that is not the gateway's own (DNS rebinding) while
the proxied /v1 API accepts any; `codex attach` takes the address of the
gateway serving the database, accepts host:port, refuses when no gateway
answers (unless --offline) and a Codex home that does not exist (unless
--create); `codex status` says "verified" only when the gateway at the URL
it wrote serves this database and takes the key, and says which is wrong
(no gateway, another database's, the key refused) and exits 1 otherwise."""

import json
import os
import re
import shutil
import subprocess
import tempfile

from harness import GatewayTest, account, closed_port, http_call, main, source_dir, switchyard_bin, wait_for

BODY = {"model": "gpt-test", "input": "hi"}


class OperatorCliTest(GatewayTest):

    def run_sy(self, g, *args, env=None, timeout=30):
        e = dict(g.env)
        e.update(env or {})
        return subprocess.run([switchyard_bin(), *args], capture_output=True, text=True, timeout=timeout, env=e,
                              stdin=subprocess.DEVNULL, cwd=g.dir)

    def admin_token(self, g):
        return g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]

    def codex_home(self):
        home = tempfile.mkdtemp(prefix="sy-codex-home-")
        self.addCleanup(shutil.rmtree, home, True)
        return home

    def base_url(self, home):
        with open(os.path.join(home, "config.toml")) as f:
            m = re.search(r'base_url = "([^"]*)"', f.read())
        return m and m.group(1)

    # --- global --db, help

    def test_db_before_the_command_reaches_every_command_and_one_after_it_wins(self):
        g = self.gateway([], start=False)
        p = self.run_sy(g, "--db", g.db_path, "account", "add", "--name", "front", "--base-url",
                        self.mock.url("front"), "--token", "sk-front")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("front", self.run_sy(g, f"--db={g.db_path}", "account", "list").stdout)
        other = os.path.join(g.dir, "other.db")
        p = self.run_sy(g, "--db", other, "account", "list", "--db", g.db_path)
        self.assertIn("front", p.stdout)
        p = self.run_sy(g, "--db", other, "account", "list")  # none there: said, and none made
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"no database at {other}", p.stderr)
        self.assertNotIn("front", p.stdout)
        self.assertFalse(os.path.exists(other))
        self.assertIn("e2e", self.run_sy(g, "--db", g.db_path, "key", "list").stdout)
        g.start()  # serve gets --db after it from the harness; the key added before serves
        self.assertEqual(g.post("/v1/responses", BODY).status, 200)

    def test_version_and_an_unknown_option_answer_in_a_line(self):
        g = self.gateway([], start=False)
        p = self.run_sy(g, "--version")
        self.assertEqual((p.returncode, p.stdout.strip()[:11]), (0, "switchyard "), p)
        self.assertRegex(p.stdout.strip(), r"^switchyard \d+\.\d+\.\d+$")
        for args, where in ((("--bogus",), "`switchyard --help`"),
                            (("account", "list", "--bogus"), "`switchyard account list --help`")):
            p = self.run_sy(g, *args)
            self.assertEqual(p.returncode, 2, p)
            self.assertIn("unknown option '--bogus'", p.stderr)
            self.assertIn(where, p.stderr)
            self.assertLessEqual(len(p.stderr.strip().splitlines()), 2, p.stderr)  # not the whole help

    def test_help_lists_every_command_and_each_line_answers_its_own_help(self):
        g = self.gateway([], start=False)
        p = self.run_sy(g, "--help")
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stdout, self.run_sy(g, "help").stdout)
        section = p.stdout.split("commands:\n", 1)[1].split("\n\n", 1)[0]
        names = [re.split(r"\s{2,}", ln.strip(), 1)[0] for ln in section.splitlines()]
        for want in ("serve", "account add", "account update", "account import", "account export", "key add",
                     "key list", "key update", "key prefer", "key revoke", "config set", "codex attach",
                     "codex detach", "codex status", "admin token", "status", "logs", "usage", "test"):
            self.assertIn(want, names)
        for name in names:
            q = self.run_sy(g, *name.split(), "--help")
            self.assertEqual(q.returncode, 0, f"{name} --help: {q.stderr}")
            self.assertIn("usage", q.stdout, name)
        bad = self.run_sy(g, "--bogus", "status")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("unknown option '--bogus'", bad.stderr)
        # the policy tests read no database: --db after `test` is refused with that reason
        t = self.run_sy(g, "test", "--db", g.db_path)
        self.assertEqual(t.returncode, 2)
        self.assertIn("--db does not apply: the policy tests read no database", t.stderr)
        t = self.run_sy(g, "test", "--bogus")
        self.assertEqual(t.returncode, 2)
        self.assertIn("unknown option '--bogus'", t.stderr)

    # --- init, and which commands make a database

    def test_init_makes_a_new_database_with_an_admin_token_and_refuses_an_existing_one(self):
        g = self.gateway([], start=False)
        path = os.path.join(g.dir, "new.db")
        p = self.run_sy(g, "init", "--db", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"created a new database at {os.path.realpath(path)}", p.stdout)
        self.assertIn(f"{os.path.realpath(path)}.admin-token", p.stdout)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        self.assertEqual(os.stat(path + ".admin-token").st_mode & 0o777, 0o600)
        with open(path + ".admin-token") as f:
            tok = f.read().strip()
        self.assertTrue(tok.startswith("sya-"), tok)
        self.assertNotIn(tok, p.stdout)  # where it is, not the secret itself
        # the token in the file is the one the database holds: `admin token` shows it, not a new one
        self.assertEqual(self.run_sy(g, "admin", "token", "--db", path).stdout.strip().splitlines()[-1], tok)
        p = self.run_sy(g, "account", "list", "--db", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(path, "rb") as f:
            before = f.read()
        p = self.run_sy(g, "init", "--db", path)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn(f"{path} exists", p.stderr)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before, "an existing database is left as it is")
        with open(path + ".admin-token") as f:
            self.assertEqual(f.read().strip(), tok)
        # listed in the help, and the database-less message points at it
        self.assertIn("init", [ln.split()[0] for ln in self.run_sy(g, "--help").stdout.split("commands:\n", 1)[1]
                               .split("\n\n", 1)[0].splitlines()])
        p = self.run_sy(g, "key", "list", "--db", os.path.join(g.dir, "none.db"))
        self.assertIn("`switchyard init` makes one", p.stderr)

    def test_only_the_commands_that_add_something_make_a_database(self):
        g = self.gateway([], start=False)
        missing = os.path.join(g.dir, "missing.db")
        home = self.codex_home()
        # what each command needs to get past its own options; a command not named here runs bare
        args = {"account update": ["--name", "x", "--sort", "1"], "account enable": ["--name", "x"],
                "account disable": ["--name", "x"], "account remove": ["--name", "x"],
                "account reset": ["--name", "x"], "account export": ["--out", os.path.join(g.dir, "e.json")],
                "key update": ["--name", "x", "--rpm", "1"], "key prefer": ["--name", "x", "--clear"],
                "key revoke": ["--name", "x"], "config set": ["usage_poll_s", "60"],
                "config get": ["usage_poll_s"], "config unset": ["usage_poll_s"],
                "codex attach": ["--codex-home", home, "--offline"], "codex detach": ["--codex-home", home],
                "codex status": ["--codex-home", home],
                "claude attach": ["--settings", os.path.join(home, "settings.json"), "--offline"],
                "claude detach": ["--settings", os.path.join(home, "settings.json")],
                "claude status": ["--settings", os.path.join(home, "settings.json")],
                "backup": ["--out", os.path.join(g.dir, "b.db")]}
        # these make one where none is (docs/operating.md); `test` reads no database
        makers = {"init", "serve", "account add", "key add", "restore", "account import", "account login", "test"}
        section = self.run_sy(g, "--help").stdout.split("commands:\n", 1)[1].split("\n\n", 1)[0]
        names = [re.split(r"\s{2,}", ln.strip(), 1)[0] for ln in section.splitlines()]
        self.assertIn("status", names)
        for name in names:
            if name in makers:
                continue
            p = self.run_sy(g, *name.split(), *args.get(name, []), "--db", missing, timeout=20)
            self.assertEqual(p.returncode, 1, f"{name}: {p.stdout}{p.stderr}")
            self.assertRegex(p.stderr, rf"(no database at|cannot read database) {re.escape(missing)}", name)
            self.assertEqual([f for f in os.listdir(g.dir) if f.startswith("missing.db")], [], name)

    def test_every_account_option_in_the_help_is_in_the_docs(self):
        # issue 34: --prefill was in `account --help` but in neither docs/accounts.md nor
        # docs/configuration.md
        g = self.gateway([], start=False)
        opts = set(re.findall(r"--[a-z][a-z-]*", self.run_sy(g, "account", "--help").stdout))
        self.assertIn("--prefill", opts)
        docs = ""
        for name in ("accounts.md", "configuration.md"):
            with open(os.path.join(source_dir(), "docs", name)) as f:
                docs += f.read()
        self.assertEqual(sorted(o for o in opts if o not in docs), [])

    # --- status

    def test_status_finds_the_running_gateway_and_says_when_none_answers(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        tok = self.admin_token(g)
        # nothing in the environment names the port: status finds it beside the database
        p = wait_for(lambda: (lambda r: r if "(live)" in r.stdout else None)(
            self.run_sy(g, "status", "--db", g.db_path, env={"SWITCHYARD_ADMIN_TOKEN": tok})), what="live status")
        self.assertIn(f"gateway http://127.0.0.1:{g.port} (live)", p.stdout)
        # no token in the environment: the one beside the database (`admin token` wrote it) serves
        p = self.run_sy(g, "status", "--db", g.db_path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"gateway http://127.0.0.1:{g.port} (live)", p.stdout)
        os.remove(g.db_path + ".admin-token")
        p = self.run_sy(g, "status", "--db", g.db_path)
        self.assertEqual(p.returncode, 0, p.stderr)
        first = p.stdout.splitlines()[0]
        self.assertIn(f"the gateway at http://127.0.0.1:{g.port} (pid {g.proc.pid}) serves this database", first)
        self.assertIn("SWITCHYARD_ADMIN_TOKEN", first)
        g.stop()
        p = self.run_sy(g, "status", "--db", g.db_path, env={"SWITCHYARD_ADMIN_TOKEN": tok})
        first = p.stdout.splitlines()[0]
        self.assertTrue(first.startswith("no gateway is answering for this database (last seen at "), first)
        self.assertIn(f"http://127.0.0.1:{g.port}", first)
        self.assertIn("it stopped", first)
        self.assertIn("showing it from the database", first)
        self.assertNotIn("8787", first)
        doc = json.loads(self.run_sy(g, "status", "--db", g.db_path, "--json").stdout)
        self.assertEqual(doc["source"], "database")
        self.assertTrue(doc["gateway"].startswith("no gateway is answering"), doc)
        g.start(port=g.port)
        # the run file is written just after the port accepts: wait for this start's, then kill it
        wait_for(lambda: f"(pid {g.proc.pid})" in self.run_sy(g, "status", "--db", g.db_path).stdout or None,
                 what="the new gateway's run file")
        g.kill9()
        first = self.run_sy(g, "status", "--db", g.db_path).stdout.splitlines()[0]
        self.assertIn("no gateway is answering for this database", first)
        self.assertIn("its process is gone", first)

    def test_status_of_a_database_no_gateway_ever_served_says_so(self):
        g = self.gateway([], start=False)
        p = self.run_sy(g, "status", "--db", g.db_path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith(
            "no gateway is answering for this database (no gateway has served it yet); showing it from the database"),
            p.stdout)

    def assertColumns(self, text, header_prefix, want):
        """Every row under the header line starting with header_prefix has, at the offset where each
        column named in want starts in the header, the start of what want says (a regex)."""
        lines = text.splitlines()
        at = next(i for i, ln in enumerate(lines) if ln.startswith(header_prefix))
        head, rows = lines[at], [ln for ln in lines[at + 1:] if ln and not ln.startswith(" ")][:2]
        self.assertEqual(len(rows), 2, text)
        for col, pattern in want.items():
            off = re.search(rf"(?:^| )({re.escape(col)})(?: |$)", head).start(1)
            for row in rows:
                self.assertRegex(row[off:], "^" + pattern, f"{col} at {off} in {row!r}\n{text}")
                self.assertTrue(off == 0 or row[off - 1] == " ", (col, row))

    def test_account_list_and_status_keep_their_columns_for_a_long_name_and_show_budgets(self):
        # issue 34: a 70-character name pushed its row out of line, and budgets showed only in --json
        long_name = "a-very-long-account-name-" + "x" * 45
        g = self.gateway([account(long_name, self.mock.url("a")), account("b", self.mock.url("b"))])
        self.run_sy(g, "account", "update", "--db", g.db_path, "--name", "b", "--budget", "5", "--budget-period", "7d")
        self.assertEqual(g.post("/v1/responses", BODY).status, 200)
        budget = r"\$[0-9.]+ of \$5\.00 7-day"
        p = self.run_sy(g, "account", "list", "--db", g.db_path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(long_name, p.stdout)
        self.assertColumns(p.stdout, "ID ", {"KIND": "api_key", "ENABLED": "yes", "BUDGET": f"(-|{budget})",
                                            "BASE_URL": "http://"})
        self.assertRegex(p.stdout, r"\n\S+ +b +.*" + budget)
        tok = self.admin_token(g)
        p = wait_for(lambda: (lambda r: r if "(live)" in r.stdout else None)(
            self.run_sy(g, "status", "--db", g.db_path, env={"SWITCHYARD_ADMIN_TOKEN": tok})), what="live status")
        for out in (p.stdout, self.run_sy(g, "status", "--db", g.db_path, "--url", "http://127.0.0.1:1").stdout):
            self.assertIn(long_name, out)
            self.assertColumns(out, "ACCOUNT ", {"KIND": "api_key", "STATE": "available", "BUDGET": f"(-|{budget})"})
            self.assertRegex(out, r"\nb +.*" + budget)

    # --- messages

    def test_listen_and_database_errors_name_their_cause_once(self):
        g = self.gateway([])
        other = os.path.join(g.dir, "other.db")
        p = self.run_sy(g, "serve", "--db", other, "--listen", f"127.0.0.1:{g.port}")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"cannot listen on 127.0.0.1:{g.port}: Address already in use", p.stderr)
        missing = os.path.join(g.dir, "no", "such", "dir", "x.db")
        p = self.run_sy(g, "serve", "--db", missing, "--listen", "127.0.0.1:0")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"cannot open database {missing}: No such file or directory", p.stderr)
        self.assertEqual(p.stderr.count("cannot open database"), 1, p.stderr)
        p = self.run_sy(g, "account", "list", "--db", missing)
        self.assertEqual(p.stderr.count(f"no database at {missing}"), 1, p.stderr)
        p = self.run_sy(g, "account", "add", "--db", missing, "--name", "x", "--base-url", self.mock.url("x"),
                        "--token", "t")  # a command that makes one: why it cannot, once
        self.assertEqual(p.stderr.count("cannot open database"), 1, p.stderr)
        p = self.run_sy(g, "account", "add", "--db", g.db_path, "--name", "", "--base-url", self.mock.url("x"),
                        "--token", "t")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--name", p.stderr)
        self.assertNotIn("--base-url", p.stderr)
        self.assertLessEqual(g.log_text().count("descriptor limit"), 1)  # quiet start-up: once, at info
        self.assertNotRegex(g.log_text(), r"warn\s+descriptor limit")

    def test_a_second_serve_on_a_busy_port_names_the_gateway_serving_there(self):
        # issue 34: "Address already in use", when the run file beside the database says which
        # switchyard serves it there
        g = self.gateway([account("a", self.mock.url("a"))])
        p = self.run_sy(g, "serve", "--db", g.db_path, "--listen", f"127.0.0.1:{g.port}")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"cannot listen on 127.0.0.1:{g.port}: it is in use: switchyard (pid {g.proc.pid}) serves "
                      f"{g.db_path} there", p.stderr)
        self.assertNotIn("Address already in use", p.stderr)
        self.assertEqual(g.post("/v1/responses", BODY).status, 200)  # the first one serves on
        # its record names it still: the second start did not take its place
        with open(g.db_path + "-gateway.json") as f:
            self.assertEqual(json.load(f)["pid"], g.proc.pid)
        # the record names the busy port, but its process is gone: the plain reason
        g.kill9()
        with closed_port() as port:
            with open(g.db_path + "-gateway.json") as f:
                rec = json.load(f)
            rec["url"] = f"http://127.0.0.1:{port}"
            with open(g.db_path + "-gateway.json", "w") as f:
                json.dump(rec, f)
            p = self.run_sy(g, "serve", "--db", g.db_path, "--listen", f"127.0.0.1:{port}")
        self.assertIn(f"cannot listen on 127.0.0.1:{port}: Address already in use", p.stderr)
        self.assertNotIn("switchyard (pid", p.stderr)

    # --- Host check

    def test_a_foreign_host_is_refused_on_metrics_admin_and_health_details_but_not_on_v1(self):
        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        g.serve_args = ["--allowed-host", "gw.example"]
        g.start()
        tok = self.admin_token(g)
        auth = {"Authorization": f"Bearer {tok}"}
        evil = {"Host": f"rebound.example:{g.port}"}
        for path, hdrs in (("/metrics", {}), ("/admin/api/accounts", auth), ("/admin/", {}),
                           ("/admin/api/overview", auth)):
            r = http_call(g.port, "GET", path, headers={**hdrs, **evil})
            self.assertEqual(self.assertOpenAIError(r, 403)["code"], "host_not_allowed", path)
            self.assertIn("rebound.example", r.json()["error"]["message"])
        for host in (f"127.0.0.1:{g.port}", f"localhost:{g.port}", "gw.example", f"GW.example:{g.port}"):
            r = wait_for(lambda: (lambda x: x if x.status != 401 else None)(
                http_call(g.port, "GET", "/admin/api/accounts", headers={**auth, "Host": host})),
                what="the admin token")
            self.assertEqual(r.status, 200, (host, r))
            self.assertEqual(http_call(g.port, "GET", "/metrics", headers={"Host": host}).status, 200, host)
        h = http_call(g.port, "GET", "/health", headers=evil)
        self.assertEqual(h.status, 200)
        self.assertEqual(set(h.json()), {"status"})
        h = http_call(g.port, "GET", "/health", headers={"Host": f"127.0.0.1:{g.port}"})
        self.assertIn("accounts", h.json())
        # the proxied API: clients behind proxies send their own names
        r = g.post("/v1/responses", BODY, headers=evil)
        self.assertEqual(r.status, 200, r)

    # --- codex attach / status

    def test_codex_attach_takes_the_running_gateways_address_and_status_sees_it_stop(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        home = self.codex_home()
        p = self.run_sy(g, "codex", "attach", "--db", g.db_path, "--codex-home", home)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.base_url(home), f"http://127.0.0.1:{g.port}/v1")
        p = self.run_sy(g, "codex", "status", "--db", g.db_path, "--codex-home", home)
        self.assertTrue(p.stdout.startswith("attached, verified: "), p.stdout)
        self.assertEqual(p.returncode, 0, p.stderr)
        g.stop()
        p = self.run_sy(g, "codex", "status", "--db", g.db_path, "--codex-home", home)
        self.assertTrue(p.stdout.startswith(f"attached, but no gateway answers at http://127.0.0.1:{g.port}/v1: "),
                        p.stdout)
        self.assertEqual(p.returncode, 1, "a script checking `codex status` must see that Codex cannot work")

    def test_codex_status_checks_the_gateway_serves_this_database_and_takes_the_key(self):
        # issue 34: status said "attached" whenever something answered /health at the URL written,
        # even another database's gateway that refuses every request Codex makes
        g = self.gateway([account("a", self.mock.url("a"))])
        home = self.codex_home()
        self.assertEqual(self.run_sy(g, "codex", "attach", "--db", g.db_path, "--codex-home", home).returncode, 0)
        p = self.run_sy(g, "codex", "status", "--db", g.db_path, "--codex-home", home)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(p.stdout.startswith("attached, verified: "), p.stdout)
        self.assertIn(f"the gateway at http://127.0.0.1:{g.port} serves {g.db_path} and takes the key", p.stdout)
        # the key revoked: the right gateway, but Codex would get 401s
        self.run_sy(g, "key", "revoke", "--db", g.db_path, "--name", "codex-attach")
        p = wait_for(lambda: (lambda r: r if r.returncode else None)(
            self.run_sy(g, "codex", "status", "--db", g.db_path, "--codex-home", home)), what="the key refused")
        self.assertTrue(p.stdout.startswith(f"attached, but the gateway at http://127.0.0.1:{g.port} does not take "
                                            "the key: "), p.stdout)
        self.assertIn("GET /v1/models answered 401", p.stdout)
        self.run_sy(g, "codex", "detach", "--db", g.db_path, "--codex-home", home)
        self.assertEqual(self.run_sy(g, "codex", "attach", "--db", g.db_path, "--codex-home", home).returncode, 0)
        # no gateway at the URL written
        g.stop()
        p = self.run_sy(g, "codex", "status", "--db", g.db_path, "--codex-home", home)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertTrue(p.stdout.startswith(f"attached, but no gateway answers at http://127.0.0.1:{g.port}/v1: "),
                        p.stdout)
        # another database's gateway on the recorded port
        other = self.gateway([account("b", self.mock.url("b"))], start=False)
        other.start(port=g.port)
        p = self.run_sy(g, "codex", "status", "--db", g.db_path, "--codex-home", home)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertTrue(p.stdout.startswith(f"attached, but the gateway at http://127.0.0.1:{g.port} does not serve "
                                            f"{g.db_path}: "), p.stdout)
        self.assertIn("another database's gateway", p.stdout)

    def test_codex_attach_takes_host_port_and_refuses_when_no_gateway_answers_unless_offline(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        home = self.codex_home()
        p = self.run_sy(g, "codex", "attach", "--db", g.db_path, "--codex-home", home,
                        "--gateway", f"127.0.0.1:{g.port}")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.base_url(home), f"http://127.0.0.1:{g.port}/v1")
        self.run_sy(g, "codex", "detach", "--db", g.db_path, "--codex-home", home)
        g.stop()
        # with no gateway recorded as running, attach tries the configured listen address: the
        # test's own (a port it holds bound and not listening), never the machine's 8787, where
        # the README's own ./scripts/run.sh may be serving
        with closed_port() as port:
            p = self.run_sy(g, "codex", "attach", "--db", g.db_path, "--codex-home", home,
                            env={"SWITCHYARD_LISTEN": f"127.0.0.1:{port}"})
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"no gateway answers at http://127.0.0.1:{port}", p.stderr)
        self.assertIn("--offline", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(home, "config.toml")))
        p = self.run_sy(g, "codex", "attach", "--db", g.db_path, "--codex-home", home, "--gateway",
                        f"127.0.0.1:{g.port}")
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"no gateway answers at http://127.0.0.1:{g.port} (", p.stderr)
        p = self.run_sy(g, "codex", "attach", "--db", g.db_path, "--codex-home", home, "--gateway",
                        f"127.0.0.1:{g.port}", "--offline")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.base_url(home), f"http://127.0.0.1:{g.port}/v1")
        p = self.run_sy(g, "codex", "attach", "--db", g.db_path, "--codex-home", home, "--gateway", "ftp://x")
        self.assertEqual(p.returncode, 2)

    def test_codex_attach_refuses_a_codex_home_that_does_not_exist_unless_create(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        parent = self.codex_home()
        home = os.path.join(parent, "mistyped")
        p = self.run_sy(g, "codex", "attach", "--db", g.db_path, "--codex-home", home)
        self.assertEqual(p.returncode, 1)
        self.assertIn("does not exist", p.stderr)
        self.assertIn("--create", p.stderr)
        self.assertFalse(os.path.exists(home))
        p = self.run_sy(g, "codex", "attach", "--db", g.db_path, "--codex-home", home, "--create")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.base_url(home), f"http://127.0.0.1:{g.port}/v1")
        self.assertEqual(os.stat(home).st_mode & 0o777, 0o700)


if __name__ == "__main__":
    main()
