"""test_account_states.py: refusals that waiting does not heal hold the
account out of the pool until an operator acts (src/route/hold.h): a
deactivated ChatGPT workspace (402 {"detail":{"code":"deactivated_workspace"}}),
a workspace that may not use Codex (403 {"detail":{"code":
"invalid_workspace_selected"}}) and a region the upstream does not serve
(403 unsupported_country_region_territory) and an API key the upstream
refuses as invalid (401 invalid_api_key: key_refused), in the shapes the mock's
status=<code>,err=<shape> answers.

For each: the request goes on on the next account; the held account gets
no request again (its scenario has times=1, so it would answer ok if it were
tried, and the verdict sets no cooldown, so only the hold keeps it out);
the router's skip reason names the state and the fix; the hold is in the
database, survives a restart and shows in `account list` (text and JSON),
`status` (live and from the database) and /admin/api/accounts; `account
reset` brings the account back. Also: the admin API's reset, a changed token
(`account update`) clears it and the same token does not, and a pool of
held accounts answers 503 saying what to do."""

import json
import subprocess

from harness import GatewayTest, account, http_call, main, switchyard_bin, wait_for

BODY = {"model": "gpt-test", "input": "hi"}

# state -> the mock scenario that refuses in the upstream's shape (once: times=1)
SHAPES = {
    "deactivated_workspace": "status=402,err=deactivated_workspace,times=1",
    "workspace_denied": "status=403,err=workspace_denied,times=1",
    "region_unsupported": "status=403,err=region,times=1",
    "account_deactivated": "status=401,err=account_deactivated,times=1",
}


def admin_token(g):
    return g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]


class AccountStatesTest(GatewayTest):

    def pool(self, state, chatgpt=False):
        """a (refuses once with state's shape, then would answer ok) first, b ok; an admin token."""
        if chatgpt:  # the ChatGPT backend's shape on a ChatGPT account, as Codex logins meet it
            a = account("a", self.mock.url("a", SHAPES[state], v1=False), kind="chatgpt", chatgpt_id="ws-a")
        else:
            a = account("a", self.mock.url("a", SHAPES[state]))
        g = self.gateway([a, account("b", self.mock.url("b", "ok"))], start=False)
        tok = admin_token(g)
        g.start()
        return g, tok

    def hold_row(self, g, name="a"):
        return g.query("SELECT hold, hold_detail, hold_since FROM accounts WHERE name = ?", (name,))[0]

    def api_account(self, g, tok, name="a"):
        r = http_call(g.port, "GET", "/admin/api/accounts", headers={"Authorization": f"Bearer {tok}"})
        self.assertEqual(r.status, 200, r)
        return {a["name"]: a for a in r.json()["accounts"]}[name]

    def served_by(self, g, name):
        r = g.post("/v1/responses", BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["x-switchyard-account"], name)

    def status(self, g, tok, *args):
        env = dict(g.env, SWITCHYARD_ADMIN_TOKEN=tok, SWITCHYARD_LISTEN=f"127.0.0.1:{g.port}")
        p = subprocess.run([switchyard_bin(), "status", "--db", g.db_path, *args], env=env, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def check_held_everywhere(self, g, tok, state, live=True):
        """The hold shows in the database, account list, status and (live) the admin API."""
        row = self.hold_row(g)
        self.assertEqual(row["hold"], state)
        self.assertGreater(row["hold_since"], 0)
        self.assertRegex(row["hold_detail"] or "", r"^HTTP 40[123]")
        fix = f"`switchyard account reset --name a`"
        doc = json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)
        held = {a["name"]: a["hold"] for a in doc}
        self.assertIsNone(held["b"])
        self.assertEqual(held["a"]["state"], state)
        self.assertIn(fix, held["a"]["fix"])
        self.assertTrue(held["a"]["what"])
        text = g.cli("account", "list", "--db", g.db_path).stdout
        self.assertIn(f"HELD: {state} since ", text)
        self.assertIn("to fix: ", text)
        self.assertIn(fix, text)
        out = self.status(g, tok) if live else self.status(g, "")
        self.assertIn("(live)" if live else "from the database", out)
        rows = {ln.split()[0]: ln.split() for ln in out.splitlines()[2:] if ln and not ln.startswith(" ")}
        self.assertEqual(rows["a"][2], "held", out)
        self.assertIn(f"held: a ({state}): ", out)
        self.assertIn(fix, out)
        doc = json.loads(self.status(g, tok if live else "", "--json"))
        a = {x["name"]: x for x in doc["accounts"]}["a"]
        self.assertEqual((a["state"], a["hold"]["state"]), ("held", state))
        if live:
            a = self.api_account(g, tok)
            self.assertEqual(a["state"], "held")
            self.assertEqual(a["hold"]["state"], state)
            self.assertIn(fix, a["hold"]["fix"])
            self.assertEqual(a["cooldown_remaining_s"], 0)  # no cooldown: the hold alone keeps it out

    def run_state(self, state, chatgpt=False):
        g, tok = self.pool(state, chatgpt)
        # the first request: a refuses, the client gets b's answer
        self.served_by(g, "b")
        self.assertEqual(len(self.mock.requests("a")), 1)
        wait_for(lambda: self.hold_row(g)["hold"] == state, what=f"a held as {state} in the database")
        # a is tried no more (it would answer ok now): the router names the state and the fix
        for _ in range(4):
            self.served_by(g, "b")
        self.assertEqual(len(self.mock.requests("a")), 1, "a held account was tried again")
        wait_for(lambda: f'account=a reason="{state}: ' in g.trace_text(), what="the skip reason in the trace")
        skip = [ln for ln in g.trace_text().splitlines() if f'account=a reason="{state}: ' in ln][-1]
        self.assertIn("`switchyard account reset --name a`", skip)  # after the fix, or beside a new key
        self.assertIn("ACCOUNT_HOLD", g.trace_text())
        self.check_held_everywhere(g, tok, state)
        # a restart keeps it
        g.restart()
        self.served_by(g, "b")
        self.assertEqual(len(self.mock.requests("a")), 1, "held no more after a restart")
        self.check_held_everywhere(g, tok, state)
        g.stop()
        self.check_held_everywhere(g, tok, state, live=False)
        g.start()
        # the operator's reset brings it back: the running gateway reloads it
        g.cli("account", "reset", "--db", g.db_path, "--name", "a")
        self.assertIsNone(self.hold_row(g)["hold"])
        wait_for(lambda: self.api_account(g, tok)["hold"] is None, what="the gateway to reload the reset")
        self.assertEqual(self.api_account(g, tok)["state"], "available")
        self.served_by(g, "a")
        self.assertEqual(len(self.mock.requests("a")), 2)

    def test_deactivated_workspace_holds_a_chatgpt_account_until_reset(self):
        self.run_state("deactivated_workspace", chatgpt=True)

    def test_workspace_denied_holds_the_account_until_reset(self):
        self.run_state("workspace_denied")

    def test_unsupported_region_holds_the_account_until_reset(self):
        self.run_state("region_unsupported")

    def test_a_key_of_a_deactivated_api_account_is_held_until_reset_not_cooled_and_probed(self):
        self.run_state("account_deactivated")

    def test_admin_api_reset_clears_the_hold_for_good(self):
        g, tok = self.pool("deactivated_workspace")
        self.served_by(g, "b")
        wait_for(lambda: self.api_account(g, tok)["hold"] is not None
                 and self.hold_row(g)["hold"] == "deactivated_workspace", what="a held")
        r = http_call(g.port, "POST", "/admin/api/accounts/reset", {"account": "a"},
                      headers={"Authorization": f"Bearer {tok}", "Content-Type": "application/json"})
        self.assertEqual(r.status, 200, r)
        self.assertIsNone(r.json()["account"]["hold"])
        wait_for(lambda: self.hold_row(g)["hold"] is None, what="the reset written to the database")
        g.restart()
        self.assertIsNone(self.api_account(g, tok)["hold"])
        self.served_by(g, "a")

    def test_a_changed_token_clears_the_hold_and_the_same_token_does_not(self):
        g, tok = self.pool("region_unsupported")
        self.served_by(g, "b")
        wait_for(lambda: self.hold_row(g)["hold"] == "region_unsupported", what="a held")
        same = g.accounts["a"]
        g.cli("account", "update", "--db", g.db_path, "--name", "a", "--token", same)
        self.assertEqual(self.hold_row(g)["hold"], "region_unsupported")  # the same login: still refused
        g.cli("account", "update", "--db", g.db_path, "--name", "a", "--token", same + "-new")
        row = self.hold_row(g)
        self.assertEqual((row["hold"], row["hold_detail"], row["hold_since"]), (None, None, 0))
        wait_for(lambda: self.api_account(g, tok)["hold"] is None, what="the gateway to reload the new login")
        # back in the pool (its one failure may still put b first: the key prefers a to see it serve)
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "a")
        wait_for(lambda: g.post("/v1/responses", BODY).headers.get("x-switchyard-account") == "a",
                 what="a request served by a")

    def test_a_refused_api_key_is_held_as_key_refused_until_a_new_token(self):
        # a: 401 invalid_api_key ("Incorrect API key provided.") once, then it would answer ok
        a = account("a", self.mock.url("a", "status=401,times=1"))
        g = self.gateway([a, account("b", self.mock.url("b", "ok"))], start=False)
        tok = admin_token(g)
        g.start()
        self.served_by(g, "b")  # one refusal: the request goes on on b
        wait_for(lambda: self.hold_row(g)["hold"] == "key_refused", what="a held as key_refused")
        for _ in range(4):
            self.served_by(g, "b")
        self.assertEqual(len(self.mock.requests("a")), 1, "a refused key was tried again")
        update = "update it with `switchyard account update --name a --token ...`"
        wait_for(lambda: 'account=a reason="key_refused: ' in g.trace_text(), what="the skip reason")
        skip = [ln for ln in g.trace_text().splitlines() if 'account=a reason="key_refused: ' in ln][-1]
        self.assertIn("the upstream refuses this key as invalid; " + update, skip)
        self.check_held_everywhere(g, tok, "key_refused")
        self.assertIn(update, self.api_account(g, tok)["hold"]["fix"])
        self.assertIn(update, g.cli("account", "list", "--db", g.db_path).stdout)
        # a new key clears it; the account serves again
        g.cli("account", "update", "--db", g.db_path, "--name", "a", "--token", g.accounts["a"] + "-new")
        self.assertIsNone(self.hold_row(g)["hold"])
        wait_for(lambda: self.api_account(g, tok)["hold"] is None, what="the gateway to reload the new key")
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "a")
        wait_for(lambda: g.post("/v1/responses", BODY).headers.get("x-switchyard-account") == "a",
                 what="a request served by a")

    def test_a_pool_of_held_accounts_answers_503_saying_what_to_do(self):
        g = self.gateway([account("a", self.mock.url("a", "status=402,err=deactivated_workspace"))])
        first = g.post("/v1/responses", BODY)
        self.assertIn(first.status, (402, 503), first)  # nothing to fail over to
        wait_for(lambda: self.hold_row(g)["hold"] == "deactivated_workspace", what="a held")
        r = g.post("/v1/responses", BODY)
        err = self.assertOpenAIError(r, 503)
        self.assertIn("a: deactivated_workspace: the ChatGPT workspace was deactivated", err["message"])
        self.assertIn("then `switchyard account reset --name a`", err["message"])
        self.assertNotIn("retry-after", r.headers)  # nothing comes back by itself
        self.assertEqual(len(self.mock.requests("a")), 1)
        health = g.get("/health", key=None).json()
        self.assertIn("1 held until an operator acts", " ".join(health["reasons"]), health)


if __name__ == "__main__":
    main()
