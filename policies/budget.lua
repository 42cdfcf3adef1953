-- policies/budget.lua: whether a budget is used up. Called as budget(b) with
-- b = {kind ("key" | "account"), name, usd (the budget), spent (USD in the
-- current window), period ("month" | "<N>d"), start, resets_at, now};
-- returns "ok" or "over".
--   A key that is "over" gets 429 insufficient_quota; an account that is
--   "over" is skipped (reason over_budget).
--   The gateway asks when the spend changes (a request finished), when a
--   budget or the policy changes, and at start; a new window starts "ok"
--   until its first charge. Not on the per-request path.
-- Default: over once the spend reaches the budget (the request that crosses
-- it completes: its cost is only known afterwards). A soft limit or an
-- overdraft is a one-line change, e.g. `b.spent >= b.usd * 1.1`.
-- The built-in C default in src/policy/policy.c mirrors this rule.

local function budget(b)
  if b.usd > 0 and b.spent >= b.usd then return "over" end
  return "ok"
end

return { version = 1, budget = budget }
