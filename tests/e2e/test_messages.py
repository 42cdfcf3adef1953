"""test_messages.py: the Anthropic Messages API at the edge (docs/claude.md).
Claude Code and the Anthropic SDKs send POST /v1/messages (with ?beta=true,
x-api-key or a bearer token, anthropic-version and anthropic-beta headers);
the gateway serves them from OpenAI accounts, translated (messages>responses
where the account speaks the Responses API, messages>chat on a chat-only
relay), plain and streamed, with tools, failover and errors in Anthropic's
shape. The mock's codex-style accounts are as strict as the ChatGPT backend,
so a translation the backend would refuse fails here too."""

import json

from harness import GatewayTest, account, http_call, main, wait_for

ANTHROPIC = {"anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14"}
MSG = {"model": "gpt-test", "max_tokens": 1024, "system": [{"type": "text", "text": "Be brief."}],
       "messages": [{"role": "user", "content": "hi"}]}
TOOLS = [{"name": "get_weather", "description": "the weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]


def chatgpt(mock, name, scenario="ok"):
    return account(name, mock.url(name, scenario, v1=False), kind="chatgpt")


def sse_events(raw):
    """(event name, parsed data) of each event of an SSE body."""
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


class MessagesTest(GatewayTest):

    def headers(self, g, bearer=False):
        h = dict(ANTHROPIC)
        if bearer:
            h["Authorization"] = f"Bearer {g.key}"
        else:
            h["x-api-key"] = g.key
        return h

    def call(self, g, body, path="/v1/messages?beta=true", bearer=False, headers=None):
        h = self.headers(g, bearer)
        h.update(headers or {})
        return http_call(g.port, "POST", path, body, h)

    def sent(self, name):
        return [json.loads(r["body"]) for r in self.mock.requests(name) if r.get("body")]

    def assertAnthropicError(self, r, status, etype):
        self.assertEqual(r.status, status, r)
        body = r.json()
        self.assertEqual(body["type"], "error", body)
        self.assertEqual(body["error"]["type"], etype, body)
        self.assertTrue(body["error"]["message"], body)
        return body["error"]

    # ---------------------------------------------------------- answers

    def test_a_plain_request_is_answered_as_an_anthropic_message_from_a_responses_account(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        r = self.call(g, MSG)
        self.assertEqual(r.status, 200, r)
        body = r.json()
        self.assertEqual((body["type"], body["role"]), ("message", "assistant"), body)
        self.assertEqual(body["content"], [{"type": "text", "text": "hello from a"}])
        self.assertEqual(body["stop_reason"], "end_turn")
        self.assertGreater(body["usage"]["input_tokens"], 0)
        self.assertGreater(body["usage"]["output_tokens"], 0)
        self.assertTrue(body["id"].startswith("msg_"), body["id"])
        up = self.sent("a")[-1]
        self.assertEqual(self.mock.requests("a")[-1]["endpoint"], "responses")
        self.assertEqual(up["instructions"], "Be brief.")
        self.assertNotIn("system", up)
        self.assertNotIn("anthropic-version", json.dumps(self.mock.requests("a")[-1]))
        row = g.wait_request_logs(1)[0]
        self.assertEqual(json.loads(row["attempts_json"])[0]["dialect"], "messages>responses")
        self.assertEqual(row["status"], 200)

    def test_a_streamed_request_on_a_chatgpt_login_gets_anthropics_events_in_order(self):
        g = self.gateway([chatgpt(self.mock, "cg")])
        r = self.call(g, dict(MSG, stream=True))
        self.assertEqual(r.status, 200, r)
        self.assertIn("text/event-stream", r.headers["content-type"])
        ev = sse_events(r.text)
        names = [n for n, _ in ev]
        self.assertEqual(names[0], "message_start", names)
        self.assertEqual(names[-2:], ["message_delta", "message_stop"], names)
        starts = [i for i, n in enumerate(names) if n == "content_block_start"]
        stops = [i for i, n in enumerate(names) if n == "content_block_stop"]
        self.assertEqual(len(starts), 1, names)
        self.assertEqual(len(stops), 1, names)
        deltas = [d["delta"]["text"] for n, d in ev if n == "content_block_delta"]
        self.assertEqual("".join(deltas), "hello from cg")
        self.assertTrue(all(starts[0] < i < stops[0] for i, n in enumerate(names) if n == "content_block_delta"))
        final = [d for n, d in ev if n == "message_delta"][0]
        self.assertEqual(final["delta"]["stop_reason"], "end_turn")
        self.assertGreater(final["usage"]["output_tokens"], 0)
        # what the strict backend accepted: streamed, not stored, instructions given
        up = self.sent("cg")[-1]
        self.assertEqual((up["stream"], up["store"], up["instructions"]), (True, False, "Be brief."))
        self.assertEqual(self.mock.requests("cg")[-1].get("violations") or [], [])

    def test_a_chat_only_relay_serves_a_messages_client_through_chat_completions(self):
        g = self.gateway([account("rl", self.mock.url("rl", "ok,speaks=chat"), args=["--speaks", "chat"])])
        r = self.call(g, dict(MSG, stream=True))
        self.assertEqual(r.status, 200, r)
        text = "".join(d["delta"]["text"] for n, d in sse_events(r.text) if n == "content_block_delta")
        self.assertEqual(text, "hello from rl")
        self.assertEqual(self.mock.requests("rl")[-1]["endpoint"], "chat/completions")
        up = self.sent("rl")[-1]
        self.assertEqual(up["messages"][0], {"role": "system", "content": "Be brief."})
        row = g.wait_request_logs(1)[0]
        self.assertEqual(json.loads(row["attempts_json"])[0]["dialect"], "messages>chat")

    def test_a_tool_call_is_a_tool_use_block_and_its_result_goes_back_as_a_function_output(self):
        g = self.gateway([account("a", self.mock.url("a", "ok,tool_call=1"))])
        r = self.call(g, dict(MSG, tools=TOOLS, stream=True))
        self.assertEqual(r.status, 200, r)
        ev = sse_events(r.text)
        block = [d["content_block"] for n, d in ev if n == "content_block_start"
                 and d["content_block"]["type"] == "tool_use"]
        self.assertEqual(len(block), 1, ev)
        args = "".join(d["delta"]["partial_json"] for n, d in ev
                       if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta")
        self.assertIsInstance(json.loads(args), dict)
        self.assertEqual([d for n, d in ev if n == "message_delta"][0]["delta"]["stop_reason"], "tool_use")
        tool = self.sent("a")[-1]["tools"][0]
        self.assertEqual((tool["type"], tool["name"]), ("function", "get_weather"))
        self.assertEqual(tool["parameters"]["required"], ["city"])
        # the result goes back: a function_call_output with the call's id
        call_id = block[0]["id"]
        turn = dict(MSG, tools=TOOLS, messages=[
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": block[0]["name"],
                                               "input": json.loads(args)}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "sunny"}]}])
        self.mock.reset()
        r = self.call(g, turn)
        self.assertEqual(r.status, 200, r)
        items = self.sent("a")[-1]["input"]
        out = [i for i in items if i.get("type") == "function_call_output"]
        self.assertEqual([(o["call_id"], o["output"]) for o in out], [(call_id, "sunny")])
        calls = [i for i in items if i.get("type") == "function_call"]
        self.assertEqual([c["call_id"] for c in calls], [call_id])

    # ---------------------------------------------------------- failover, errors

    def test_a_429_fails_over_unseen_and_the_client_gets_the_next_accounts_answer(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429")), account("b", self.mock.url("b"))])
        r = self.call(g, dict(MSG, stream=True))
        self.assertEqual(r.status, 200, r)
        text = "".join(d["delta"]["text"] for n, d in sse_events(r.text) if n == "content_block_delta")
        self.assertEqual(text, "hello from b")

    def test_an_error_of_the_upstream_reaches_the_client_in_anthropics_shape(self):
        g = self.gateway([account("a", self.mock.url("a", "status=400"))])
        err = self.assertAnthropicError(self.call(g, MSG), 400, "invalid_request_error")
        self.assertIn("Invalid request", err["message"])
        # a pool out of accounts (the only one rate limited) is Anthropic's overload, which its clients retry
        g2 = self.gateway([account("b", self.mock.url("b", "status=429"))])
        r = self.call(g2, MSG)
        self.assertAnthropicError(r, 529, "overloaded_error")
        self.assertTrue(r.headers.get("retry-after"), r.headers)

    def test_the_gateways_own_errors_are_in_anthropics_shape(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        r = http_call(g.port, "POST", "/v1/messages", MSG, dict(ANTHROPIC))
        self.assertAnthropicError(r, 401, "authentication_error")
        r = http_call(g.port, "POST", "/v1/messages", MSG, dict(ANTHROPIC, **{"x-api-key": "sy-wrong"}))
        self.assertAnthropicError(r, 401, "authentication_error")
        r = self.call(g, {"model": "gpt-test", "messages": "hi"})
        self.assertAnthropicError(r, 400, "invalid_request_error")
        r = self.call(g, b"{not json")
        self.assertAnthropicError(r, 400, "invalid_request_error")
        g.cli("account", "disable", "--db", g.db_path, "--name", "a")
        wait_for(lambda: self.call(g, MSG).status == 529 or None, what="no account left")
        self.assertAnthropicError(self.call(g, MSG), 529, "overloaded_error")
        # the OpenAI endpoints keep OpenAI's shape
        r = http_call(g.port, "POST", "/v1/chat/completions", {"model": "m", "messages": []}, {})
        self.assertEqual(r.status, 401, r)
        self.assertIn("error", r.json())
        self.assertNotIn("type", r.json())

    def test_a_bearer_token_is_accepted_as_a_platform_key(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        self.assertEqual(self.call(g, MSG, bearer=True).status, 200)
        self.assertEqual(self.call(g, MSG, path="/v1/messages").status, 200)

    # ---------------------------------------------------------- count_tokens

    def test_count_tokens_is_an_estimate_said_to_be_one(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        r = self.call(g, MSG, path="/v1/messages/count_tokens?beta=true")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("x-switchyard-token-count"), "estimate")
        small = r.json()["input_tokens"]
        self.assertGreater(small, 0)
        big = dict(MSG, messages=[{"role": "user", "content": "word " * 4000}])
        self.assertGreater(self.call(g, big, path="/v1/messages/count_tokens").json()["input_tokens"], small + 3000)
        self.assertEqual(self.mock.requests("a"), [], "no account was asked")
        self.assertAnthropicError(self.call(g, {"model": "m"}, path="/v1/messages/count_tokens"), 400,
                                  "invalid_request_error")


if __name__ == "__main__":
    main()
