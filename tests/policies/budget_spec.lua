-- budget_spec.lua: policies/budget.lua: when a key's or an account's budget is used up.
local function B(o)
  local b = { kind = "key", name = "team", period = "month", usd = 50, spent = 0,
              start = 1798761600, resets_at = 1801440000, now = 1799000000 }
  for k, v in pairs(o or {}) do b[k] = v end
  return b
end

describe("budget", function()
  it("under the budget is ok", function()
    expect(budget(B{ spent = 49.99 })).to_be("ok")
    expect(budget(B{ spent = 0 })).to_be("ok")
  end)
  it("reaching the budget is over (the request that crossed it has already completed)", function()
    expect(budget(B{ spent = 50 })).to_be("over")
    expect(budget(B{ spent = 80 })).to_be("over")
  end)
  it("the same rule for accounts and for N-day periods", function()
    expect(budget(B{ kind = "account", period = "7d", usd = 5, spent = 5.01 })).to_be("over")
    expect(budget(B{ kind = "account", period = "7d", usd = 5, spent = 4 })).to_be("ok")
  end)
  it("a zero budget is no budget", function()
    expect(budget(B{ usd = 0, spent = 1000 })).to_be("ok")
  end)
  it("never falls back", function()
    expect(fallbacks()).to_be(0)
  end)
end)
