-- lua/fixtures.lua: builders of the tables the hooks receive, for specs
-- (`fixtures` global of `switchyard test`). Each takes a table of overrides
-- and fills every other field the way the gateway would. Field lists:
-- docs/policies.md.
local F = {}

F.NOW = 1700000000  -- a fixed "now" (unix seconds) for cooldown specs
local next_id = 1000  -- ids given to candidates that do not name one

local function merge(base, over)
  for k, v in pairs(over or {}) do base[k] = v end
  return base
end

local function error_json(ev)
  return cjson.encode({ error = { type = ev.error_type, code = ev.error_code, message = ev.error_message } })
end

-- An upstream error response. With error_type/code/message and no body, the
-- body is the OpenAI-style JSON error object holding them.
function F.error_event(o)
  local ev = merge({ status = 500, network_error = false, timeout = false, in_stream = false,
                     retry_after = -1, account_kind = "api_key", endpoint = "/v1/responses",
                     retries = 0, alternatives = 1, random = 0.5, context_fallbacks = 0,
                     after_output = false, delivered_chars = 0, tool_call = false }, o)
  if ev.body == nil and (ev.error_type or ev.error_code or ev.error_message) then
    ev.body = error_json(ev)
  end
  return ev
end

function F.network_error(o)
  return F.error_event(merge({ status = 0, network_error = true }, o))
end

function F.timeout_event(o)
  return F.error_event(merge({ status = 0, timeout = true }, o))
end

-- An `error` event inside a 200 SSE stream, before any output.
function F.stream_error_event(o)
  local ev = merge({ status = 200, in_stream = true, account_kind = "chatgpt" }, o)
  if ev.body == nil then
    ev.body = "event: error\ndata: " .. cjson.encode({ type = "error", error = {
      type = ev.error_type, code = ev.error_code, message = ev.error_message } }) .. "\n\n"
  end
  return F.error_event(ev)
end

-- A chat stream cut (connection lost) after the client got 40 bytes of
-- text, which the gateway could continue elsewhere.
function F.cut_stream_event(o)
  return F.error_event(merge({ status = 200, in_stream = true, network_error = true, after_output = true,
                               delivered_chars = 40, continuable = true, alternatives = 1,
                               endpoint = "/v1/chat/completions" }, o))
end

-- A usage limit that ended a Responses stream after the client got 40
-- bytes of text (ChatGPT's response.failed usage_limit_reached).
function F.late_error_event(o)
  local ev = merge({ status = 200, in_stream = true, after_output = true, delivered_chars = 40,
                     continuable = true, alternatives = 1, endpoint = "/v1/responses",
                     error_code = "usage_limit_reached", error_message = "You've hit your usage limit." }, o)
  if ev.body == nil then
    ev.body = cjson.encode({ type = "response.failed", response = { status = "failed", error = {
      code = ev.error_code, message = ev.error_message } } })
  end
  return F.error_event(ev)
end

-- The ChatGPT-account usage-limit error, as it arrives in a stream.
function F.quota_stream_event(o)
  return F.stream_error_event(merge({ error_type = "usage_limit_reached",
    error_message = "You've hit your usage limit. Upgrade to Pro or try again later." }, o))
end

function F.state(o)
  return merge({ account_id = 1, ladder_step = 0, last_429_at = 0, cooldown_until = 0,
                 retry_after = -1, primary_used_pct = -1, primary_reset_at = 0,
                 secondary_used_pct = -1, secondary_reset_at = 0, family = "" }, o)
end

-- The breaker's view of an account; counts include the outcome being judged.
function F.breaker_state(o)
  return merge({ account_id = 1, kind = "api_key", state = "closed", consecutive_failures = 0,
                 consecutive_successes = 0, window_requests = 0, window_failures = 0 }, o)
end

function F.candidate(o)
  o = o or {}
  local id = o.id
  if id == nil then
    next_id = next_id + 1
    id = next_id
  end
  return merge({ id = id, name = "account-" .. id, kind = "api_key", sort = 0, updated_at = 0,
                 primary_used_pct = -1, secondary_used_pct = -1, primary_reset_at = 0,
                 secondary_reset_at = 0, primary_window_s = 0, secondary_window_s = 0,
                 plan_type = "", has_credits = -1, credits_unlimited = -1, credits_balance = -1,
                 success_rate = 1,
                 latency_ema_ms = 200, inflight = 0, max_concurrency = 0, reserve = false,
                 health_age_s = 0, weight = 1, current_weight = 0 }, o)
end

-- candidates{ {id=1}, {id=2, kind="aggregate"} } -> list of candidates
function F.candidates(list)
  local out = {}
  for i, o in ipairs(list) do out[i] = F.candidate(o) end
  return out
end

function F.ctx(o)
  return merge({ strategy = "ordered", rotation = "account_rotation", model = "gpt-5",
                 platform_key_id = 1, cursor = 0, preferred = 0, seed = 1 }, o)
end

return F
