-- dialect_spec.lua: policies/dialect.lua: what each upstream kind accepts of
-- a request in the dialect it is sent in (docs/clients.md).
local function has(list, name)
  for _, v in ipairs(list) do if v == name then return true end end
  return false
end

describe("dialect", function()
  it("the ChatGPT backend streams always, stores never and requires instructions", function()
    local r = dialect({ kind = "chatgpt", client = "responses", upstream = "responses" })
    eq(r.stream, "always")
    eq(r.store, false)
    eq(r.instructions, "You are a helpful assistant.")
  end)
  it("the ChatGPT backend's refused parameters are dropped", function()
    local r = dialect({ kind = "chatgpt", client = "responses", upstream = "responses" })
    for _, f in ipairs({ "max_output_tokens", "temperature", "top_p", "frequency_penalty", "presence_penalty" }) do
      eq(has(r.drop, f), true)
    end
    eq(has(r.drop, "model"), false)
  end)
  it("the ChatGPT backend gets a list input, developer messages and items without ids", function()
    local r = dialect({ kind = "chatgpt", client = "chat", upstream = "responses" })
    eq(r.input_list, true)
    eq(r.system_role, "developer")
    eq(r.strip_item_ids, true)
  end)
  it("a chat client's penalties reach the ChatGPT backend as ignored, not refused", function()
    local r = dialect({ kind = "chatgpt", client = "chat", upstream = "responses" })
    eq(has(r.ignore, "frequency_penalty"), true)
    eq(has(r.ignore, "presence_penalty"), true)
    eq(has(r.ignore, "n"), false) -- n > 1 is never silently one answer
  end)
  it("an API key speaks each dialect as the client asked, with no rule", function()
    for _, pair in ipairs({ { "responses", "responses" }, { "chat", "chat" }, { "chat", "responses" } }) do
      local r = dialect({ kind = "api_key", client = pair[1], upstream = pair[2] })
      eq(r.stream, "as_asked")
      eq(r.store, nil)
      eq(#r.drop, 0)
      eq(#r.ignore, 0)
    end
  end)
  it("a Responses request to a chat upstream may leave out what a chat API has no place for", function()
    local r = dialect({ kind = "aggregate", client = "responses", upstream = "chat" })
    for _, f in ipairs({ "include", "reasoning.summary", "truncation", "tools.web_search", "tools.namespace" }) do
      eq(has(r.ignore, f), true)
    end
    eq(has(r.ignore, "tools.function"), false)
  end)
  it("an OpenAI request to an anthropic account may leave out what the Messages API has no place for", function()
    for _, client in ipairs({ "chat", "responses" }) do
      local r = dialect({ kind = "anthropic", client = client, upstream = "messages" })
      for _, f in ipairs({ "tools.web_search", "tools.namespace", "text.verbosity", "frequency_penalty", "seed" }) do
        eq(has(r.ignore, f), true)
      end
      eq(has(r.ignore, "n"), false) -- n > 1 is never silently one answer
      eq(has(r.ignore, "tools.function"), false)
      eq(r.stream, "as_asked")
    end
    -- a Messages client on its own API: nothing to leave out
    eq(#dialect({ kind = "anthropic", client = "messages", upstream = "messages" }).ignore, 0)
  end)
end)
