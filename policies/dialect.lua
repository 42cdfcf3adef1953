-- policies/dialect.lua: what an upstream accepts of a request in the dialect
-- it is sent in (docs/clients.md). Called as
-- dialect({kind, client, upstream}) -> rules, where kind is the account's
-- ("api_key" | "chatgpt" | "aggregate" | "anthropic"), client the dialect the
-- client speaks and upstream the one the request is sent in ("responses" |
-- "chat" | "messages").
-- The answer is data, kept per (kind, client, upstream) until the next
-- reload: the hook runs a few times per load, never per request.
--
-- rules (every member optional):
--   stream = "always"    the upstream request always streams; a client that
--                        asked no stream gets one answer aggregated from it
--   store = false        "store": false upstream, whatever the client asked
--                        (the gateway's own conversation record then keeps
--                        what a client asked to store)
--   instructions = text  a request without instructions takes the system or
--                        developer messages that open its input (Codex
--                        sends its prompt so), else this text
--   input_list = true    a string "input" goes as one user message
--   system_role = role   a system message in "input" goes with this role
--   strip_item_ids = true input items go without their ids
--   drop = {names}       top-level fields removed
--   rename = {from = to} top-level fields renamed
--   ignore = {names}     fields a translation may leave out because the
--                        upstream ignores them anyway ("tools.<type>" for a
--                        tool type); any other field a translation cannot
--                        carry is a 400 naming it
--
-- The ChatGPT backend's rules are those its answers state (docs/clients.md,
-- "The ChatGPT backend, as it really is"); next month's refusal is a line
-- here, reloaded with SIGHUP. The built-in C default in
-- src/policy/policy_defaults.c mirrors this file.

-- what Codex itself sends as instructions when it has none of its own is its
-- long system prompt; a client that sends none gets this short one
local DEFAULT_INSTRUCTIONS = "You are a helpful assistant."

local CHATGPT_RESPONSES = {
  stream = "always",
  store = false,
  instructions = DEFAULT_INSTRUCTIONS,
  input_list = true,
  system_role = "developer",
  strip_item_ids = true,
  -- "Unsupported parameter: ..." (400)
  drop = { "max_output_tokens", "temperature", "top_p", "frequency_penalty", "presence_penalty" },
  -- a chat client's sampling settings that the Responses API has no field for:
  -- the backend decides them itself, as it decides temperature
  ignore = { "frequency_penalty", "presence_penalty", "seed", "logit_bias" },
}

-- a Responses request sent to a Chat Completions upstream: what such an
-- upstream would ignore anyway (no place for it in a chat request), and
-- the tools Codex offers that only run on the Responses API: its hosted web
-- search, and its "namespace" tools (sub-agents: their calls are named within
-- the namespace, which a chat API cannot say). Codex works on without them.
local TO_CHAT = {
  ignore = { "include", "reasoning.summary", "truncation", "metadata", "prompt_cache_key",
             "service_tier", "safety_identifier", "tools.web_search", "tools.web_search_preview",
             "tools.namespace" },
}

-- a Chat or Responses request sent to the Anthropic Messages API (an
-- anthropic account): the tools Codex offers that only run on the Responses
-- API (as for a chat upstream), a verbosity Anthropic has no setting for,
-- and the sampling settings chat tools send that Anthropic has no field for
-- (docs/clients.md, "Into the Messages API")
local TO_MESSAGES = {
  ignore = { "tools.web_search", "tools.web_search_preview", "tools.namespace", "text.verbosity", "verbosity",
             "frequency_penalty", "presence_penalty", "seed", "logit_bias" },
}

local function dialect(a)
  if a.kind == "chatgpt" and a.upstream == "responses" then return CHATGPT_RESPONSES end
  if a.upstream == "chat" and a.client == "responses" then return TO_CHAT end
  if a.upstream == "messages" and a.client ~= "messages" then return TO_MESSAGES end
  return {}
end

return { version = 1, dialect = dialect }
