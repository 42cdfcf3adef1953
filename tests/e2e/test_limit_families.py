"""test_limit_families.py: cooldowns per (account, limit family) (store.h,
account_family; docs/codex.md "Limits Codex shows"). The ChatGPT backend
meters some models apart from an account's main limit: a family of its own
(x-codex-<name>-* headers, x-codex-active-limit: codex_<name> on an answer
for such a model). A 429 for a model of a family cools only that family of
the account: the account keeps serving its other models, the family's model
fails over to another account, and comes back when the family's window
resets.

The mock's family=<name>,family_model=<model>,family_until=<unix s> makes an
account meter <model> in the family <name>: its answers for that model carry
the family's headers (and the main x-codex-primary-* carrying the family's
numbers, as the backend sends them), and until family_until it answers that
model with a 429 usage_limit_reached. Other models are served as usual."""

import json
import subprocess
import time

from harness import GatewayTest, account, http_call, main, switchyard_bin, wait_for

FAMILY_MODEL = "gpt-spark"
OTHER_MODEL = "gpt-test"


def body(model):
    return {"model": model, "input": "hi"}


def admin_token(g):
    return g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]


class LimitFamilyTest(GatewayTest):

    @staticmethod
    def spec(until):
        return f"ok,family=spark,family_model={FAMILY_MODEL},family_until={until}"

    def pool(self, until, b_scenario="ok"):
        """a (meters FAMILY_MODEL in the family spark, spent until `until`) first, b after it."""
        g = self.gateway([account("a", self.mock.url("a", self.spec(until)), sort=0),
                          account("b", self.mock.url("b", b_scenario), sort=1)], start=False)
        tok = admin_token(g)
        g.start()
        return g, tok

    def served_by(self, g, model, name):
        r = g.post("/v1/responses", body(model))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["x-switchyard-account"], name)

    def asked(self, name, model):
        return [r for r in self.mock.requests(name) if r["method"] == "POST" and r.get("model") == model]

    def api_account(self, g, tok, name="a"):
        r = http_call(g.port, "GET", "/admin/api/accounts", headers={"Authorization": f"Bearer {tok}"})
        self.assertEqual(r.status, 200, r)
        return {a["name"]: a for a in r.json()["accounts"]}[name]

    def status(self, g, tok):
        env = dict(g.env, SWITCHYARD_ADMIN_TOKEN=tok, SWITCHYARD_LISTEN=f"127.0.0.1:{g.port}")
        p = subprocess.run([switchyard_bin(), "status", "--db", g.db_path], env=env, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def stored_families(self, g):
        rows = g.query("SELECT family_cooldowns FROM account_state WHERE account_id ="
                       " (SELECT id FROM accounts WHERE name = 'a')")
        return json.loads(rows[0]["family_cooldowns"]) if rows and rows[0]["family_cooldowns"] else []

    def test_a_429_for_a_family_model_cools_only_that_family_until_its_window_resets(self):
        # The window is a time: the checks that need it still open are few and quick (what the operator
        # sees, which takes CLI runs, is in the next test, on a window of ten minutes), and it is set just
        # before the gateway starts, so the setup's CLI runs do not use it up on a loaded machine
        g = self.gateway([account("a", self.mock.url("a", self.spec(0)), sort=0),
                          account("b", self.mock.url("b"), sort=1)], start=False)
        tok = admin_token(g)
        until = int(time.time()) + 10
        g.cli("account", "update", "--db", g.db_path, "--name", "a", "--base-url", self.mock.url("a", self.spec(until)))
        g.start()
        # a answers the family's model with a 429: the request goes on on b
        self.served_by(g, FAMILY_MODEL, "b")
        self.assertEqual(len(self.asked("a", FAMILY_MODEL)), 1)
        # a keeps serving the other model: the account itself does not rest
        self.served_by(g, OTHER_MODEL, "a")
        self.served_by(g, OTHER_MODEL, "a")
        # the family's model is not sent to a again while the family rests
        self.served_by(g, FAMILY_MODEL, "b")
        self.assertEqual(len(self.asked("a", FAMILY_MODEL)), 1, "a family-cooled account was asked again")
        wait_for(lambda: 'account=a reason="limit family codex_spark cooling down' in g.trace_text() or None,
                 what="the router's skip reason naming the family")
        # the window reset (the clock past it, its own sign): a serves the family's model again
        wait_for(lambda: time.time() > until + 0.5 or None, timeout=15, what="the family's window to reset")
        self.served_by(g, FAMILY_MODEL, "a")
        self.assertEqual(len(self.asked("a", FAMILY_MODEL)), 2)
        self.assertEqual(self.api_account(g, tok)["family_cooldowns"], [])

    def test_a_family_cooldown_shows_in_the_admin_api_account_list_and_status(self):
        # a window of ten minutes: the CLI runs below (a second or more each on a loaded machine under
        # ASan) cannot outlast it
        until = int(time.time()) + 600
        g, tok = self.pool(until)
        self.served_by(g, FAMILY_MODEL, "b")
        # what the operator sees: the family, not the account, cooling down
        a = self.api_account(g, tok)
        self.assertEqual(a["cooldown_remaining_s"], 0)
        self.assertEqual(a["state"], "available")
        fams = a["family_cooldowns"]
        self.assertEqual([(f["family"], f["model"]) for f in fams], [("codex_spark", FAMILY_MODEL)])
        self.assertGreater(fams[0]["remaining_s"], 0)
        self.assertLessEqual(fams[0]["until"], until + 1)  # rests until the family's window resets
        # the main headers carried the family's 100 %: not the account's own usage
        self.assertNotEqual((a["usage"]["primary"] or {}).get("used_pct"), 100, a["usage"])
        # the CLI reads the database: what the writer thread commits, awaited by its own sign
        wait_for(lambda: self.stored_families(g) or None, what="the family cooldown in the database")
        self.assertEqual(self.stored_families(g)[0]["family"], "codex_spark")
        listed = {x["name"]: x for x in json.loads(g.cli("account", "list", "--json", "--db", g.db_path).stdout)}
        self.assertEqual([f["family"] for f in listed["a"]["family_cooldowns"]], ["codex_spark"])
        self.assertEqual(listed["b"]["family_cooldowns"], [])
        self.assertIn("limit family cooling down: codex_spark for ",
                      g.cli("account", "list", "--db", g.db_path).stdout)
        self.assertIn(f"limit family cooling down: a: codex_spark for ", self.status(g, tok))

    def test_a_family_cooldown_survives_a_restart_and_account_reset_clears_it(self):
        until = int(time.time()) + 120
        g, tok = self.pool(until)
        self.served_by(g, FAMILY_MODEL, "b")
        wait_for(lambda: self.stored_families(g) or None, what="the family cooldown in the database")
        g.restart()
        # after a restart the gateway knows no model's family yet: the stored slot's model still matches
        self.served_by(g, FAMILY_MODEL, "b")
        self.assertEqual(len(self.asked("a", FAMILY_MODEL)), 1, "the family cooldown was forgotten by a restart")
        self.served_by(g, OTHER_MODEL, "a")
        g.cli("account", "reset", "--db", g.db_path, "--name", "a")
        wait_for(lambda: self.api_account(g, tok)["family_cooldowns"] == [] or None,
                 what="the gateway to reload the reset")
        # a state write the gateway queued before the reset may land after it: the reset is written back
        wait_for(lambda: self.stored_families(g) == [] or None, what="the reset family cooldowns in the database")

    def test_a_pool_whose_family_is_spent_everywhere_answers_the_usage_limit_and_serves_other_models(self):
        until = int(time.time()) + 600
        g, tok = self.pool(until, b_scenario=self.spec(until))
        first = g.post("/v1/responses", body(FAMILY_MODEL))  # both accounts answer 429 for the family
        self.assertEqual(first.status, 429, first)
        r = g.post("/v1/responses", body(FAMILY_MODEL))  # both rest for that family: Codex's usage limit
        self.assertEqual(r.status, 429, r)
        err = r.json()["error"]
        self.assertEqual(err["type"], "usage_limit_reached")
        self.assertLessEqual(abs(err["resets_at"] - until), 2, err)
        self.assertEqual(len(self.asked("a", FAMILY_MODEL)) + len(self.asked("b", FAMILY_MODEL)), 2)
        self.served_by(g, OTHER_MODEL, "a")



class PerModelRateLimitTest(GatewayTest):
    """The API's rate limits are each model's: a 429 "Rate limit reached for MODEL in
    organization ..." rests that model on the account (classify's scope "model"), which goes on
    serving its other models; the failover benchmark's scenarios, one model each, no longer
    keep its primary from every scenario after one 429."""

    def test_a_429_naming_the_model_rests_only_that_model_on_the_account(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,err=per_model,times=1")),
                          account("b", self.mock.url("b"))])
        r = g.post("/v1/responses", body("m1"))
        self.assertEqual((r.status, r.headers["x-switchyard-account"]), (200, "b"), r)
        r = g.post("/v1/responses", body("m2"))
        self.assertEqual((r.status, r.headers["x-switchyard-account"]), (200, "a"), "a serves its other models")
        r = g.post("/v1/responses", body("m1"))
        self.assertEqual((r.status, r.headers["x-switchyard-account"]), (200, "b"), "m1 still rests on a")
        self.assertEqual([q["model"] for q in self.mock.requests("a") if q["method"] == "POST"], ["m1", "m2"])
        wait_for(lambda: "FAMILY_COOLDOWN" in g.trace_text() and "family=model:m1" in g.trace_text(),
                 what="the model's rest in the trace")

    def test_a_429_for_the_organization_rests_the_account(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,times=1")),
                          account("b", self.mock.url("b"))])
        self.assertEqual(g.post("/v1/responses", body("m1")).headers["x-switchyard-account"], "b")
        self.assertEqual(g.post("/v1/responses", body("m2")).headers["x-switchyard-account"], "b")


if __name__ == "__main__":
    main()
