"""test_accounts.py: logins in and out of the database with `switchyard
account import / export / update`: Codex auth.json files, CodexManager and
sub2api exports, switchyard's own export, concatenated objects; bad files
name the entry and field and import nothing; duplicates update in place."""

import json
import os
import stat
import time

from harness import GatewayTest, main
from test_oauth import auth_json


class AccountsCliTest(GatewayTest):

    def write(self, g, name, obj, raw=None):
        path = os.path.join(g.dir, name)
        with open(path, "w") as f:
            f.write(raw if raw is not None else json.dumps(obj))
        return path

    def rows(self, g):
        return g.query("SELECT id, name, chatgpt_account_id, email, plan_type, refresh_token, token_expires_at"
                       " FROM accounts ORDER BY id")

    def test_codex_auth_add_keeps_the_whole_login(self):
        g = self.gateway(start=False)
        path = self.write(g, "auth.json", auth_json("ann", 3600))
        g.cli("account", "add", "--db", g.db_path, "--name", "ann", "--codex-auth", path)
        r = self.rows(g)[0]
        self.assertEqual((r["chatgpt_account_id"], r["email"], r["plan_type"], r["refresh_token"]),
                         ("acct-ann", "ann@example.com", "plus", "rt_ann_1"))
        self.assertAlmostEqual(r["token_expires_at"], time.time() + 3600, delta=120)
        row = g.query("SELECT last_refresh_at FROM accounts")[0]
        self.assertEqual(row["last_refresh_at"], 1735689600)  # auth.json's last_refresh, 2025-01-01T00:00:00Z
        listing = g.cli("account", "list", "--db", g.db_path, "--json").stdout
        self.assertNotIn("rt_ann", listing)
        self.assertNotIn(auth_json("ann", 3600)["tokens"]["id_token"][:40], listing)

    def test_codex_auth_update_replaces_the_whole_login_in_place(self):
        # add and update take the login's fields through the same path (login_entry_login)
        g = self.gateway(start=False)
        g.cli("account", "add", "--db", g.db_path, "--name", "ann", "--codex-auth",
              self.write(g, "old.json", auth_json("ann", 60)))
        before = self.rows(g)[0]
        newer = auth_json("ann", 7200, refresh="rt_ann_9", last_refresh="2025-06-01T00:00:00Z")
        g.cli("account", "update", "--db", g.db_path, "--name", "ann", "--codex-auth",
              self.write(g, "new.json", newer))
        r = self.rows(g)[0]
        self.assertEqual(r["id"], before["id"])
        self.assertEqual((r["chatgpt_account_id"], r["email"], r["plan_type"], r["refresh_token"]),
                         ("acct-ann", "ann@example.com", "plus", "rt_ann_9"))
        self.assertAlmostEqual(r["token_expires_at"], time.time() + 7200, delta=120)
        row = g.query("SELECT last_refresh_at, id_token FROM accounts")[0]
        self.assertEqual(row["last_refresh_at"], 1748736000)  # 2025-06-01T00:00:00Z
        self.assertEqual(row["id_token"], newer["tokens"]["id_token"])

    def test_import_takes_codexmanager_sub2api_arrays_and_object_streams(self):
        g = self.gateway(start=False)
        cm = {"format": "com.nik.mei.codexmanager.accounts", "version": 1, "exportedAt": 0,
              "accounts": [{"id": "x", "label": "cm1", "email": "cm1@example.com", "accountId": "acct-cm1",
                            "authJson": auth_json("cm1", 3600)}]}
        s2 = {"code": 0, "data": {"type": "sub2api-data", "version": 1, "proxies": [],
              "accounts": [{"name": "s2", "platform": "openai", "type": "oauth", "concurrency": 3, "priority": 5,
                            "credentials": dict(auth_json("s2", 3600)["tokens"], email="s2@example.com")}]}}
        arr = [dict(auth_json("arr", 3600)["tokens"], name="arr")]
        stream = json.dumps(auth_json("st1", 3600)) + "\n" + json.dumps(auth_json("st2", 3600))
        files = [self.write(g, "cm.json", cm), self.write(g, "s2.json", s2), self.write(g, "arr.json", arr),
                 self.write(g, "stream.json", None, raw=stream)]
        out = g.cli("account", "import", "--db", g.db_path, *files).stdout
        self.assertIn("imported 5 logins: 5 added, 0 updated", out)
        names = {r["name"]: r for r in self.rows(g)}
        self.assertEqual(set(names), {"cm1", "s2", "arr", "st1@example.com", "st2@example.com"})
        self.assertEqual(names["s2"]["refresh_token"], "rt_s2_1")
        s2row = g.query("SELECT sort, max_concurrency FROM accounts WHERE name = 's2'")[0]
        self.assertEqual((s2row["sort"], s2row["max_concurrency"]), (5, 3))

    def test_duplicate_import_updates_the_existing_account_in_place(self):
        g = self.gateway(start=False)
        g.cli("account", "import", "--db", g.db_path, self.write(g, "a.json", auth_json("dup", 3600)))
        before = self.rows(g)
        g.cli("account", "update", "--db", g.db_path, "--name", "dup@example.com", "--sort", "42")
        out = g.cli("account", "import", "--db", g.db_path,
                    self.write(g, "b.json", auth_json("dup", 7200, refresh="rt_dup_9"))).stdout
        self.assertIn("0 added, 1 updated", out)
        after = self.rows(g)
        self.assertEqual(len(after), 1)
        self.assertEqual(after[0]["id"], before[0]["id"])
        self.assertEqual(after[0]["refresh_token"], "rt_dup_9")
        self.assertEqual(g.query("SELECT sort FROM accounts")[0]["sort"], 42)

    def test_a_bad_entry_names_entry_and_field_and_imports_nothing(self):
        g = self.gateway(start=False)
        good = auth_json("ok1", 3600)
        bad = {"tokens": {"refresh_token": "rt_x_1", "account_id": "acct-x"}}
        path = self.write(g, "mixed.json", [good, bad])
        p = g.cli("account", "import", "--db", g.db_path, path, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("mixed.json entry 2: access_token: missing", p.stderr)
        self.assertIn("nothing was imported", p.stderr)
        self.assertNotIn("rt_x_1", p.stderr)
        self.assertEqual(self.rows(g), [])
        p = g.cli("account", "import", "--db", g.db_path, self.write(g, "junk.json", None, raw="{\"a\": [1,"),
                  check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("junk.json", p.stderr)

    def test_export_is_private_tokenless_by_default_and_import_takes_it_back(self):
        g = self.gateway(start=False)
        g.cli("account", "import", "--db", g.db_path, self.write(g, "a.json", auth_json("exp", 3600)))
        g.cli("account", "update", "--db", g.db_path, "--name", "exp@example.com", "--models", "gpt-5-codex, o3")
        plain = os.path.join(g.dir, "plain.json")
        g.cli("account", "export", "--db", g.db_path, "--out", plain)
        self.assertEqual(stat.S_IMODE(os.stat(plain).st_mode), 0o600)
        text = open(plain).read()
        self.assertNotIn("rt_exp", text)
        self.assertNotIn("access_token", text)
        self.assertEqual(json.loads(text)["accounts"][0]["models"], "gpt-5-codex,o3")  # the --models list
        full = os.path.join(g.dir, "full.json")
        g.cli("account", "export", "--db", g.db_path, "--out", full, "--with-secrets", "--name", "exp@example.com")
        self.assertEqual(stat.S_IMODE(os.stat(full).st_mode), 0o600)
        self.assertIn("rt_exp_1", open(full).read())
        g2 = self.gateway(start=False)
        out = g2.cli("account", "import", "--db", g2.db_path, full).stdout
        self.assertIn("1 added", out)
        self.assertEqual(self.rows(g2)[0]["refresh_token"], "rt_exp_1")
        self.assertEqual(g2.query("SELECT models FROM accounts")[0]["models"], "gpt-5-codex,o3")
        p = g2.cli("account", "import", "--db", g2.db_path, plain, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("access_token: missing", p.stderr)

    def test_a_full_export_imported_back_updates_every_account_in_place(self):
        g = self.gateway(start=False)
        g.cli("account", "import", "--db", g.db_path, self.write(g, "a.json", auth_json("rt1", 3600)))
        g.add_account("key1", "https://api.example.com/v1", "sk-key1-old", kind="api_key")
        full = os.path.join(g.dir, "full.json")
        g.cli("account", "export", "--db", g.db_path, "--out", full, "--with-secrets")
        before = g.query("SELECT id, name FROM accounts ORDER BY id")
        out = g.cli("account", "import", "--db", g.db_path, full).stdout
        self.assertIn("imported 2 logins: 0 added, 2 updated", out)
        self.assertEqual(g.query("SELECT id, name FROM accounts ORDER BY id"), before)

    def test_an_api_key_codex_login_is_refused_with_the_reason(self):
        g = self.gateway(start=False)
        path = self.write(g, "auth.json", {"OPENAI_API_KEY": "sk-abc", "tokens": None})
        p = g.cli("account", "add", "--db", g.db_path, "--name", "x", "--codex-auth", path, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("uses an API key (OPENAI_API_KEY)", p.stderr)
        self.assertNotIn("sk-abc", p.stderr)


if __name__ == "__main__":
    main()
