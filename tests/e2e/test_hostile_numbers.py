"""test_hostile_numbers.py: outside numbers that no integer holds (1e300, -1e300, 1e19) in
the admin API's query values and ids and in an import file's sort and max_concurrency.
Each is refused or taken as absent, never cast: a cast of a double out of an integer's
range is undefined behaviour, which the sanitizer build (-fsanitize=float-cast-overflow)
reports and fails the test for (harness.py reads the gateway's log)."""

import json
import os

from harness import GatewayTest, account, admin_call, main

HUGE = ("1e300", "-1e300", "1e19", "-9.3e18", "nan", "inf")


class HostileNumbersTest(GatewayTest):

    def test_admin_query_values_too_large_for_an_integer_are_taken_as_absent(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        self.assertEqual(g.post("/v1/responses", {"model": "gpt-test", "input": "hi"}).status, 200)
        g.wait_request_logs(1)
        for v in HUGE:
            for q in ("before", "after", "status", "limit"):
                r = admin_call(g, "GET", f"/admin/api/requests?{q}={v}")
                self.assertEqual(r.status, 200, (q, v, r))
                self.assertIsInstance(r.json()["requests"], list)
        self.assertTrue(g.running())

    def test_admin_ids_too_large_for_an_integer_name_nothing(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        for v in ("1e300", "-1e300", "1e19"):
            body = f'{{"account":{v}}}'.encode()
            r = admin_call(g, "POST", "/admin/api/accounts/disable", body)
            self.assertEqual(r.status, 404, (v, r))
            r = admin_call(g, "POST", "/admin/api/keys/prefer", f'{{"key":{v},"account":null}}'.encode())
            self.assertEqual(r.status, 404, (v, r))
        r = admin_call(g, "POST", "/admin/api/accounts/disable", b'{"account":1}')
        self.assertEqual(r.status, 200, r)  # a real id still names its account

    def test_import_refuses_a_sort_or_concurrency_no_integer_holds(self):
        g = self.gateway([], start=False)
        for field, value in (("sort", "1e300"), ("sort", "-1e300"), ("max_concurrency", "1e300")):
            path = os.path.join(g.dir, f"{field}.json")
            with open(path, "w") as f:
                f.write('[{"name":"n","access_token":"tok","account_id":"acct-n","' + field + '":' + value + "}]")
            p = g.cli("account", "import", "--db", g.db_path, path, check=False)
            self.assertNotEqual(p.returncode, 0, (field, value, p.stdout))
            self.assertIn(f"{field}: expected an integer number", p.stderr)
            self.assertNotIn("runtime error", p.stderr)
        self.assertEqual(g.query("SELECT name FROM accounts"), [])


if __name__ == "__main__":
    main()
