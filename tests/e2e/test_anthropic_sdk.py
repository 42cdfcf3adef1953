"""test_anthropic_sdk.py: the official Anthropic Node SDK (npm
@anthropic-ai/sdk) against the gateway, as a user's code would call it, on a
pool of ChatGPT logins (every Messages request translated to the Responses
API and adapted to the backend's rules) and on a relay that speaks Chat
Completions only. Each case runs in tests/e2e/anthropic_sdk_driver.mjs:
messages.create plain, messages.stream with finalMessage (the SDK rebuilds
the message from Anthropic's events and fails on any out of order), tool
use and its result, a streamed tool call's input JSON, countTokens (an
estimate), and an upstream refusal as the SDK's own error class. The SDK is
installed from the npm registry into .cache/anthropic of the source tree on
first use; without npm or the registry the test is skipped and says why."""

import json
import os
import shutil
import subprocess

from harness import GatewayTest, account, main, npm_package

SDK_VERSION = os.environ.get("SWITCHYARD_ANTHROPIC_SDK_VERSION", "1.17.0")
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "anthropic_sdk_driver.mjs")


def sdk():
    return npm_package(f"@anthropic-ai/sdk@{SDK_VERSION}", "anthropic",
                       os.path.join("node_modules", "@anthropic-ai", "sdk", "index.mjs"))


class AnthropicSdkTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.sdk, why = sdk()
        if not self.sdk or not shutil.which("node"):
            self.skipTest(why or "node is not installed")

    def run_case(self, g, case):
        # the SDK's base URL is the gateway's root: it appends /v1/messages itself
        p = subprocess.run(["node", DRIVER, self.sdk, f"http://127.0.0.1:{g.port}", g.key, case],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout.strip().splitlines()[-1])

    def ok(self, out):
        self.assertNotIn("error", out, out)
        return out

    def chatgpt_pool(self, scenario="ok"):
        return self.gateway([account("cg", self.mock.url("cg", scenario, v1=False), kind="chatgpt")])

    def relay_pool(self, scenario="ok"):
        return self.gateway([account("rl", self.mock.url("rl", f"{scenario},speaks=chat"), args=["--speaks", "chat"])])

    def test_create_and_stream_on_chatgpt_logins(self):
        g = self.chatgpt_pool()
        out = self.ok(self.run_case(g, "plain"))
        self.assertEqual((out["type"], out["role"], out["stop_reason"]), ("message", "assistant", "end_turn"))
        self.assertEqual(out["content"], [{"type": "text", "text": "hello from cg"}])
        self.assertGreater(out["usage"]["output_tokens"], 0)
        out = self.ok(self.run_case(g, "stream"))
        self.assertEqual((out["text"], out["deltas"], out["stop_reason"]), ("hello from cg", "hello from cg", "end_turn"))
        self.assertEqual(out["events"][0], "message_start")
        self.assertEqual(out["events"][-1], "message_stop")
        self.assertEqual([r.get("violations") or [] for r in self.mock.requests("cg")], [[], []])

    def test_create_and_stream_on_a_chat_only_relay(self):
        g = self.relay_pool()
        self.assertEqual(self.ok(self.run_case(g, "plain"))["content"][0]["text"], "hello from rl")
        self.assertEqual(self.ok(self.run_case(g, "stream"))["text"], "hello from rl")

    def test_tool_use_and_its_result(self):
        for g, name in ((self.chatgpt_pool("ok,tool_call=1"), "cg"), (self.relay_pool("ok,tool_call=1"), "rl")):
            out = self.ok(self.run_case(g, "tools"))
            self.assertEqual(out["stop_reason"], "tool_use", name)
            self.assertEqual(len(out["uses"]), 1, out)
            self.assertIsInstance(out["uses"][0]["input"], dict)
            self.assertTrue(out["uses"][0]["id"], out)
            out = self.ok(self.run_case(g, "stream_tools"))
            self.assertEqual(out["stop_reason"], "tool_use", name)
            self.assertEqual(json.loads(out["json"]), out["uses"][0]["input"])

    def test_count_tokens_answers(self):
        out = self.ok(self.run_case(self.chatgpt_pool(), "count"))
        self.assertGreater(out["input_tokens"], 0)

    def test_an_upstream_refusal_is_the_sdks_own_error(self):
        out = self.run_case(self.relay_pool("status=400"), "refused")
        self.assertEqual(out["error"]["class"], "BadRequestError", out)
        self.assertEqual((out["error"]["status"], out["error"]["type"]), (400, "invalid_request_error"))
        out = self.run_case(self.relay_pool("status=429"), "refused")
        self.assertEqual(out["error"]["class"], "OverloadedError", out)  # 529, which the SDK retries
        self.assertEqual((out["error"]["status"], out["error"]["type"]), (529, "overloaded_error"))


if __name__ == "__main__":
    main()
