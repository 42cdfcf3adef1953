-- policies/first_token.lua: how long a stream may show no progress before
-- it fails over (the time-to-first-token limit), per request. Called once
-- per streamed attempt, when its headers came, with
-- {endpoint, model, reasoning, stream, account_kind}: `reasoning` is the
-- request's reasoning effort (Responses `reasoning.effort`, chat
-- `reasoning_effort`), "" when it asks for reasoning without naming an
-- effort, nil when it says nothing of reasoning. Returns seconds, 1..3600.
-- Progress is any text, refusal, reasoning (summary) or tool-call delta, an
-- output item or a terminal event; keepalives, SSE comments,
-- response.created and response.in_progress are not (docs/policies.md).
-- SWITCHYARD_TTFT_MS caps whatever this answers.
-- The built-in C default in src/policy/policy_defaults.c mirrors this rule.

local CHAT = 15        -- a stream with nothing to think about: silent this long, it is stuck
local REASONING = 180  -- a reasoning model may think for minutes before its first event

-- a model that reasons by default: the o-series, gpt-5 (not its -chat
-- variants) and the codex models; a provider prefix ("openai/") is skipped
local function reasoning_model(model)
  local m = sy.lower(model or ""):match("([^/]*)$")
  if sy.contains(m, "chat") then return false end
  return sy.starts_with(m, "o1") or sy.starts_with(m, "o3") or sy.starts_with(m, "o4")
      or sy.starts_with(m, "gpt-5") or sy.contains(m, "codex")
end

local function first_token(req)
  if req.reasoning == "none" then return CHAT end
  if req.reasoning ~= nil or reasoning_model(req.model) then return REASONING end
  return CHAT
end

return { version = 1, first_token = first_token }
