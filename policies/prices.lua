-- policies/prices.lua: what a model costs, in USD per million tokens, for the
-- spend column of the request log, `switchyard usage` and budgets. Called as
-- price(model) -> {input, cached_input, output} or nil (unknown: the
-- request's cost is left empty and no budget is charged for it).
--   input: uncached input tokens; cached_input: input tokens served from the
--   prompt cache (usage *_tokens_details.cached_tokens); output: output
--   tokens (reasoning included, as the providers bill them).
--   A model not listed takes the price of the longest listed name it starts
--   with followed by "-" (dated snapshots: "gpt-4o-2024-08-06" -> "gpt-4o").
-- The figures are OpenAI's and Anthropic's list prices when this file was written: edit them
-- (or add your relay's) like any other rule, and reload with SIGHUP. The
-- gateway asks once per model and policy load, so this is not on the
-- per-request path.

local PRICES = {
  ["gpt-5"]        = { input = 1.25, cached_input = 0.125, output = 10.00 },
  ["gpt-5-codex"]  = { input = 1.25, cached_input = 0.125, output = 10.00 },
  ["gpt-5-mini"]   = { input = 0.25, cached_input = 0.025, output = 2.00 },
  ["gpt-5-nano"]   = { input = 0.05, cached_input = 0.005, output = 0.40 },
  ["gpt-4.1"]      = { input = 2.00, cached_input = 0.50,  output = 8.00 },
  ["gpt-4.1-mini"] = { input = 0.40, cached_input = 0.10,  output = 1.60 },
  ["gpt-4.1-nano"] = { input = 0.10, cached_input = 0.025, output = 0.40 },
  ["gpt-4o"]       = { input = 2.50, cached_input = 1.25,  output = 10.00 },
  ["gpt-4o-mini"]  = { input = 0.15, cached_input = 0.075, output = 0.60 },
  ["o3"]           = { input = 2.00, cached_input = 0.50,  output = 8.00 },
  ["o3-mini"]      = { input = 1.10, cached_input = 0.55,  output = 4.40 },
  ["o4-mini"]      = { input = 1.10, cached_input = 0.275, output = 4.40 },
  -- Anthropic's list prices (an anthropic account). Its prompt cache bills
  -- reads at a tenth of the input (cached_input) and writes at 1.25 times
  -- it; a write is counted here as plain input, which the spend then shows
  -- a fifth short for those tokens.
  ["claude-opus-4-5"]   = { input = 5.00,  cached_input = 0.50, output = 25.00 },
  ["claude-opus-4-1"]   = { input = 15.00, cached_input = 1.50, output = 75.00 },
  ["claude-opus-4"]     = { input = 15.00, cached_input = 1.50, output = 75.00 },
  ["claude-sonnet-4-5"] = { input = 3.00,  cached_input = 0.30, output = 15.00 },
  ["claude-sonnet-4"]   = { input = 3.00,  cached_input = 0.30, output = 15.00 },
  ["claude-haiku-4-5"]  = { input = 1.00,  cached_input = 0.10, output = 5.00 },
  ["claude-3-5-haiku"]  = { input = 0.80,  cached_input = 0.08, output = 4.00 },
}

local function price(model)
  local p = PRICES[model]
  if p then return p end
  local best, best_len = nil, 0
  for name, q in pairs(PRICES) do
    local n = #name
    if n > best_len and #model > n + 1 and model:sub(n + 1, n + 1) == "-" and model:sub(1, n) == name then
      best, best_len = q, n
    end
  end
  return best
end

return { version = 1, price = price }
