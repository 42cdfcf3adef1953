-- policies/guard.lua: the quota guard. Called with one candidate account
-- (see order.lua for its fields); returns "normal", "reserve" (only used when
-- the normal pool is empty) or "exclude" (not tried at all).
-- Usage is in percent used; -1 means unknown and never reserves.
-- The built-in C default in src/policy.c mirrors this rule.

local PRIMARY_RESERVE_AT = 95    -- 5 h window: less than 5 % left
local SECONDARY_RESERVE_AT = 90  -- weekly window: less than 10 % left

local function guard(acct)
  if acct.primary_used_pct >= PRIMARY_RESERVE_AT then return "reserve" end
  if acct.secondary_used_pct >= SECONDARY_RESERVE_AT then return "reserve" end
  return "normal"
end

return { version = 1, guard = guard }
