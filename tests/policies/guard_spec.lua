-- guard_spec.lua: policies/guard.lua: the quota guard thresholds.
local C = fixtures.candidate

describe("guard", function()
  it("unknown usage (-1) is normal", function()
    expect(guard(C{})).to_be("normal")
  end)
  it("primary 94.9 % used is normal", function()
    expect(guard(C{ primary_used_pct = 94.9 })).to_be("normal")
  end)
  it("primary 95 % used (5 % left) is reserve", function()
    expect(guard(C{ primary_used_pct = 95 })).to_be("reserve")
  end)
  it("primary 100 % used is reserve, not excluded", function()
    expect(guard(C{ primary_used_pct = 100 })).to_be("reserve")
  end)
  it("secondary 89.9 % used is normal", function()
    expect(guard(C{ secondary_used_pct = 89.9 })).to_be("normal")
  end)
  it("secondary 90 % used (10 % left) is reserve", function()
    expect(guard(C{ secondary_used_pct = 90 })).to_be("reserve")
  end)
  it("either window alone is enough", function()
    expect(guard(C{ primary_used_pct = 10, secondary_used_pct = 95 })).to_be("reserve")
    expect(guard(C{ primary_used_pct = 99, secondary_used_pct = -1 })).to_be("reserve")
  end)
  it("aggregate APIs with unknown usage are normal", function()
    expect(guard(C{ kind = "aggregate" })).to_be("normal")
  end)
  it("route: reserve accounts are tried only after every normal one", function()
    local cands = fixtures.candidates{
      { id = 1, sort = 0, primary_used_pct = 97 },
      { id = 2, sort = 1 },
      { id = 3, sort = 2, secondary_used_pct = 91 },
      { id = 4, sort = 3 },
    }
    eq(route(cands, fixtures.ctx{ strategy = "balanced" }), { 2, 4, 1, 3 })
  end)
end)
