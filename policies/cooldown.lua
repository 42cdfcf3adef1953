-- policies/cooldown.lua: how long an account rests after a failure. Called
-- as cooldown(state, class, now) with state = {account_id, ladder_step,
-- last_429_at, cooldown_until, retry_after, primary_used_pct,
-- primary_reset_at, secondary_used_pct, secondary_reset_at, family}; returns
-- seconds, new_ladder_step. family "" is the whole account; a name (e.g.
-- "codex_bengalfox") is one limit family of it, and then the ladder, the
-- cooldown and the windows in state are that family's own (only it rests).
-- 429 and quota climb a ladder (reset after 30 min in service without one); other
-- classes rest a fixed time. When the account's usage (rate-limit headers or
-- the usage poll) shows a spent window (100 % used) with a known reset time,
-- a 429 / quota error rests exactly until that window resets instead of the
-- ladder's guess. A larger Retry-After / resets_in_seconds wins.
-- The built-in C default in src/policy/policy.c mirrors these rules.

local LADDER = { 45, 300, 1800, 7200 }  -- seconds; stays on the last step
local LADDER_CLASSES = sy.set{ "rate_limit", "quota" }
-- The ladder starts over after 30 min of service without a 429. The gap is
-- measured from when the account came back (the end of its last cooldown),
-- not from the last 429: otherwise the 1800 s step itself would always reset
-- the ladder and 7200 s could never be reached.
local RESET_AFTER = 1800
local FIXED = { server = 30, network = 20, timeout = 20 }
local DEFAULT = 20                      -- other 4xx failovers (auth, not_found, ...)
local MAX = 30 * 86400

local function next_step(st, now)
  if st.ladder_step <= 0 then return 1 end
  local back = math.max(st.last_429_at, st.cooldown_until)
  if back > 0 and now - back > RESET_AFTER then return 1 end
  return math.min(st.ladder_step + 1, #LADDER)
end

-- The latest future reset among the spent windows; 0 when none is known.
local function window_reset(st, now)
  local t = 0
  if st.primary_used_pct >= 100 and st.primary_reset_at > now then t = st.primary_reset_at end
  if st.secondary_used_pct >= 100 and st.secondary_reset_at > now then
    t = math.max(t, st.secondary_reset_at)
  end
  return t
end

local function cooldown(st, class, now)
  local step, secs = st.ladder_step, FIXED[class] or DEFAULT
  if LADDER_CLASSES[class] then
    step = next_step(st, now)  -- the ladder still counts the 429
    local reset = window_reset(st, now)
    secs = reset > 0 and reset - now or LADDER[step]
  end
  if st.retry_after > secs then secs = st.retry_after end
  return sy.clamp(secs, 0, MAX), step
end

return { version = 1, cooldown = cooldown }
