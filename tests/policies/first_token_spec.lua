-- first_token_spec.lua: policies/first_token.lua: how long a stream may
-- show no progress before it fails over.
local function R(o)
  local r = { endpoint = "/v1/chat/completions", model = "gpt-4o", stream = true, account_kind = "api_key" }
  for k, v in pairs(o or {}) do r[k] = v end
  return r
end

describe("first_token", function()
  it("a silent chat stream of a non-reasoning model on a small prompt fails over after 10 s", function()
    eq(first_token(R{}), 10)
    eq(first_token(R{ endpoint = "/v1/responses", model = "gpt-4.1", account_kind = "chatgpt" }), 10)
    eq(first_token(R{ model = "gpt-test", prompt_kib = 32 }), 10)
  end)
  it("a longer prompt takes longer to read: 5 s more per doubling above 32 KiB, 60 s at most", function()
    eq(first_token(R{ prompt_kib = 64 }), 15)
    eq(first_token(R{ prompt_kib = 256 }), 25)
    eq(first_token(R{ prompt_kib = 1024 * 1024 }), 60)
    eq(first_token(R{ model = "o3", prompt_kib = 1024 * 1024 }), 180) -- reasoning keeps its own
  end)
  it("a request asking for reasoning keeps the long limit, whatever the model", function()
    eq(first_token(R{ reasoning = "high" }), 180)
    eq(first_token(R{ reasoning = "minimal", endpoint = "/v1/responses" }), 180)
    eq(first_token(R{ reasoning = "" }), 180) -- reasoning asked for without an effort
  end)
  it("reasoning effort none is a chat stream even on a reasoning model", function()
    eq(first_token(R{ model = "gpt-5", reasoning = "none" }), 10)
  end)
  it("a reasoning model keeps the long limit when the request says nothing of reasoning", function()
    for _, m in ipairs({ "o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5.1-codex", "GPT-5", "openai/o3", "codex-mini-latest" }) do
      eq(first_token(R{ model = m }), 180)
    end
  end)
  it("the chat variants of reasoning families answer at once", function()
    eq(first_token(R{ model = "gpt-5-chat-latest" }), 10)
  end)
  it("a request without a model is a chat stream", function()
    eq(first_token(R{ model = "" }), 10)
  end)
  it("a chat stream silent 30 s after output is cut (and resumed where safe)", function()
    local _, after = first_token(R{})
    eq(after, 30)
    _, after = first_token(R{ model = "gpt-5", reasoning = "none", endpoint = "/v1/responses" })
    eq(after, 30)
  end)
  it("a reasoning request may think again after its summary: its after-output limit is the long one", function()
    local _, after = first_token(R{ reasoning = "high" })
    eq(after, 180)
    _, after = first_token(R{ model = "o3" })
    eq(after, 180)
  end)
end)
