-- policies/exhausted.lua: what a client is told when no account can serve
-- its request now. Called with {endpoint, now, accounts = {{name, kind, why,
-- last_class, back_at, primary_used_pct, secondary_used_pct, primary_reset_at,
-- secondary_reset_at, plan_type}, ...}} (every enabled account that serves
-- the endpoint; usage in percent used, -1 unknown; times in unix seconds, 0
-- unknown); returns {shape = "usage_limit", resets_at = t, plan_type = p}
-- or {shape = "unavailable"}.
-- "usage_limit" is the ChatGPT backend's own answer when a plan is spent
-- (HTTP 429, error.type "usage_limit_reached", resets_at), which Codex shows
-- as a usage limit with its reset time instead of retrying; "unavailable" is
-- the gateway's 503 no_available_account naming each account and why.
-- The built-in C default in src/policy/policy_defaults.c mirrors this rule.

-- Out for its plan's usage: resting after a quota error or a 429, or a
-- usage window spent. When it is back: its rest, or the reset of a spent
-- window, whichever is later (0 unknown); nil when out for something else.
local function out_for_usage(a, now)
  local resting = a.back_at > now and (a.last_class == "quota" or a.last_class == "rate_limit")
  local p, s = a.primary_used_pct >= 100, a.secondary_used_pct >= 100
  if not (resting or p or s) then return nil end
  local t = a.back_at > now and a.back_at or 0
  if p and a.primary_reset_at > t then t = a.primary_reset_at end
  if s and a.secondary_reset_at > t then t = a.secondary_reset_at end
  return t
end

local function exhausted(ctx)
  -- only the Responses API has this shape; other endpoints and causes keep the 503
  if ctx.endpoint ~= "/v1/responses" or #ctx.accounts == 0 then return { shape = "unavailable" } end
  local soonest, plan = 0, ""
  for _, a in ipairs(ctx.accounts) do
    local t = out_for_usage(a, ctx.now)
    if t == nil then return { shape = "unavailable" } end
    if t > 0 and (soonest == 0 or t < soonest) then soonest, plan = t, a.plan_type end
  end
  return { shape = "usage_limit", resets_at = soonest, plan_type = plan }
end

return { version = 1, exhausted = exhausted }
