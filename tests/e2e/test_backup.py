"""test_backup.py: the whole state out and back in (issue 24). `switchyard backup`
copies the database while a gateway serves it under load (the copy holds every
account, key and request log committed before it began, and the gateway goes on
serving); `switchyard restore` refuses while a gateway serves that database, refuses a
file that is not a switchyard database this build can open, and otherwise puts the copy
in place (the previous database kept) for a gateway that then serves the restored pool.
`account export` / `import` carry every account setting, and base URLs are checked at
add, update and import."""

import json
import os
import sqlite3
import stat
import threading
import time

from harness import GatewayTest, account, main, wait_for
from test_oauth import auth_json

CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


class BackupTest(GatewayTest):

    def load(self, g, stop, results):
        """Requests one after another until stop is set; statuses into results."""
        while not stop.is_set():
            try:
                results.append(g.post("/v1/chat/completions", CHAT_BODY).status)
            except OSError as e:
                results.append(repr(e))

    def copy_count(self, path, sql, args=()):
        with sqlite3.connect(path) as c:
            return c.execute(sql, args).fetchone()[0]

    def test_backup_under_load_holds_everything_committed_before_it(self):
        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b"))])
        stop, results = threading.Event(), []
        threads = [threading.Thread(target=self.load, args=(g, stop, results)) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            g.wait_request_logs(50)
            # committed just before the backup starts, while requests keep coming
            g.add_account("late", self.mock.url("late"), "tok-late")
            late_key = g.add_key("late-key")
            self.assertTrue(late_key)
            logged = g.query("SELECT max(id) AS m, count(*) AS n FROM request_logs")[0]
            out = os.path.join(g.dir, "backup.db")
            p = g.cli("backup", "--db", g.db_path, "--out", out)
            served_during = len(results)
            self.assertIn(f"backed up {g.db_path} to {out}: 3 accounts, 2 keys", p.stdout)
            wait_for(lambda: len(results) > served_during + 20, what="requests served after the backup")
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
        self.assertEqual({s for s in results}, {200}, results[-5:])
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o600)
        self.assertFalse(os.path.exists(out + ".tmp"))
        with sqlite3.connect(out) as c:
            self.assertEqual(c.execute("PRAGMA integrity_check").fetchone()[0], "ok")
            self.assertEqual(sorted(r[0] for r in c.execute("SELECT name FROM accounts")), ["a", "b", "late"])
            self.assertEqual(sorted(r[0] for r in c.execute("SELECT name FROM platform_keys")), ["e2e", "late-key"])
            self.assertEqual(c.execute("SELECT token FROM accounts WHERE name = 'late'").fetchone()[0], "tok-late")
            # every request log committed before the backup, none missing in between
            self.assertEqual(c.execute("SELECT count(*) FROM request_logs WHERE id <= ?",
                                       (logged["m"],)).fetchone()[0], logged["n"])
        # an existing file is kept unless --force
        p = g.cli("backup", "--db", g.db_path, "--out", out, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("exists: give another name, or --force", p.stderr)
        g.cli("backup", "--db", g.db_path, "--out", out, "--force")
        self.assertTrue(g.running())

    def test_restore_is_refused_while_serving_and_the_restored_pool_serves(self):
        g = self.gateway([account("kept", self.mock.url("kept"))])
        backup = os.path.join(g.dir, "before.db")
        g.cli("backup", "--db", g.db_path, "--out", backup)
        # after the backup: another account, the first one disabled
        g.add_account("newer", self.mock.url("newer"), "tok-newer", sort=0)
        g.cli("account", "disable", "--db", g.db_path, "--name", "kept")
        before = g.cli("account", "list", "--db", g.db_path, "--json").stdout
        p = g.cli("restore", backup, "--db", g.db_path, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"a gateway is serving {g.db_path} (pid {g.proc.pid}): stop it first", p.stderr)
        self.assertIn("nothing was changed", p.stderr)
        self.assertEqual(g.cli("account", "list", "--db", g.db_path, "--json").stdout, before)
        self.assertFalse(os.path.exists(g.db_path + ".before-restore"))
        g.stop()
        p = g.cli("restore", backup, "--db", g.db_path)
        self.assertIn(f"restored {backup} into {g.db_path}: 1 account, 1 key", p.stdout)
        self.assertIn(".before-restore", p.stdout)
        for sfx in ("-wal", "-shm", ".restore-tmp"):
            self.assertFalse(os.path.exists(g.db_path + sfx), sfx)
        self.assertEqual(stat.S_IMODE(os.stat(g.db_path).st_mode), 0o600)
        kept = sqlite3.connect(g.db_path + ".before-restore")
        self.assertEqual(sorted(r[0] for r in kept.execute("SELECT name FROM accounts")), ["kept", "newer"])
        kept.close()
        g.start()
        self.mock.reset()
        for _ in range(3):
            r = g.post("/v1/chat/completions", CHAT_BODY)
            self.assertEqual(r.status, 200, r)
        self.assertEqual(set(self.mock.accounts_hit()), {"kept"})
        rows = json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)
        self.assertEqual([(r["name"], r["enabled"]) for r in rows], [("kept", True)])

    def test_restore_into_a_new_path_leaves_no_stray_files_and_its_gateway_still_locks_it(self):
        # issue 34: a restore into a path where no database was left a 0-byte <db>.serving
        g = self.gateway([account("only", self.mock.url("only"))], start=False)
        backup = os.path.join(g.dir, "copy.db")
        g.cli("backup", "--db", g.db_path, "--out", backup)
        fresh = os.path.join(g.dir, "fresh")
        os.mkdir(fresh)
        target = os.path.join(fresh, "restored.db")
        junk = os.path.join(g.dir, "junk.db")
        with open(junk, "w") as f:
            f.write("not a database\n")
        for bad in (os.path.join(g.dir, "missing.db"), junk):  # refused: nothing left either
            p = g.cli("restore", bad, "--db", target, check=False)
            self.assertEqual(p.returncode, 1)
            self.assertEqual(os.listdir(fresh), [], bad)
        p = g.cli("restore", backup, "--db", target)
        self.assertIn(f"restored {backup} into {target}: 1 account", p.stdout)
        self.assertEqual(os.listdir(fresh), ["restored.db"])
        # the lock still works: a gateway serving the restored database makes its own, and refuses a restore
        r = self.gateway([], start=False)
        r.db_path = target
        r.start()
        self.assertEqual(r.post("/v1/chat/completions", CHAT_BODY, key=g.key).status, 200)
        p = g.cli("restore", backup, "--db", target, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"a gateway is serving {target} (pid {r.proc.pid})", p.stderr)

    def test_restore_refuses_a_file_that_is_not_a_database_this_build_opens(self):
        g = self.gateway([account("only", self.mock.url("only"))], start=False)
        before = g.cli("account", "list", "--db", g.db_path, "--json").stdout
        junk = os.path.join(g.dir, "pool.json")
        g.cli("account", "export", "--db", g.db_path, "--out", junk)
        newer = os.path.join(g.dir, "newer.db")
        g.cli("backup", "--db", g.db_path, "--out", newer)
        for path, sql in ((newer, "INSERT INTO schema_migrations(version, applied_at) VALUES (9999, 0)"),
                          (os.path.join(g.dir, "other.db"), "CREATE TABLE notes(x)")):
            c = sqlite3.connect(path)
            c.execute(sql)
            c.commit()
            c.close()
        other = os.path.join(g.dir, "other.db")
        cases = {junk: "is not a SQLite database", newer: "has schema version 9999, newer than this build's",
                 other: "is not a switchyard database", os.path.join(g.dir, "missing.db"): "cannot read"}
        for path, why in cases.items():
            p = g.cli("restore", path, "--db", g.db_path, check=False)
            self.assertEqual(p.returncode, 1, path)
            self.assertIn(why, p.stderr, path)
            self.assertIn("nothing was changed", p.stderr)
            self.assertFalse(os.path.exists(g.db_path + ".before-restore"))
        self.assertEqual(g.cli("account", "list", "--db", g.db_path, "--json").stdout, before)
        p = g.cli("restore", "--db", g.db_path, check=False)
        self.assertEqual(p.returncode, 2)


class ExportSettingsTest(GatewayTest):

    # the volatile fields of `account list --json`: state the gateway learns, not settings
    VOLATILE = {"id", "cooldown_remaining_s", "last_refresh_at"}

    def settings(self, g):
        rows = json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)
        listed = [{k: v for k, v in r.items() if k not in self.VOLATILE} for r in rows]
        raw = g.query("SELECT name, token, model_map, refresh_token FROM accounts ORDER BY name")
        return listed, raw

    def test_export_then_import_keeps_every_account_setting(self):
        g = self.gateway(start=False)
        g.add_account("tuned", "https://api.example.com/v1", "sk-tuned", sort=5, args=[
            "--weight", "4", "--max-rpm", "60", "--max-tpm", "90000", "--budget", "12.5", "--budget-period", "7d",
            "--context-fallback", "--max-concurrency", "3", "--model-map", '{"gpt-5":"gpt-5-codex"}',
            "--models", "gpt-5,o3"])
        g.add_account("agg", "https://agg.example.com/openai/v1", "sk-agg", kind="aggregate", sort=-2,
                      args=["--budget", "0.1"])
        g.add_account("off", "http://127.0.0.1:9/v1", "sk-off")
        g.cli("account", "disable", "--db", g.db_path, "--name", "off")
        path = os.path.join(g.dir, "auth.json")
        with open(path, "w") as f:
            json.dump(auth_json("cg", 3600), f)
        g.cli("account", "add", "--db", g.db_path, "--name", "cg", "--codex-auth", path, "--weight", "2",
              "--max-rpm", "7", "--budget", "30", "--sort", "1")
        full = os.path.join(g.dir, "full.json")
        g.cli("account", "export", "--db", g.db_path, "--out", full, "--with-secrets")
        entry = {e["name"]: e for e in json.load(open(full))["accounts"]}["tuned"]
        for k, v in {"weight": 4, "max_rpm": 60, "max_tpm": 90000, "budget_usd": 12.5, "budget_period": "7d",
                     "context_fallback": True, "enabled": True, "max_concurrency": 3, "sort": 5}.items():
            self.assertEqual(entry[k], v, k)
        g2 = self.gateway(start=False)
        p = g2.cli("account", "import", "--db", g2.db_path, full)
        self.assertIn("imported 4 logins: 4 added, 0 updated", p.stdout)
        self.assertEqual(self.settings(g2), self.settings(g))
        # an account that exists keeps its own settings: the import renews its login only
        g2.cli("account", "update", "--db", g2.db_path, "--name", "tuned", "--weight", "9")
        p = g2.cli("account", "import", "--db", g2.db_path, full)
        self.assertIn("4 updated", p.stdout)
        self.assertEqual(g2.query("SELECT weight FROM accounts WHERE name = 'tuned'")[0]["weight"], 9)

    def test_a_bad_setting_in_an_import_names_the_entry_and_imports_nothing(self):
        g = self.gateway(start=False)
        entries = [{"name": "ok", "kind": "api_key", "base_url": "https://h/v1", "tokens": {"access_token": "sk-1"}},
                   {"name": "bad", "kind": "api_key", "base_url": "https://h/v1", "budget_period": "fortnight",
                    "tokens": {"access_token": "sk-2"}}]
        path = os.path.join(g.dir, "bad.json")
        with open(path, "w") as f:
            json.dump({"format": "switchyard.accounts", "accounts": entries}, f)
        p = g.cli("account", "import", "--db", g.db_path, path, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("entry 2 (bad): budget_period: expected month or <N>d", p.stderr)
        self.assertEqual(g.query("SELECT count(*) AS n FROM accounts")[0]["n"], 0)


class BaseUrlTest(GatewayTest):

    BAD = {
        "https://api.example.com/v1/chat/completions":
            "ends in the endpoint /chat/completions: give the base, e.g. https://api.example.com/v1",
        "https://chatgpt.com/backend-api/codex/responses/":
            "ends in the endpoint /responses: give the base, e.g. https://chatgpt.com/backend-api/codex",
        "http://127.0.0.1:9/v1/models": "ends in the endpoint /models",
        "http://exa mple/v1": "contains a space",
        "https://": "has no host",
        "http://h:70000/v1": "has an invalid port",
        "http://h/v1?x=1": "takes no ?query",
    }

    def test_bad_base_urls_are_refused_at_add_update_and_import(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        for url, why in self.BAD.items():
            p = g.cli("account", "add", "--db", g.db_path, "--name", "x", "--base-url", url, "--token", "t",
                      check=False)
            self.assertEqual(p.returncode, 2, url)
            self.assertIn(f"--base-url {why}", p.stderr, url)
            p = g.cli("account", "update", "--db", g.db_path, "--name", "a", "--base-url", url, check=False)
            self.assertEqual(p.returncode, 1, url)
            self.assertIn(f"base_url {why}", p.stderr, url)
            path = os.path.join(g.dir, "in.json")
            with open(path, "w") as f:
                json.dump([{"name": "ok", "kind": "api_key", "base_url": "https://h/v1", "token": "sk-1"},
                           {"name": "x", "kind": "api_key", "base_url": url, "token": "sk-2"}], f)
            p = g.cli("account", "import", "--db", g.db_path, path, check=False)
            self.assertEqual(p.returncode, 1, url)
            self.assertIn(f"entry 2 (x): account base_url {why}", p.stderr, url)
        self.assertEqual([r["name"] for r in g.query("SELECT name FROM accounts")], ["a"])
        self.assertEqual(g.query("SELECT base_url FROM accounts")[0]["base_url"], self.mock.url("a"))
        # the account still serves at its base: nothing was sent to a doubled path
        self.assertEqual(g.post("/v1/chat/completions", CHAT_BODY).status, 200)
        g.cli("account", "update", "--db", g.db_path, "--name", "a", "--base-url", self.mock.url("a") + "/")


if __name__ == "__main__":
    main()
