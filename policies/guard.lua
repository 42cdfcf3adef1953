-- policies/guard.lua: the quota guard. Called with one account's identity
-- and usage {id, name, kind, sort, updated_at, primary_used_pct,
-- secondary_used_pct, max_concurrency}; returns "normal", "reserve" (only
-- used when the normal pool is empty) or "exclude" (not tried at all). The
-- gateway keeps the verdict until the usage or the account changes, so decide
-- from the argument alone.
-- Usage is in percent used; -1 means unknown and never reserves.
-- The built-in C default in src/policy/policy.c mirrors this rule.

local PRIMARY_RESERVE_AT = 95    -- 5 h window: less than 5 % left
local SECONDARY_RESERVE_AT = 90  -- weekly window: less than 10 % left

local function guard(acct)
  if acct.primary_used_pct >= PRIMARY_RESERVE_AT then return "reserve" end
  if acct.secondary_used_pct >= SECONDARY_RESERVE_AT then return "reserve" end
  return "normal"
end

return { version = 1, guard = guard }
