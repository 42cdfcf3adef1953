"""test_spend_search.py: spend where an operator looks for it, and the
request log searched (issue 24). /admin/api/spend shows today's spend and
the budget window's per account and per key (revoked keys only when asked
for) and per model, and keeps today across a restart; /metrics counts
tokens and cost by account, key and model with the model label bounded;
/admin/api/requests finds requests by words (model, account, key, status,
error class, endpoint), exact filters and a time range, pages through
everything with its cursor, bounds the rows one page examines; one request
in detail at /admin/api/request; `switchyard logs` searches and pages the
same way."""

import json
import re
import sqlite3
import time

from harness import GatewayTest, account, admin_get, http_call, main, wait_for

MILLION = "ok,input_tokens=1000000,cached=400000"  # 600k uncached + 400k cached input, 3 output
# gpt-5: 1.25 / 0.125 / 10 USD per million (policies/prices.lua)
GPT5_COST = 0.6 * 1.25 + 0.4 * 0.125 + 3 * 10 / 1e6


def chat(model):
    return {"model": model, "messages": [{"role": "user", "content": "hi"}]}


def token_of(g):
    return g.cli("admin", "token", "--db", g.db_path).stdout.strip().splitlines()[-1]


def get(g, tok, path):
    r = http_call(g.port, "GET", path, None, {"Authorization": f"Bearer {tok}"})
    return r


class SpendTest(GatewayTest):

    def test_spend_per_account_key_and_model_today_and_against_budget(self):
        g = self.gateway([account("a", self.mock.url("a", MILLION), args=["--budget", "100"]),
                          account("b", self.mock.url("b", "ok"))], start=False)
        g.cli("key", "update", "--db", g.db_path, "--name", "e2e", "--budget", "50", "--budget-period", "7d")
        old = g.add_key("old-laptop")
        g.cli("key", "revoke", "--db", g.db_path, "--name", "old-laptop")
        self.assertTrue(old)
        tok = token_of(g)
        g.start()
        for _ in range(2):
            self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5")).status, 200)
        g.wait_request_logs(2)
        sp = get(g, tok, "/admin/api/spend").json()
        accts = {a["name"]: a for a in sp["accounts"]}
        self.assertEqual(accts["a"]["today"]["requests"], 2)
        self.assertEqual(accts["a"]["today"]["input_tokens"], 2000000)
        self.assertEqual(accts["a"]["today"]["cached_tokens"], 800000)
        self.assertAlmostEqual(accts["a"]["today"]["cost_usd"], 2 * GPT5_COST, places=5)
        self.assertEqual(accts["a"]["budget"]["usd"], 100)
        self.assertAlmostEqual(accts["a"]["budget"]["spent_usd"], 2 * GPT5_COST, places=2)
        self.assertEqual(accts["b"]["today"]["requests"], 0)
        self.assertIsNone(accts["b"]["budget"])
        keys = {k["name"]: k for k in sp["keys"]}
        self.assertNotIn("old-laptop", keys)  # revoked: hidden unless asked for
        self.assertEqual(sp["revoked_hidden"], 1)
        self.assertEqual(keys["e2e"]["budget"]["period"], "7d")
        self.assertAlmostEqual(keys["e2e"]["budget"]["spent_usd"], 2 * GPT5_COST, places=2)
        self.assertAlmostEqual(keys["e2e"]["today"]["cost_usd"], 2 * GPT5_COST, places=5)
        with_revoked = get(g, tok, "/admin/api/spend?revoked=1").json()
        self.assertTrue(any(k["name"] == "old-laptop" and k["revoked"] for k in with_revoked["keys"]))
        models = {m["model"]: m for m in sp["models"]}
        self.assertEqual(models["gpt-5"]["today"]["output_tokens"], 6)
        # the keys list carries the budget too
        ks = {k["name"]: k for k in get(g, tok, "/admin/api/keys").json()["keys"]}
        self.assertEqual(ks["e2e"]["budget"]["usd"], 50)
        # a restart keeps today's figures (seeded from the request log)
        g.stop()
        g.start()
        again = {a["name"]: a for a in get(g, tok, "/admin/api/spend").json()["accounts"]}
        self.assertEqual(again["a"]["today"]["requests"], 2)
        self.assertAlmostEqual(again["a"]["today"]["cost_usd"], 2 * GPT5_COST, places=5)

    def test_key_list_shows_each_keys_spend_today_and_in_its_period_and_last_use(self):
        g = self.gateway([account("a", self.mock.url("a", MILLION))], start=False)
        g.cli("key", "update", "--db", g.db_path, "--name", "e2e", "--budget", "50", "--budget-period", "7d")
        idle = g.add_key("idle")
        self.assertTrue(idle)
        g.start()
        t0 = time.time()
        for _ in range(2):
            self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5")).status, 200)
        g.wait_request_logs(2)
        # a request of yesterday counts in the 7-day period, not today
        g.stop()
        c = sqlite3.connect(g.db_path)
        cols = [r[1] for r in c.execute("PRAGMA table_info(request_logs)") if r[1] not in ("id", "ts")]
        c.execute(f"INSERT INTO request_logs(ts, {', '.join(cols)}) SELECT ts - 86400, {', '.join(cols)}"
                  " FROM request_logs ORDER BY id LIMIT 1")
        yesterday = c.execute("SELECT max(id), ts FROM request_logs").fetchone()[1]
        c.commit()
        c.close()
        week = 7 * 86400  # the 7d period is a fixed window (budget.c): yesterday may lie in the last one
        in_period = 3 if yesterday >= (time.time() // week) * week else 2
        rows = {k["name"]: k for k in json.loads(g.cli("key", "list", "--db", g.db_path, "--json").stdout)}
        e2e = rows["e2e"]
        self.assertEqual(e2e["spend"]["today_requests"], 2)
        self.assertAlmostEqual(e2e["spend"]["today_usd"], 2 * GPT5_COST, places=5)
        self.assertAlmostEqual(e2e["spend"]["period_usd"], in_period * GPT5_COST, places=5)
        self.assertGreaterEqual(e2e["last_used_at"], t0 - 1)
        self.assertLessEqual(e2e["last_used_at"], time.time())
        self.assertEqual(rows["idle"]["spend"], {"today_usd": 0, "today_requests": 0, "period_usd": None})
        self.assertIsNone(rows["idle"]["last_used_at"])
        table = g.cli("key", "list", "--db", g.db_path).stdout
        self.assertIn("LAST USED", table.splitlines()[0])
        line = [ln for ln in table.splitlines() if " e2e " in ln][0]
        self.assertIn(f"${2 * GPT5_COST:.4f}", line)
        self.assertIn(f"${in_period * GPT5_COST:.4f}", line)
        self.assertIn(time.strftime("%Y-%m-%dT", time.gmtime()), line)

    def test_metrics_count_tokens_and_cost_by_account_key_and_model_with_bounded_models(self):
        g = self.gateway([account("a", self.mock.url("a", MILLION))])
        self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5")).status, 200)
        for i in range(70):  # more distinct models than the label set holds
            self.assertEqual(g.post("/v1/chat/completions", chat(f"relay-model-{i:02d}")).status, 200)
        g.wait_request_logs(71)
        text = admin_get(g, "/metrics").body.decode()
        self.assertIn('switchyard_tokens_total{direction="input",account="a",key="e2e",model="gpt-5"} 1000000\n', text)
        self.assertIn('switchyard_tokens_total{direction="cached",account="a",key="e2e",model="gpt-5"} 400000\n', text)
        self.assertIn('switchyard_tokens_total{direction="output",account="a",key="e2e",model="gpt-5"} 3\n', text)
        m = re.search(r'^switchyard_cost_usd_total\{account="a",key="e2e",model="gpt-5"\} (\S+)$', text, re.M)
        self.assertIsNotNone(m, text[-3000:])
        self.assertAlmostEqual(float(m.group(1)), GPT5_COST, places=6)
        models = set(re.findall(r'^switchyard_tokens_total\{direction="input",[^}]*model="([^"]*)"\}', text, re.M))
        self.assertLessEqual(len(models), 64)
        self.assertIn("other", models)
        total_in = sum(int(v) for v in re.findall(r'^switchyard_tokens_total\{direction="input"[^}]*\} (\d+)$', text, re.M))
        self.assertEqual(total_in, 71 * 1000000)  # folded, not lost


class SearchTest(GatewayTest):

    def searchable(self):
        """Requests on two accounts and two models through two keys; the ones through "ci"
        go to account "bad", whose upstream answers 400."""
        g = self.gateway([account("good", self.mock.url("good", "ok")),
                          account("bad", self.mock.url("bad", "status=400"))], start=False)
        ci = g.add_key("ci")
        g.cli("key", "prefer", "--db", g.db_path, "--name", "ci", "--account", "bad")
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", "good")
        tok = token_of(g)
        g.start()
        for _ in range(3):
            self.assertEqual(g.post("/v1/chat/completions", chat("gpt-5")).status, 200)
        self.assertEqual(g.post("/v1/responses", {"model": "o3", "input": "hi"}).status, 200)
        self.assertEqual(g.post("/v1/responses", {"model": "o3", "input": "hi"}, key=ci).status, 400)
        g.wait_request_logs(5)
        return g, tok

    def ids(self, g, tok, query):
        r = get(g, tok, "/admin/api/requests?" + query)
        self.assertEqual(r.status, 200, r.body)
        return [q["id"] for q in r.json()["requests"]]

    def test_requests_are_found_by_words_exact_filters_and_time_range(self):
        g, tok = self.searchable()
        rows = {r["id"]: r for r in g.request_logs()}
        o3 = sorted((i for i, r in rows.items() if r["model"] == "o3"), reverse=True)
        self.assertEqual(self.ids(g, tok, "q=O3"), o3)  # case does not matter
        self.assertEqual(len(self.ids(g, tok, "q=gpt-5")), 3)
        failed = [i for i, r in rows.items() if r["status"] == 400]
        self.assertEqual(self.ids(g, tok, "q=bad+400"), failed)  # every word: account and status
        self.assertEqual(self.ids(g, tok, "q=ci"), failed)  # the key's name
        self.assertEqual(self.ids(g, tok, "q=o3+good"), [i for i in o3 if i not in failed])
        self.assertEqual(self.ids(g, tok, "q=%2Fv1%2Fresponses"), o3)  # the endpoint
        self.assertEqual(self.ids(g, tok, "q=nothing-like-this"), [])
        self.assertEqual(self.ids(g, tok, "model=o3&endpoint=%2Fv1%2Fresponses"), o3)
        self.assertEqual(self.ids(g, tok, "model=O3"), [])  # exact filters are exact
        self.assertEqual(len(self.ids(g, tok, "endpoint=%2Fv1%2Fchat%2Fcompletions")), 3)
        # a time range: since the ts of the fourth request
        ts = sorted((r["ts"], i) for i, r in rows.items())
        cut = ts[3][0]
        self.assertEqual(sorted(self.ids(g, tok, f"since={cut}")), sorted(i for t, i in ts if t >= cut))
        self.assertEqual(sorted(self.ids(g, tok, f"until={cut}")), sorted(i for t, i in ts if t < cut))

    def test_a_search_pages_through_everything_with_its_cursor(self):
        g, tok = self.searchable()
        seen, before = [], None
        for _ in range(10):
            page = get(g, tok, "/admin/api/requests?q=gpt-5&limit=1" + (f"&before={before}" if before else "")).json()
            seen += [q["id"] for q in page["requests"]]
            before = page["next_before"]
            if before is None:
                break
        self.assertEqual(len(seen), 3)
        self.assertEqual(seen, sorted(seen, reverse=True))

    def test_a_search_examines_a_bounded_number_of_rows_per_page(self):
        g, tok = self.searchable()
        c = g.db()
        row = ("INSERT INTO request_logs(ts, endpoint, model, stream, account_name, status, attempts, latency_ms,"
               " route_strategy, error_class) VALUES (?, '/v1/responses', 'filler', 0, 'good', 200, 1, 1, 'ordered', '')")
        now = time.time()  # recent: the retention (90 days by default) must not sweep them meanwhile
        c.executemany(row, [(now,) for _ in range(25000)])
        c.commit()
        c.close()
        page = get(g, tok, "/admin/api/requests?q=o3&limit=5").json()
        self.assertEqual(page["requests"], [])  # the newest 5 000 rows hold no o3
        self.assertTrue(page["scan_limited"])
        self.assertEqual(page["scan_max"], 5000)  # a text search examines at most 5 000 rows a page
        self.assertEqual(page["next_before"], 25005 - 5000 + 1)
        found = []
        while page["next_before"]:
            page = get(g, tok, f"/admin/api/requests?q=o3&limit=5&before={page['next_before']}").json()
            found += [q["model"] for q in page["requests"]]
        self.assertEqual(found, ["o3", "o3"])

    def test_one_request_in_detail(self):
        g, tok = self.searchable()
        rid = self.ids(g, tok, "q=bad")[0]
        d = get(g, tok, f"/admin/api/request?id={rid}").json()["request"]
        self.assertEqual((d["id"], d["status"], d["account"], d["key"], d["model"]), (rid, 400, "bad", "ci", "o3"))
        self.assertEqual(d["tried"][0]["account"], "bad")
        self.assertIn("ms", d["tried"][0])
        for field in ("latency_ms", "input_tokens", "output_tokens", "cached_tokens", "cost_usd", "error_class",
                      "upstream_model", "endpoint", "ts"):
            self.assertIn(field, d)
        ok = self.ids(g, tok, "q=gpt-5")[0]
        d = get(g, tok, f"/admin/api/request?id={ok}").json()["request"]
        self.assertGreater(d["input_tokens"], 0)
        self.assertEqual(get(g, tok, "/admin/api/request?id=999999").status, 404)
        self.assertEqual(get(g, tok, "/admin/api/request").status, 400)
        self.assertEqual(get(g, tok, "/admin/api/request?id=abc").status, 400)

    def test_logs_command_searches_filters_and_pages(self):
        g, tok = self.searchable()
        out = g.cli("logs", "--db", g.db_path, "--search", "bad 400").stdout
        lines = [ln for ln in out.splitlines() if ln.strip()]
        self.assertEqual(len(lines), 1, out)
        self.assertIn("account=bad", lines[0])
        out = g.cli("logs", "--db", g.db_path, "--model", "gpt-5", "--limit", "2").stdout
        lines = out.splitlines()
        self.assertEqual(len([ln for ln in lines if " #" in ln]), 2, out)
        m = re.search(r"--before (\d+)", lines[-1])
        self.assertIsNotNone(m, out)
        older = g.cli("logs", "--db", g.db_path, "--model", "gpt-5", "--limit", "2", "--before", m.group(1)).stdout
        self.assertEqual(len([ln for ln in older.splitlines() if " #" in ln]), 1, older)
        self.assertNotIn("--before", older)
        self.assertEqual(g.cli("logs", "--db", g.db_path, "--since", "1h", "--search", "o3").stdout.count(" #"), 2)
        self.assertEqual(g.cli("logs", "--db", g.db_path, "--until", "2000-01-01").stdout.count(" #"), 0)
        bad = g.cli("logs", "--db", g.db_path, "--since", "yesterday-ish", check=False)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--since", bad.stderr)


if __name__ == "__main__":
    main()
