"""test_mock_backends.py: the mock upstream's accounts behave as separate,
strict backends (tests/mock_upstream.c): encrypted reasoning and compaction
blobs verify only for the account that minted them and are refused by any
other in OpenAI's shapes; stored responses, previous_response_id, GET and
DELETE /responses/{id} are per account; tool_call=1 answers a function call
until the input ends with its output. These tests call the mock directly
(no gateway), so the gateway-side tests can lean on what they prove."""

from harness import GatewayTest, event_type, http_call, main, parse_sse

BODY = {"model": "gpt-test", "input": "hi"}
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
        body, _ = self.reasoning("a")
        rid = body["id"]
        for v1 in (True, False):
            with self.subTest(v1=v1):
                got = self.mock.stored("a", rid, v1=v1)
                self.assertEqual(got.status, 200, got)
                self.assertEqual(got.json(), body)
                self.assertError(self.mock.stored("b", rid, v1=v1), 404,
                                 f"Response with id '{rid}' not found.", None)
                self.assertError(self.mock.stored("b", rid, v1=v1, method="DELETE"), 404,
                                 f"Response with id '{rid}' not found.", None)
        r = http_call(self.mock.port, "GET", f"/acct/a/ok/backend-api/codex/responses/{rid}/input_items")
        self.assertEqual(r.json(), {"object": "list", "has_more": False, "data": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]})
        d = self.mock.stored("a", rid, v1=False, method="DELETE")
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
            "response.function_call_arguments.delta", "response.function_call_arguments.done",
            "response.output_item.done", "response.completed"])
        added, d1, d2, args_done, done, completed = (e["json"] for e in evs[4:])
        n = int(evs[0]["json"]["response"]["id"].rsplit("_", 1)[1])
        self.assertEqual((added["output_index"], added["item"]),
                         (1, {"type": "function_call", "id": f"fc_a_{n}", "call_id": f"call_a_{n}",
                              "name": "exec_command", "arguments": "", "status": "in_progress"}))
        self.assertEqual({d1["item_id"], d2["item_id"], args_done["item_id"]}, {f"fc_a_{n}"})
        self.assertEqual(d1["delta"] + d2["delta"], '{"cmd":"echo hi"}')
        self.assertEqual((args_done["arguments"], args_done["output_index"]), ('{"cmd":"echo hi"}', 1))
        self.assertEqual(done["item"], dict(added["item"], arguments='{"cmd":"echo hi"}', status="completed"))
        self.assertEqual([o["type"] for o in completed["response"]["output"]], ["reasoning", "function_call"])
        self.assertEqual(completed["response"]["output"][1], done["item"])
        self.assertEqual([e["json"]["sequence_number"] for e in evs], list(range(len(evs))))

    def test_tool_call_applies_only_where_the_scenario_answers(self):
        r = self.post("a", "status=429,tool_call=1", BODY)
        self.assertEqual(r.status, 429, r)
        self.assertIsNone(self.mock.requests("a")[-1]["tool_call"])
        r = self.post("a", "late_error,tool_call=1", dict(BODY, stream=True))
        self.assertNotIn("response.function_call_arguments.done", [event_type(e) for e in parse_sse(r.body)])


if __name__ == "__main__":
    main()
