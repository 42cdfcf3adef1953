"""test_anthropic_accounts.py: the anthropic account kind (docs/claude.md). A
key of the Anthropic API serves a Messages client natively: the client's
bytes go as they came to POST {base}/messages with x-api-key and the
client's anthropic-version and anthropic-beta (no Authorization, nothing
translated), the answer comes back as the upstream sent it, and its usage
(cache reads included) is counted and priced. Anthropic's answers are
classified as its own: a 529 overloaded_error, or an overloaded error event
inside the 200 stream before output, moves the request to the next account
unseen (an OpenAI account, translated); a 429 rate_limit_error rests the key;
a 401 invalid x-api-key holds it; "prompt is too long" goes to a declared
larger-context account. An OpenAI client (Chat Completions, Responses) is
served by it too, translated into the Messages API and back. The mock's anthropic=1
accounts are as strict as api.anthropic.com (x-api-key and anthropic-version
required, OpenAI-only fields refused)."""

import json

from harness import GatewayTest, account, chat_text, http_call, main, response_text, wait_for

ANTHROPIC = {"anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219"}
MSG = {"model": "claude-sonnet-4-5", "max_tokens": 256, "system": "Be brief.",
       "messages": [{"role": "user", "content": "hi"}]}


def sse_events(raw):
    out = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if name or data:
            out.append((name, json.loads("\n".join(data)) if data else None))
    return out


def text_of(raw):
    return "".join(d["delta"].get("text", "") for n, d in sse_events(raw) if n == "content_block_delta")


class AnthropicAccountTest(GatewayTest):

    def anthropic(self, name, scenario="ok", args=()):
        return account(name, self.mock.url(name, f"{scenario},anthropic=1"), kind="anthropic", args=list(args))

    def call(self, g, body, path="/v1/messages?beta=true", headers=None):
        h = dict(ANTHROPIC, **{"x-api-key": g.key})
        h.update(headers or {})
        return http_call(g.port, "POST", path, body, h)

    def posts(self, name):
        return [r for r in self.mock.requests(name) if r["method"] == "POST"]

    def test_a_messages_client_is_served_natively_with_anthropics_headers(self):
        g = self.gateway([self.anthropic("ant")])
        r = self.call(g, dict(MSG, stream=True))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(text_of(r.text), "hello from ant")
        names = [n for n, _ in sse_events(r.text)]
        self.assertEqual((names[0], names[-1]), ("message_start", "message_stop"), names)
        self.assertIn("ping", names)  # the upstream's own events, as they came
        q = self.posts("ant")[-1]
        self.assertEqual(q["endpoint"], "messages")
        self.assertEqual(q["x_api_key"], g.accounts["ant"])
        self.assertIsNone(q["authorization"])
        self.assertEqual((q["anthropic_version"], q["anthropic_beta"]), ("2023-06-01", "claude-code-20250219"))
        self.assertEqual(q.get("violations") or [], [])
        self.assertEqual(json.loads(q["body"]), dict(MSG, stream=True))  # nothing translated
        row = g.wait_request_logs(1)[0]
        self.assertEqual(row["account_name"], "ant")
        self.assertNotIn("dialect", json.loads(row["attempts_json"])[0])
        # usage: input 7 + 2 read from the cache, output 3, priced as claude-sonnet-4-5
        self.assertEqual((row["input_tokens"], row["cached_tokens"], row["output_tokens"], row["total_tokens"]),
                         (9, 2, 3, 12))
        self.assertGreater(row["cost_usd"], 0)

    def test_a_plain_answer_passes_as_it_came_and_is_counted(self):
        g = self.gateway([self.anthropic("ant")])
        r = self.call(g, MSG)
        self.assertEqual(r.status, 200, r)
        body = r.json()
        self.assertEqual((body["type"], body["content"][0]["text"]), ("message", "hello from ant"))
        row = g.wait_request_logs(1)[0]
        self.assertEqual((row["input_tokens"], row["output_tokens"]), (9, 3))

    def test_an_anthropic_version_is_sent_when_the_client_gives_none(self):
        g = self.gateway([self.anthropic("ant")])
        r = http_call(g.port, "POST", "/v1/messages", MSG, {"Authorization": f"Bearer {g.key}"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.posts("ant")[-1]["anthropic_version"], "2023-06-01")

    def test_an_overloaded_anthropic_moves_to_an_openai_account_unseen(self):
        for scenario in ("status=529", "overloaded_stream"):
            self.mock.reset()
            g = self.gateway([self.anthropic("ant", scenario), account("oa", self.mock.url("oa"))])
            r = self.call(g, dict(MSG, stream=True))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(text_of(r.text), "hello from oa", scenario)
            self.assertNotIn("overloaded", r.text, scenario)
            self.assertEqual(self.posts("oa")[-1]["endpoint"], "responses")  # translated there
            attempts = json.loads(g.wait_request_logs(1)[0]["attempts_json"])
            self.assertEqual([a["account"] for a in attempts][-1], "oa", attempts)
            self.assertEqual(attempts[-1]["dialect"], "messages>responses")
            g.stop()

    def test_rate_limited_rests_and_a_refused_key_is_held(self):
        g = self.gateway([self.anthropic("ant", "status=429,retry_after=600"), self.anthropic("bad", "status=401"),
                          self.anthropic("ok")])
        self.assertEqual(text_of(self.call(g, dict(MSG, stream=True)).text), "hello from ok")
        wait_for(lambda: "key_refused" in g.cli("account", "list", "--db", g.db_path).stdout or None,
                 what="the refused key held")
        listed = {a["name"]: a for a in json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)}
        self.assertGreater(listed["ant"]["cooldown_remaining_s"] or 0, 500, listed["ant"])  # its retry-after
        self.mock.reset()
        self.assertEqual(text_of(self.call(g, dict(MSG, stream=True)).text), "hello from ok")
        self.assertEqual((self.posts("ant"), self.posts("bad")), ([], []), "both skipped now")

    def test_a_prompt_too_long_goes_to_the_larger_context_account(self):
        g = self.gateway([self.anthropic("small", "prompt_too_long"),
                          self.anthropic("large", args=["--context-fallback"])])
        r = self.call(g, MSG)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["content"][0]["text"], "hello from large")

    def test_openai_clients_are_served_by_an_anthropic_account_translated(self):
        # Chat Completions and Responses (Codex's dialect) into the Messages API and back: the strict
        # mock takes the requests (x-api-key, anthropic-version, max_tokens, no OpenAI field)
        g = self.gateway([self.anthropic("ant")])
        chat = {"model": "claude-sonnet-4-5", "messages": [{"role": "system", "content": "Be brief."},
                                                          {"role": "user", "content": "hi"}]}
        r = g.post("/v1/chat/completions", chat)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["choices"][0]["message"]["content"], "hello from ant")
        s = g.stream("/v1/chat/completions", dict(chat, stream=True))
        self.assertEqual(chat_text(s.events), "hello from ant")
        s = g.stream("/v1/responses", {"model": "claude-sonnet-4-5", "input": "hi", "instructions": "Be brief.",
                                       "stream": True, "store": False})
        self.assertEqual(response_text(s.events), "hello from ant")
        self.assertEqual(s.types()[-1], "response.completed")
        posts = self.posts("ant")
        self.assertEqual({q["endpoint"] for q in posts}, {"messages"})
        self.assertEqual([q.get("violations") or [] for q in posts], [[], [], []])
        sent = json.loads(posts[0]["body"])
        self.assertEqual(sent["system"][0]["text"] if isinstance(sent["system"], list) else sent["system"], "Be brief.")
        self.assertIn("max_tokens", sent)
        rows = g.wait_request_logs(3)
        self.assertEqual({json.loads(r["attempts_json"])[0]["dialect"] for r in rows},
                         {"chat>messages", "responses>messages"})

    def test_an_openai_account_that_fails_moves_to_an_anthropic_one(self):
        g = self.gateway([account("oa", self.mock.url("oa", "status=429"), sort=0,
                                  args=["--model-map", '{"m":"gpt-test"}']),
                          self.anthropic("ant", args=["--model-map", '{"m":"claude-sonnet-4-5"}'])])
        s = g.stream("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                              "stream": True})
        self.assertEqual(chat_text(s.events), "hello from ant")
        self.assertEqual(json.loads(self.posts("ant")[-1]["body"])["model"], "claude-sonnet-4-5")

    def test_count_tokens_is_counted_by_an_anthropic_account_else_estimated(self):
        g = self.gateway([account("oa", self.mock.url("oa")), self.anthropic("ant")])
        body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hello there"}]}
        r = self.call(g, body, path="/v1/messages/count_tokens?beta=true")
        self.assertEqual(r.status, 200, r)
        self.assertIsNone(r.headers.get("x-switchyard-token-count"))
        q = [x for x in self.posts("ant") if x["endpoint"] == "messages/count_tokens"]
        self.assertEqual(len(q), 1)
        self.assertEqual(r.json()["input_tokens"], len(q[0]["body"]) // 4 + 1)  # the mock's own count
        self.assertEqual(self.posts("oa"), [])
        # the anthropic account out (a 429): the gateway's estimate, said to be one
        g2 = self.gateway([account("oa2", self.mock.url("oa2")), self.anthropic("ant2", "status=429,retry_after=600")])
        r = self.call(g2, body, path="/v1/messages/count_tokens")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("x-switchyard-token-count"), "estimate")
        self.assertGreater(r.json()["input_tokens"], 0)
        self.assertEqual(self.posts("oa2"), [])

    def test_the_kind_is_listed_and_validated(self):
        g = self.gateway([self.anthropic("ant")])
        listed = {a["name"]: a for a in json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)}
        self.assertEqual(listed["ant"]["kind"], "anthropic")
        self.assertIn("speaks: messages", g.cli("account", "list", "--db", g.db_path).stdout)
        bad = g.cli("account", "add", "--db", g.db_path, "--name", "x", "--kind", "anthropic", "--token", "k",
                    "--speaks", "chat", check=False)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("Messages API only", bad.stderr)
        ok = g.cli("account", "add", "--db", g.db_path, "--name", "y", "--kind", "anthropic", "--token", "k")
        self.assertEqual(ok.returncode, 0)
        y = [a for a in json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout) if a["name"] == "y"][0]
        self.assertEqual(y["base_url"], "https://api.anthropic.com/v1")


if __name__ == "__main__":
    main()
