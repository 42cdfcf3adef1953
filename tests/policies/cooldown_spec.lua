-- cooldown_spec.lua: policies/cooldown.lua: the 429/quota ladder and fixed rests.
local S, NOW = fixtures.state, fixtures.NOW

-- Climbs the ladder `n` times with 429s `gap` seconds apart; returns the seconds seen.
local function climb(class, n, gap)
  local st, seen, now = S(), {}, NOW
  for i = 1, n do
    local secs, step = cooldown(st, class, now)
    seen[i] = secs
    st = S{ ladder_step = step, last_429_at = now }
    now = now + gap
  end
  return seen
end

describe("cooldown", function()
  it("429 ladder: 45 -> 300 -> 1800 -> 7200 and stays at 7200", function()
    eq(climb("rate_limit", 6, 60), { 45, 300, 1800, 7200, 7200, 7200 })
  end)

  it("quota uses the same ladder", function()
    eq(climb("quota", 4, 60), { 45, 300, 1800, 7200 })
  end)

  it("first 429 is step 1", function()
    local secs, step = cooldown(S(), "rate_limit", NOW)
    expect(secs).to_be(45)
    expect(step).to_be(1)
  end)

  it("a 429 more than 30 min after the previous one resets to step 1", function()
    local secs, step = cooldown(S{ ladder_step = 3, last_429_at = NOW - 1801 }, "rate_limit", NOW)
    expect(secs).to_be(45)
    expect(step).to_be(1)
  end)

  it("exactly 30 min later still climbs", function()
    local secs, step = cooldown(S{ ladder_step = 1, last_429_at = NOW - 1800 }, "rate_limit", NOW)
    expect(secs).to_be(300)
    expect(step).to_be(2)
  end)

  it("a 429 right after the 1800 s cooldown ended climbs to 7200", function()
    local secs, step = cooldown(S{ ladder_step = 3, last_429_at = NOW - 1810, cooldown_until = NOW - 10 },
                                "rate_limit", NOW)
    expect(secs).to_be(7200)
    expect(step).to_be(4)
  end)

  it("30 min back in service without a 429 resets, measured from the cooldown's end", function()
    local secs, step = cooldown(S{ ladder_step = 3, last_429_at = NOW - 3700, cooldown_until = NOW - 1801 },
                                "rate_limit", NOW)
    expect(secs).to_be(45)
    expect(step).to_be(1)
  end)

  it("429s spread 31 min apart never climb", function()
    eq(climb("rate_limit", 4, 31 * 60), { 45, 45, 45, 45 })
  end)

  it("honours a larger retry_after", function()
    local secs, step = cooldown(S{ retry_after = 120 }, "rate_limit", NOW)
    expect(secs).to_be(120)
    expect(step).to_be(1)
  end)

  it("ignores a smaller retry_after", function()
    expect((cooldown(S{ ladder_step = 1, last_429_at = NOW - 10, retry_after = 5 }, "rate_limit", NOW)))
      .to_be(300)
  end)

  it("honours resets_in_seconds-sized hints on quota (hours)", function()
    expect((cooldown(S{ retry_after = 4 * 3600 }, "quota", NOW))).to_be(4 * 3600)
  end)

  describe("non-ladder classes rest a fixed time and keep the ladder step", function()
    for _, case in ipairs({ { "server", 30 }, { "network", 20 }, { "timeout", 20 },
                            { "auth", 20 }, { "not_found", 20 }, { "deactivated", 20 } }) do
      local class, want = case[1], case[2]
      it(class .. " -> " .. want, function()
        local secs, step = cooldown(S{ ladder_step = 2, last_429_at = NOW - 60 }, class, NOW)
        expect(secs).to_be(want)
        expect(step).to_be(2)
      end)
    end
    it("server honours a larger retry_after", function()
      expect((cooldown(S{ retry_after = 90 }, "server", NOW))).to_be(90)
    end)
  end)

  it("classify + cooldown: a 429 then asks the ladder", function()
    local v = classify(fixtures.error_event{ status = 429 })
    expect(v.cooldown).to_be(-1)
    expect((cooldown(S(), v.class, NOW))).to_be(45)
  end)
  describe("a spent usage window rests the account exactly until it resets", function()
    it("quota with the 5 h window at 100 % rests until its reset_at", function()
      local secs, step = cooldown(S{ primary_used_pct = 100, primary_reset_at = NOW + 4321 }, "quota", NOW)
      expect(secs).to_be(4321)
      expect(step).to_be(1)
    end)

    it("a 429 with the weekly window spent rests until the weekly reset, even a short one", function()
      expect((cooldown(S{ secondary_used_pct = 100, secondary_reset_at = NOW + 10 }, "rate_limit", NOW)))
        .to_be(10)
    end)

    it("both windows spent: the later reset wins", function()
      expect((cooldown(S{ primary_used_pct = 100, primary_reset_at = NOW + 600,
                          secondary_used_pct = 100, secondary_reset_at = NOW + 90000 }, "quota", NOW)))
        .to_be(90000)
    end)

    it("the ladder still climbs underneath", function()
      local _, step = cooldown(S{ ladder_step = 2, last_429_at = NOW - 60, primary_used_pct = 100,
                                  primary_reset_at = NOW + 100 }, "rate_limit", NOW)
      expect(step).to_be(3)
    end)

    it("a window not yet spent does not decide: the ladder does", function()
      expect((cooldown(S{ primary_used_pct = 99, primary_reset_at = NOW + 4321 }, "quota", NOW))).to_be(45)
    end)

    it("a reset time already past falls back to the ladder", function()
      expect((cooldown(S{ primary_used_pct = 100, primary_reset_at = NOW - 1 }, "quota", NOW))).to_be(45)
    end)

    it("an unknown reset time falls back to the ladder", function()
      expect((cooldown(S{ primary_used_pct = 100 }, "rate_limit", NOW))).to_be(45)
    end)

    it("a larger retry_after still wins", function()
      expect((cooldown(S{ primary_used_pct = 100, primary_reset_at = NOW + 100, retry_after = 500 },
                       "quota", NOW))).to_be(500)
    end)

    it("other classes ignore the windows", function()
      expect((cooldown(S{ primary_used_pct = 100, primary_reset_at = NOW + 4321 }, "server", NOW))).to_be(30)
    end)
  end)
  -- A limit family's 429 (state.family names it): the state's ladder and
  -- windows are the family's own, and the same rules decide.
  describe("a limit family", function()
    it("rests until the family's spent window resets", function()
      local secs, step = cooldown(S{ family = "codex_bengalfox", primary_used_pct = 100,
                                     primary_reset_at = NOW + 900 }, "quota", NOW)
      expect(secs).to_be(900)
      expect(step).to_be(1)
    end)

    it("climbs its own ladder", function()
      local secs, step = cooldown(S{ family = "codex_bengalfox", ladder_step = 1, last_429_at = NOW - 60 },
                                  "rate_limit", NOW)
      expect(secs).to_be(300)
      expect(step).to_be(2)
    end)
  end)
end)
