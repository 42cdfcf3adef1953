-- policies/classify.lua: what an upstream failure means. Called with the
-- event table (status, body, error_type/code/message, network_error, timeout,
-- in_stream, retry_after, account_kind, endpoint, not_answer, retries,
-- alternatives, random, context_fallbacks, after_output, delivered_chars,
-- tool_call, continuable); returns
-- {action = "failover" | "return" | "retry" | "context_fallback" | "resume" | "strip_retry" | "retry_turn",
--  class = "...", cooldown = seconds | -1, after = seconds, state = "..."}.
-- cooldown = -1 asks the cooldown hook (the 429/quota ladder).
-- state (with "failover" only) takes the account out of the pool in that
-- state until an operator acts (`switchyard account reset`, or a changed
-- login through `account update` / `account import`): for refusals that
-- waiting does not heal. A plain word (a-z, 0-9, _); the gateway knows what
-- "deactivated_workspace", "workspace_denied", "region_unsupported" and
-- "key_refused" mean
-- and what to do about them (src/route/hold.c), and shows any other as a
-- refusal to look into. The request itself fails over as for any failover.
-- "retry" tries the same account again after `after` seconds (the request
-- body is sent again unchanged); "context_fallback" sends the request once
-- to a candidate declared as a larger-context fallback; "resume" (only for
-- after_output events: a stream cut after output reached the client, or
-- ended by an error there; the gateway continues only what ev.continuable
-- says it can) finishes the answer on the next candidate; "retry_turn"
-- (after_output, /v1/responses only) ends the client's stream in the shape
-- its client retries the turn in; the cooldown of an after_output verdict
-- applies whatever its action; "strip_retry" (the upstream
-- refused an account-bound blob: encrypted reasoning or compaction another
-- account minted) resends once to the same account with every blob not known
-- to be its own removed (policies/strip.lua decides how); the gateway never
-- does it twice for one request, and a second refusal reaches the client.
-- The built-in C default in src/policy/policy.c mirrors these rules.

local QUOTA_TEXTS = {
  "hit your usage limit",  -- "You've hit your usage limit" (either apostrophe)
  "usage_limit_reached",
  "quota exceeded",
  "insufficient_quota",
  "credit balance is too low",  -- the Anthropic API's 400 when the prepaid credit is gone
}
local DEACTIVATED_TEXTS = { "account_deactivated", "deactivated" }
-- Refusals of the account that waiting does not heal, as the ChatGPT backend
-- and the API send them (on 401, 402 or 403): the account is held out of the
-- pool in that state until an operator acts.
--   402 {"detail":{"code":"deactivated_workspace"}}: the ChatGPT workspace was
--       deactivated (or "This workspace has been deactivated ...").
--   403 {"detail":{"code":"invalid_workspace_selected"}}: the login's
--       workspace may not use Codex.
--   401 {"error":{"code":"account_deactivated","message":"The OpenAI account
--       associated with this API key has been deactivated. ..."}}: the API
--       account behind the key was deactivated (a 401/402/403 naming it;
--       "deactivated" elsewhere, without the code, stays a cooldown below).
--   403 {"error":{"code":"unsupported_country_region_territory","message":
--       "Country, region, or territory not supported","type":"request_forbidden"}},
--       or a 401 "Workspace is not authorized in this region.": the upstream
--       does not serve the gateway's country or region.
local HELD = {
  { "deactivated_workspace", { "deactivated_workspace", "workspace is deactivated",
                               "workspace has been deactivated" } },
  { "workspace_denied", { "invalid_workspace_selected", "workspace_access_denied" } },
  { "region_unsupported", { "unsupported_country_region_territory", "not authorized in this region" } },
  { "account_deactivated", { "account_deactivated", "account associated with this api key has been deactivated" } },
}
local HELD_STATUS = sy.set{ 401, 402, 403 }
-- An API key its upstream refuses as invalid (401 or 403): the OpenAI API's
-- 401 {"error":{"code":"invalid_api_key","message":"Incorrect API key
-- provided: sk-...","type":"invalid_request_error"}}, "incorrect_api_key",
-- 403 "invalid_key", Anthropic's 401 "invalid x-api-key". Waiting does not
-- heal it: held as "key_refused" until `account update --token` or `account
-- reset`. Only for keys: a ChatGPT login's 401 means its access token needs
-- a refresh (the gateway refreshes it first; a refused refresh is needs_login).
local KEY_REFUSED_TEXTS = { "invalid_api_key", "incorrect_api_key", "incorrect api key provided",
                            "invalid_key", "invalid api key", "invalid x-api-key" }
local KEY_REFUSED_STATUS = sy.set{ 401, 403 }
-- A model this account does not serve: the ChatGPT backend's 400 "The 'x'
-- model is not supported when using Codex with a ChatGPT account.", the
-- API's 404 model_not_found ("The model `x` does not exist or you do not
-- have access to it."). Class "model_unsupported": the gateway remembers
-- that the account does not serve the model (in memory, until a reset) and
-- moves the request on; the account is not cooled down and its health and
-- breaker are untouched (it is fine for every other model).
local MODEL_TEXTS = { "model_not_found", "not supported when using codex with a chatgpt account",
                      "does not exist or you do not have access to it" }
-- An account-bound blob the account cannot read: "The encrypted content
-- gAAA… could not be verified." (code invalid_encrypted_content or null),
-- "…for item rs_…", "…did not match the target organization", "Encrypted
-- function output content could not be decrypted or decoded."
local ENCRYPTED_CODE = { "invalid_encrypted_content" }
local ENCRYPTED_WORD = { "encrypted" }
local ENCRYPTED_TEXTS = { "could not be verified", "could not be decrypted",
                          "did not match the target organization" }

-- 4xx statuses that mean "this account, not this request": try the next one.
local FAILOVER_4XX = { [401] = "auth", [403] = "auth", [404] = "not_found",
                       [408] = "timeout", [409] = "conflict" }
local COOLDOWN_4XX = 20

-- Error codes inside a 200 stream (or a 200 plain body that is an error
-- object: ev.in_stream is set for both) that are the account's fault.
local STREAM_RATE = sy.set{ "rate_limit_exceeded", "rate_limit_error", "rate_limited" }
local STREAM_SERVER = sy.set{ "server_error", "internal_error", "internal_server_error",
  "overloaded", "overloaded_error", "server_is_overloaded", "service_unavailable", "api_error" }

-- Transient server trouble: the same account once more, after a jittered pause.
local SERVER_RETRIES = 1
local JITTER_MIN, JITTER_MAX = 0.12, 0.9     -- seconds
-- A 429/503 that says it is back within this many seconds is waited out on
-- the same account when every other candidate would change the model (or none
-- is left), at most WAIT_RETRIES times per account and request.
local WAIT_RETRY_AFTER_MAX = 5
local WAIT_RETRIES = 2
local CAPACITY_TEXTS = { "overloaded", "at capacity", "capacity_exceeded", "server_is_overloaded" }
local CONTEXT_TEXTS = { "context_length_exceeded", "maximum context length", "context window",
                        "prompt is too long" }  -- the Anthropic API's "prompt is too long: N tokens > M maximum"
-- A 404 about something the request named, not about the endpoint: an input
-- item or a previous response the upstream does not hold ("Item with id
-- 'rs_…' not found. Items are not persisted when `store` is set to false.",
-- "Previous response with id 'resp_…' not found.").
local NOT_ENDPOINT_TEXTS = { "item with id", "previous response", "previous_response_not_found",
                             "response with id" }
-- A chat-completions or Responses stream cut after text only (no tool call
-- in flight; for Responses one message being written, nothing else open)
-- is finished on the next candidate that takes an assistant prefill, the
-- delivered text sent as that prefill; only the continuation reaches the
-- client (a Responses continuation spliced into the cut response). Set to
-- false to end every cut stream of that API with the explicit interrupted
-- error instead. The gateway only keeps that text when this policy would resume.
local RESUME_CHAT_STREAMS = true
local RESUME_RESPONSES_STREAMS = true
-- A limit that ends a Responses stream after output (a usage limit, quota,
-- rate limit or capacity error event) where the answer cannot be continued
-- (a tool call already went out, nobody takes the continuation) while
-- another account can serve: the stream ends with a response.failed whose
-- code Codex retries ("upstream_limit_retry"), not with the limit's own
-- event, which Codex takes as the end of the plan. Codex sends the turn
-- again and the gateway serves it elsewhere. Set to false to give the
-- client the limit as it came.
local RETRY_TURN_RESPONSES = true

local function retry(class, after)
  return { action = "retry", class = class, after = after }
end

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

-- The state a refusal holds the account in, or nil.
local function held_state(ev)
  if not HELD_STATUS[ev.status] then return nil end
  for _, h in ipairs(HELD) do
    if mentions(ev, h[2]) then return h[1] end
  end
  if KEY_REFUSED_STATUS[ev.status] and ev.account_kind ~= "chatgpt" and mentions(ev, KEY_REFUSED_TEXTS) then
    return "key_refused"
  end
  return nil
end

local function stream_code(ev, set)
  return set[sy.lower(ev.error_code)] or set[sy.lower(ev.error_type)]
end

-- A short Retry-After worth waiting for on this account: the user's model
-- would otherwise change (or nothing else is left).
local function wait_out(ev)
  return ev.retry_after > 0 and ev.retry_after <= WAIT_RETRY_AFTER_MAX
     and ev.alternatives == 0 and ev.retries < WAIT_RETRIES
end

-- The API's rate limits are each model's ("Rate limit reached for gpt-4o in
-- organization org-... on tokens per min (TPM)"): such a 429 rests that
-- model on the account (scope "model"), which goes on serving the others. A
-- ChatGPT login's limits are the account's usage windows (a family of its
-- own is named by its headers, not here).
local function limit_scope(ev)
  local m, model = ev.error_message, ev.model
  if ev.account_kind == "chatgpt" or not m or not model or model == "" then return nil end
  if string.find(string.lower(m), "rate limit reached for " .. string.lower(model), 1, true) then
    return "model"
  end
  return nil
end

local function rate_limited(ev)
  return { action = "failover", class = "rate_limit", cooldown = -1, scope = limit_scope(ev) }
end

-- Server trouble: retry once with jitter, unless a Retry-After was given
-- (then: wait it out if short and nothing equivalent is left, else move on).
local function server_trouble(ev)
  if ev.retry_after > 0 then
    if wait_out(ev) then return retry("server", ev.retry_after) end
    return failover("server", 30)
  end
  if ev.retries < SERVER_RETRIES then
    return retry("server", JITTER_MIN + (JITTER_MAX - JITTER_MIN) * ev.random)
  end
  return failover("server", 30)
end

-- After output (the client has part of the answer): the stream was cut
-- (network_error, timeout) or an error event ended it. A limit of the
-- account cools it as it would have before output; then the answer goes on
-- elsewhere when it can (text only: ev.continuable), else a Responses
-- client is told to retry the turn when another account can serve, else
-- the client gets the error (a cut: the explicit interrupted error).
local function after_output(ev)
  local cls, cooldown
  if ev.network_error or ev.timeout then cls, cooldown = "interrupted", 20
  elseif mentions(ev, QUOTA_TEXTS) then cls, cooldown = "quota", -1
  elseif stream_code(ev, STREAM_RATE) then cls, cooldown = "rate_limit", -1
  elseif stream_code(ev, STREAM_SERVER) or mentions(ev, CAPACITY_TEXTS) then cls, cooldown = "server", 30
  else return give_back("stream") end  -- about the request, not the account: the client gets it
  local resumable = (RESUME_CHAT_STREAMS and ev.endpoint == "/v1/chat/completions")
                    or (RESUME_RESPONSES_STREAMS and ev.endpoint == "/v1/responses")
  if resumable and ev.continuable and not ev.tool_call and ev.delivered_chars > 0 then
    return { action = "resume", class = cls, cooldown = cooldown }
  end
  if cls ~= "interrupted" and RETRY_TURN_RESPONSES and ev.endpoint == "/v1/responses" and ev.alternatives > 0 then
    return { action = "retry_turn", class = cls, cooldown = cooldown }
  end
  return { action = "return", class = cls, cooldown = cls == "interrupted" and 0 or cooldown }
end

local function classify(ev)
  local s = ev.status
  if ev.after_output then return after_output(ev) end
  if (ev.status == 400 or ev.in_stream) and (mentions(ev, ENCRYPTED_CODE)
      or (mentions(ev, ENCRYPTED_WORD) and mentions(ev, ENCRYPTED_TEXTS))) then
    return { action = "strip_retry", class = "invalid_encrypted_content", cooldown = 0 }
  end
  if (ev.status == 400 or ev.status == 404 or ev.in_stream) and mentions(ev, MODEL_TEXTS) then
    return { action = "failover", class = "model_unsupported", cooldown = 0 }
  end
  local held = held_state(ev)
  if held then return { action = "failover", class = held, cooldown = 0, state = held } end
  if mentions(ev, QUOTA_TEXTS) then return failover("quota", -1) end
  if mentions(ev, DEACTIVATED_TEXTS) then return failover("deactivated", COOLDOWN_4XX) end
  if ev.timeout then return failover("timeout", 20) end
  if ev.network_error then return failover("network", 20) end
  if ev.not_answer then return failover("bad_answer", 30) end  -- a 2xx that is not an answer
  if ev.in_stream then
    if stream_code(ev, STREAM_RATE) then return rate_limited(ev) end
    if stream_code(ev, STREAM_SERVER) or mentions(ev, CAPACITY_TEXTS) then return server_trouble(ev) end
    return give_back("stream")
  end
  if s == 0 then return failover("network", 20) end
  if s == 429 then
    if wait_out(ev) then return retry("rate_limit", ev.retry_after) end
    return rate_limited(ev)
  end
  -- GET/DELETE /v1/responses/{id} (and its input_items): a 404 (not
  -- there), 405 or 501 (the upstream has no stored-response calls; the
  -- gateway's record then answers) is an answer about that call, not about
  -- the account's health
  if ev.endpoint == "/v1/responses/{id}" then
    if s == 404 then return give_back("not_found") end
    if s == 405 or s == 501 then return give_back("unsupported_call") end
  end
  -- an endpoint the upstream does not have (404/405 to /responses or
  -- /chat/completions: OpenAI's "Invalid URL (POST /v1/responses)", a relay's
  -- plain not found): it does not speak that dialect. The gateway remembers
  -- it and sends the request to the same account at once in the dialect it
  -- has left, with no cooldown (docs/clients.md); only an account that has no
  -- dialect left to try rests the cooldown given here.
  if (s == 404 or s == 405) and ev.endpoint ~= "/v1/responses/{id}" and not mentions(ev, NOT_ENDPOINT_TEXTS) then
    return failover("unknown_endpoint", COOLDOWN_4XX)
  end
  if FAILOVER_4XX[s] then return failover(FAILOVER_4XX[s], COOLDOWN_4XX) end
  if s >= 400 and s < 500 then
    if ev.context_fallbacks > 0 and mentions(ev, CONTEXT_TEXTS) then
      return { action = "context_fallback", class = "context_length", cooldown = 0 }
    end
    return give_back("request")  -- e.g. context_length_exceeded with no larger account
  end
  if s >= 200 and s < 300 then return give_back("ok") end
  return server_trouble(ev)  -- 5xx and anything unexpected
end

return { version = 1, classify = classify }
