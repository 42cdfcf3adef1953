"""test_conversation_move.py: a conversation outlives its account (issue 21).

The mock's accounts are separate backends: each mints its own encrypted
reasoning and compaction blobs and refuses any blob it did not mint (in
OpenAI's error shapes), as the ChatGPT backend and the API do. These tests
prove that the gateway records who minted each blob it relays (plain and
streamed answers, across a restart), leaves another account's blobs out of a
request before it reaches an account (a reasoning item whole, a compaction
or an encrypted part as text), sends the target's own and unknown blobs
untouched, resends once without the unknown ones when the account refuses a
blob (strip_retry, every error shape, plain and in a 200 stream), and never
twice; and that a body with no blob reaches the upstream byte for byte.

Who served a request is read from x-switchyard-account; the balanced
strategy makes the next account predictable (strict round-robin)."""

import json

from harness import GatewayTest, account, http_call, main, wait_for

BALANCED = {"SWITCHYARD_ROUTE_STRATEGY": "balanced"}
INCLUDE = ["reasoning.encrypted_content"]


def served_by(resp):
    return resp.headers.get("x-switchyard-account")


def user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def turn(history, text, stream=False):
    body = {"model": "gpt-test", "store": False, "include": INCLUDE, "input": history + [user(text)]}
    if stream:
        body["stream"] = True
    return body


def output_of(resp):
    """The output items of a plain answer."""
    return resp.json()["output"]


def output_of_stream(s):
    """The output items of a streamed answer, from its response.completed event."""
    for ev in s.events:
        j = ev["json"] or {}
        if j.get("type") == "response.completed":
            return j["response"]["output"]
    raise AssertionError(f"no response.completed in {s!r}")


def blob_owners(mock, account):
    """(minted by, own) of each blob the account's last request carried."""
    reqs = mock.requests(account)
    return [(b["by"], b["own"]) for b in (reqs[-1].get("blobs") or [])] if reqs else None


def fake_reasoning(n=0):
    return {"type": "reasoning", "id": f"rs_fake_{n}", "summary": [{"type": "summary_text", "text": "x"}],
            "encrypted_content": "gAAAAAB" + "Zm9yZ2Vk" * 40 + f"{n:04d}"}


class BlobMoveTest(GatewayTest):

    def test_foreign_reasoning_is_dropped_whole_when_the_turn_moves(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=1,reasoning=1")),
                          account("b", self.mock.url("b", "ok,reasoning=1"))])
        r1 = g.post("/v1/responses", turn([], "first"))
        self.assertEqual(r1.status, 200, r1)
        self.assertEqual(served_by(r1), "a")
        history = [user("first")] + output_of(r1)
        self.assertIn("reasoning", [i["type"] for i in history])
        r2 = g.post("/v1/responses", turn(history, "second"))   # a answers 429 now: b serves
        self.assertEqual(r2.status, 200, r2)
        self.assertEqual(served_by(r2), "b")
        self.assertEqual(r2.headers.get("x-switchyard-moved"), "a->b")
        self.assertEqual(r2.headers.get("x-switchyard-stripped"), "dropped=1")
        b_req = self.mock.requests("b")[-1]
        self.assertEqual(b_req["blobs"], [])                     # a's blob never reached b
        self.assertEqual(b_req["input_types"], ["message", "message", "message"])
        self.assertEqual(self.mock.requests("a")[-1]["blobs"][0]["own"], True)  # the 429'd try had it, a's own
        text = wait_for(lambda: (lambda t: t if "BLOBS_STRIPPED" in t else None)(g.trace_text()),
                        what="a BLOBS_STRIPPED line")
        self.assertIn("account=b from=a dropped=1 text=0 strip_retry=0", text)
        m = http_call(g.port, "GET", "/metrics").text
        self.assertIn('switchyard_blobs_stripped_total{action="dropped"} 1', m)
        self.assertIn('switchyard_conversation_moves_total{by="blobs"} 1', m)

    def test_a_conversation_moved_twice_takes_each_accounts_own_blobs_back_to_it(self):
        # balanced: a, b, a; every account mints, every account refuses the others'
        g = self.gateway([account("a", self.mock.url("a", "ok,reasoning=1")),
                          account("b", self.mock.url("b", "ok,reasoning=1"))], env=BALANCED)
        r1 = g.post("/v1/responses", turn([], "one"))
        self.assertEqual(served_by(r1), "a")
        h = [user("one")] + output_of(r1)
        r2 = g.post("/v1/responses", turn(h, "two"))
        self.assertEqual((r2.status, served_by(r2)), (200, "b"), r2)
        h = h + [user("two")] + output_of(r2)
        r3 = g.post("/v1/responses", turn(h, "three"))
        self.assertEqual((r3.status, served_by(r3)), (200, "a"), r3)
        self.assertEqual(r3.headers.get("x-switchyard-moved"), "b->a")
        # a got its own blob back, and not b's
        self.assertEqual(blob_owners(self.mock, "a"), [("a", True)])
        types = self.mock.requests("a")[-1]["input_types"]
        self.assertEqual(types.count("reasoning"), 1, types)

    def test_blobs_minted_in_a_stream_are_recorded_from_its_finished_items(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=1,reasoning=1")),
                          account("b", self.mock.url("b", "ok,reasoning=1"))])
        s = g.stream("/v1/responses", turn([], "first", stream=True))
        self.assertEqual(s.status, 200, s)
        h = [user("first")] + output_of_stream(s)
        s2 = g.stream("/v1/responses", turn(h, "second", stream=True))
        self.assertEqual(s2.status, 200, s2)
        self.assertIn("response.completed", s2.types())
        self.assertEqual(s2.headers.get("x-switchyard-moved"), "a->b")
        self.assertEqual(self.mock.requests("b")[-1]["blobs"], [])

    def test_who_minted_a_blob_survives_a_restart(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=1,reasoning=1")),
                          account("b", self.mock.url("b", "ok,reasoning=1"))])
        r1 = g.post("/v1/responses", turn([], "first"))
        self.assertEqual(served_by(r1), "a")
        h = [user("first")] + output_of(r1)
        g.wait_request_logs(1)
        g.restart()
        r2 = g.post("/v1/responses", turn(h, "second"))
        self.assertEqual((r2.status, served_by(r2)), (200, "b"), r2)
        self.assertEqual(r2.headers.get("x-switchyard-stripped"), "dropped=1")
        self.assertEqual(self.mock.requests("b")[-1]["blobs"], [])

    def test_compaction_and_encrypted_parts_become_text_the_model_can_read(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=1,reasoning=1,compaction=1")),
                          account("b", self.mock.url("b", "ok"))])
        r1 = g.post("/v1/responses", turn([], "first"))
        self.assertEqual(served_by(r1), "a")
        out = output_of(r1)
        comp = [i for i in out if i["type"] == "compaction"]
        self.assertEqual(len(comp), 1, out)
        reasoning = [i for i in out if i["type"] == "reasoning"][0]
        # an encrypted part inside a tool output, carrying a's blob
        tool_out = {"type": "function_call_output", "call_id": "call_1",
                    "output": [{"type": "input_text", "text": "ls"},
                               {"type": "encrypted_content", "encrypted_content": reasoning["encrypted_content"]}]}
        h = [user("first")] + out + [tool_out]
        r2 = g.post("/v1/responses", turn(h, "second"))
        self.assertEqual((r2.status, served_by(r2)), (200, "b"), r2)
        self.assertEqual(r2.headers.get("x-switchyard-stripped"), "dropped=1,replaced=2")
        req = self.mock.requests("b")[-1]
        self.assertEqual(req["blobs"], [])
        # reasoning gone, compaction now a message, the tool output kept with its part as text
        self.assertEqual(req["input_types"], ["message", "message", "message", "function_call_output", "message"])


class StripRetryTest(GatewayTest):

    def strip_retry_once(self, scenario, stream=False):
        g = self.gateway([account("a", self.mock.url("a", scenario))])
        body = turn([fake_reasoning(1), user("earlier")], "now", stream=stream)
        r = g.stream("/v1/responses", body) if stream else g.post("/v1/responses", body)
        self.assertEqual(r.status, 200, r)
        reqs = self.mock.requests("a")
        self.assertEqual(len(reqs), 2, reqs)
        self.assertEqual([b["by"] for b in reqs[0]["blobs"]], [None])  # unknown: sent untouched first
        self.assertEqual(reqs[1]["blobs"], [])                          # then left out, once
        self.assertEqual(r.headers.get("x-switchyard-stripped"), "dropped=1")
        self.assertIsNone(r.headers.get("x-switchyard-moved"))  # no account moved; the blob was unknown
        text = wait_for(lambda: (lambda t: t if "REQUEST_FINAL" in t else None)(g.trace_text()),
                        what="REQUEST_FINAL")
        self.assertIn("CANDIDATE_STRIP_RETRY", text)
        self.assertIn("class=invalid_encrypted_content", text)
        m = http_call(g.port, "GET", "/metrics").text
        self.assertIn("switchyard_strip_retries_total 1", m)
        return r

    def test_strip_retry_on_invalid_encrypted_content(self):
        self.strip_retry_once("ok")

    def test_strip_retry_on_the_code_null_variant(self):
        self.strip_retry_once("ok,enc_err=null_code")

    def test_strip_retry_on_the_for_item_message(self):
        self.strip_retry_once("ok,enc_err=item")

    def test_strip_retry_on_another_organization(self):
        self.strip_retry_once("ok,enc_err=org")

    def test_strip_retry_on_function_output_that_cannot_be_decrypted(self):
        self.strip_retry_once("ok,enc_err=fn_output")

    def test_strip_retry_on_response_failed_inside_a_200_stream(self):
        s = self.strip_retry_once("ok,enc_err=stream", stream=True)
        self.assertIn("response.completed", s.types())
        self.assertNotIn("response.failed", s.types())

    def test_a_second_refusal_reaches_the_client_as_the_upstreams_error(self):
        keep_all = "local function strip(blob) return \"keep\" end\nreturn { version = 1, strip = strip }\n"
        pol = self.policy_copy({"strip.lua": keep_all})
        g = self.gateway([account("a", self.mock.url("a", "ok")), account("b", self.mock.url("b", "ok"))],
                         policies=pol)
        r = g.post("/v1/responses", turn([fake_reasoning(2)], "now"))
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.json()["error"]["code"], "invalid_encrypted_content")
        self.assertEqual(self.mock.accounts_hit(), ["a", "a"])  # once more, then never a failover loop


class UntouchedTest(GatewayTest):

    def test_a_body_without_blobs_reaches_the_upstream_byte_for_byte(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        raw = ('{"input":[{"type":"mystery_item","x":{"deep":[1,2,{"k":"v"}]},"id":"m1"},'
               '{"role":"user","content":"hi"}],  "zeta":true,"model":"gpt-test","tools":[{"type":"function",'
               '"name":"f","parameters":{"type":"object"}}]}')
        r = g.request("POST", "/v1/responses", raw.encode(), headers={"Content-Type": "application/json"})
        self.assertEqual(r.status, 200, r)
        rec = self.mock.requests("a")[-1]
        self.assertEqual(rec["body_len"], len(raw))
        self.assertEqual(rec["input_types"], ["mystery_item", "message"])

    def test_own_and_unknown_blobs_pass_untouched_and_unknown_item_types_stay(self):
        g = self.gateway([account("a", self.mock.url("a", "ok,reasoning=1,accept_foreign=1"))])
        r1 = g.post("/v1/responses", turn([], "first"))
        h = [user("first")] + output_of(r1) + [fake_reasoning(3), {"type": "mystery_item", "v": 1}]
        r2 = g.post("/v1/responses", turn(h, "second"))
        self.assertEqual(r2.status, 200, r2)
        self.assertIsNone(r2.headers.get("x-switchyard-stripped"))
        rec = self.mock.requests("a")[-1]
        self.assertEqual(sorted(b["by"] or "-" for b in rec["blobs"]), ["-", "a"])
        self.assertIn("mystery_item", rec["input_types"])
        self.assertEqual(rec["body_len"], len(json.dumps(turn(h, "second")).encode()))



def text_of(resp):
    return "".join(c.get("text", "") for i in resp.json()["output"] if i["type"] == "message"
                   for c in i["content"])


def text_of_stream(s):
    return "".join((ev["json"] or {}).get("delta", "") for ev in s.events
                   if (ev["json"] or {}).get("type") == "response.output_text.delta")


def chained(prev, text, stream=False):
    body = {"model": "gpt-test", "input": text}
    if prev:
        body["previous_response_id"] = prev
    if stream:
        body["stream"] = True
    return body


def completed_id(s):
    for ev in s.events:
        j = ev["json"] or {}
        if j.get("type") == "response.completed":
            return j["response"]["id"]
    raise AssertionError(f"no response.completed in {s!r}")


class ChainTest(GatewayTest):
    """previous_response_id chains: the gateway records each turn it relays with
    store (the default) and rebuilds the chain for another account when the
    owner cannot serve."""

    def chain_of_three_moving_mid_chain(self, stream, restart=False):
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=2,echo_input=1")),
                          account("b", self.mock.url("b", "status=429,ok_first=2,echo_input=1")),
                          account("c", self.mock.url("c", "ok,echo_input=1"))])

        def ask(prev, text):
            if stream:
                s = g.stream("/v1/responses", chained(prev, text, stream=True))
                self.assertEqual(s.status, 200, s)
                return s, completed_id(s), text_of_stream(s)
            r = g.post("/v1/responses", chained(prev, text))
            self.assertEqual(r.status, 200, r)
            return r, r.json()["id"], text_of(r)

        r1, id1, t1 = ask(None, "one")
        self.assertEqual(served_by(r1), "a")
        self.assertIn("[chain=0 items=1]", t1)
        r2, id2, t2 = ask(id1, "two")
        self.assertEqual(served_by(r2), "a")
        self.assertIn("[chain=1 items=1]", t2)        # a follows its own stored chain
        g.wait_request_logs(2)
        if restart:
            wait_for(lambda: len(g.query("SELECT response_id FROM conversations")) >= 2,
                     what="two recorded turns")
            g.restart()
        # a answers 429 now: the third turn is rebuilt from the gateway's record for b
        r3, id3, t3 = ask(id2, "three")
        self.assertEqual(served_by(r3), "b")
        self.assertEqual(r3.headers.get("x-switchyard-moved"), "a->b")
        self.assertIn("[chain=0 items=5]", t3)         # one, out1, two, out2, three; no previous_response_id
        self.assertTrue(id3.startswith("resp_b_"), id3)
        breq = self.mock.requests("b")[-1]
        self.assertIsNone(breq["previous_response_id"])
        self.assertEqual(breq["input_items"], 5)
        # the record keeps the client's own turn, not the rebuilt whole (a later move must not repeat items)
        rec = wait_for(lambda: g.query("SELECT input_json, previous_response_id FROM conversations "
                                       "WHERE response_id = ?", (id3,)), what="the moved turn recorded")
        self.assertEqual(len(json.loads(rec[0]["input_json"])), 1, rec[0]["input_json"])
        self.assertEqual(rec[0]["previous_response_id"], id2)
        # the chain goes on at b, natively
        r4, id4, t4 = ask(id3, "four")
        self.assertEqual(served_by(r4), "b")
        self.assertIn("[chain=1 items=1]", t4)
        # b answers 429 now: moved a second time, the whole conversation once, nothing repeated
        r5, id5, t5 = ask(id4, "five")
        self.assertEqual(served_by(r5), "c")
        self.assertEqual(r5.headers.get("x-switchyard-moved"), "b->c")
        self.assertIn("[chain=0 items=9]", t5)         # one..four with their outputs, then five
        text = wait_for(lambda: (lambda t: t if t.count("REQUEST_FINAL") >= 5 else None)(g.trace_text()),
                        what="five REQUEST_FINAL lines")
        self.assertIn("by=previous_response_id turns=2", text)
        self.assertIn("by=previous_response_id turns=4", text)
        m = http_call(g.port, "GET", "/metrics").text
        self.assertIn('switchyard_conversation_moves_total{by="previous_response_id"} 2', m)

    def test_a_chain_of_three_turns_moves_mid_chain_plain(self):
        self.chain_of_three_moving_mid_chain(stream=False)

    def test_a_chain_of_three_turns_moves_mid_chain_streamed(self):
        self.chain_of_three_moving_mid_chain(stream=True)

    def test_the_record_survives_a_restart_between_turns(self):
        self.chain_of_three_moving_mid_chain(stream=False, restart=True)

    def test_a_chain_the_gateway_did_not_store_cannot_move_and_says_why(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=1")),
                          account("b", self.mock.url("b"))])
        r1 = g.post("/v1/responses", {"model": "gpt-test", "input": "one", "store": False})
        self.assertEqual(served_by(r1), "a")
        r2 = g.post("/v1/responses", chained(r1.json()["id"], "two"))
        self.assertOpenAIError(r2, 503)
        self.assertIn("cannot move to another account", r2.json()["error"]["message"])
        self.assertEqual(self.mock.accounts_hit(), ["a", "a"])   # never b with a chain it cannot read

    def test_an_unknown_previous_response_id_reaches_an_upstream_that_says_so(self):
        g = self.gateway([account("a", self.mock.url("a"))])
        r = g.post("/v1/responses", chained("resp_nobody_1", "two"))
        self.assertOpenAIError(r, 400)
        self.assertEqual(r.json()["error"]["code"], "previous_response_not_found")

    def test_get_and_delete_of_a_stored_response_go_to_its_account(self):
        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b"))],
                         env=BALANCED)
        ida = g.post("/v1/responses", chained(None, "one")).json()["id"]
        idb = g.post("/v1/responses", chained(None, "two")).json()["id"]
        self.assertTrue(ida.startswith("resp_a_") and idb.startswith("resp_b_"), (ida, idb))
        for rid, acct in ((idb, "b"), (ida, "a")):
            r = g.get(f"/v1/responses/{rid}")
            self.assertEqual(r.status, 200, r)
            self.assertEqual((served_by(r), r.json()["id"]), (acct, rid))
        r = g.request("DELETE", f"/v1/responses/{ida}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json(), {"id": ida, "object": "response.deleted", "deleted": True})
        r = g.get(f"/v1/responses/{ida}")                      # gone at a: its 404, a not cooled down
        self.assertOpenAIError(r, 404)
        self.assertEqual(served_by(g.post("/v1/responses", chained(None, "x"))), "a")
        r = g.get("/v1/responses/resp_never_relayed")
        self.assertOpenAIError(r, 404)
        self.assertEqual(r.json()["error"]["code"], "response_not_found")
        self.assertOpenAIError(g.post("/v1/responses/" + ida, {}), 405)
        wait_for(lambda: not g.query("SELECT 1 FROM conversations WHERE response_id = ?", (ida,)),
                 what="the deleted turn gone from the record")

    def test_a_stored_response_whose_account_rests_is_answered_from_the_record(self):
        # a stores the response, then hits a rate limit and rests: GET and input_items come
        # from the gateway's record instead of a 503 naming previous_response_id
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=1"))])
        r1 = g.post("/v1/responses", chained(None, "one"))
        rid = r1.json()["id"]
        wait_for(lambda: g.query("SELECT 1 FROM conversations WHERE response_id = ?", (rid,)), what="the record")
        self.assertOpenAIError(g.post("/v1/responses", chained(None, "two")), 429)   # a rests now
        hits = len(self.mock.requests("a"))
        r = g.get(f"/v1/responses/{rid}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("x-switchyard-record"), "1", r.headers)
        self.assertEqual((r.json()["id"], r.json()["output"]), (rid, r1.json()["output"]))
        r = g.get(f"/v1/responses/{rid}/input_items")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["object"], "list")
        self.assertEqual(len(self.mock.requests("a")), hits, "a resting account was asked")
        # a response the gateway has no record of, its account resting: the error names the call
        r = g.get("/v1/responses/resp_a_999")
        self.assertOpenAIError(r, 404)

    def test_a_405_or_501_to_get_or_delete_is_an_answer_about_the_call_and_the_record_answers_it(self):
        for status in (405, 501):
            self.mock.reset()
            g = self.gateway([account("a", self.mock.url("a", f"ok,stored={status}"))])
            r1 = g.post("/v1/responses", chained(None, "one"))
            rid = r1.json()["id"]
            wait_for(lambda: g.query("SELECT 1 FROM conversations WHERE response_id = ?", (rid,)), what="the record")
            # the relay has no stored-response calls: the gateway's record answers them
            r = g.get(f"/v1/responses/{rid}")
            self.assertEqual((r.status, r.headers.get("x-switchyard-record")), (200, "1"), r)
            self.assertEqual(r.json()["output"], r1.json()["output"])
            r = g.get(f"/v1/responses/{rid}/input_items")
            self.assertEqual((r.status, r.json()["object"]), (200, "list"), r)
            # one the gateway holds no record of: the relay's own error, which names the call
            unrecorded = g.post("/v1/responses", {"model": "gpt-test", "input": "two", "store": False}).json()["id"]
            r = g.request("DELETE", f"/v1/responses/{unrecorded}")
            self.assertOpenAIError(r, status)
            self.assertIn("DELETE /", r.json()["error"]["message"])
            r = g.request("DELETE", f"/v1/responses/{rid}")
            self.assertEqual((r.status, r.json().get("deleted")), (200, True), r)
            g.wait_request_logs(6)
            # nothing rested, nothing retried: each call asked a once, and the next turn goes to a
            self.assertFalse(g.query("SELECT 1 FROM account_state WHERE account_id = ? AND cooldown_until > 0",
                                     (g.account_id("a"),)), status)
            self.assertEqual(served_by(g.post("/v1/responses", chained(None, "x"))), "a")
            self.assertEqual([q["method"] for q in self.mock.requests("a")],
                             ["POST", "GET", "GET", "POST", "DELETE", "DELETE", "POST"], status)

    def test_a_get_whose_account_rests_without_a_record_names_the_call_not_previous_response_id(self):
        g = self.gateway([account("a", self.mock.url("a", "status=429,ok_first=1"))])
        rid = g.post("/v1/responses", {"model": "gpt-test", "input": "one", "store": False}).json()["id"]
        self.assertOpenAIError(g.post("/v1/responses", chained(None, "two")), 429)   # a rests now
        r = g.get(f"/v1/responses/{rid}")
        self.assertOpenAIError(r, 503)
        msg = r.json()["error"]["message"]
        self.assertIn(f"GET /v1/responses/{rid}", msg)
        self.assertNotIn("previous_response_id", msg)

if __name__ == "__main__":
    main()
