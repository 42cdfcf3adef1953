-- order_spec.lua: policies/order.lua: strategies, rotation modes, reserve, preferred.
local C, X = fixtures.candidates, fixtures.ctx

-- Equal health everywhere, so P2C keeps the base order.
local function same_health(list)
  for _, c in ipairs(list) do c.success_rate, c.latency_ema_ms, c.inflight = 1, 100, 0 end
  return list
end

describe("order", function()
  describe("base order (ordered)", function()
    it("sort ASC, then updated_at DESC, then id ASC", function()
      local cands = same_health(C{
        { id = 5, sort = 2, updated_at = 10 },
        { id = 4, sort = 1, updated_at = 10 },
        { id = 3, sort = 1, updated_at = 20 },
        { id = 2, sort = 0, updated_at = 5 },
        { id = 1, sort = 0, updated_at = 5 },
      })
      -- reserves keep the base order untouched (no P2C among them)
      for _, c in ipairs(cands) do c.reserve = true end
      eq(order(cands, X{ seed = 1 }), { 1, 2, 3, 4, 5 })
      eq(order(cands, X{ seed = 99 }), { 1, 2, 3, 4, 5 })
    end)
    it("with equal health P2C only reshuffles the first three", function()
      local cands = same_health(C{ { id = 4, sort = 3 }, { id = 1, sort = 0 }, { id = 3, sort = 2 },
                                   { id = 2, sort = 1 }, { id = 5, sort = 4 } })
      for seed = 0, 30 do
        local ids = order(cands, X{ seed = seed })
        eq({ ids[4], ids[5] }, { 4, 5 })
        local head = { ids[1], ids[2], ids[3] }
        table.sort(head)
        eq(head, { 1, 2, 3 })
      end
    end)
    it("keeps every candidate", function()
      expect(order(C{ { id = 1 }, { id = 2 } }, X())).to_have_length(2)
    end)
  end)

  describe("ordered: power of two choices among the first 3", function()
    local function cands()
      return C{
        { id = 1, sort = 0, success_rate = 0.5 },
        { id = 2, sort = 1, success_rate = 0.99 },
        { id = 3, sort = 2, success_rate = 0.98 },
        { id = 4, sort = 3, success_rate = 1.0 },
      }
    end
    it("the first is always one of the first three, never the fourth", function()
      for seed = 0, 50 do
        local ids = order(cands(), X{ seed = seed })
        expect(ids[1]).to_be_less_than(4)
        expect(ids[4] == 4 or ids[1] ~= 4).to_be_true()
      end
    end)
    it("the unhealthy head loses whenever it is drawn against a healthy one", function()
      for seed = 0, 50 do
        expect(order(cands(), X{ seed = seed })[1]).not_to_be(1)
      end
    end)
    it("is deterministic for a seed", function()
      for seed = 0, 20 do
        eq(order(cands(), X{ seed = seed }), order(cands(), X{ seed = seed }))
      end
    end)
    it("different seeds spread the load over the healthy ones", function()
      local firsts = {}
      for seed = 0, 60 do firsts[order(cands(), X{ seed = seed })[1]] = true end
      ok(firsts[2] and firsts[3], "both 2 and 3 go first for some seed")
    end)
    it("only the winner moves; the rest keep their order", function()
      local ids = order(cands(), X{ seed = 7 })
      local rest = {}
      for _, id in ipairs(ids) do if id ~= ids[1] then rest[#rest + 1] = id end end
      for i = 2, #rest do expect(rest[i]).to_be_greater_than(rest[i - 1]) end
    end)
    it("fewer inflight wins when success rates are close", function()
      local list = C{ { id = 1, sort = 0, inflight = 3 }, { id = 2, sort = 1, inflight = 0 } }
      expect(order(list, X{ seed = 5 })[1]).to_be(2)
    end)
    it("an account with no latency history is not faster: the head of the sort order serves", function()
      for seed = 0, 40 do
        local list = C{ { id = 1, sort = 0, latency_ema_ms = 800 }, { id = 2, sort = 1, latency_ema_ms = 0 } }
        expect(order(list, X{ seed = seed })[1]).to_be(1)
      end
    end)
    it("equal health: the head of the sort order serves for every seed", function()
      for seed = 0, 40 do
        local list = same_health(C{ { id = 7, sort = 0 }, { id = 3, sort = 1 }, { id = 5, sort = 2 } })
        expect(order(list, X{ seed = seed })[1]).to_be(7)
      end
    end)
    it("a small latency difference is not health", function()
      for seed = 0, 40 do
        local list = C{ { id = 1, sort = 0, latency_ema_ms = 300 }, { id = 2, sort = 1, latency_ema_ms = 200 } }
        expect(order(list, X{ seed = seed })[1]).to_be(1)
        -- twice as fast, but by milliseconds only
        list = C{ { id = 1, sort = 0, latency_ema_ms = 4 }, { id = 2, sort = 1, latency_ema_ms = 1 } }
        expect(order(list, X{ seed = seed })[1]).to_be(1)
      end
    end)
    it("health lost to failures recovers with time (60 s half-life)", function()
      local function list(age)
        return C{ { id = 1, sort = 0, success_rate = 0.5, health_age_s = age }, { id = 2, sort = 1 } }
      end
      for seed = 0, 40 do
        expect(order(list(0), X{ seed = seed })[1]).to_be(2)
        expect(order(list(30), X{ seed = seed })[1]).to_be(2)  -- 0.65 recovered: still clearly worse
        expect(order(list(300), X{ seed = seed })[1]).to_be(1) -- 0.98: back to the head
      end
    end)
    it("lower latency wins when success and inflight tie", function()
      local list = C{ { id = 1, sort = 0, latency_ema_ms = 900 }, { id = 2, sort = 1, latency_ema_ms = 100 } }
      expect(order(list, X{ seed = 5 })[1]).to_be(2)
    end)
  end)

  describe("balanced: strict round-robin by account id", function()
    local list = same_health(C{ { id = 30, sort = 0 }, { id = 10, sort = 1 }, { id = 20, sort = 2 } })
    it("no cursor starts at the lowest id", function()
      eq(order(list, X{ strategy = "balanced", cursor = 0 }), { 10, 20, 30 })
    end)
    it("starts after the cursor", function()
      eq(order(list, X{ strategy = "balanced", cursor = 10 }), { 20, 30, 10 })
      eq(order(list, X{ strategy = "balanced", cursor = 20 }), { 30, 10, 20 })
    end)
    it("wraps after the highest id", function()
      eq(order(list, X{ strategy = "balanced", cursor = 30 }), { 10, 20, 30 })
    end)
    it("a vanished cursor id starts at the first id greater than it", function()
      eq(order(list, X{ strategy = "balanced", cursor = 15 }), { 20, 30, 10 })
      eq(order(list, X{ strategy = "balanced", cursor = 99 }), { 10, 20, 30 })
    end)
    it("feeding the first id back as cursor visits each account in turn", function()
      local cursor, firsts = 0, {}
      for i = 1, 6 do
        firsts[i] = order(list, X{ strategy = "balanced", cursor = cursor })[1]
        cursor = firsts[i]
      end
      eq(firsts, { 10, 20, 30, 10, 20, 30 })
    end)
  end)

  describe("reserve", function()
    it("reserve candidates go after every normal one, in base order", function()
      local list = same_health(C{
        { id = 1, sort = 0, reserve = true }, { id = 2, sort = 1 },
        { id = 3, sort = 2, reserve = true }, { id = 4, sort = 3 },
      })
      eq(order(list, X{ strategy = "balanced" }), { 2, 4, 1, 3 })
      local ids = order(list, X{ strategy = "ordered" })
      eq({ ids[3], ids[4] }, { 1, 3 })
    end)
    it("with only reserves left they are still tried", function()
      local list = C{ { id = 1, reserve = true }, { id = 2, reserve = true } }
      expect(order(list, X())).to_have_length(2)
    end)
  end)

  describe("preferred account", function()
    local list = same_health(C{ { id = 1, sort = 0 }, { id = 2, sort = 1 }, { id = 3, sort = 2, reserve = true } })
    it("rotates to the front", function()
      eq(order(list, X{ preferred = 2, strategy = "balanced" }), { 2, 1, 3 })
    end)
    it("even when it is a reserve", function()
      expect(order(list, X{ preferred = 3 })[1]).to_be(3)
    end)
    it("an unknown preferred id changes nothing", function()
      eq(order(list, X{ preferred = 42, strategy = "balanced" }), { 1, 2, 3 })
    end)
  end)

  describe("rotation modes", function()
    local list = same_health(C{
      { id = 1, kind = "chatgpt", sort = 0 }, { id = 2, kind = "aggregate", sort = 0 },
      { id = 3, kind = "api_key", sort = 1 }, { id = 4, kind = "aggregate", sort = 1 },
    })
    local function ids(rotation)
      return order(list, X{ rotation = rotation, strategy = "balanced" })
    end
    it("account_rotation: only non-aggregate kinds", function()
      eq(ids("account_rotation"), { 1, 3 })
    end)
    it("aggregate_api_rotation: only aggregates", function()
      eq(ids("aggregate_api_rotation"), { 2, 4 })
    end)
    it("hybrid_rotation: accounts first, then aggregates", function()
      eq(ids("hybrid_rotation"), { 1, 3, 2, 4 })
    end)
    it("hybrid_aggregate_first_rotation: aggregates first", function()
      eq(ids("hybrid_aggregate_first_rotation"), { 2, 4, 1, 3 })
    end)
    it("hybrid: normal aggregates come before reserve accounts", function()
      local l = same_health(C{ { id = 1, kind = "chatgpt", reserve = true }, { id = 2, kind = "aggregate" },
                               { id = 3, kind = "chatgpt" } })
      eq(order(l, X{ rotation = "hybrid_rotation", strategy = "balanced" }), { 3, 2, 1 })
    end)
  end)

  describe("weighted: smooth weighted round-robin", function()
    -- What C does after each pick (pool_swrr_advance): every candidate gains
    -- its weight, the first one gives back the total.
    local function picks(list, n)
      local seq = {}
      for _ = 1, n do
        local ids = order(list, X{ strategy = "weighted" })
        seq[#seq + 1] = ids[1]
        local total = 0
        for _, c in ipairs(list) do
          c.current_weight = c.current_weight + c.weight
          total = total + c.weight
        end
        for _, c in ipairs(list) do
          if c.id == ids[1] then c.current_weight = c.current_weight - total end
        end
      end
      return seq
    end
    it("weights 5:1:1 give nginx's sequence a a b a c a a", function()
      local list = same_health(C{ { id = 1, weight = 5 }, { id = 2, weight = 1 }, { id = 3, weight = 1 } })
      eq(picks(list, 7), { 1, 1, 2, 1, 3, 1, 1 })
    end)
    it("shares follow the weights over a cycle (3:1 -> 6 and 2 of 8)", function()
      local list = same_health(C{ { id = 1, weight = 3 }, { id = 2, weight = 1 } })
      local count = { 0, 0 }
      for _, id in ipairs(picks(list, 8)) do count[id] = count[id] + 1 end
      eq(count, { 6, 2 })
    end)
    it("is deterministic: the seed plays no part", function()
      local list = same_health(C{ { id = 1, weight = 2, current_weight = 1 }, { id = 2, weight = 2 } })
      eq(order(list, X{ strategy = "weighted", seed = 1 }), order(list, X{ strategy = "weighted", seed = 99 }))
    end)
    it("ties keep the base order", function()
      local list = same_health(C{ { id = 2, sort = 1, weight = 1 }, { id = 1, sort = 0, weight = 1 } })
      eq(order(list, X{ strategy = "weighted" }), { 1, 2 })
    end)
    it("a failing account goes after the healthy ones whatever its weight", function()
      local list = same_health(C{ { id = 1, weight = 10 }, { id = 2, weight = 1 }, { id = 3, weight = 1 } })
      list[1].success_rate = 0.2
      eq(order(list, X{ strategy = "weighted" }), { 2, 3, 1 })
    end)
    it("reserves still come after every normal account", function()
      local list = same_health(C{ { id = 1, weight = 10, reserve = true }, { id = 2, weight = 1 } })
      eq(order(list, X{ strategy = "weighted" }), { 2, 1 })
    end)
  end)

  describe("dialects and model lists (docs/clients.md)", function()
    it("an account reached by translation goes after those speaking the client's dialect", function()
      local cands = same_health(C{ { id = 1, sort = 0, translated = true }, { id = 2, sort = 0 }, { id = 3, sort = 0 } })
      for _, c in ipairs(cands) do c.reserve = false end
      local ids = order(cands, X{ seed = 7 })
      eq(ids[3], 1)
    end)
    it("an account whose upstream does not list the model goes after the translated ones", function()
      local cands = same_health(C{ { id = 1, sort = 0, unlisted = true }, { id = 2, sort = 0, translated = true },
                                   { id = 3, sort = 0 } })
      eq(order(cands, X{ seed = 1 }), { 3, 2, 1 })
    end)
    it("the demotion keeps the strategy's order among equals and never drops an account", function()
      local cands = same_health(C{ { id = 1, sort = 0 }, { id = 2, sort = 0, translated = true },
                                   { id = 3, sort = 0 }, { id = 4, sort = 0, translated = true } })
      eq(#order(cands, X{ seed = 3 }), 4)
      local ids = order(cands, X{ seed = 3 })
      eq({ ids[3], ids[4] }, { 2, 4 })
    end)
    it("ordered: the operator's sort outranks the hints (a primary whose /models omits the name first)", function()
      -- failover benchmark as published: primary sort 0 lists none of the scenario models,
      -- the fallback sort 1 maps them all; the primary is tried first
      local cands = same_health(C{ { id = 1, sort = 0, unlisted = true }, { id = 2, sort = 1 } })
      eq(order(cands, X{ seed = 1 }), { 1, 2 })
      cands = same_health(C{ { id = 1, sort = 0, translated = true }, { id = 2, sort = 1 }, { id = 3, sort = 1, unlisted = true },
                             { id = 4, sort = 1 } })
      eq(order(cands, X{ seed = 1 }), { 1, 2, 4, 3 })
    end)
    it("balanced and weighted have no sort: the hints reorder the whole group", function()
      local cands = same_health(C{ { id = 1, sort = 0, unlisted = true }, { id = 2, sort = 1 } })
      eq(order(cands, X{ strategy = "balanced", cursor = 0 }), { 2, 1 })
      eq(order(cands, X{ strategy = "weighted" }), { 2, 1 })
    end)
    it("the preferred account still goes first when it needs a translation", function()
      local cands = same_health(C{ { id = 1, sort = 0 }, { id = 2, sort = 1, translated = true } })
      eq(order(cands, X{ preferred = 2 })[1], 2)
    end)
  end)
  it("never falls back to the C default on these inputs", function()
    expect(fallbacks()).to_be(0)
  end)
end)
