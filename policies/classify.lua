-- policies/classify.lua: what an upstream failure means. Called with the
-- event table (status, body, error_type/code/message, network_error, timeout,
-- in_stream, retry_after, account_kind, endpoint); returns
-- {action = "failover" | "return", class = "...", cooldown = seconds | -1}.
-- cooldown = -1 asks the cooldown hook (the 429/quota ladder).
-- The built-in C default in src/policy.c mirrors these rules.

local QUOTA_TEXTS = {
  "hit your usage limit",  -- "You've hit your usage limit" (either apostrophe)
  "usage_limit_reached",
  "quota exceeded",
  "insufficient_quota",
}
local DEACTIVATED_TEXTS = { "account_deactivated", "deactivated" }

-- 4xx statuses that mean "this account, not this request": try the next one.
local FAILOVER_4XX = { [401] = "auth", [403] = "auth", [404] = "not_found",
                       [408] = "timeout", [409] = "conflict" }
local COOLDOWN_4XX = 20

-- Error codes inside a 200 stream that are the account's fault.
local STREAM_RATE = sy.set{ "rate_limit_exceeded", "rate_limit_error", "rate_limited" }
local STREAM_SERVER = sy.set{ "server_error", "internal_error", "internal_server_error",
  "overloaded", "overloaded_error", "server_is_overloaded", "service_unavailable", "api_error" }

local function failover(class, cooldown)
  return { action = "failover", class = class, cooldown = cooldown }
end

local function give_back(class)
  return { action = "return", class = class, cooldown = 0 }
end

local function mentions(ev, list)
  return sy.contains_any(ev.body, list) or sy.contains_any(ev.error_message, list)
      or sy.contains_any(ev.error_code, list) or sy.contains_any(ev.error_type, list)
end

local function stream_code(ev, set)
  return set[sy.lower(ev.error_code)] or set[sy.lower(ev.error_type)]
end

local function classify(ev)
  local s = ev.status
  if mentions(ev, QUOTA_TEXTS) then return failover("quota", -1) end
  if mentions(ev, DEACTIVATED_TEXTS) then return failover("deactivated", COOLDOWN_4XX) end
  if ev.timeout then return failover("timeout", 20) end
  if ev.network_error then return failover("network", 20) end
  if ev.in_stream then
    if stream_code(ev, STREAM_RATE) then return failover("rate_limit", -1) end
    if stream_code(ev, STREAM_SERVER) then return failover("server", 30) end
    return give_back("stream")
  end
  if s == 0 then return failover("network", 20) end
  if s == 429 then return failover("rate_limit", -1) end
  if FAILOVER_4XX[s] then return failover(FAILOVER_4XX[s], COOLDOWN_4XX) end
  if s >= 400 and s < 500 then return give_back("request") end  -- e.g. context_length_exceeded
  if s >= 200 and s < 300 then return give_back("ok") end
  return failover("server", 30)  -- 5xx and anything unexpected
end

return { version = 1, classify = classify }
