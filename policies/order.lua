-- policies/order.lua: the order candidates are tried in. Called as
-- order(candidates, ctx); each candidate is {id, name, kind, sort, updated_at,
-- primary_used_pct, secondary_used_pct, success_rate, latency_ema_ms,
-- inflight, max_concurrency, reserve, health_age_s, weight, current_weight,
-- success_rate_60s, latency_60s_ms, attempts_60s, translated, unlisted}; ctx is
-- {strategy, rotation, model,
-- platform_key_id, cursor, preferred, seed}. Returns the candidate ids in try
-- order (leaving one out means "do not try it").
--   rotation picks the groups and their order: accounts (every kind but
--     "aggregate") and/or aggregate APIs;
--   each group: normal accounts first, all reserves after every normal one;
--   strategy "ordered": sort ASC, updated_at DESC, id ASC, then the clearly
--     healthier of two random picks among the first three goes first
--     (ctx.seed); with equal health the one earlier in the sort order wins,
--     and an account with no latency history is not "faster";
--   health recovers with time: a success rate lowered by failures climbs back
--     towards 1 with a half-life of HEALTH_HALF_LIFE seconds since the
--     account's last failure (health_age_s), so a primary that failed wins
--     its place back once its outage is over (its first request after a
--     failure is a half-open probe: C sends it one request at a time);
--   strategy "balanced": strict round-robin by id, starting after ctx.cursor;
--   strategy "weighted": smooth weighted round-robin: the largest
--     current_weight + weight first (C keeps current_weight per platform key
--     + model and steps it after each pick, as nginx does), accounts whose
--     (recovered) success rate is below HEALTH_FLOOR after the healthy ones;
--   within each group, after the strategy's order, an account that does not
--     speak the client's dialect (translated: the request is translated,
--     docs/clients.md) goes after those that do, and one whose upstream's
--     /models list lacks the model (unlisted: a hint, not a refusal) after
--     both; the order among equals is kept. These are hints, so with the
--     "ordered" strategy they reorder only accounts of the same sort: an
--     operator's --sort is an explicit order and outranks them (a primary
--     whose /models omits an alias it serves is still tried first);
--   ctx.preferred, when present, goes first.
-- The built-in C default in src/policy/policy.c mirrors these rules.
--
-- How far one request may go, read once when this file loads (no call per
-- request): MAX_ATTEMPTS attempts at most (failovers and same-account
-- retries alike), and no new attempt or wait for capacity once MAX_SECONDS
-- have passed since the request arrived (until output reached the client;
-- an attempt already running is not cut). A pool of thousands of failing
-- accounts then answers within a bound instead of trying every one; the
-- rest still rest or recover for the next request.

local GROUPS = {
  account_rotation = { "account" },
  aggregate_api_rotation = { "aggregate" },
  hybrid_rotation = { "account", "aggregate" },
  hybrid_aggregate_first_rotation = { "aggregate", "account" },
}
local P2C_AMONG = 3
local SUCCESS_MARGIN = 0.05  -- success rates closer than this count as equal
local LATENCY_FACTOR = 2     -- latency decides only when one is at least this many times faster
local LATENCY_MIN_GAP = 250  -- ... and faster by at least this many ms (loopback noise is no health)
local HEALTH_HALF_LIFE = 60  -- seconds: half of the lost success rate comes back
local HEALTH_FLOOR = 0.5     -- weighted: a success rate below this demotes the account
local MAX_ATTEMPTS = 16      -- attempts per request, 1..1000
local MAX_SECONDS = 120      -- seconds per request before its answer starts, 1..3600

local function group_of(c)
  return c.kind == "aggregate" and "aggregate" or "account"
end

local function before(a, b)
  if a.sort ~= b.sort then return a.sort < b.sort end
  if a.updated_at ~= b.updated_at then return a.updated_at > b.updated_at end
  return a.id < b.id
end

-- The success rate with the time since it last changed taken into account.
local function recovered(c)
  local age = c.health_age_s
  if c.success_rate >= 1 or age <= 0 then return c.success_rate end
  return 1 - (1 - c.success_rate) * 0.5 ^ (age / HEALTH_HALF_LIFE)
end

-- Is a clearly healthier than b? Ties (and unknown latency) say no.
local function healthier(a, b)
  local ra, rb = recovered(a), recovered(b)
  if math.abs(ra - rb) > SUCCESS_MARGIN then return ra > rb end
  if a.inflight ~= b.inflight then return a.inflight < b.inflight end
  local la, lb = a.latency_ema_ms, b.latency_ema_ms
  return la > 0 and lb > 0 and la * LATENCY_FACTOR <= lb and lb - la >= LATENCY_MIN_GAP
end

-- Power of two choices among the first P2C_AMONG; returns the next seed.
local function p2c(seg, seed)
  local k = math.min(P2C_AMONG, #seg)
  if k < 2 then return seed end
  local r1 = sy.rand(seed)
  local r2 = sy.rand(r1)
  local i, j = r1 % k + 1, r2 % (k - 1) + 1
  if j >= i then j = j + 1 end
  local lo, hi = math.min(i, j), math.max(i, j)
  local win = healthier(seg[hi], seg[lo]) and hi or lo
  -- the head keeps its turn unless the winner is clearly healthier than it
  if win ~= 1 and healthier(seg[win], seg[1]) then
    table.insert(seg, 1, table.remove(seg, win))
  end
  return r2
end

-- Strict round-robin: by id, first the id after the cursor, wrapping.
local function round_robin(seg, cursor)
  table.sort(seg, function(a, b) return a.id < b.id end)
  local start = 1
  for i, c in ipairs(seg) do
    if c.id > cursor then start = i break end
  end
  local out = {}
  for k = 0, #seg - 1 do out[#out + 1] = seg[(start - 1 + k) % #seg + 1] end
  return out
end

-- Smooth weighted round-robin order: does a go before b?
local function heavier(a, b)
  local da, db = recovered(a) < HEALTH_FLOOR, recovered(b) < HEALTH_FLOOR
  if da ~= db then return db end
  return a.current_weight + a.weight > b.current_weight + b.weight
end

-- Stable insertion sort (segments are short; ties keep the base order).
local function swrr_sort(seg)
  for i = 2, #seg do
    local c, j = seg[i], i - 1
    while j >= 1 and heavier(c, seg[j]) do
      seg[j + 1] = seg[j]
      j = j - 1
    end
    seg[j + 1] = c
  end
end

-- 0 native and listed, 1 translated, 2 unlisted, 3 both.
local function penalty(c)
  return (c.unlisted and 2 or 0) + (c.translated and 1 or 0)
end

-- Stable: the candidates with a penalty after the others, in their order;
-- by_sort: only within each run of consecutive candidates of the same sort.
local function demote(seg, by_sort)
  local any = false
  for i = 1, #seg do if seg[i].translated or seg[i].unlisted then any = true break end end
  if not any then return seg end
  local out, a = {}, 1
  while a <= #seg do
    local b = a
    if by_sort then
      while b < #seg and seg[b + 1].sort == seg[a].sort do b = b + 1 end
    else
      b = #seg
    end
    for p = 0, 3 do
      for i = a, b do if penalty(seg[i]) == p then out[#out + 1] = seg[i] end end
    end
    a = b + 1
  end
  return out
end

-- Runs for every request, so it is written for the VM: numeric loops (no
-- iterator calls), one list of ids, one of reserve ids, one segment per group.
local function order(candidates, ctx)
  local n = #candidates
  local list = table.move(candidates, 1, n, 1, {})
  if n > 1 then table.sort(list, before) end
  local ids, reserve_ids, seed = {}, {}, ctx.seed
  local groups = GROUPS[ctx.rotation] or GROUPS.hybrid_rotation
  local balanced, weighted = ctx.strategy == "balanced", ctx.strategy == "weighted"
  for gi = 1, #groups do
    local g, seg = groups[gi], {}
    for i = 1, n do
      local c = list[i]
      if group_of(c) == g then
        if c.reserve then reserve_ids[#reserve_ids + 1] = c.id else seg[#seg + 1] = c end
      end
    end
    if balanced then
      seg = round_robin(seg, ctx.cursor)
    elseif weighted then
      swrr_sort(seg)
    elseif #seg > 1 then
      seed = p2c(seg, seed)
    end
    seg = demote(seg, not balanced and not weighted)
    for i = 1, #seg do ids[#ids + 1] = seg[i].id end
  end
  for i = 1, #reserve_ids do ids[#ids + 1] = reserve_ids[i] end
  if ctx.preferred ~= 0 then sy.move_to_front(ids, ctx.preferred) end
  return ids
end

return { version = 1, order = order, max_attempts = MAX_ATTEMPTS, max_seconds = MAX_SECONDS }
