"""test_mock_backends.py: the mock upstream's accounts behave as separate,
strict backends (tests/mock_upstream.c): encrypted reasoning and compaction
blobs verify only for the account that minted them and are refused by any
other in OpenAI's shapes; stored responses, previous_response_id, GET and
DELETE /responses/{id} are per account; tool_call=1 answers a function call
(tool_calls=N: N in parallel) until the input ends with its output. The
codex style (a path without /v1/) keeps the ChatGPT codex backend's rules,
one test per rule; speaks= makes an API upstream that has only one of the
two APIs; chat requests are checked as a strict Chat Completions API does
and chat answers carry tool calls and reasoning_content. These tests call
the mock directly (no gateway), so the gateway-side tests can lean on what
they prove."""

import json

from harness import GatewayTest, event_type, http_call, main, parse_sse

BODY = {"model": "gpt-test", "input": "hi"}
# what Codex sends the ChatGPT backend: every rule of the codex style met
CODEX_BODY = {"model": "gpt-test", "instructions": "You are Codex.", "stream": True, "store": False,
              "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}
CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
NOT_PERSISTED = ("Item with id '{}' not found. Items are not persisted when `store` is set to false. Try again with "
                 "`store` set to true, or remove this item from your input.")
INCLUDE = ["reasoning.encrypted_content"]
VERIFY_MSG = "The encrypted content {} could not be verified."


def abbrev(blob):
    """How OpenAI shows a blob in its errors: gAAA...DQ==."""
    return f"{blob[:4]}...{blob[-4:]}"


class MockBackendsTest(GatewayTest):

    def post(self, name, scenario, body, v1=True):
        return self.mock.call(name, scenario, "responses", body, v1=v1)

    def reasoning(self, name, scenario="ok,reasoning=1"):
        """A plain answer of account name; returns (response json, its reasoning item)."""
        r = self.post(name, scenario, BODY)
        self.assertEqual(r.status, 200, r)
        out = r.json()["output"]
        self.assertEqual(out[0]["type"], "reasoning", out)
        return r.json(), out[0]

    def assertBlob(self, blob):
        self.assertIsInstance(blob, str)
        self.assertTrue(blob.startswith("gAAAAA"), blob[:20])
        self.assertTrue(400 <= len(blob) <= 3000, len(blob))
        self.assertRegex(blob, r"^[A-Za-z0-9_-]+=*$")

    def assertError(self, r, status, message, code, param=None):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.json(), {"error": {"message": message, "type": "invalid_request_error",
                                              "param": param, "code": code}})

    # --- reasoning and compaction items

    def test_reasoning_item_precedes_the_message_in_a_plain_answer(self):
        body, item = self.reasoning("a")
        n = int(body["id"].rsplit("_", 1)[1])
        self.assertEqual(body["id"], f"resp_a_{n}")
        self.assertEqual(set(item), {"type", "id", "summary", "encrypted_content"})
        self.assertEqual(item["id"], f"rs_a_{n}")
        self.assertEqual(item["summary"], [{"type": "summary_text", "text": "thinking"}])
        self.assertBlob(item["encrypted_content"])
        self.assertEqual([o["type"] for o in body["output"]], ["reasoning", "message"])
        self.assertEqual(body["output"][1]["content"][0]["text"], "hello from a")

    def test_include_asks_for_reasoning_and_without_it_the_answer_is_as_before(self):
        r = self.post("a", "ok", dict(BODY, include=INCLUDE))
        self.assertEqual([o["type"] for o in r.json()["output"]], ["reasoning", "message"])
        self.assertBlob(r.json()["output"][0]["encrypted_content"])
        r = self.post("a", "ok", dict(BODY, include=["message.output_text.logprobs"]))
        self.assertEqual([o["type"] for o in r.json()["output"]], ["message"])

    def test_reasoning_and_compaction_items_stream_before_the_message(self):
        r = self.post("a", "ok,reasoning=1,compaction=1", dict(BODY, stream=True))
        self.assertEqual(r.status, 200, r)
        self.assertIn("text/event-stream", r.headers["content-type"])
        evs = parse_sse(r.body)
        self.assertEqual([event_type(e) for e in evs][:8], [
            "response.created", "response.in_progress",
            "response.output_item.added", "response.output_item.done",
            "response.output_item.added", "response.output_item.done",
            "response.output_item.added", "response.content_part.added"])
        added_rs, done_rs, added_cmp, done_cmp, added_msg = (e["json"] for e in evs[2:7])
        n = int(evs[0]["json"]["response"]["id"].rsplit("_", 1)[1])
        self.assertEqual((added_rs["output_index"], added_rs["item"]),
                         (0, {"type": "reasoning", "id": f"rs_a_{n}", "summary": []}))
        self.assertEqual(done_rs["output_index"], 0)
        self.assertEqual(done_rs["item"]["summary"], [{"type": "summary_text", "text": "thinking"}])
        self.assertBlob(done_rs["item"]["encrypted_content"])
        self.assertEqual((added_cmp["output_index"], added_cmp["item"]),
                         (1, {"type": "compaction", "id": f"cmp_a_{n}"}))
        self.assertEqual((done_cmp["output_index"], done_cmp["item"]["id"]), (1, f"cmp_a_{n}"))
        self.assertBlob(done_cmp["item"]["encrypted_content"])
        self.assertNotEqual(done_rs["item"]["encrypted_content"], done_cmp["item"]["encrypted_content"])
        self.assertEqual(added_msg["output_index"], 2)
        deltas = [e["json"] for e in evs if event_type(e) == "response.output_text.delta"]
        self.assertEqual({d["output_index"] for d in deltas}, {2})
        self.assertEqual("".join(d["delta"] for d in deltas), "hello from a")
        done = [e["json"] for e in evs if event_type(e) == "response.completed"]
        self.assertEqual(len(done), 1)
        out = done[0]["response"]["output"]
        self.assertEqual([o["type"] for o in out], ["reasoning", "compaction", "message"])
        self.assertEqual(out[0], done_rs["item"])
        self.assertEqual(out[1], done_cmp["item"])

    def test_every_answer_mints_a_new_blob(self):
        blobs = {self.reasoning("a")[1]["encrypted_content"] for _ in range(3)}
        self.assertEqual(len(blobs), 3)

    # --- blobs: own accepted, foreign refused

    def test_an_account_accepts_its_own_blob_and_records_it_as_own(self):
        _, item = self.reasoning("a")
        self.mock.reset()
        inp = [{"role": "user", "content": "hi"}, item, {"type": "message", "role": "user", "content": "again"}]
        r = self.post("a", "ok", dict(BODY, input=inp))
        self.assertEqual(r.status, 200, r)
        rec, = self.mock.requests("a")
        self.assertEqual(rec["input_types"], ["message", "reasoning", "message"])
        self.assertEqual(rec["input_items"], 3)
        self.assertIsNone(rec["refused"])
        self.assertEqual(self.mock.blobs_sent("a"), [{
            "prefix": item["encrypted_content"][:16], "by": "a", "own": True,
            "len": len(item["encrypted_content"]), "item": item["id"], "item_type": "reasoning",
            "n": rec["n"], "account": "a"}])

    def test_a_blob_minted_by_another_account_is_refused_in_each_shape(self):
        _, item = self.reasoning("a")
        blob = item["encrypted_content"]
        body = dict(BODY, input=[{"role": "user", "content": "hi"}, item])
        shown = abbrev(blob)
        cases = {
            "": ("invalid_encrypted_content", VERIFY_MSG.format(shown)),
            ",enc_err=null_code": (None, VERIFY_MSG.format(shown)),
            ",enc_err=item": ("invalid_encrypted_content",
                              f"The encrypted content for item {item['id']} could not be verified. "
                              "Reason: Encrypted content could not be decrypted or parsed."),
            ",enc_err=org": ("invalid_encrypted_content",
                             VERIFY_MSG.format(shown) + " Reason: Encrypted content organization_id did not "
                             "match the target organization."),
            ",enc_err=fn_output": ("invalid_encrypted_content",
                                   "Encrypted function output content could not be decrypted or decoded."),
            ",enc_err=stream": ("invalid_encrypted_content", VERIFY_MSG.format(shown)),  # not streamed: plain
        }
        for opts, (code, message) in cases.items():
            with self.subTest(opts=opts):
                self.assertError(self.post("b", "ok" + opts, body), 400, message, code)
        recs = self.mock.requests("b")
        self.assertEqual([x["refused"] for x in recs], ["invalid_encrypted_content"] * len(cases))
        self.assertEqual({(b["by"], b["own"]) for b in self.mock.blobs_sent("b")}, {("a", False)})
        # the same input is still fine where it was minted
        self.assertEqual(self.post("a", "ok", body).status, 200)

    def test_a_foreign_blob_in_a_stream_fails_the_stream_with_enc_err_stream(self):
        _, item = self.reasoning("a")
        r = self.post("b", "ok,enc_err=stream", dict(BODY, stream=True, input=[item]))
        self.assertEqual(r.status, 200, r)
        self.assertIn("text/event-stream", r.headers["content-type"])
        evs = parse_sse(r.body)
        self.assertEqual([event_type(e) for e in evs], ["response.created", "response.failed"])
        resp = evs[1]["json"]["response"]
        self.assertEqual(evs[1]["json"]["type"], "response.failed")
        self.assertTrue(resp["id"].startswith("resp_b_"), resp)
        self.assertEqual((resp["status"], resp["output"]), ("failed", []))
        self.assertEqual(resp["error"], {"code": "invalid_encrypted_content",
                                         "message": VERIFY_MSG.format(abbrev(item["encrypted_content"]))})
        # without enc_err=stream a streamed request gets the plain 400
        r = self.post("b", "ok", dict(BODY, stream=True, input=[item]))
        self.assertEqual(r.status, 400, r)

    def test_blobs_the_mock_never_minted_are_refused_even_by_the_named_account(self):
        _, item = self.reasoning("a")
        blob = item["encrypted_content"]
        forged = "gAAAAA" + "B" * 600 + "=="
        edited = blob[:100] + ("A" if blob[100] != "A" else "B") + blob[101:]
        for bad in (forged, edited, "not base64 at all!", ""):
            with self.subTest(bad=bad[:20]):
                r = self.post("a", "ok", dict(BODY, input=[dict(item, encrypted_content=bad)]))
                self.assertError(r, 400, VERIFY_MSG.format(abbrev(bad)), "invalid_encrypted_content")
        self.assertEqual({(b["by"], b["own"]) for b in self.mock.blobs_sent("a")}, {(None, False)})

    def test_blobs_anywhere_in_an_input_item_are_checked(self):
        _, item = self.reasoning("a")
        blob = item["encrypted_content"]
        inputs = [
            [{"type": "message", "role": "assistant", "id": "msg_x",
              "content": [{"type": "output_text", "text": "x", "encrypted_content": blob}]}],
            [{"type": "function_call_output", "call_id": "c1",
              "output": [{"type": "input_text", "text": "x"}, {"type": "input_text", "encrypted_content": blob}]}],
            [{"type": "compaction", "id": "cmp_x", "encrypted_content": blob}],
        ]
        for inp in inputs:
            with self.subTest(item=inp[0]["type"]):
                r = self.post("b", "ok", dict(BODY, input=inp))
                self.assertError(r, 400, VERIFY_MSG.format(abbrev(blob)), "invalid_encrypted_content")
                self.assertEqual(self.post("a", "ok", dict(BODY, input=inp)).status, 200)
        self.assertEqual([b["item_type"] for b in self.mock.blobs_sent("b")],
                         ["message", "function_call_output", "compaction"])

    def test_accept_foreign_takes_any_blob(self):
        _, item = self.reasoning("a")
        for bad in (item["encrypted_content"], "gAAAAAforged"):
            r = self.post("b", "ok,accept_foreign=1", dict(BODY, input=[dict(item, encrypted_content=bad)]))
            self.assertEqual(r.status, 200, r)
        self.assertEqual([x["refused"] for x in self.mock.requests("b")], [None, None])

    def test_an_account_that_cannot_serve_answers_its_scenario_before_checking_blobs(self):
        _, item = self.reasoning("a")
        r = self.post("b", "quota429", dict(BODY, input=[item]))
        self.assertEqual(r.status, 429, r)
        self.assertEqual(r.json()["error"]["code"], "usage_limit_reached")

    # --- stored responses, previous_response_id

    def test_a_stored_response_continues_on_its_account_and_not_on_another(self):
        first = self.post("a", "ok", BODY).json()["id"]
        r = self.post("a", "ok,echo_input=1", dict(BODY, previous_response_id=first))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["output"][0]["content"][0]["text"], "hello from a [chain=1 items=1]")
        second = r.json()["id"]
        r = self.post("a", "ok,echo_input=1", dict(BODY, previous_response_id=second))
        self.assertEqual(r.json()["output"][0]["content"][0]["text"], "hello from a [chain=2 items=1]")
        self.assertEqual([x["chain"] for x in self.mock.requests("a")], [0, 1, 2])
        for prev in (first, "resp_nobody_1"):
            with self.subTest(prev=prev):
                self.assertError(self.post("b", "ok", dict(BODY, previous_response_id=prev)), 400,
                                 f"Previous response with id '{prev}' not found.",
                                 "previous_response_not_found", param="previous_response_id")
        self.assertEqual([x["refused"] for x in self.mock.requests("b")], ["previous_response_not_found"] * 2)

    def test_a_streamed_answer_is_stored_and_store_false_is_not(self):
        s = self.post("a", "ok", dict(BODY, stream=True))
        done = [e for e in parse_sse(s.body) if event_type(e) == "response.completed"][0]
        kept = done["json"]["response"]["id"]
        self.assertEqual(self.post("a", "ok", dict(BODY, previous_response_id=kept)).status, 200)
        gone = self.post("a", "ok", dict(BODY, store=False)).json()["id"]
        self.assertError(self.post("a", "ok", dict(BODY, previous_response_id=gone)), 400,
                         f"Previous response with id '{gone}' not found.", "previous_response_not_found",
                         param="previous_response_id")
        self.assertEqual(self.mock.stored("a", gone).status, 404)
        self.assertEqual([x["store"] for x in self.mock.requests("a") if x["endpoint"] == "responses"],
                         [None, None, False, None])

    def test_items_counts_the_input_of_a_request_without_previous_response(self):
        _, item = self.reasoning("a")
        inp = [{"role": "user", "content": "hi"}, item,
               {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
               {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
        r = self.post("a", "ok,echo_input=1", dict(BODY, input=inp))
        self.assertEqual(r.json()["output"][0]["content"][0]["text"], "hello from a [chain=0 items=4]")
        rec = self.mock.requests("a")[-1]
        self.assertEqual(rec["input_types"], ["message", "reasoning", "function_call", "function_call_output"])
        self.assertEqual((rec["input_items"], rec["chain"]), (4, 0))

    def test_get_and_delete_see_only_their_accounts_stored_responses_on_both_url_shapes(self):
        # the codex shape has these endpoints only with lax=routes (the real backend has none)
        body, _ = self.reasoning("a")
        rid = body["id"]
        for v1, sc in ((True, "ok"), (False, "ok,lax=routes")):
            with self.subTest(v1=v1):
                got = self.mock.stored("a", rid, scenario=sc, v1=v1)
                self.assertEqual(got.status, 200, got)
                self.assertEqual(got.json(), body)
                self.assertError(self.mock.stored("b", rid, scenario=sc, v1=v1), 404,
                                 f"Response with id '{rid}' not found.", None)
                self.assertError(self.mock.stored("b", rid, scenario=sc, v1=v1, method="DELETE"), 404,
                                 f"Response with id '{rid}' not found.", None)
        r = http_call(self.mock.port, "GET", f"/acct/a/ok,lax=routes/backend-api/codex/responses/{rid}/input_items")
        self.assertEqual(r.json(), {"object": "list", "has_more": False, "data": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]})
        d = self.mock.stored("a", rid, scenario="ok,lax=routes", v1=False, method="DELETE")
        self.assertEqual((d.status, d.json()), (200, {"id": rid, "object": "response.deleted", "deleted": True}))
        self.assertEqual(self.mock.stored("a", rid).status, 404)
        self.assertEqual(self.mock.stored("a", rid, method="DELETE").status, 404)
        self.assertEqual(self.post("a", "ok", dict(BODY, previous_response_id=rid)).status, 400)
        recs = [(x["account"], x["method"], x["endpoint"]) for x in self.mock.requests()[1:]]
        self.assertEqual(recs, [
            ("a", "GET", "responses_get"), ("b", "GET", "responses_get"), ("b", "DELETE", "responses_delete"),
            ("a", "GET", "responses_get"), ("b", "GET", "responses_get"), ("b", "DELETE", "responses_delete"),
            ("a", "GET", "responses_input_items"), ("a", "DELETE", "responses_delete"),
            ("a", "GET", "responses_get"), ("a", "DELETE", "responses_delete"), ("a", "POST", "responses")])

    def test_get_and_delete_do_not_count_toward_ok_first(self):
        rid = self.post("a", "status=500,ok_first=2", BODY).json()["id"]
        for _ in range(3):
            self.assertEqual(self.mock.stored("a", rid, scenario="status=500,ok_first=2").status, 200)
        self.assertEqual(self.post("a", "status=500,ok_first=2", BODY).status, 200)
        self.assertEqual(self.post("a", "status=500,ok_first=2", BODY).status, 500)

    # --- tool_call=1: a function call until the input ends with its output

    def test_tool_call_answers_a_function_call_and_after_its_output_the_message(self):
        r = self.post("a", "ok,reasoning=1,tool_call=1", BODY)
        self.assertEqual(r.status, 200, r)
        out = r.json()["output"]
        n = int(r.json()["id"].rsplit("_", 1)[1])
        self.assertEqual([o["type"] for o in out], ["reasoning", "function_call"])
        call = out[1]
        self.assertEqual(call, {"type": "function_call", "id": f"fc_a_{n}", "call_id": f"call_a_{n}",
                                "name": "exec_command", "arguments": '{"cmd":"echo hi"}', "status": "completed"})
        rec = self.mock.requests("a")[-1]
        self.assertEqual((rec["tool_call"], rec["last_input_type"], rec["tool_outputs"]),
                         (f"call_a_{n}", "message", []))
        history = [{"role": "user", "content": "hi"}] + out
        for kind in ("function_call_output", "custom_tool_call_output"):
            follow = dict(BODY, input=history + [{"type": kind, "call_id": call["call_id"], "output": "hi\n"}])
            r2 = self.post("a", "ok,reasoning=1,tool_call=1", follow)
            self.assertEqual(r2.status, 200, r2)
            self.assertEqual([o["type"] for o in r2.json()["output"]], ["reasoning", "message"])
            rec = self.mock.requests("a")[-1]
            self.assertEqual((rec["tool_call"], rec["last_input_type"], rec["tool_outputs"]),
                             (None, kind, [call["call_id"]]))
        # a later user message asks again: another call
        again = dict(BODY, input=history + [{"type": "function_call_output", "call_id": call["call_id"],
                                             "output": "hi"}, {"role": "user", "content": "more"}])
        self.assertEqual(self.post("a", "ok,tool_call=1,tool=shell", again).json()["output"][0]["arguments"],
                         '{"command":["echo","hi"]}')

    def test_tool_call_streams_the_function_call_events(self):
        r = self.post("a", "ok,reasoning=1,tool_call=1", dict(BODY, stream=True))
        self.assertEqual(r.status, 200, r)
        evs = parse_sse(r.body)
        self.assertEqual([event_type(e) for e in evs], [
            "response.created", "response.in_progress",
            "response.output_item.added", "response.output_item.done",
            "response.output_item.added", "response.function_call_arguments.delta",
            "response.function_call_arguments.delta", "response.function_call_arguments.delta",
            "response.function_call_arguments.done", "response.output_item.done", "response.completed"])
        added, d1, d2, d3, args_done, done, completed = (e["json"] for e in evs[4:])
        n = int(evs[0]["json"]["response"]["id"].rsplit("_", 1)[1])
        self.assertEqual((added["output_index"], added["item"]),
                         (1, {"type": "function_call", "id": f"fc_a_{n}", "call_id": f"call_a_{n}",
                              "name": "exec_command", "arguments": "", "status": "in_progress"}))
        self.assertEqual({d1["item_id"], d2["item_id"], d3["item_id"], args_done["item_id"]}, {f"fc_a_{n}"})
        self.assertTrue(all(d["delta"] for d in (d1, d2, d3)), (d1, d2, d3))
        self.assertEqual(d1["delta"] + d2["delta"] + d3["delta"], '{"cmd":"echo hi"}')
        self.assertEqual((args_done["arguments"], args_done["output_index"]), ('{"cmd":"echo hi"}', 1))
        self.assertEqual(done["item"], dict(added["item"], arguments='{"cmd":"echo hi"}', status="completed"))
        self.assertEqual([o["type"] for o in completed["response"]["output"]], ["reasoning", "function_call"])
        self.assertEqual(completed["response"]["output"][1], done["item"])
        self.assertEqual([e["json"]["sequence_number"] for e in evs], list(range(len(evs))))

    def test_tool_call_applies_only_where_the_scenario_answers(self):
        r = self.post("a", "status=429,tool_call=1", BODY)
        self.assertEqual(r.status, 429, r)
        self.assertIsNone(self.mock.requests("a")[-1]["tool_call"])
        r = self.post("a", "failed_stream,tool_call=1", dict(BODY, stream=True))
        self.assertNotIn("response.function_call_arguments.done", [event_type(e) for e in parse_sse(r.body)])
        # late_error: the calls go out, then the error (a limit after a tool call)
        r = self.post("a", "late_error,failed=1,tool_call=1", dict(BODY, stream=True))
        types = [event_type(e) for e in parse_sse(r.body)]
        self.assertEqual(types[-3:], ["response.function_call_arguments.done", "response.output_item.done",
                                      "response.failed"], types)

    # --- tool_calls=N: parallel calls on the Responses API

    def test_tool_calls_2_answers_two_parallel_function_calls_streamed_in_pieces(self):
        r = self.post("a", "ok,tool_call=1,tool_calls=2", BODY)
        n = int(r.json()["id"].rsplit("_", 1)[1])
        self.assertEqual(r.json()["output"], [
            {"type": "function_call", "id": f"fc_a_{n}", "call_id": f"call_a_{n}", "name": "exec_command",
             "arguments": '{"cmd":"echo hi"}', "status": "completed"},
            {"type": "function_call", "id": f"fc_a_{n}_2", "call_id": f"call_a_{n}_2", "name": "exec_command",
             "arguments": '{"cmd":"echo hi 2"}', "status": "completed"}])
        self.assertEqual(self.mock.requests("a")[-1]["tool_calls"], [f"call_a_{n}", f"call_a_{n}_2"])
        s = self.post("a", "ok,tool_call=1,tool_calls=2", dict(BODY, stream=True))
        evs = [e["json"] for e in parse_sse(s.body)]
        n = int(evs[0]["response"]["id"].rsplit("_", 1)[1])
        for k, (fc, args) in enumerate(((f"fc_a_{n}", '{"cmd":"echo hi"}'), (f"fc_a_{n}_2", '{"cmd":"echo hi 2"}'))):
            with self.subTest(call=k):
                mine = [e for e in evs if e.get("output_index") == k]
                self.assertEqual([e["type"] for e in mine], [
                    "response.output_item.added"] + ["response.function_call_arguments.delta"] * 3 + [
                    "response.function_call_arguments.done", "response.output_item.done"])
                deltas = [e["delta"] for e in mine if e["type"].endswith(".delta")]
                self.assertTrue(all(deltas), deltas)
                self.assertEqual("".join(deltas), args)
                self.assertEqual({e.get("item_id", e.get("item", {}).get("id")) for e in mine}, {fc})
        # the second call's events all come after the first call's
        idx = [e.get("output_index") for e in evs if "output_index" in e]
        self.assertEqual(idx, sorted(idx))
        self.assertEqual([o["call_id"] for o in evs[-1]["response"]["output"]], [f"call_a_{n}", f"call_a_{n}_2"])

    # --- the codex style: the ChatGPT codex backend's rules, one test each

    def codex(self, body, scenario="ok", name="a", path="responses"):
        return self.mock.call(name, scenario, path, body, v1=False)

    def assertDetail(self, r, status, detail, rule=None, name="a"):
        self.assertEqual((r.status, r.json()), (status, {"detail": detail}), r)
        if rule:
            self.assertEqual(self.mock.requests(name)[-1]["refused"], rule)

    def test_codex_body_meeting_every_rule_streams(self):
        r = self.codex(CODEX_BODY)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(parse_sse(r.body)[-1]["json"]["type"], "response.completed")
        rec = self.mock.requests("a")[-1]
        self.assertEqual((rec["style"], rec["refused"], rec["store"]), ("codex", None, False))
        self.assertEqual(json.loads(rec["body"]), CODEX_BODY)

    def test_codex_stream_must_be_set_to_true(self):
        for stream in (None, False, "true", 1):
            with self.subTest(stream=stream):
                body = {k: v for k, v in CODEX_BODY.items() if k != "stream"}
                if stream is not None:
                    body["stream"] = stream
                self.assertDetail(self.codex(body), 400, "Stream must be set to true", "stream")
        # lax=stream: a plain answer, as before the rule
        r = self.codex(dict(CODEX_BODY, stream=False), "ok,lax=stream")
        self.assertEqual((r.status, r.json()["object"]), (200, "response"), r)

    def test_codex_store_must_be_set_to_false(self):
        for store in (None, True, "false", 0):
            with self.subTest(store=store):
                body = {k: v for k, v in CODEX_BODY.items() if k != "store"}
                if store is not None:
                    body["store"] = store
                self.assertDetail(self.codex(body), 400, "Store must be set to false", "store")
        self.assertEqual(self.codex(dict(CODEX_BODY, store=True), "ok,lax=store").status, 200)

    def test_codex_instructions_are_required(self):
        for instructions in (None, "", ["You are Codex."]):
            with self.subTest(instructions=instructions):
                body = {k: v for k, v in CODEX_BODY.items() if k != "instructions"}
                if instructions is not None:
                    body["instructions"] = instructions
                self.assertDetail(self.codex(body), 400, "Instructions are required", "instructions")
        self.assertEqual(self.codex(dict(CODEX_BODY, instructions=""), "ok,lax=instructions").status, 200)

    def test_codex_unsupported_parameters(self):
        names = ["max_output_tokens", "temperature", "top_p", "frequency_penalty", "presence_penalty"]
        for name in names:
            for value in (1, None):
                with self.subTest(name=name, value=value):
                    self.assertDetail(self.codex(dict(CODEX_BODY, **{name: value})), 400,
                                      f"Unsupported parameter: {name}", "params")
        # several: the first in that order is named, whatever the body's order
        body = dict(CODEX_BODY, presence_penalty=0, temperature=1, max_output_tokens=9)
        self.assertDetail(self.codex(body), 400, "Unsupported parameter: max_output_tokens")
        # what the backend takes stays allowed
        ok = dict(CODEX_BODY, reasoning={"effort": "low"}, tools=[], tool_choice="auto", parallel_tool_calls=True,
                  include=["reasoning.encrypted_content"], prompt_cache_key="k", text={"verbosity": "low"})
        self.assertEqual(self.codex(ok).status, 200)
        self.assertEqual(self.codex(dict(CODEX_BODY, temperature=1), "ok,lax=params").status, 200)

    def test_codex_input_must_be_a_list(self):
        for value in ("hi", None, {"role": "user", "content": "hi"}):
            with self.subTest(input=value):
                body = dict(CODEX_BODY, input=value) if value is not None else \
                    {k: v for k, v in CODEX_BODY.items() if k != "input"}
                self.assertDetail(self.codex(body), 400, "Input must be a list", "input_list")
        self.assertEqual(self.codex(dict(CODEX_BODY, input="hi"), "ok,lax=input_list").status, 200)

    def test_codex_system_messages_are_not_allowed(self):
        for item in ({"type": "message", "role": "system", "content": "be brief"},
                     {"role": "system", "content": [{"type": "input_text", "text": "be brief"}]}):
            with self.subTest(item=item):
                body = dict(CODEX_BODY, input=[item] + CODEX_BODY["input"])
                self.assertDetail(self.codex(body), 400, "System messages are not allowed", "system")
        dev = dict(CODEX_BODY, input=[{"type": "message", "role": "developer", "content": "be brief"}]
                   + CODEX_BODY["input"])
        self.assertEqual(self.codex(dev).status, 200)
        body = dict(CODEX_BODY, input=[{"role": "system", "content": "x"}] + CODEX_BODY["input"])
        self.assertEqual(self.codex(body, "ok,lax=system").status, 200)

    def test_codex_input_items_with_an_id_are_not_found(self):
        # the backend persists nothing, so an id refers to nothing: 404 in the API's shape
        r = self.codex(dict(CODEX_BODY, reasoning={"effort": "low"}, include=["reasoning.encrypted_content"]),
                       "ok,tool_call=1")
        done = [e["json"]["item"] for e in parse_sse(r.body) if event_type(e) == "response.output_item.done"]
        self.assertEqual([i["type"] for i in done], ["reasoning", "function_call"])
        rs, fc = done
        items = [rs, fc, {"type": "message", "id": "msg_1", "role": "assistant",
                          "content": [{"type": "output_text", "text": "x"}]},
                 {"type": "item_reference", "id": "rs_ref"}]
        for item in items:
            with self.subTest(item=item["id"]):
                body = dict(CODEX_BODY, input=CODEX_BODY["input"] + [item])
                r = self.codex(body)
                self.assertEqual(r.status, 404, r)
                self.assertEqual(r.json(), {"error": {"message": NOT_PERSISTED.format(item["id"]),
                                                      "type": "invalid_request_error", "param": "input",
                                                      "code": None}})
                self.assertEqual(self.mock.requests("a")[-1]["refused"], "item_ids")
        # the same items without their ids: the history a client keeps with store false
        history = CODEX_BODY["input"] + [{k: v for k, v in i.items() if k != "id"} for i in (rs, fc)] + [
            {"type": "function_call_output", "call_id": fc["call_id"], "output": "hi"}]
        r = self.codex(dict(CODEX_BODY, input=history), "ok,tool_call=1")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.mock.requests("a")[-1]["last_input_type"], "function_call_output")
        self.assertEqual(self.codex(dict(CODEX_BODY, input=CODEX_BODY["input"] + [rs]), "ok,lax=item_ids").status,
                         200)

    def test_codex_previous_response_id_is_never_found(self):
        r = self.codex(CODEX_BODY)
        rid = parse_sse(r.body)[0]["json"]["response"]["id"]
        for prev in (rid, "resp_nobody_1"):
            with self.subTest(prev=prev):
                r = self.codex(dict(CODEX_BODY, previous_response_id=prev))
                self.assertError(r, 400, f"Previous response with id '{prev}' not found.",
                                 "previous_response_not_found", param="previous_response_id")
        self.assertEqual(self.mock.requests("a")[-1]["refused"], "previous_response_not_found")
        # nothing was kept: not even the API shape of the same account finds it
        self.assertEqual(self.mock.stored("a", rid).status, 404)
        self.assertEqual(self.codex(dict(CODEX_BODY, previous_response_id=None)).status, 200)

    def test_codex_has_no_stored_responses_and_no_chat_completions(self):
        for method, path in (("GET", "responses/resp_a_1"), ("DELETE", "responses/resp_a_1"),
                             ("GET", "responses/resp_a_1/input_items"),
                             ("GET", "backend-api/codex/responses/resp_a_1"),
                             ("POST", "chat/completions"), ("POST", "backend-api/codex/chat/completions")):
            with self.subTest(method=method, path=path):
                body = CHAT_BODY if method == "POST" else None
                r = http_call(self.mock.port, method, f"/acct/a/ok/{path}", body)
                self.assertDetail(r, 404, "Not Found", "routes")
        # lax=routes: as before the rule
        r = http_call(self.mock.port, "POST", "/acct/a/ok,lax=routes/chat/completions", CHAT_BODY)
        self.assertEqual((r.status, r.json()["object"]), (200, "chat.completion"), r)
        self.assertEqual(self.mock.requests("a")[-1]["violations"], ["routes"])
        # the models endpoint is the backend's own
        self.assertEqual(http_call(self.mock.port, "GET", "/acct/a/ok/models").status, 200)

    def test_codex_streams_carry_no_content_type_and_completed_lists_no_items(self):
        r = self.codex(CODEX_BODY, "ok,reasoning=1")
        self.assertEqual(r.status, 200, r)
        self.assertNotIn("content-type", r.headers)
        evs = parse_sse(r.body)
        done = [e["json"]["item"] for e in evs if event_type(e) == "response.output_item.done"]
        self.assertEqual([i["type"] for i in done], ["reasoning", "message"])
        completed = evs[-1]["json"]["response"]
        self.assertEqual((evs[-1]["event"], completed["status"], completed["output"]),
                         ("response.completed", "completed", []))
        self.assertEqual(completed["usage"]["output_tokens"], 3)
        # the refusals are JSON and say so
        r = self.codex(dict(CODEX_BODY, stream=False))
        self.assertEqual(r.headers["content-type"], "application/json")
        # each switch alone
        r = self.codex(CODEX_BODY, "ok,lax=content_type")
        self.assertEqual(r.headers["content-type"], "text/event-stream")
        self.assertEqual(parse_sse(r.body)[-1]["json"]["response"]["output"], [])
        r = self.codex(CODEX_BODY, "ok,lax=output")
        self.assertNotIn("content-type", r.headers)
        self.assertEqual([o["type"] for o in parse_sse(r.body)[-1]["json"]["response"]["output"]], ["message"])

    def test_codex_rules_are_checked_in_order(self):
        bad = {"model": "gpt-test", "input": "hi", "temperature": 1, "previous_response_id": "resp_x"}
        steps = [("stream", True, "Stream must be set to true"), ("store", False, "Store must be set to false"),
                 ("instructions", "x", "Instructions are required"),
                 ("temperature", None, "Unsupported parameter: temperature"),
                 ("input", [{"role": "system", "content": "x"}, {"type": "reasoning", "id": "rs_x", "summary": []}],
                  "Input must be a list"),
                 ("input", [{"type": "reasoning", "id": "rs_x", "summary": []}], "System messages are not allowed")]
        for key, fix, detail in steps:
            with self.subTest(detail=detail):
                self.assertDetail(self.codex(bad), 400, detail)
            if fix is None:
                del bad[key]
            else:
                bad[key] = fix
        r = self.codex(bad)
        self.assertEqual((r.status, r.json()["error"]["message"]), (404, NOT_PERSISTED.format("rs_x")))
        bad["input"] = CODEX_BODY["input"]
        self.assertEqual(self.codex(bad).json()["error"]["code"], "previous_response_not_found")
        del bad["previous_response_id"]
        self.assertEqual(self.codex(bad).status, 200)
        first = self.mock.requests("a")[0]
        self.assertEqual(first["violations"], ["stream", "store", "instructions", "params", "input_list",
                                               "prev_id"])
        self.assertEqual(self.mock.requests("a")[-1]["violations"], [])

    def test_codex_rules_come_before_the_scenario_but_after_a_bad_token(self):
        self.assertDetail(self.codex(BODY, "quota429"), 400, "Stream must be set to true")
        self.assertEqual(self.codex(CODEX_BODY, "quota429").status, 429)
        self.assertDetail(self.codex(BODY, "status=500"), 400, "Stream must be set to true")
        r = self.codex(BODY, "ok,auth=1")
        self.assertEqual((r.status, r.json()["error"]["code"]), (401, "token_expired"), r)

    def test_codex_lax_1_turns_every_rule_off(self):
        r = self.codex(BODY, "ok,lax=1")
        self.assertEqual(r.status, 200, r)
        # what a strict backend would have refused is still recorded, every rule in order
        rec = self.mock.requests("a")[-1]
        self.assertEqual((rec["refused"], rec["violations"]), (None, ["stream", "store", "instructions",
                                                                      "input_list"]))
        self.assertEqual(r.headers["content-type"], "application/json")
        self.assertEqual([o["type"] for o in r.json()["output"]], ["message"])
        rid = r.json()["id"]
        self.assertEqual(self.codex(dict(BODY, previous_response_id=rid), "ok,lax=1").status, 200)
        s = self.codex(dict(BODY, stream=True, temperature=1), "ok,lax=1")
        self.assertEqual(s.headers["content-type"], "text/event-stream")
        self.assertEqual(len(parse_sse(s.body)[-1]["json"]["response"]["output"]), 1)
        self.assertEqual(self.mock.stored("a", rid, scenario="ok,lax=1", v1=False).status, 200)

    def test_the_api_style_keeps_none_of_the_codex_rules(self):
        r = self.post("a", "ok", dict(BODY, temperature=1, max_output_tokens=5,
                                      input=[{"type": "message", "id": "msg_1", "role": "system", "content": "x"}]))
        self.assertEqual(r.status, 200, r)
        s = self.post("a", "ok", dict(BODY, stream=True))
        self.assertEqual(s.headers["content-type"], "text/event-stream")
        self.assertEqual(len(parse_sse(s.body)[-1]["json"]["response"]["output"]), 1)
        self.assertEqual({x["style"] for x in self.mock.requests("a")}, {"openai"})

    # --- speaks=: an API upstream with only one of the two APIs

    def invalid_url(self, r, method, path):
        self.assertEqual(r.status, 404, r)
        self.assertEqual(r.json(), {"error": {"message": f"Invalid URL ({method} {path})",
                                              "type": "invalid_request_error", "param": None, "code": None}})

    def test_speaks_chat_has_no_responses_api(self):
        self.invalid_url(self.post("a", "ok,speaks=chat", BODY), "POST", "/v1/responses")
        for method in ("GET", "DELETE"):
            self.invalid_url(self.mock.stored("a", "resp_a_1", scenario="ok,speaks=chat", method=method),
                             method, "/v1/responses/resp_a_1")
        r = self.mock.call("a", "ok,speaks=chat", "chat/completions", CHAT_BODY)
        self.assertEqual((r.status, r.json()["choices"][0]["message"]["content"]), (200, "hello from a"))
        self.assertEqual([x["refused"] for x in self.mock.requests("a")], ["speaks", "speaks", "speaks", None])

    def test_speaks_responses_has_no_chat_completions(self):
        r = self.mock.call("a", "ok,speaks=responses", "chat/completions", CHAT_BODY)
        self.invalid_url(r, "POST", "/v1/chat/completions")
        self.assertEqual(self.post("a", "ok,speaks=responses", BODY).status, 200)

    # --- chat: a strict Chat Completions API, tool calls, reasoning_content

    def chat(self, body, scenario="ok", name="a"):
        return self.mock.call(name, scenario, "chat/completions", body)

    def assertChatError(self, r, message, param, code=None):
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.json(), {"error": {"message": message, "type": "invalid_request_error",
                                              "param": param, "code": code}})
        self.assertEqual(self.mock.requests("a")[-1]["refused"], "messages")

    def test_chat_messages_must_be_a_non_empty_array(self):
        self.assertChatError(self.chat({"model": "gpt-test"}), "Missing required parameter: 'messages'.",
                             "messages", "missing_required_parameter")
        self.assertChatError(self.chat({"model": "gpt-test", "messages": "hi"}),
                             "Invalid type for 'messages': expected an array of objects, but got another type "
                             "instead.", "messages", "invalid_type")
        self.assertChatError(self.chat({"model": "gpt-test", "messages": []}),
                             "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an "
                             "empty array instead.", "messages", "empty_array")

    def test_chat_messages_need_a_known_role(self):
        for role in ("system", "developer", "user", "assistant"):
            self.assertEqual(self.chat({"messages": [{"role": role, "content": "x"}]}).status, 200, role)
        msgs = [{"role": "user", "content": "hi"}, {"role": "bot", "content": "x"}]
        self.assertChatError(self.chat({"messages": msgs}), "Invalid value: 'bot'. Supported values are: 'system', "
                             "'assistant', 'user', 'tool', and 'developer'.", "messages[1].role", "invalid_value")
        self.assertChatError(self.chat({"messages": [{"content": "x"}]}),
                             "Missing required parameter: 'messages[0].role'.", "messages[0].role",
                             "missing_required_parameter")

    def test_chat_tool_messages_must_answer_a_tool_call_of_the_assistant_message_before(self):
        call = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
        user = {"role": "user", "content": "hi"}

        def tool(cid):
            return {"role": "tool", "tool_call_id": cid, "content": "out"} if cid else {"role": "tool", "content": "o"}
        self.assertChatError(self.chat({"messages": [user, tool("c1")]}),
                             "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                             "message with 'tool_calls'.", "messages.[1].role")
        self.assertChatError(self.chat({"messages": [user, call, tool(None)]}),
                             "Missing parameter 'tool_call_id': messages with role 'tool' must have a "
                             "'tool_call_id'.", "messages.[2].tool_call_id")
        self.assertChatError(self.chat({"messages": [user, call, tool("c1"), tool("c9")]}),
                             "Invalid parameter: 'tool_call_id' of 'c9' not found in 'tool_calls' of previous "
                             "message.", "messages.[3].tool_call_id")
        self.assertChatError(self.chat({"messages": [user, call, tool("c2"), user]}),
                             "An assistant message with 'tool_calls' must be followed by tool messages responding "
                             "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                             "c1", "messages.[3].role")
        # a later turn's tool message cannot answer an earlier turn's call
        self.assertChatError(self.chat({"messages": [user, call, tool("c1"), tool("c2"), user, tool("c1")]}),
                             "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                             "message with 'tool_calls'.", "messages.[5].role")
        r = self.chat({"messages": [user, call, tool("c1"), tool("c2"), user]})
        self.assertEqual(r.status, 200, r)
        rec = self.mock.requests("a")[-1]
        self.assertEqual((rec["roles"], rec["last_role"], rec["tool_outputs"]),
                         (["user", "assistant", "tool", "tool", "user"], "user", ["c1", "c2"]))
        self.assertEqual(self.chat({"messages": [user, tool("c1")]}, "ok,lax=messages").status, 200)
        self.assertEqual(self.mock.requests("a")[-1]["violations"], ["messages"])

    def test_chat_tool_call_streams_parallel_calls_as_openai_does(self):
        r = self.chat(dict(CHAT_BODY, stream=True), "ok,tool_call=1,tool_calls=2")
        self.assertEqual(r.status, 200, r)
        evs = parse_sse(r.body)
        self.assertEqual(evs[-1]["data"], "[DONE]")
        deltas = [e["json"]["choices"][0] for e in evs[:-1] if e["json"]["choices"]]
        self.assertEqual(deltas[0]["delta"]["role"], "assistant")
        self.assertEqual([d["finish_reason"] for d in deltas][-1], "tool_calls")
        rec = self.mock.requests("a")[-1]
        ids = rec["tool_calls"]
        self.assertEqual(ids, [f"call_a_{rec['n']}", f"call_a_{rec['n']}_2"])
        pieces = [tc for d in deltas for tc in d["delta"].get("tool_calls", [])]
        self.assertFalse([d for d in deltas if d["delta"].get("content")], deltas)
        args = {0: "", 1: ""}
        for k, cid, want in ((0, ids[0], '{"cmd":"echo hi"}'), (1, ids[1], '{"cmd":"echo hi 2"}')):
            with self.subTest(index=k):
                mine = [p for p in pieces if p["index"] == k]
                self.assertEqual(mine[0], {"index": k, "id": cid, "type": "function",
                                           "function": {"name": "exec_command", "arguments": ""}})
                self.assertGreaterEqual(len(mine) - 1, 2)
                for p in mine[1:]:
                    self.assertEqual(set(p), {"index", "function"})
                    self.assertEqual(set(p["function"]), {"arguments"})
                    self.assertTrue(p["function"]["arguments"])
                    args[k] += p["function"]["arguments"]
                self.assertEqual(args[k], want)
        # all of the first call before the second
        self.assertEqual([p["index"] for p in pieces], sorted(p["index"] for p in pieces))

    def test_chat_tool_call_plain_answer_carries_message_tool_calls(self):
        r = self.chat(CHAT_BODY, "ok,tool_call=1")
        n = self.mock.requests("a")[-1]["n"]
        choice = r.json()["choices"][0]
        self.assertEqual(choice["finish_reason"], "tool_calls")
        self.assertEqual(choice["message"], {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_a_{n}", "type": "function",
             "function": {"name": "exec_command", "arguments": '{"cmd":"echo hi"}'}}]})

    def test_chat_ending_with_a_tool_message_answers_text(self):
        first = self.chat(CHAT_BODY, "ok,tool_call=1,tool_calls=2").json()["choices"][0]["message"]
        msgs = CHAT_BODY["messages"] + [first] + [
            {"role": "tool", "tool_call_id": c["id"], "content": "hi"} for c in first["tool_calls"]]
        for stream in (False, True):
            with self.subTest(stream=stream):
                r = self.chat({"model": "gpt-test", "messages": msgs, "stream": stream}, "ok,tool_call=1,tool_calls=2")
                self.assertEqual(r.status, 200, r)
                if stream:
                    text = "".join(e["json"]["choices"][0]["delta"].get("content") or ""
                                   for e in parse_sse(r.body)[:-1] if e["json"]["choices"])
                else:
                    text = r.json()["choices"][0]["message"]["content"]
                self.assertEqual(text, "hello from a")
                rec = self.mock.requests("a")[-1]
                self.assertEqual((rec["tool_calls"], rec["last_role"]), ([], "tool"))

    def test_chat_reasoning_streams_reasoning_content_before_the_answer(self):
        r = self.chat(dict(CHAT_BODY, stream=True), "ok,reasoning=1")
        deltas = [e["json"]["choices"][0]["delta"] for e in parse_sse(r.body)[:-1] if e["json"]["choices"]]
        thinking = [d for d in deltas if d.get("reasoning_content")]
        self.assertEqual("".join(d["reasoning_content"] for d in thinking), "thinking about it")
        self.assertTrue(all(d["content"] is None for d in thinking))
        first_text = next(i for i, d in enumerate(deltas) if d.get("content"))
        self.assertLess(deltas.index(thinking[-1]), first_text)
        self.assertEqual("".join(d.get("content") or "" for d in deltas), "hello from a")
        msg = self.chat(CHAT_BODY, "ok,reasoning=1").json()["choices"][0]["message"]
        self.assertEqual(msg, {"role": "assistant", "content": "hello from a",
                               "reasoning_content": "thinking about it"})

    # --- the request record: the body as sent, bounded

    def test_requests_record_the_body_bounded_at_64_kib(self):
        self.post("a", "ok", BODY)
        self.chat(CHAT_BODY)
        big = dict(BODY, input="x" * (70 << 10))
        self.post("a", "ok", big)
        recs = self.mock.requests("a")
        self.assertEqual([json.loads(x["body"]) for x in recs[:2]], [BODY, CHAT_BODY])
        self.assertEqual([x["body_truncated"] for x in recs], [False, False, True])
        raw = json.dumps(big)
        self.assertEqual((len(recs[2]["body"]), recs[2]["body_len"]), (64 << 10, len(raw)))
        self.assertEqual(recs[2]["body"], raw[:64 << 10])
        # a body the record cannot show as text still leaves a valid record
        r = http_call(self.mock.port, "POST", "/acct/a/ok/v1/responses", b"\xff\xfe{not json")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.mock.requests("a")[-1]["body"], "\ufffd\ufffd{not json")
        self.mock.reset()
        self.assertEqual(self.mock.requests(), [])



if __name__ == "__main__":
    main()
