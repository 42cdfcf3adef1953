-- exhausted_spec.lua: policies/exhausted.lua: a pool out of quota is answered
-- as a usage limit on the Responses API, anything else as unavailable.
local NOW = 1700000000
local function A(o)
  local a = { name = "a", kind = "chatgpt", why = "cooling down", last_class = "quota", back_at = NOW + 300,
              primary_used_pct = -1, secondary_used_pct = -1, primary_reset_at = 0, secondary_reset_at = 0,
              plan_type = "plus" }
  for k, v in pairs(o or {}) do a[k] = v end
  return a
end
local function X(accounts, endpoint)
  return exhausted({ endpoint = endpoint or "/v1/responses", now = NOW, accounts = accounts })
end

describe("exhausted", function()
  it("every account resting after quota: a usage limit with the soonest return", function()
    local r = X{ A{ back_at = NOW + 300 }, A{ name = "b", back_at = NOW + 120, plan_type = "pro" } }
    expect(r.shape).to_be("usage_limit")
    expect(r.resets_at).to_be(NOW + 120)
    expect(r.plan_type).to_be("pro")
  end)
  it("a spent window counts until its reset, even when the cooldown ends sooner", function()
    local r = X{ A{ back_at = NOW + 45, primary_used_pct = 100, primary_reset_at = NOW + 3600 } }
    expect(r.shape).to_be("usage_limit")
    expect(r.resets_at).to_be(NOW + 3600)
  end)
  it("a 429 ladder counts as a usage limit too", function()
    expect(X{ A{ last_class = "rate_limit" } }.shape).to_be("usage_limit")
  end)
  it("one account out for another reason keeps the 503", function()
    expect(X{ A{}, A{ name = "b", last_class = "network", back_at = NOW + 20 } }.shape).to_be("unavailable")
    expect(X{ A{}, A{ name = "b", last_class = "", back_at = 0, why = "at its concurrency limit" } }.shape)
      .to_be("unavailable")
  end)
  it("other endpoints keep the 503", function()
    expect(X({ A{} }, "/v1/chat/completions").shape).to_be("unavailable")
  end)
  it("no account at all is no usage limit", function()
    expect(X{}.shape).to_be("unavailable")
  end)
  it("an unknown reset time is 0", function()
    local r = X{ A{ back_at = 0, primary_used_pct = 100 } }
    expect(r.shape).to_be("usage_limit")
    expect(r.resets_at).to_be(0)
  end)
end)
