"""test_model_catalog.py: the models each account serves, end to end: an
operator's `--models` list, the list learned from each account's upstream
GET /models (the model poll, SWITCHYARD_MODEL_POLL_S), an upstream's refusal
of a model for an account (the ChatGPT backend's "not supported when using
Codex with a ChatGPT account", the API's 404 model_not_found), and GET
/v1/models answered by the gateway from the pool (the OpenAI list, or
Codex's own form with ?client_version=) or passed through when nothing is
known.

The mock's option models=a+b makes an account serve only those models: its
GET models answers them (the Codex form when asked with client_version) and
it refuses any other model as its upstream would. Who served a request is
read from x-switchyard-account and checked against the mock's records."""

import json

from harness import GatewayTest, account, main, wait_for

POLL = {"SWITCHYARD_MODEL_POLL_S": "3600"}


def body(model):
    return {"model": model, "input": "hi"}


class ModelCatalogTest(GatewayTest):

    def posts(self, name):
        return [r for r in self.mock.requests(name) if r["method"] == "POST"]

    def model_polls(self, name=None):
        return [r for r in self.mock.requests(name) if r["endpoint"] == "models" and r["method"] == "GET"]

    def wait_model_polls(self, names):
        return wait_for(lambda: {r["account"] for r in self.model_polls()} >= set(names) or None,
                        what=f"model polls of {names}")

    def wait_lists_learned(self, g, names):
        """Waits until the gateway knows each named account's list. The mock records a poll when it
        answers it, before the gateway has read the answer; the gateway sets the list and queues it
        for the database in the same loop turn, so its stored row is the sign that routing and the
        catalog have it."""
        def learned():
            rows = g.query("SELECT a.name FROM account_state s JOIN accounts a ON a.id = s.account_id"
                           " WHERE s.models_learned IS NOT NULL")
            return {r["name"] for r in rows} >= set(names) or None
        wait_for(learned, what=f"the learned model lists of {names}")

    def codex_url(self, name, scenario="ok"):
        return self.mock.url(name, scenario, v1=False) + "/backend-api/codex"

    # ---------------------------------------------------------- --models

    def test_models_override_skips_the_account_for_other_models_without_cooling_it(self):
        g = self.gateway([account("only-o3", self.mock.url("only-o3"), args=["--models", "o3, o4-mini"]),
                          account("any", self.mock.url("any"))])
        r = g.post("/v1/responses", body("gpt-test"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["x-switchyard-account"], "any")
        self.assertEqual(self.posts("only-o3"), [])
        r = g.post("/v1/responses", body("o3"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["x-switchyard-account"], "only-o3")  # not cooled down by the skip
        listed = {a["name"]: a for a in json.loads(g.cli("account", "list", "--json", "--db", g.db_path).stdout)}
        self.assertEqual(listed["only-o3"]["models"], "o3,o4-mini")
        self.assertIsNone(listed["any"]["models"])
        self.assertIn("models: o3,o4-mini", g.cli("account", "list", "--db", g.db_path).stdout)

    def test_models_update_replaces_and_clears_the_list_and_bad_names_are_refused(self):
        g = self.gateway([account("a", self.mock.url("a"), args=["--models", "o3"])], start=False)
        bad = g.cli("account", "update", "--db", g.db_path, "--name", "a", "--models", "o3,,x", check=False)
        self.assertEqual(bad.returncode, 2, bad.stderr)
        self.assertIn("--models", bad.stderr)
        g.cli("account", "update", "--db", g.db_path, "--name", "a", "--models", "gpt-test")
        self.assertEqual(json.loads(g.cli("account", "list", "--json", "--db", g.db_path).stdout)[0]["models"],
                         "gpt-test")
        g.cli("account", "update", "--db", g.db_path, "--name", "a", "--models", "")
        self.assertIsNone(json.loads(g.cli("account", "list", "--json", "--db", g.db_path).stdout)[0]["models"])

    def test_no_account_serving_the_model_is_a_503_naming_why(self):
        g = self.gateway([account("a", self.mock.url("a"), args=["--models", "o3"])])
        r = g.post("/v1/responses", body("gpt-test"))
        self.assertEqual(r.status, 503, r)
        self.assertIn("does not serve model gpt-test", r.json()["error"]["message"])
        self.assertEqual(self.mock.requests("a"), [])

    def test_models_list_is_checked_against_the_name_the_model_map_sends(self):
        # routing asks whether an account serves the model it would be sent:
        # after its --model-map, not the client's name
        g = self.gateway([account("wrong", self.mock.url("wrong"), sort=1,
                                  args=["--models", "fast,m-b", "--model-map", '{"fast":"m-z"}']),
                          account("mapped", self.mock.url("mapped"), sort=2,
                                  args=["--models", "m-a", "--model-map", '{"fast":"m-a"}'])])
        r = g.post("/v1/responses", body("fast"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["x-switchyard-account"], "mapped")  # "wrong" would be sent m-z
        self.assertEqual([x["model"] for x in self.posts("mapped")], ["m-a"])
        self.assertEqual(self.posts("wrong"), [])
        r = g.post("/v1/responses", body("m-b"))  # a name the map leaves alone: its list as before
        self.assertEqual(r.headers["x-switchyard-account"], "wrong")
        g.cli("account", "disable", "--db", g.db_path, "--name", "mapped")
        wait_for(lambda: g.post("/v1/responses", body("fast")).status == 503 or None, what="mapped disabled")
        r = g.post("/v1/responses", body("fast"))
        self.assertIn("its --model-map sends m-z", r.json()["error"]["message"])

    # ---------------------------------------------------------- refusals

    def test_chatgpt_refusal_of_a_model_moves_on_and_is_remembered_without_cooldown(self):
        g = self.gateway([account("cg", self.mock.url("cg", "ok,models=gpt-x", v1=False), kind="chatgpt"),
                          account("api", self.mock.url("api"))])
        for _ in range(2):
            r = g.post("/v1/responses", body("gpt-test"))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.headers["x-switchyard-account"], "api")
        self.assertEqual(len(self.posts("cg")), 1)  # refused once, then skipped
        r = g.post("/v1/responses", body("gpt-x"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["x-switchyard-account"], "cg")  # no cooldown: it still serves gpt-x
        self.assertIn("account cg: the upstream refused model gpt-test", g.log_text())

    def test_api_model_not_found_moves_on_and_the_last_refusal_reaches_the_client(self):
        g = self.gateway([account("a", self.mock.url("a", "ok,models=o3")),
                          account("b", self.mock.url("b", "ok,models=o3"))])
        r = g.post("/v1/responses", body("gpt-test"))
        self.assertEqual(r.status, 404, r)  # the upstream's own answer, not a 503
        self.assertEqual(r.json()["error"]["code"], "model_not_found")
        self.assertEqual((len(self.posts("a")), len(self.posts("b"))), (1, 1))
        r = g.post("/v1/responses", body("o3"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["x-switchyard-account"], "a")

    # ---------------------------------------------------------- the poll and the catalog

    def test_model_poll_learns_each_accounts_list_and_routes_by_it(self):
        # one sort: a learned list is a hint that orders equals (an operator's --sort outranks it)
        g = self.gateway([account("a", self.mock.url("a", "ok,models=m-a"), sort=0),
                          account("b", self.mock.url("b", "ok,models=m-b+m-c"), sort=0)], env=POLL)
        self.wait_model_polls(["a", "b"])
        poll = self.model_polls("a")[0]
        self.assertEqual(poll["path"], "/acct/a/ok,models=m-a/v1/models")
        self.assertEqual(poll["authorization"], f"Bearer {g.accounts['a']}")
        self.wait_lists_learned(g, ["a", "b"])
        r = g.post("/v1/responses", body("m-c"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["x-switchyard-account"], "b")
        self.assertEqual(self.posts("a"), [])  # routed by a's list, not by a's refusal

        r = g.get("/v1/models")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("x-switchyard-catalog"), "pool")
        data = r.json()
        self.assertEqual(data["object"], "list")
        # the union in the pool's order; two accounts of one sort go by their last change, so the
        # order between their lists is not this test's to fix: each model once
        self.assertEqual(sorted(m["id"] for m in data["data"]), ["m-a", "m-b", "m-c"])
        self.assertEqual({m["object"] for m in data["data"]}, {"model"})

    def test_codex_catalog_is_built_from_the_codex_form_answers(self):
        g = self.gateway([account("cg1", self.codex_url("cg1", "ok,models=gpt-5-codex+gpt-5"), kind="chatgpt"),
                          account("cg2", self.codex_url("cg2", "ok,models=gpt-5+gpt-5-mini"), kind="chatgpt")],
                         env=POLL)
        self.wait_model_polls(["cg1", "cg2"])
        self.assertIn("client_version=", self.model_polls("cg1")[0]["path"])
        self.wait_lists_learned(g, ["cg1", "cg2"])  # the catalog is "pool" from the first list on
        r = g.get("/v1/models?client_version=0.99.0")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("x-switchyard-catalog"), "pool", r)
        models = r.json()["models"]
        self.assertEqual([m["slug"] for m in models], ["gpt-5-codex", "gpt-5", "gpt-5-mini"])
        self.assertEqual(models[0]["display_name"], "gpt-5-codex")  # the upstream's object, whole
        r = g.get("/models?client_version=0.99.0")
        self.assertEqual([m["slug"] for m in r.json()["models"]], ["gpt-5-codex", "gpt-5", "gpt-5-mini"])
        r = g.get("/v1/models")  # the OpenAI list from the same lists
        self.assertEqual([m["id"] for m in r.json()["data"]], ["gpt-5-codex", "gpt-5", "gpt-5-mini"])

    def test_the_poll_asks_with_the_client_version_a_client_sent(self):
        g = self.gateway([account("cg1", self.codex_url("cg1", "ok,models=gpt-5-codex"), kind="chatgpt")],
                         env={"SWITCHYARD_MODEL_POLL_S": "1"})
        self.wait_model_polls(["cg1"])
        self.assertTrue(self.model_polls("cg1")[0]["path"].endswith("client_version=0.98.0"))
        # the list known: the clients' GETs below are answered from the pool (one passed through
        # would be recorded as a models request with the client's own query, and taken for a poll)
        self.wait_lists_learned(g, ["cg1"])
        self.assertEqual(g.get("/v1/models?client_version=0.171.0").headers.get("x-switchyard-catalog"), "pool")
        wait_for(lambda: self.model_polls("cg1")[-1]["path"].endswith("client_version=0.171.0") or None,
                 what="a poll with the client's version")
        r = g.get("/v1/models?client_version=1.0%0d%0aX:y")  # not a version: not taken
        self.assertEqual(r.headers.get("x-switchyard-catalog"), "pool")
        # the version is taken (or not) while that GET is answered; a poll under way then may have
        # started before it, the one after that started after it
        n = len(self.model_polls("cg1"))
        wait_for(lambda: len(self.model_polls("cg1")) >= n + 2 or None, what="two more polls")
        self.assertTrue(self.model_polls("cg1")[-1]["path"].endswith("client_version=0.171.0"))

    def test_learned_lists_survive_a_restart_before_any_poll(self):
        g = self.gateway([account("cg1", self.codex_url("cg1", "ok,models=gpt-5-codex+gpt-5"), kind="chatgpt", sort=0),
                          account("cg2", self.codex_url("cg2", "ok,models=gpt-5+gpt-5-mini"), kind="chatgpt", sort=0)],
                         env=POLL)
        self.wait_model_polls(["cg1", "cg2"])
        wait_for(lambda: g.get("/v1/models").headers.get("x-switchyard-catalog") == "pool" or None,
                 what="the catalog")
        wait_for(lambda: len(g.query("SELECT 1 FROM account_state WHERE models_learned IS NOT NULL")) == 2 or None,
                 what="the learned lists stored")
        g.env["SWITCHYARD_MODEL_POLL_S"] = "0"  # no poll after the restart: what it knows was stored
        g.restart()
        polls = len(self.model_polls())
        r = g.get("/v1/models?client_version=0.99.0")
        self.assertEqual(r.headers.get("x-switchyard-catalog"), "pool", r)
        # one sort (the list a hint among equals): each model once, in whichever account comes first
        self.assertEqual(sorted(m["slug"] for m in r.json()["models"]), ["gpt-5", "gpt-5-codex", "gpt-5-mini"])
        r = g.get("/v1/models")
        self.assertEqual(sorted(m["id"] for m in r.json()["data"]), ["gpt-5", "gpt-5-codex", "gpt-5-mini"])
        r = g.post("/v1/responses", body("gpt-5-mini"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["x-switchyard-account"], "cg2")
        self.assertEqual(self.posts("cg1"), [])  # routed by the stored list, not by a refusal
        self.assertEqual(len(self.model_polls()), polls)

    def test_models_pass_through_to_an_account_when_no_list_is_known(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        r = g.get("/v1/models")
        self.assertEqual(r.status, 200, r)
        self.assertIsNone(r.headers.get("x-switchyard-catalog"))
        self.assertEqual([m["id"] for m in r.json()["data"]], ["gpt-test"])
        self.assertEqual(len(self.model_polls("a")), 1)  # the client's own request, passed through
        r = g.get("/v1/models?client_version=0.99.0")  # Codex's form asked for: the query goes along
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.model_polls("a")[-1]["path"], "/acct/a/ok/v1/models?client_version=0.99.0")
        g.get("/v1/models?x=<script>")  # a query outside the URL-safe set is not forwarded
        self.assertEqual(self.model_polls("a")[-1]["path"], "/acct/a/ok/v1/models")

    def test_key_allowed_models_narrow_the_catalog(self):
        g = self.gateway([account("a", self.mock.url("a"), args=["--models", "gpt-5,o3,o4-mini"])])
        g.cli("key", "update", "--db", g.db_path, "--name", "e2e", "--models", "o*")
        r = wait_for(lambda: (lambda x: x if [m["id"] for m in x.json()["data"]] == ["o3", "o4-mini"] else None)(
            g.get("/v1/models")), what="the key's models applied")
        self.assertEqual(r.status, 200, r)


if __name__ == "__main__":
    main()
