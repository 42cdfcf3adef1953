-- policies/alert.lua: what the operator is told about an event. Called with
-- {kind, subject, state, text, webhook_url, now}:
--   kind     "account_needs_login" (a ChatGPT login's refresh was refused),
--            "account_held" (an account left the pool until an operator acts;
--            state: the hold, e.g. "key_refused"), "pool_exhausted" (a request
--            got the usage-limit or no_available_account answer; state:
--            "usage_limit" | "no_available_account"), "budget" (a key's or an
--            account's budget crossed a threshold; state: "80%" | "over"),
--            "breaker_open" (an account's circuit opened), "db_degraded" (the
--            database writer is failing or its file has a problem; state: the
--            problem), "test" (`switchyard alerts test`; subject "operator");
--   subject  whom it is about: an account or key name ("key NAME" /
--            "account NAME" for budgets), "pool", "database";
--   text     one line for a person, names only (never a secret);
--   webhook_url  the alert_webhook_url setting ("" none); now  unix seconds.
-- Returns nil (no alert), one post {url = "http(s)://...", body = table or
-- string, headers = {name = value}} or a list of up to 4 posts. A table body
-- is sent as JSON; a string as it is; Content-Type application/json unless
-- headers name one. The gateway has already deduplicated the event (the same
-- kind, subject and state at most once per alert_dedup_s, default 10
-- minutes; an event this hook posts nowhere does not count) and posts off
-- the loop, retrying a failure 3 times.
-- The built-in C default in src/policy/policy_defaults.c mirrors this rule.

-- A Slack-compatible body ({"text": ...}): Slack, Mattermost, Rocket.Chat,
-- Discord's /slack endpoint and most chat webhooks take it as it is.
local function alert(ev)
  if ev.webhook_url == "" then return nil end
  return { url = ev.webhook_url, body = { text = "switchyard: " .. ev.text } }
end

return { version = 1, alert = alert }
