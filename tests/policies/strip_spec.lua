-- strip_spec.lua: policies/strip.lua: what an account-bound blob becomes on its
-- way to an account that did not mint it.
local function B(o)
  local b = { item_type = "reasoning", in_part = false, origin = "a", origin_kind = "chatgpt",
              target = "b", target_kind = "chatgpt", strip_retry = false }
  for k, v in pairs(o or {}) do b[k] = v end
  return b
end

describe("strip", function()
  it("another account's reasoning item is dropped whole", function()
    expect(strip(B{})).to_be("drop")
    expect(strip(B{ target_kind = "api_key" })).to_be("drop")
  end)
  it("the target's own blob stays", function()
    expect(strip(B{ origin = "b" })).to_be("keep")
  end)
  it("a blob of unknown origin passes untouched", function()
    expect(strip(B{ origin = "", origin_kind = "" })).to_be("keep")
    expect(strip(B{ origin = "", item_type = "compaction" })).to_be("keep")
  end)
  it("after the target refused a blob, unknown ones go too", function()
    expect(strip(B{ origin = "", strip_retry = true })).to_be("drop")
    expect(strip(B{ origin = "", strip_retry = true, in_part = true,
                    item_type = "function_call_output" })).to_be("text")
  end)
  it("a compaction becomes text the model can read", function()
    expect(strip(B{ item_type = "compaction" })).to_be("text")
    expect(strip(B{ item_type = "compaction_summary" })).to_be("text")
  end)
  it("an encrypted part of a message or a tool output becomes text", function()
    expect(strip(B{ item_type = "message", in_part = true })).to_be("text")
    expect(strip(B{ item_type = "function_call_output", in_part = true })).to_be("text")
  end)
  it("an unknown item type holding a blob of its own is dropped", function()
    expect(strip(B{ item_type = "agent_message_v9" })).to_be("drop")
  end)
end)
