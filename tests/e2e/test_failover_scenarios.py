"""test_failover_scenarios.py: the failover benchmark's last scenarios, each
shaped like the fault it names: a slow first token (headers at once, the
first token late), a stream cut mid-answer, a fallback that refuses an
assistant prefill, and a client that closes right after the terminal event.
docs/policies.md ("Slow first token", "Stream resume", "Accounting") says
what the gateway does in each."""

import json
import os
import re
import socket
import time

from harness import (GatewayTest, account, chat_text, is_error_event, main, response_text, source_dir, wait_for)

CHAT_STREAM = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "stream": True}
RESP_STREAM = {"model": "gpt-test", "input": "hi", "stream": True}


class SlowFirstTokenTest(GatewayTest):

    def test_silent_chat_stream_fails_over_within_the_first_token_limit(self):
        # headers at once, the first token after 20 s: the default limit of a
        # non-reasoning chat stream on a small prompt is 10 s
        g = self.gateway([account("a", self.mock.url("a", "stall,ms=20000")), account("b", self.mock.url("b"))])
        t0 = time.monotonic()
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        took = time.monotonic() - t0
        self.assertEqual(s.status, 200, s)
        self.assertEqual(chat_text(s.events), "hello from b")
        self.assertEqual([e for e in s.events if is_error_event(e)], [])
        self.assertGreater(took, 9.5)  # it waited for the limit (load only makes this longer)
        # cut by the gateway before a's first token (20 s), not answered: a's stream was left
        rec = wait_for(lambda: [r for r in self.mock.requests("a") if r["aborted"]],
                       what="a's silent stream cut by the gateway")[0]
        self.assertFalse(rec["completed"], "the silent stream was not failed over within the first token limit")
        self.assertEqual(self.mock.accounts_hit(), ["a", "b"])
        row = g.wait_request_logs(1)[-1]
        self.assertEqual([(t["account"], t["class"]) for t in json.loads(row["attempts_json"])],
                         [("a", "timeout"), ("b", "")])

    def test_the_first_token_limit_counts_from_the_request_not_from_late_headers(self):
        # a's headers come after 6 s, then it stays silent: cut 10 s after the request (4 s
        # after its headers), not 10 s after its headers
        g = self.gateway([account("a", self.mock.url("a", "stall,ms=30000,head=6000")),
                          account("b", self.mock.url("b"))])
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(chat_text(s.events), "hello from b")
        tried = json.loads(g.wait_request_logs(1)[-1]["attempts_json"])
        self.assertEqual([(t["account"], t["class"]) for t in tried], [("a", "timeout"), ("b", "")])
        # a's attempt lasted the limit from the request; from its headers it would be 16 s
        self.assertGreater(tried[0]["ms"], 9500, tried)
        self.assertLess(tried[0]["ms"], 15000, tried)

    def test_a_long_prompt_gets_a_longer_first_token_limit(self):
        # 200 KiB of prompt: 256 KiB for the policy, 25 s; a's first token after 12 s comes in time
        g = self.gateway([account("a", self.mock.url("a", "stall,ms=12000")), account("b", self.mock.url("b"))])
        body = dict(CHAT_STREAM, messages=[{"role": "user", "content": "x" * (200 << 10)}])
        s = g.stream("/v1/chat/completions", body)
        self.assertEqual(chat_text(s.events), "hello from a")
        self.assertEqual(self.mock.accounts_hit(), ["a"])

    def test_reasoning_request_is_not_cut_while_silent_longer_than_a_chat_stream_nor_while_it_shows_progress(self):
        # silent 16 s (past the chat limit), then reasoning summary deltas, then the answer
        g = self.gateway([account("a", self.mock.url("a", "stall,ms=16000,think=3,think_ms=1000")),
                          account("b", self.mock.url("b"))])
        body = dict(RESP_STREAM, reasoning={"effort": "high", "summary": "auto"})
        s = g.stream("/v1/responses", body)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(response_text(s.events), "hello from a")
        self.assertEqual(s.types().count("response.reasoning_summary_text.delta"), 3, s.types())
        self.assertEqual(s.types()[-1], "response.completed")
        self.assertEqual(self.mock.accounts_hit(), ["a"])


class ClientClosesAfterDoneTest(GatewayTest):

    def raw_stream_until(self, g, path, body, marker):
        """POSTs a stream on a raw socket, reads until marker, closes at once (unread bytes: a reset)."""
        payload = json.dumps(body).encode()
        req = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {g.key}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n").encode() + payload
        sock = socket.create_connection(("127.0.0.1", g.port), timeout=20)
        try:
            sock.sendall(req)
            got = b""
            while marker not in got:
                b = sock.recv(65536)
                if not b:
                    break
                got += b
        finally:
            sock.close()
        self.assertIn(marker, got)
        return got

    def test_stream_whose_client_closes_right_after_done_is_logged_as_served_with_its_usage(self):
        # the upstream ends its body a little after [DONE] (tail): the client is gone by then
        g = self.gateway([account("a", self.mock.url("a", "ok,tail=150"))])
        n = 30
        for i in range(n):
            if i % 3 == 2:
                self.raw_stream_until(g, "/v1/responses", RESP_STREAM, b"event: response.completed")
            else:
                self.raw_stream_until(g, "/v1/chat/completions", CHAT_STREAM, b"data: [DONE]")
        rows = g.wait_request_logs(n)
        self.assertEqual([r["status"] for r in rows], [200] * n, [(r["status"], r["error_class"]) for r in rows])
        for r in rows:
            self.assertGreater(r["total_tokens"] or 0, 0, r)
            self.assertEqual(r["error_class"] or "", "", r)
            self.assertEqual([t["outcome"] for t in json.loads(r["attempts_json"])], ["ok"], r)


class CutMidAnswerTest(GatewayTest):

    def assertResumedWhole(self, g, s, cut="a", to="b"):
        self.assertEqual(s.status, 200, s)
        self.assertFalse(s.truncated, s)
        self.assertEqual([e for e in s.events if is_error_event(e)], [], "the client saw the cut")
        # the delivered "hello from", then the continuation: the mock answers its whole text again,
        # as a model told to continue often does, and the repeat is taken out (upstream/overlap.h)
        self.assertEqual(chat_text(s.events), f"hello from {to}")
        self.assertEqual(s.events[-1]["data"].strip(), "[DONE]")
        self.assertNotIn(b"xxxx", s.raw, "the cut stream's unfinished event reached the client")
        reqs = self.mock.requests()
        self.assertEqual(reqs[-1]["account"], to)
        # no prefill to an account not declared to take one: the delivered text, then the instruction
        self.assertIsNone(reqs[-1]["prefill"])
        self.assertEqual(reqs[-1]["continued"], "hello from", "the continuation is not exactly the delivered text")
        row = g.wait_request_logs(1)[-1]
        self.assertEqual((row["status"], row["resumed"], row["error_class"] or ""), (200, 1, ""), row)
        self.assertEqual(g.log_account_name(row), to)
        return row

    def test_stream_cut_mid_answer_is_finished_on_the_next_account_by_default(self):
        # two deltas, then half an event, then the connection closes
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2,partial=8")),
                          account("b", self.mock.url("b"))])
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        row = self.assertResumedWhole(g, s)
        self.assertEqual(row["attempts"], 2, row)
        self.assertEqual([(t["account"], t["outcome"]) for t in json.loads(row["attempts_json"])],
                         [("a", "resume"), ("b", "ok")])
        self.assertGreater(row["total_tokens"] or 0, 0, row)
        self.assertEqual(self.mock.accounts_hit(), ["a", "b"])

    def test_stream_that_stalls_after_output_is_finished_on_the_next_account(self):
        # two deltas, then silence past the idle limit
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2,ms=20000")),
                          account("b", self.mock.url("b"))], env={"SWITCHYARD_IDLE_TIMEOUT_MS": "1500"})
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        row = self.assertResumedWhole(g, s)
        self.assertEqual([(t["account"], t["outcome"]) for t in json.loads(row["attempts_json"])],
                         [("a", "resume"), ("b", "ok")])


    def after_output_policies(self, seconds):
        """The bundled policies, a chat stream's silence limit after output set to seconds."""
        with open(os.path.join(source_dir(), "policies", "first_token.lua")) as f:
            text = f.read()
        text, n = re.subn(r"local CHAT_AFTER_OUTPUT = 30", f"local CHAT_AFTER_OUTPUT = {seconds}", text)
        self.assertEqual(n, 1)
        return self.policy_copy({"first_token.lua": text})

    def test_stream_silent_after_output_past_the_policy_limit_is_cut_and_resumed_before_the_idle_limit(self):
        # two deltas, then 20 s of silence; the idle limit is the default 120 s, the
        # policy's after_output 2 s: the stall is a cut at 2 s and the answer finished on b
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2,ms=20000")),
                          account("b", self.mock.url("b"))], policies=self.after_output_policies(2))
        t0 = time.monotonic()
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        took = time.monotonic() - t0
        self.assertResumedWhole(g, s)
        self.assertGreater(took, 1.9)  # it waited for the policy's limit (load only makes this longer)
        # cut by the gateway (the client left a's stream) before a's own reset at 20 s, so well before
        # the 120 s idle limit: the policy's after_output cut it
        rec = wait_for(lambda: [r for r in self.mock.requests("a") if r["aborted"]],
                       what="a's stalled stream cut by the gateway")[0]
        self.assertFalse(rec["completed"], "the stall after output was not cut at the policy's limit")

    def test_stream_with_gaps_under_the_after_output_limit_is_not_cut(self):
        # a delta every 2.5 s: under the bundled 30 s after output, served whole by a
        g = self.gateway([account("a", self.mock.url("a", "slow_stream,ms=2500,deltas=3")), account("b", self.mock.url("b"))])
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(chat_text(s.events), "hello from a")
        self.assertEqual(self.mock.accounts_hit(), ["a"])
        self.assertEqual(g.wait_request_logs(1)[-1]["resumed"], 0)

    def assertOneResponse(self, s, whole):
        """The client's Responses stream is one coherent response carrying whole."""
        self.assertEqual(s.status, 200, s)
        self.assertFalse(s.truncated, s)
        self.assertEqual([e for e in s.events if is_error_event(e)], [], "the client saw the cut")
        self.assertNotIn(b"xxxx", s.raw, "the cut stream's unfinished event reached the client")
        types = s.types()
        self.assertEqual(types.count("response.created"), 1, types)
        self.assertEqual(types.count("response.content_part.added"), 1, types)
        self.assertEqual(types.count("response.output_text.done"), 1, types)
        self.assertEqual(types.count("response.completed"), 1, types)
        self.assertEqual(types[-1], "response.completed", types)
        js = [e["json"] for e in s.events if isinstance(e["json"], dict)]
        created = next(j for j in js if j.get("type") == "response.created")["response"]
        done = js[-1]["response"]
        self.assertEqual(done["id"], created["id"], "the continuation's response id reached the client")
        deltas = [j for j in js if j.get("type") == "response.output_text.delta"]
        self.assertEqual("".join(d["delta"] for d in deltas), whole)
        self.assertEqual(len({(d["item_id"], d["output_index"], d["content_index"]) for d in deltas}), 1, deltas)
        item_id = deltas[0]["item_id"]
        text_done = next(j for j in js if j.get("type") == "response.output_text.done")
        self.assertEqual((text_done["item_id"], text_done["text"]), (item_id, whole))
        part_done = next(j for j in js if j.get("type") == "response.content_part.done")
        self.assertEqual(part_done["part"]["text"], whole)
        item_done = [j for j in js if j.get("type") == "response.output_item.done"][-1]
        self.assertEqual((item_done["item"]["id"], item_done["item"]["content"][0]["text"]), (item_id, whole))
        msgs = [o for o in done["output"] if o.get("type") == "message"]
        self.assertEqual([(m["id"], m["content"][0]["text"]) for m in msgs], [(item_id, whole)])
        seqs = [j["sequence_number"] for j in js if "sequence_number" in j]
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))), "sequence numbers are not continuous")
        return done

    def test_responses_stream_cut_mid_answer_is_finished_as_one_response(self):
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2,partial=8")),
                          account("b", self.mock.url("b"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertOneResponse(s, "hello from b")
        reqs = self.mock.requests()
        self.assertEqual(reqs[-1]["account"], "b")
        self.assertEqual(reqs[-1]["continued"], "hello from", "the continuation is not exactly the delivered text")
        row = g.wait_request_logs(1)[-1]
        self.assertEqual((row["status"], row["resumed"], row["error_class"] or ""), (200, 1, ""), row)
        self.assertEqual([(t["account"], t["outcome"]) for t in json.loads(row["attempts_json"])],
                         [("a", "resume"), ("b", "ok")])
        self.assertGreater(row["total_tokens"] or 0, 0, row)
        self.assertEqual(g.log_account_name(row), "b")

    def test_responses_cut_after_a_finished_reasoning_item_keeps_it_in_the_final_output(self):
        # a reasoning item (finished) before the message: the client has it; the spliced
        # response.completed lists it before the message, and the continuation's own is not shown
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2,reasoning=1")),
                          account("b", self.mock.url("b", "ok,reasoning=1"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        done = self.assertOneResponse(s, "hello from b")
        self.assertEqual([o["type"] for o in done["output"]], ["reasoning", "message"], done["output"])
        first_rs = next(e["json"]["item"] for e in s.events if isinstance(e["json"], dict)
                        and e["json"].get("type") == "response.output_item.done")
        self.assertEqual(done["output"][0], first_rs, "the final reasoning item is not the one the client got")
        self.assertEqual(s.types().count("response.output_item.added"), 2, s.types())

    def test_responses_stream_cut_while_nobody_can_continue_fails_with_the_original_response_id(self):
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2")),
                          account("b", self.mock.url("b", "status=400"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(response_text(s.events), "hello from")
        self.assertEqual(s.types()[-1], "response.failed", s.types())
        js = [e["json"] for e in s.events if isinstance(e["json"], dict)]
        failed = js[-1]["response"]
        self.assertEqual(failed["id"], next(j for j in js if j.get("type") == "response.created")["response"]["id"])
        self.assertEqual(failed["error"]["code"], "upstream_stream_interrupted")
        self.assertIn("from account a ", failed["error"]["message"])
        row = g.wait_request_logs(1)[-1]
        self.assertEqual([(t["account"], t["outcome"]) for t in json.loads(row["attempts_json"])],
                         [("a", "resume"), ("b", "resume_failed")])


class ContinuationFormTest(GatewayTest):
    """How a continuation reaches the next account (failover benchmark S14, "fallback that
    rejects prefill"): an assistant prefill only to an account declared to take one (--prefill
    yes); every other account gets the delivered text as an assistant turn followed by the
    instruction to continue, which every chat API takes, so a fresh database never pays a
    refused prefill. A declared account that refuses is learned (stored: refused) and gets the
    instruction form at once."""

    def no_resume_cooldown(self):
        """The bundled policies, the cut account not rested (so every request here starts on it)."""
        with open(os.path.join(source_dir(), "policies", "classify.lua")) as f:
            text = f.read()
        text, n = re.subn(r'cls, cooldown = "interrupted", 20', 'cls, cooldown = "interrupted", 0', text)
        self.assertEqual(n, 1)
        return self.policy_copy({"classify.lua": text})

    def test_a_fallback_that_refuses_prefills_is_never_sent_one_it_gets_the_instruction_form(self):
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2")),
                          account("b", self.mock.url("b", "ok,prefill=0"))])
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual([e for e in s.events if is_error_event(e)], [], s.raw)
        self.assertEqual(chat_text(s.events), "hello from b")     # continuous: b's repeat taken out
        b = self.mock.requests("b")
        self.assertEqual(len(b), 1, "a refused attempt was made")
        self.assertIsNone(b[0]["prefill"])
        self.assertEqual(b[0]["continued"], "hello from")
        body = json.loads(b[0]["body"])
        self.assertEqual([m["role"] for m in body["messages"]][-2:], ["assistant", "user"])
        self.assertIn("Continue", body["messages"][-1]["content"])
        row = g.wait_request_logs(1)[-1]
        self.assertEqual([(t["account"], t["outcome"]) for t in json.loads(row["attempts_json"])],
                         [("a", "resume"), ("b", "ok")])
        wait_for(lambda: "STREAM_RESUME_OVERLAP" in g.trace_text(), what="the repeat taken out, in the trace")

    def test_a_responses_continuation_in_the_instruction_form_is_one_response(self):
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2")),
                          account("b", self.mock.url("b", "ok,prefill=0"))])
        s = g.stream("/v1/responses", RESP_STREAM)
        self.assertEqual(response_text(s.events), "hello from b")
        self.assertEqual(s.types()[-1], "response.completed")
        b = self.mock.requests("b")[0]
        self.assertEqual(b["continued"], "hello from")
        self.assertEqual(json.loads(b["body"])["input"][-1]["role"], "user")

    def test_an_account_declared_to_take_prefills_gets_one(self):
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2")),
                          account("b", self.mock.url("b"), args=["--prefill", "yes"])])
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(chat_text(s.events), "hello from b")
        b = self.mock.requests("b")
        self.assertEqual((b[0]["prefill"], b[0]["continued"]), ("hello from", None))

    def test_a_declared_account_that_refuses_is_learned_stored_and_served_in_the_other_form(self):
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2")),
                          account("b", self.mock.url("b", "ok,prefill=0"), args=["--prefill", "yes"])],
                         policies=self.no_resume_cooldown())
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual([e for e in s.events if is_error_event(e)], [], s.raw)
        self.assertEqual(chat_text(s.events), "hello from b")
        b = self.mock.requests("b")
        self.assertEqual([(q["prefill"], q["continued"]) for q in b], [("hello from", None), (None, "hello from")])
        row = g.wait_request_logs(1)[-1]
        self.assertEqual([(t["account"], t["outcome"]) for t in json.loads(row["attempts_json"])],
                         [("a", "resume"), ("b", "prefill_refused"), ("b", "ok")])
        wait_for(lambda: g.query("SELECT prefill FROM accounts WHERE name = 'b'")[0]["prefill"] == "refused" or None,
                 what="the refusal stored")
        listed = {a["name"]: a for a in json.loads(g.cli("account", "list", "--db", g.db_path, "--json").stdout)}
        self.assertEqual(listed["b"]["prefill"], "refused")
        g.restart()
        self.mock.reset()
        self.assertEqual(chat_text(g.stream("/v1/chat/completions", CHAT_STREAM).events), "hello from b")
        self.assertEqual([q["prefill"] for q in self.mock.requests("b")], [None], "a restart sent the prefill again")
        g.cli("account", "reset", "--db", g.db_path, "--name", "b")
        self.assertEqual(g.query("SELECT prefill FROM accounts WHERE name = 'b'")[0]["prefill"], "yes",
                         "a reset takes the declaration back")

    def test_the_prefill_setting_is_validated_and_exported(self):
        g = self.gateway([account("b", self.mock.url("b"), args=["--prefill", "no"])])
        g.cli("account", "update", "--db", g.db_path, "--name", "b", "--prefill", "yes")
        self.assertEqual(g.query("SELECT prefill FROM accounts WHERE name = 'b'")[0]["prefill"], "yes")
        bad = g.cli("account", "update", "--db", g.db_path, "--name", "b", "--prefill", "refused", check=False)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--prefill must be auto, yes or no", bad.stderr)
        out = g.cli("account", "export", "--db", g.db_path, "--out", "-").stdout
        self.assertIn('"prefill":"yes"', out.replace(" ", ""))

    def test_when_nobody_can_continue_the_original_cut_is_the_error(self):
        g = self.gateway([account("a", self.mock.url("a", "late_reset,after=2")),
                          account("b", self.mock.url("b", "status=400"))])
        s = g.stream("/v1/chat/completions", CHAT_STREAM)
        self.assertEqual(s.status, 200, s)
        self.assertEqual(chat_text(s.events), "hello from")
        errs = [e for e in s.events if is_error_event(e)]
        self.assertEqual(len(errs), 1, s.events)
        err = errs[0]["json"]["error"]
        self.assertEqual(err["code"], "upstream_stream_interrupted")
        self.assertIn("from account a ", err["message"])
        self.assertNotIn(b"[DONE]", s.raw)
        self.assertEqual(self.mock.accounts_hit(), ["a", "b"])
        row = g.wait_request_logs(1)[-1]
        self.assertEqual(row["error_class"], "stream_interrupted", row)
        self.assertEqual([(t["account"], t["outcome"]) for t in json.loads(row["attempts_json"])],
                         [("a", "resume"), ("b", "resume_failed")])


if __name__ == "__main__":
    main()
