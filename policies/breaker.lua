-- policies/breaker.lua: the circuit breaker, for every account kind. Called
-- as breaker(state, outcome, now) after every failed attempt (one that fails
-- over) and after every attempt while the breaker is not closed; state =
-- {account_id, kind, state, consecutive_failures, consecutive_successes,
-- window_requests, window_failures}, the counts already including this
-- outcome ("success" | "failure"); the window is the account's last 20
-- outcomes. Returns the new state ("closed" | "open" | "half_open") and, for
-- "open", how many seconds it stays open. After that the account is
-- half-open: one probe request at a time (C enforces it) until this hook
-- closes it. Numbers: the best-known desktop router's defaults.
-- The built-in C default in src/policy/policy.c mirrors these rules.

local OPEN_AFTER_FAILURES = 4    -- consecutive
local OPEN_ERROR_RATE = 0.6      -- failures / requests in the window ...
local OPEN_MIN_REQUESTS = 10     -- ... once it holds at least this many
local OPEN_SECONDS = 60
local CLOSE_AFTER_SUCCESSES = 2  -- consecutive, while half-open

local function breaker(st, outcome, now)
  if st.state == "closed" then
    if outcome == "failure" and (st.consecutive_failures >= OPEN_AFTER_FAILURES or
        (st.window_requests >= OPEN_MIN_REQUESTS and
         st.window_failures >= OPEN_ERROR_RATE * st.window_requests)) then
      return "open", OPEN_SECONDS
    end
    return "closed"
  end
  -- half-open (or still open): a probe's outcome
  if outcome == "failure" then return "open", OPEN_SECONDS end
  if st.consecutive_successes >= CLOSE_AFTER_SUCCESSES then return "closed" end
  return "half_open"
end

return { version = 1, breaker = breaker }
