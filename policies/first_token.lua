-- policies/first_token.lua: how long a stream may show no progress before
-- it fails over (the time-to-first-token limit), per request. Called once
-- per streamed attempt, when its headers came, with
-- {endpoint, model, reasoning, stream, account_kind, prompt_kib}: `reasoning`
-- is the request's reasoning effort (Responses `reasoning.effort`, chat
-- `reasoning_effort`), "" when it asks for reasoning without naming an
-- effort, nil when it says nothing of reasoning; `prompt_kib` the request
-- body's size in KiB rounded up to a power of two. The limit counts from
-- the request for its first attempt (connect and headers included), from
-- the attempt's start for one after another. Returns seconds, 1..3600,
-- or { seconds = s, after_output = t }: t (1..3600) is the longest silence
-- once output reached the client; past it the stream counts as cut (and is
-- resumed where that is safe, classify.lua). Without it only the upstream
-- idle limit (SWITCHYARD_IDLE_TIMEOUT_MS, 120 s) ends a silent stream.
-- Progress is any text, refusal, reasoning (summary) or tool-call delta, an
-- output item or a terminal event; keepalives, SSE comments,
-- response.created and response.in_progress are not (docs/policies.md).
-- SWITCHYARD_TTFT_MS caps whatever this answers.
-- The built-in C default in src/policy/policy_defaults.c mirrors this rule.

local CHAT = 10        -- a stream with nothing to think about on a prompt up to CHAT_KIB: silent this long, stuck
local CHAT_KIB = 32    -- ... a longer prompt takes longer to read: CHAT_PER_DOUBLING more per doubling
local CHAT_PER_DOUBLING = 5
local CHAT_MAX = 60
local REASONING = 180  -- a reasoning model may think for minutes before its first event
local CHAT_AFTER_OUTPUT = 30 -- a chat stream silent this long mid-answer is stuck: cut it, resume elsewhere
-- a reasoning model may think again between its summary and its answer: as
-- long as before its first event (the idle limit caps it)
local REASONING_AFTER_OUTPUT = REASONING

-- a model that reasons by default: the o-series, gpt-5 (not its -chat
-- variants) and the codex models; a provider prefix ("openai/") is skipped
local function reasoning_model(model)
  local m = sy.lower(model or ""):match("([^/]*)$")
  if sy.contains(m, "chat") then return false end
  return sy.starts_with(m, "o1") or sy.starts_with(m, "o3") or sy.starts_with(m, "o4")
      or sy.starts_with(m, "gpt-5") or sy.contains(m, "codex")
end

local function chat_limit(kib)
  local s, k = CHAT, CHAT_KIB
  while k < kib and s < CHAT_MAX do s, k = s + CHAT_PER_DOUBLING, k * 2 end
  return math.min(s, CHAT_MAX)
end

local function first_token(req)
  local chat = { seconds = chat_limit(req.prompt_kib or 1), after_output = CHAT_AFTER_OUTPUT }
  if req.reasoning == "none" then return chat end
  if req.reasoning ~= nil or reasoning_model(req.model) then
    return { seconds = REASONING, after_output = REASONING_AFTER_OUTPUT }
  end
  return chat
end

return { version = 1, first_token = first_token }
