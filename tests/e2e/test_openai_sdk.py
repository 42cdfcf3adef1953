"""test_openai_sdk.py: the official OpenAI Node SDK (npm openai) against the
gateway, as a user's code would call it, on the two pools where a client
used to fail: ChatGPT logins only (the backend's rules: a plain
responses.create with the SDK's defaults, and every chat.completions call,
must be adapted or translated), and a relay that speaks Chat Completions
only (every responses call translated). Each case runs in
tests/e2e/openai_sdk_driver.mjs: responses.create plain, responses.stream
with finalResponse, function tools and their outputs, a stored chain with
retrieve / inputItems.list / delete; chat.completions plain, streamed with
its usage chunk, streamed tool calls through the SDK's stream helper and
their results; a field no translation can carry refused as the SDK's
BadRequestError naming it. The SDK is installed from the npm registry into
.cache/openai of the source tree on first use; without npm or the registry
the test is skipped and says why."""

import json
import os
import shutil
import subprocess

from harness import GatewayTest, account, main, npm_package, source_dir

SDK_VERSION = os.environ.get("SWITCHYARD_OPENAI_SDK_VERSION", "6.49.0")
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openai_sdk_driver.mjs")


def sdk():
    return npm_package(f"openai@{SDK_VERSION}", "openai", os.path.join("node_modules", "openai", "index.mjs"))


class OpenAISdkTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.sdk, why = sdk()
        if not self.sdk or not shutil.which("node"):
            self.skipTest(why or "node is not installed")

    def run_case(self, g, case):
        p = subprocess.run(["node", DRIVER, self.sdk, f"http://127.0.0.1:{g.port}/v1", g.key, case],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout.strip().splitlines()[-1])
        return out

    def chatgpt_pool(self, scenario="ok"):
        return self.gateway([account("cg", self.mock.url("cg", scenario, v1=False), kind="chatgpt")])

    def relay_pool(self, scenario="ok"):
        return self.gateway([account("rl", self.mock.url("rl", f"{scenario},speaks=chat"), args=["--speaks", "chat"])])

    def ok(self, out):
        self.assertNotIn("error", out, out)
        return out

    # ------------------------------------------------------------ ChatGPT logins

    def test_responses_with_the_sdk_defaults_on_chatgpt_logins(self):
        g = self.chatgpt_pool()
        out = self.ok(self.run_case(g, "responses_plain"))
        self.assertEqual((out["text"], out["status"]), ("hello from cg", "completed"))
        self.assertEqual(out["usage"]["output_tokens"], 3)
        out = self.ok(self.run_case(g, "responses_stream"))
        self.assertEqual(out["text"], "hello from cg")  # finalResponse: the terminal event's output filled
        self.assertEqual(out["deltas"], "hello from cg")

    def test_responses_function_tools_and_a_stored_chain_on_chatgpt_logins(self):
        g = self.chatgpt_pool("ok,tool_call=1,tool_calls=2")
        out = self.ok(self.run_case(g, "responses_tools"))
        self.assertEqual(len(out["calls"]), 2)
        self.assertEqual(out["text"], "hello from cg")
        g2 = self.chatgpt_pool()
        out = self.ok(self.run_case(g2, "responses_chain"))
        self.assertEqual((out["got"], out["prev"]), (out["two"], out["one"]))
        self.assertEqual(out["text"], "hello from cg")
        self.assertGreater(out["items"], 0)
        self.assertEqual(out["gone"], 404)

    def test_chat_completions_plain_streamed_and_with_tools_on_chatgpt_logins(self):
        g = self.chatgpt_pool()
        out = self.ok(self.run_case(g, "chat_plain"))
        self.assertEqual((out["text"], out["finish"]), ("hello from cg", "stop"))
        out = self.ok(self.run_case(g, "chat_stream"))
        self.assertEqual((out["text"], out["finish"]), ("hello from cg", "stop"))
        self.assertEqual(out["usage"]["completion_tokens"], 3)
        g2 = self.chatgpt_pool("ok,tool_call=1,tool_calls=2")
        out = self.ok(self.run_case(g2, "chat_tools"))
        self.assertEqual(out["finish"], "tool_calls")
        self.assertEqual(len(out["calls"]), 2)
        self.assertTrue(all(c["id"] for c in out["calls"]))
        self.assertEqual(out["text"], "hello from cg")

    def test_a_field_no_translation_can_carry_is_the_sdks_bad_request_naming_it(self):
        g = self.chatgpt_pool()
        out = self.run_case(g, "chat_refused")
        self.assertEqual((out.get("error"), out.get("status"), out.get("param")), ("BadRequestError", 400, "n"), out)

    # ------------------------------------------------------------ a Chat-only relay

    def test_responses_plain_streamed_tools_and_chain_on_a_chat_only_relay(self):
        g = self.relay_pool()
        out = self.ok(self.run_case(g, "responses_plain"))
        self.assertEqual(out["text"], "hello from rl")
        out = self.ok(self.run_case(g, "responses_stream"))
        self.assertEqual((out["text"], out["deltas"]), ("hello from rl", "hello from rl"))
        out = self.ok(self.run_case(g, "responses_chain"))
        self.assertEqual(out["prev"], out["one"])
        self.assertEqual(out["gone"], 404)
        g2 = self.relay_pool("ok,tool_call=1,tool_calls=2")
        out = self.ok(self.run_case(g2, "responses_tools"))
        self.assertEqual(len(out["calls"]), 2)
        self.assertEqual(out["text"], "hello from rl")


if __name__ == "__main__":
    main()
