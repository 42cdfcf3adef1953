"""test_dialects.py: any client on any account (docs/clients.md). A Chat
Completions client served by a ChatGPT login (translated to the Responses
API and adapted to the backend's rules), a Responses client served by a
relay that speaks Chat Completions only (translated), plain and streamed;
tools (parallel calls, arguments streamed in pieces, their results sent
back), errors inside a stream in the client's dialect, failover across
dialects, a client that asked no stream from a backend that always
streams, a stored chain and GET/DELETE of a response on a backend that
stores nothing, a dialect learned from a 404, a field no translation can
carry refused naming it, a {"detail": ...} error made an OpenAI error, an
SSE answer without a Content-Type, and a model an upstream's /models does
not list still tried. The mock's codex-style accounts are as strict as the
ChatGPT backend (tests/e2e/README.md, "The upstreams' rules"), so each
adaptation is proven by the strict upstream accepting the request."""

import json
import os

from harness import (GatewayTest, account, http_call, main, wait_for, chat_text, response_text, event_type,
                     admin_call)

CHAT = {"model": "gpt-test", "messages": [{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": "hi"}]}
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "the weather in a city",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}


def chatgpt(name, scenario="ok"):
    """A ChatGPT login on the mock's codex-style (strict) backend."""
    return {"kind": "chatgpt", "v1": False, "name": name, "scenario": scenario}


class DialectTest(GatewayTest):

    def pool(self, specs, env=None, policies=None):
        accts = []
        for s in specs:
            if isinstance(s, dict) and "v1" in s:
                accts.append(account(s["name"], self.mock.url(s["name"], s["scenario"], v1=False), kind="chatgpt"))
            else:
                accts.append(s)
        return self.gateway(accts, env=env, policies=policies)

    def relay(self, name, scenario="ok", speaks="chat", declared=True):
        """An API key on a relay that speaks Chat Completions only."""
        args = ["--speaks", "chat"] if declared else []
        return account(name, self.mock.url(name, f"{scenario},speaks={speaks}"), args=args)

    def sent(self, name):
        """The bodies the mock got for account name, parsed."""
        return [json.loads(r["body"]) for r in self.mock.requests(name) if r.get("body")]

    def log_rows(self, g, n):
        return g.wait_request_logs(n)[:n]

    # ---------------------------------------------------------- chat client, ChatGPT login

    def test_a_chat_client_gets_a_plain_answer_from_a_chatgpt_login(self):
        g = self.pool([chatgpt("cg")])
        r = g.post("/v1/chat/completions", CHAT)
        self.assertEqual(r.status, 200, r)
        body = r.json()
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["choices"][0]["message"]["content"], "hello from cg")
        self.assertEqual(body["choices"][0]["finish_reason"], "stop")
        self.assertEqual(body["usage"]["prompt_tokens"], 7)
        self.assertIn("application/json", r.headers["content-type"])
        up = self.sent("cg")[-1]
        # what the strict backend accepted: streamed, not stored, the system message as instructions
        self.assertEqual((up["stream"], up["store"], up["instructions"]), (True, False, "Be brief."))
        self.assertEqual([i["role"] for i in up["input"]], ["user"])
        self.assertEqual(self.mock.requests("cg")[-1].get("violations") or [], [])
        row = self.log_rows(g, 1)[0]
        self.assertEqual(json.loads(row["attempts_json"])[0]["dialect"], "chat>responses")
        self.assertEqual((row["input_tokens"], row["output_tokens"]), (7, 3))
        wait_for(lambda: "dialect=chat>responses" in g.trace_text(), what="the translation in the trace")
        m = http_call(g.port, "GET", "/metrics").text
        self.assertIn('switchyard_translations_total{pair="chat>responses"} 1', m)

    def test_a_chat_client_streams_from_a_chatgpt_login_with_its_usage_chunk_only_when_asked(self):
        g = self.pool([chatgpt("cg")])
        s = g.stream("/v1/chat/completions", dict(CHAT, stream=True))
        self.assertEqual(s.status, 200, s)
        self.assertIn("text/event-stream", s.headers["content-type"])
        self.assertEqual(chat_text(s.events), "hello from cg")
        self.assertEqual(s.events[-1]["data"], "[DONE]")
        self.assertFalse(any(isinstance(e["json"], dict) and e["json"].get("usage") for e in s.events))
        s = g.stream("/v1/chat/completions", dict(CHAT, stream=True, stream_options={"include_usage": True}))
        usage = [e["json"]["usage"] for e in s.events if isinstance(e["json"], dict) and e["json"].get("usage")]
        self.assertEqual(usage[0]["completion_tokens"], 3)
        self.assertEqual(chat_text(s.events), "hello from cg")

    def test_parallel_tool_calls_reach_a_chat_client_with_their_ids_and_the_results_go_back(self):
        g = self.pool([chatgpt("cg", "ok,tool_call=1,tool_calls=2")])
        req = {"model": "gpt-test", "stream": True, "tools": [TOOL], "tool_choice": "auto",
               "messages": [{"role": "user", "content": "weather in Paris and Rome?"}]}
        s = g.stream("/v1/chat/completions", req)
        self.assertEqual(s.status, 200, s)
        calls = {}
        for e in s.events:
            for ch in (e["json"] or {}).get("choices") or [] if isinstance(e["json"], dict) else []:
                for tc in (ch.get("delta") or {}).get("tool_calls") or []:
                    c = calls.setdefault(tc["index"], {"id": None, "name": "", "args": ""})
                    c["id"] = tc.get("id") or c["id"]
                    c["name"] += (tc.get("function") or {}).get("name") or ""
                    c["args"] += (tc.get("function") or {}).get("arguments") or ""
        self.assertEqual(sorted(calls), [0, 1])
        finish = [ch["finish_reason"] for e in s.events if isinstance(e["json"], dict)
                  for ch in e["json"].get("choices") or [] if ch.get("finish_reason")]
        self.assertEqual(finish, ["tool_calls"])
        for c in calls.values():
            self.assertTrue(c["id"])
            json.loads(c["args"])  # arguments streamed in pieces, whole again
        up = self.sent("cg")[-1]
        self.assertEqual(up["tools"][0]["name"], "get_weather")
        # the results go back as tool messages: the backend gets function_call_output items
        msgs = req["messages"] + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["args"]}}
            for _, c in sorted(calls.items())]}]
        msgs += [{"role": "tool", "tool_call_id": c["id"], "content": "sunny"} for _, c in sorted(calls.items())]
        r = g.post("/v1/chat/completions", dict(req, stream=False, messages=msgs))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["choices"][0]["message"]["content"], "hello from cg")
        items = self.sent("cg")[-1]["input"]
        self.assertEqual([i.get("type") for i in items][-4:],
                         ["function_call", "function_call", "function_call_output", "function_call_output"])
        self.assertEqual({i["call_id"] for i in items if i.get("type") == "function_call_output"},
                         {c["id"] for c in calls.values()})

    def test_an_error_inside_the_backends_stream_reaches_a_chat_client_as_a_chat_error(self):
        g = self.pool([chatgpt("cg", "late_error,code=server_is_confused,after=2")])
        s = g.stream("/v1/chat/completions", dict(CHAT, stream=True))
        self.assertEqual(s.status, 200, s)
        self.assertEqual(chat_text(s.events), "hello from")
        errs = [e["json"]["error"] for e in s.events if isinstance(e["json"], dict) and e["json"].get("error")]
        self.assertEqual(len(errs), 1, s.raw)
        self.assertTrue(errs[0]["message"])
        self.assertNotIn("[DONE]", [e["data"] for e in s.events])

    # ---------------------------------------------------------- Responses client, ChatGPT login

    def test_the_sdk_defaults_on_a_chatgpt_login_get_one_aggregated_answer_with_its_items(self):
        g = self.pool([chatgpt("cg", "ok,reasoning=1")])
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi", "max_output_tokens": 50,
                                     "temperature": 0.2})
        self.assertEqual(r.status, 200, r)
        body = r.json()
        self.assertEqual((body["object"], body["status"]), ("response", "completed"))
        # the backend's response.completed carried output []: the items come from its output_item.done events
        self.assertEqual([i["type"] for i in body["output"]], ["reasoning", "message"])
        self.assertEqual(body["output"][1]["content"][0]["text"], "hello from cg")
        self.assertEqual(body["usage"]["output_tokens"], 3)
        up = self.sent("cg")[-1]
        self.assertEqual((up["stream"], up["store"]), (True, False))
        self.assertEqual(up["instructions"], "You are a helpful assistant.")
        self.assertNotIn("max_output_tokens", up)
        self.assertNotIn("temperature", up)
        self.assertIsInstance(up["input"], list)
        self.assertEqual(json.loads(self.log_rows(g, 1)[0]["attempts_json"])[0].get("adapted"), True)

    def test_a_stream_without_a_content_type_reaches_the_client_as_an_event_stream_with_its_usage(self):
        g = self.pool([chatgpt("cg")])
        s = g.stream("/v1/responses", {"model": "gpt-test", "stream": True, "store": False,
                                       "instructions": "x", "input": [{"role": "user", "content": "hi"}]})
        self.assertEqual(s.status, 200, s)
        self.assertIn("text/event-stream", s.headers["content-type"])
        self.assertEqual(response_text(s.events), "hello from cg")
        row = self.log_rows(g, 1)[0]
        self.assertEqual((row["input_tokens"], row["output_tokens"]), (7, 3))

    def test_a_developer_prompt_and_item_ids_are_made_acceptable_to_the_backend(self):
        g = self.pool([chatgpt("cg")])
        inp = [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
               {"type": "message", "role": "system", "content": "Mind the sandbox."},
               {"type": "message", "id": "msg_1", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
        s = g.stream("/v1/responses", {"model": "gpt-test", "stream": True, "store": False, "input": inp})
        self.assertEqual(s.status, 200, s)
        up = self.sent("cg")[-1]
        self.assertTrue(up["instructions"].startswith("You are Codex."), up["instructions"])
        self.assertNotIn("system", [i.get("role") for i in up["input"]])
        self.assertFalse(any("id" in i for i in up["input"]))
        self.assertEqual(self.mock.requests("cg")[-1].get("violations") or [], [])

    def test_a_detail_error_of_the_backend_reaches_the_client_as_an_openai_error(self):
        # a dialect.lua that does not drop temperature: the backend's own refusal comes back, in OpenAI's shape
        pdir = self.policy_copy({"dialect.lua": "return { version = 1, dialect = function(a)\n"
                                 "  if a.kind == 'chatgpt' then return { stream = 'always', store = false,\n"
                                 "    instructions = 'x', input_list = true } end\n"
                                 "  return {} end }\n"})
        g = self.pool([chatgpt("cg")], policies=pdir)
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi", "temperature": 0.5})
        err = self.assertOpenAIError(r, 400)
        self.assertEqual(err["message"], "Unsupported parameter: temperature")
        self.assertNotIn("detail", r.json())

    def test_a_stored_chain_on_a_backend_that_stores_nothing_is_served_from_the_gateways_record(self):
        g = self.pool([chatgpt("cg")])
        r1 = g.post("/v1/responses", {"model": "gpt-test", "input": "one"})
        self.assertEqual(r1.status, 200, r1)
        first = r1.json()
        wait_for(lambda: g.query("SELECT count(*) AS n FROM conversations")[0]["n"] == 1, what="turn 1 recorded")
        r2 = g.post("/v1/responses", {"model": "gpt-test", "input": "two", "previous_response_id": first["id"]})
        self.assertEqual(r2.status, 200, r2)
        up = self.sent("cg")[-1]
        self.assertNotIn("previous_response_id", up)  # the strict backend would refuse it
        texts = json.dumps(up["input"])
        self.assertIn("one", texts)
        self.assertIn("hello from cg", texts)  # turn 1's answer, rebuilt from the record
        self.assertFalse(any("id" in i for i in up["input"]))
        second = r2.json()["id"]
        wait_for(lambda: g.query("SELECT count(*) AS n FROM conversations")[0]["n"] == 2, what="turn 2 recorded")
        # GET, its input items and DELETE: the gateway's record answers (the backend has no such endpoint)
        got = g.get(f"/v1/responses/{second}")
        self.assertEqual(got.status, 200, got)
        self.assertEqual(got.headers.get("x-switchyard-record"), "1")
        self.assertEqual(got.json()["output"][-1]["content"][0]["text"], "hello from cg")
        self.assertEqual(got.json()["previous_response_id"], first["id"])
        items = g.get(f"/v1/responses/{second}/input_items")
        self.assertEqual(items.status, 200, items)
        self.assertIn("two", json.dumps(items.json()["data"]))
        gone = g.request("DELETE", f"/v1/responses/{second}")
        self.assertEqual((gone.status, gone.json().get("deleted")), (200, True), gone)
        self.assertOpenAIError(g.get(f"/v1/responses/{second}"), 404)
        self.assertEqual([r["method"] for r in self.mock.requests("cg")], ["POST", "POST"])

    def test_streamed_turns_are_recorded_with_their_items_and_a_chain_goes_on_through_a_chat_relay(self):
        g = self.pool([chatgpt("cg"), self.relay("rl")])
        # on the ChatGPT backend: its completed event has no output; the record takes the items
        s = g.stream("/v1/responses", {"model": "gpt-test", "stream": True, "input": "one"})
        self.assertEqual(s.status, 200, s)
        first = s.events[-1]["json"]["response"]["id"]
        row = wait_for(lambda: g.query("SELECT output_json FROM conversations WHERE response_id = ?", (first,)),
                       what="turn 1 recorded")[0]
        self.assertIn("hello from cg", row["output_json"])
        # the next turn on the chat relay (the login disabled): rebuilt from the record, then translated
        g.cli("account", "disable", "--db", g.db_path, "--name", "cg")
        wait_for(lambda: g.post("/v1/responses", {"model": "gpt-test", "input": "x", "store": False})
                 .headers.get("x-switchyard-account") == "rl" or None, what="cg disabled")
        s = g.stream("/v1/responses", {"model": "gpt-test", "stream": True, "input": "two",
                                       "previous_response_id": first})
        self.assertEqual((s.status, s.headers.get("x-switchyard-account")), (200, "rl"), s)
        msgs = self.sent("rl")[-1]["messages"]
        self.assertEqual([m["role"] for m in msgs], ["user", "assistant", "user"])
        self.assertEqual(msgs[1]["content"], "hello from cg")
        second = s.events[-1]["json"]["response"]["id"]
        self.assertTrue(second.startswith("resp_"), second)
        row = wait_for(lambda: g.query("SELECT output_json, previous_response_id AS prev FROM conversations"
                                       " WHERE response_id = ?", (second,)), what="turn 2 recorded")[0]
        self.assertEqual(row["prev"], first)
        self.assertIn("hello from rl", row["output_json"])
        got = g.get(f"/v1/responses/{second}")
        self.assertEqual((got.status, got.headers.get("x-switchyard-record")), (200, "1"), got)

    # ---------------------------------------------------------- Responses client, Chat-only relay

    def test_a_responses_client_is_served_by_a_chat_only_relay_plain_and_streamed(self):
        g = self.pool([self.relay("rl")])
        r = g.post("/v1/responses", {"model": "gpt-test", "instructions": "Be brief.", "input": "hi"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["output"][-1]["content"][0]["text"], "hello from rl")
        up = self.sent("rl")[-1]
        self.assertEqual(up["messages"][0], {"role": "system", "content": "Be brief."})
        self.assertEqual(self.mock.requests("rl")[-1]["path"].rsplit("/", 2)[-2:], ["chat", "completions"])
        s = g.stream("/v1/responses", {"model": "gpt-test", "input": "hi", "stream": True})
        self.assertEqual(s.status, 200, s)
        types = s.types()
        self.assertEqual(types[:2], ["response.created", "response.in_progress"])
        self.assertEqual(types[-1], "response.completed")
        self.assertEqual(response_text(s.events), "hello from rl")
        seq = [e["json"]["sequence_number"] for e in s.events]
        self.assertEqual(seq, list(range(len(seq))))
        done = s.events[-1]["json"]["response"]
        self.assertEqual(done["usage"]["output_tokens"], 3)
        self.assertTrue(self.sent("rl")[-1]["stream_options"]["include_usage"])

    def test_parallel_function_calls_from_a_chat_relay_become_function_call_items(self):
        g = self.pool([self.relay("rl", "ok,tool_call=1,tool_calls=2")])
        tool = {"type": "function", "name": "get_weather", "parameters": TOOL["function"]["parameters"]}
        s = g.stream("/v1/responses", {"model": "gpt-test", "stream": True, "tools": [tool], "input": "weather?"})
        self.assertEqual(s.status, 200, s)
        done = [e["json"]["item"] for e in s.events if event_type(e) == "response.output_item.done"]
        calls = [i for i in done if i["type"] == "function_call"]
        self.assertEqual(len(calls), 2)
        for c in calls:
            self.assertTrue(c["call_id"])
            json.loads(c["arguments"])
        deltas = [e for e in s.events if event_type(e) == "response.function_call_arguments.delta"]
        self.assertGreater(len(deltas), 2)  # arguments streamed in pieces
        up = self.sent("rl")[-1]
        self.assertEqual(up["tools"][0]["function"]["name"], "get_weather")
        # the outputs go back: the relay gets an assistant message with both calls and two tool messages
        inp = [{"role": "user", "content": "weather?"}] + calls + [
            {"type": "function_call_output", "call_id": c["call_id"], "output": "sunny"} for c in calls]
        r = g.post("/v1/responses", {"model": "gpt-test", "tools": [tool], "input": inp})
        self.assertEqual(r.status, 200, r)
        roles = [m["role"] for m in self.sent("rl")[-1]["messages"]]
        self.assertEqual(roles, ["user", "assistant", "tool", "tool"])

    def test_a_relay_that_answers_404_to_responses_is_learned_to_speak_chat_without_a_cooldown(self):
        g = self.pool([self.relay("rl", declared=False)])
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "hi"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual([q["path"].endswith("/responses") for q in self.mock.requests("rl")], [True, False])
        wait_for(lambda: "DIALECT_LEARNED" in g.trace_text(), what="the learned dialect in the trace")
        r = g.post("/v1/responses", {"model": "gpt-test", "input": "again"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(self.mock.requests("rl")), 3)  # straight to chat now
        # the state row is written by the writer thread: none may be there yet on a slow (sanitizer) run
        wait_for(lambda: [r["dialects_refused"] for r in g.query("SELECT dialects_refused FROM account_state")] == [2],
                 what="the learned dialect in the database")
        listed = json.loads(g.cli("account", "list", "--json", "--db", g.db_path).stdout)[0]
        self.assertEqual((listed["dialects"], listed["dialects_refused"]), (["chat"], ["responses"]))
        self.assertEqual(listed["last_error"], None)  # nothing cooled down
        g.cli("account", "reset", "--db", g.db_path, "--name", "rl")
        wait_for(lambda: json.loads(g.cli("account", "list", "--json", "--db", g.db_path).stdout)[0]
                 ["dialects_refused"] == [], what="the reset to forget it")

    # ---------------------------------------------------------- across dialects

    def test_a_chat_request_fails_over_from_an_api_key_to_a_chatgpt_login_and_back(self):
        g = self.pool([account("key", self.mock.url("key", "status=429,times=1")), chatgpt("cg")])
        r = g.post("/v1/chat/completions", CHAT)
        self.assertEqual((r.status, r.headers["x-switchyard-account"]), (200, "cg"), r)
        self.assertEqual(r.json()["choices"][0]["message"]["content"], "hello from cg")
        tried = json.loads(self.log_rows(g, 1)[0]["attempts_json"])
        self.assertEqual([(t["account"], t.get("dialect")) for t in tried], [("key", None), ("cg", "chat>responses")])
        g.cli("account", "reset", "--db", g.db_path, "--name", "key")
        wait_for(lambda: g.post("/v1/chat/completions", CHAT).headers.get("x-switchyard-account") == "key" or None,
                 what="the api key back first")

    def test_a_quota_error_in_the_backends_stream_switches_a_chat_client_unseen(self):
        g = self.pool([chatgpt("cg", "quota_stream"), self.relay("rl")])
        # the relay speaks chat natively: it goes first unless demoted; make the login first by sort
        g.cli("account", "update", "--db", g.db_path, "--name", "rl", "--sort", "100")
        s = g.stream("/v1/chat/completions", dict(CHAT, stream=True))
        self.assertEqual(s.status, 200, s)
        self.assertEqual(chat_text(s.events), "hello from rl")
        self.assertFalse(any(isinstance(e["json"], dict) and e["json"].get("error") for e in s.events))

    def test_a_field_no_translation_can_carry_is_refused_naming_it_unless_a_native_account_serves(self):
        g = self.pool([chatgpt("cg")])
        r = g.post("/v1/chat/completions", dict(CHAT, n=2))
        err = self.assertOpenAIError(r, 400)
        self.assertEqual((err["code"], r.json()["error"].get("param")), ("unsupported_parameter", "n"))
        self.assertEqual(self.mock.requests("cg"), [])
        g2 = self.pool([chatgpt("cg2"), account("key", self.mock.url("key"))])
        r = g2.post("/v1/chat/completions", dict(CHAT, n=2))
        self.assertEqual((r.status, r.headers["x-switchyard-account"]), (200, "key"), r)

    def test_an_account_whose_models_list_lacks_the_name_is_still_tried_after_those_listing_it(self):
        g = self.pool([account("a", self.mock.url("a", "ok,listed=other-model"), sort=0),
                       account("b", self.mock.url("b", "status=500"), sort=0)],
                      env={"SWITCHYARD_MODEL_POLL_S": "600"})
        wait_for(lambda: g.query("SELECT count(*) AS n FROM account_state WHERE models_learned IS NOT NULL")[0]["n"] >= 1,
                 what="a's learned list")
        r = g.post("/v1/chat/completions", CHAT)  # b first (a's list lacks gpt-test), b fails, a serves
        self.assertEqual((r.status, r.headers["x-switchyard-account"]), (200, "a"), r)
        self.assertTrue([q for q in self.mock.requests("b") if q["method"] == "POST"], "b went first")

    def test_an_operators_sort_outranks_the_list_hint(self):
        # the failover benchmark as published: the primary (sort 0) lists none of the scenario
        # models but serves them; the fallback (sort 1) maps them. The primary is tried first.
        g = self.pool([account("primary", self.mock.url("primary", "ok,listed=other-model"), sort=0),
                       account("fallback", self.mock.url("fallback"), sort=1,
                               args=["--model-map", '{"gpt-test":"fb-ok"}'])],
                      env={"SWITCHYARD_MODEL_POLL_S": "600"})
        wait_for(lambda: g.query("SELECT count(*) AS n FROM account_state WHERE models_learned IS NOT NULL")[0]["n"] >= 2,
                 what="both learned lists")
        r = g.post("/v1/chat/completions", CHAT)
        self.assertEqual((r.status, r.headers["x-switchyard-account"]), (200, "primary"), r)
        self.assertEqual([q for q in self.mock.requests("fallback") if q["method"] == "POST"], [])


if __name__ == "__main__":
    main()
