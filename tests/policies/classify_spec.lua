-- classify_spec.lua: policies/classify.lua, through the real engine path.
local E = fixtures.error_event

local function verdict(ev)
  local v = classify(ev)
  return v.action, v.class, v.cooldown
end

describe("classify", function()
  describe("an account-bound blob the account cannot read is stripped and resent once", function()
    local shapes = {
      { "invalid_encrypted_content code", { error_code = "invalid_encrypted_content",
          error_message = "The encrypted content gAAAAABo could not be verified." } },
      { "code null, same message", { error_message = "The encrypted content gAAAAABo could not be verified." } },
      { "for item rs_", { error_message = "The encrypted content for item rs_0a18 could not be verified. "
          .. "Reason: Encrypted content could not be decrypted or parsed." } },
      { "another organization", { error_message = "The encrypted content gAAAA could not be verified. "
          .. "Reason: Encrypted content organization_id did not match the target organization." } },
      { "function output", { error_code = "invalid_encrypted_content",
          error_message = "Encrypted function output content could not be decrypted or decoded." } },
    }
    for _, case in ipairs(shapes) do
      it("HTTP 400: " .. case[1], function()
        local o = { status = 400, error_type = "invalid_request_error" }
        for k, v in pairs(case[2]) do o[k] = v end
        local action, class, cooldown = verdict(E(o))
        expect(action).to_be("strip_retry")
        expect(class).to_be("invalid_encrypted_content")
        expect(cooldown).to_be(0)
      end)
      it("response.failed inside a 200 stream: " .. case[1], function()
        local o = { status = 200, in_stream = true }
        for k, v in pairs(case[2]) do o[k] = v end
        expect((verdict(E(o)))).to_be("strip_retry")
      end)
    end
    it("another 400 that mentions no encrypted content is still returned as is", function()
      expect((verdict(E{ status = 400, error_code = "invalid_value", error_message = "could not be verified" })))
        .to_be("return")
    end)
  end)

  describe("account-level 4xx fail over for ~20 s", function()
    for _, case in ipairs({ { 401, "auth" }, { 403, "auth" }, { 408, "timeout" }, { 409, "conflict" } }) do
      local status, class = case[1], case[2]
      it(status .. " -> failover " .. class .. " 20", function()
        eq(classify(E{ status = status }), { action = "failover", class = class, cooldown = 20 })
      end)
    end
  end)

  describe("a model the account does not serve fails over as model_unsupported, no cooldown", function()
    local shapes = {
      { 400, { error_message = "The 'gpt-5.1-codex-max' model is not supported when using Codex with a ChatGPT account." } },
      { 404, { error_code = "model_not_found", error_type = "invalid_request_error" } },
      { 404, { error_message = "The model `o9` does not exist or you do not have access to it." } },
    }
    for _, case in ipairs(shapes) do
      it(case[1] .. " " .. (case[2].error_code or case[2].error_message), function()
        local o = { status = case[1] }
        for k, v in pairs(case[2]) do o[k] = v end
        eq(classify(E(o)), { action = "failover", class = "model_unsupported", cooldown = 0 })
      end)
    end
    it("a 404 that names no model is an endpoint the upstream does not have", function()
      expect((select(2, verdict(E{ status = 404, error_message = "Not Found" })))).to_be("unknown_endpoint")
    end)
  end)

  describe("an endpoint the upstream does not have (docs/clients.md)", function()
    it("OpenAI's 404 Invalid URL is unknown_endpoint: the gateway tries the other dialect", function()
      eq(classify(E{ status = 404, error_message = "Invalid URL (POST /v1/responses)",
                     error_type = "invalid_request_error" }),
         { action = "failover", class = "unknown_endpoint", cooldown = 20 })
    end)
    it("a 405 is one too", function()
      eq(classify(E{ status = 405 }), { action = "failover", class = "unknown_endpoint", cooldown = 20 })
    end)
    it("a 404 about an item or a previous response the upstream does not hold is no missing endpoint", function()
      local item = "Item with id 'rs_1' not found. Items are not persisted when `store` is set to false."
      expect(select(2, verdict(E{ status = 404, error_message = item }))).to_be("not_found")
      expect(select(2, verdict(E{ status = 404, error_code = "previous_response_not_found" }))).to_be("not_found")
    end)
    it("a stored response that is not there stays the answer", function()
      eq(classify(E{ status = 404, endpoint = "/v1/responses/{id}" }).action, "return")
    end)
    it("a 405 or 501 to GET/DELETE of a stored response is about that call: nobody rests", function()
      for _, s in ipairs{ 405, 501 } do
        eq(classify(E{ status = s, endpoint = "/v1/responses/{id}" }),
           { action = "return", class = "unsupported_call", cooldown = 0 })
      end
    end)
  end)

  it("429 fails over and asks the cooldown ladder (-1)", function()
    eq(classify(E{ status = 429 }), { action = "failover", class = "rate_limit", cooldown = -1 })
  end)
  describe("the Anthropic API's answers (an anthropic account)", function()
    it("529 overloaded_error: server trouble, retried once, then over", function()
      local v = classify(E{ status = 529, account_kind = "anthropic", error_type = "overloaded_error",
                            error_message = "Overloaded" })
      eq({ v.action, v.class }, { "retry", "server" })
      v = classify(E{ status = 529, account_kind = "anthropic", error_type = "overloaded_error", retries = 1 })
      eq({ v.action, v.class }, { "failover", "server" })
    end)
    it("an overloaded_error event inside the 200 stream, before output", function()
      local v = classify(E{ status = 200, in_stream = true, account_kind = "anthropic", error_type = "overloaded_error",
                            retries = 1 })
      eq({ v.action, v.class }, { "failover", "server" })
    end)
    it("429 rate_limit_error: the ladder", function()
      local v = classify(E{ status = 429, account_kind = "anthropic", error_type = "rate_limit_error",
                            error_message = "Number of request tokens has exceeded your per-minute rate limit" })
      eq({ v.action, v.class, v.cooldown }, { "failover", "rate_limit", -1 })
    end)
    it("401 invalid x-api-key holds the key", function()
      local v = classify(E{ status = 401, account_kind = "anthropic", error_type = "authentication_error",
                            error_message = "invalid x-api-key" })
      eq({ v.action, v.state }, { "failover", "key_refused" })
    end)
    it("prompt is too long: the context fallback", function()
      local v = classify(E{ status = 400, account_kind = "anthropic", error_type = "invalid_request_error",
                            error_message = "prompt is too long: 210000 tokens > 200000 maximum", context_fallbacks = 1 })
      eq(v.action, "context_fallback")
    end)
    it("a credit balance too low is a quota", function()
      local v = classify(E{ status = 400, account_kind = "anthropic", error_type = "invalid_request_error",
                            error_message = "Your credit balance is too low to access the Anthropic API." })
      eq(v.class, "quota")
    end)
  end)
  describe("the API's per-model rate limits (scope model: only that model rests on the account)", function()
    local msg = "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000."
    it("a 429 naming the model sent", function()
      eq(classify(E{ status = 429, account_kind = "api_key", model = "gpt-4o", error_message = msg }),
         { action = "failover", class = "rate_limit", cooldown = -1, scope = "model" })
    end)
    it("in a stream too", function()
      local v = classify(E{ status = 200, in_stream = true, error_code = "rate_limit_exceeded",
                            account_kind = "api_key", model = "GPT-4O", error_message = msg })
      eq({ v.class, v.scope }, { "rate_limit", "model" })
    end)
    it("not another model's, not the organization's, not a ChatGPT login's", function()
      expect(classify(E{ status = 429, account_kind = "api_key", model = "gpt-4o-mini", error_message = msg }).scope)
        .to_be(nil)
      expect(classify(E{ status = 429, account_kind = "api_key", model = "gpt-4o",
                         error_message = "Rate limit reached for requests." }).scope).to_be(nil)
      expect(classify(E{ status = 429, account_kind = "chatgpt", model = "gpt-4o", error_message = msg }).scope)
        .to_be(nil)
    end)
    it("a quota is the account's whatever it names", function()
      local v = classify(E{ status = 429, account_kind = "api_key", model = "gpt-4o", error_code = "insufficient_quota",
                            error_message = "You exceeded your current quota for gpt-4o" })
      eq({ v.class, v.scope }, { "quota", nil })
    end)
  end)

  describe("quota texts fail over as quota, case-insensitively, wherever they appear", function()
    local texts = { "You've hit your usage limit", "usage_limit_reached", "quota exceeded",
                    "insufficient_quota", "YOU'VE HIT YOUR USAGE LIMIT", "Insufficient_Quota" }
    for _, t in ipairs(texts) do
      it("in the body: " .. t, function()
        eq(classify(E{ status = 400, body = "{\"detail\":\"" .. t .. ".\"}" }),
           { action = "failover", class = "quota", cooldown = -1 })
      end)
      it("in the message: " .. t, function()
        expect(classify(E{ status = 403, error_message = t }).class).to_be("quota")
      end)
    end
    it("in the code (429 insufficient_quota is quota, not rate_limit)", function()
      local v = classify(E{ status = 429, error_code = "insufficient_quota", body = "" })
      expect(v.class).to_be("quota")
      expect(v.cooldown).to_be(-1)
    end)
    it("with a typographic apostrophe", function()
      expect(classify(E{ status = 429, error_message = "You\u{2019}ve hit your usage limit." }).class).to_be("quota")
    end)
  end)

  describe("deactivated accounts fail over", function()
    it("account_deactivated code on a 400 (no refusal of the account: not held)", function()
      local a, c = verdict(E{ status = 400, error_code = "account_deactivated" })
      expect(a).to_be("failover")
      expect(c).to_be("deactivated")
    end)
    it("'deactivated' in the message of a 400", function()
      expect(classify(E{ status = 400, error_message = "This account has been deactivated" }).action)
        .to_be("failover")
    end)
  end)

  describe("refusals waiting does not heal hold the account until an operator acts", function()
    local shapes = {
      { "402 deactivated workspace (ChatGPT backend)", "deactivated_workspace",
        { status = 402, body = '{"detail":{"code":"deactivated_workspace"}}', error_code = "deactivated_workspace" } },
      { "403 with the deactivated-workspace message", "deactivated_workspace",
        { status = 403, error_message = "This workspace has been deactivated and can no longer be used." } },
      { "403 invalid_workspace_selected (ChatGPT backend)", "workspace_denied",
        { status = 403, body = '{"detail":{"code":"invalid_workspace_selected"}}',
          error_code = "invalid_workspace_selected" } },
      { "403 workspace_access_denied", "workspace_denied",
        { status = 403, error_code = "workspace_access_denied" } },
      { "403 unsupported_country_region_territory (API)", "region_unsupported",
        { status = 403, error_type = "request_forbidden", error_code = "unsupported_country_region_territory",
          error_message = "Country, region, or territory not supported" } },
      { "401 workspace not authorized in this region", "region_unsupported",
        { status = 401, body = "Workspace is not authorized in this region.",
          error_message = "Workspace is not authorized in this region." } },
    }
    for _, case in ipairs(shapes) do
      it(case[1] .. " -> failover, state " .. case[2] .. ", no cooldown", function()
        eq(classify(E(case[3])), { action = "failover", class = case[2], cooldown = 0, state = case[2] })
      end)
    end
    it("the same code on a 400 (the request, not the account) holds nothing", function()
      local v = classify(E{ status = 400, error_code = "unsupported_country_region_territory" })
      expect(v.state).to_be(nil)
      expect(v.action).to_be("return")
    end)
    it("a deactivated workspace wins over a quota text in the same body", function()
      local v = classify(E{ status = 402, body = '{"detail":{"code":"deactivated_workspace"}} quota exceeded' })
      expect(v.state).to_be("deactivated_workspace")
    end)
    it("a plain 403 is still a 20 s auth cooldown, not a hold", function()
      eq(classify(E{ status = 403 }), { action = "failover", class = "auth", cooldown = 20 })
    end)
    it("account_deactivated on a 401, 402 or 403 holds the account: waiting does not heal it", function()
      for _, s in ipairs({ 401, 402, 403 }) do
        expect(classify(E{ status = s, error_code = "account_deactivated" }).state).to_be("account_deactivated")
      end
      expect(classify(E{ status = 401, error_message = "The OpenAI account associated with this API key has been deactivated." }).state)
        .to_be("account_deactivated")
    end)
    it("account_deactivated on another status is still a cooldown", function()
      expect(classify(E{ status = 400, error_code = "account_deactivated" }).state).to_be(nil)
    end)
  end)

  describe("an API key its upstream refuses as invalid is held as key_refused", function()
    local shapes = {
      { "401 invalid_api_key (OpenAI API)", { status = 401, error_type = "invalid_request_error",
          error_code = "invalid_api_key", error_message = "Incorrect API key provided: sk-abc***xyz." } },
      { "401 message only, code null", { status = 401, error_message = "Incorrect API key provided: sk-a***." } },
      { "401 incorrect_api_key", { status = 401, error_code = "incorrect_api_key" } },
      { "403 invalid_key", { status = 403, error_code = "invalid_key", error_message = "Invalid key" } },
      { "401 invalid x-api-key (Anthropic)", { status = 401, error_type = "authentication_error",
          error_message = "invalid x-api-key" } },
    }
    for _, case in ipairs(shapes) do
      for _, kind in ipairs({ "api_key", "aggregate" }) do
        it(case[1] .. " on an " .. kind .. " account -> failover, state key_refused, no cooldown", function()
          local o = { account_kind = kind }
          for k, v in pairs(case[2]) do o[k] = v end
          eq(classify(E(o)), { action = "failover", class = "key_refused", cooldown = 0, state = "key_refused" })
        end)
      end
    end
    it("a ChatGPT login's 401 keeps its refresh path: an auth failover, no hold", function()
      eq(classify(E{ status = 401, account_kind = "chatgpt", error_code = "invalid_api_key" }),
        { action = "failover", class = "auth", cooldown = 20 })
    end)
    it("a plain 401 without an invalid-key code is still a 20 s auth cooldown", function()
      eq(classify(E{ status = 401, error_code = "token_expired" }), { action = "failover", class = "auth", cooldown = 20 })
    end)
    it("the invalid-key code on a 400 or a 429 holds nothing", function()
      expect(classify(E{ status = 400, error_code = "invalid_api_key" }).state).to_be(nil)
      expect(classify(E{ status = 429, error_code = "invalid_api_key" }).state).to_be(nil)
    end)
  end)

  describe("5xx retry the same account once after 120-900 ms of jitter, then fail over as server for 30 s", function()
    for _, s in ipairs({ 500, 502, 503, 504, 529 }) do
      it(tostring(s) .. " first time: retry", function()
        eq(classify(E{ status = s, random = 0 }), { action = "retry", class = "server", after = 0.12, cooldown = 0 })
        near(classify(E{ status = s, random = 0.999999 }).after, 0.9, 1e-5)
      end)
      it(tostring(s) .. " after one retry: failover", function()
        eq(classify(E{ status = s, retries = 1 }), { action = "failover", class = "server", cooldown = 30 })
      end)
    end
    it("the jitter follows ev.random", function()
      near(classify(E{ status = 500, random = 0.5 }).after, 0.51, 1e-9)
    end)
  end)

  describe("a short Retry-After is waited out on the same account only when nothing equivalent is left", function()
    it("429 Retry-After 2, every other candidate changes the model: retry after 2 s", function()
      eq(classify(E{ status = 429, retry_after = 2, alternatives = 0 }),
         { action = "retry", class = "rate_limit", after = 2, cooldown = 0 })
    end)
    it("503 Retry-After 5, no candidate left: retry after 5 s", function()
      eq(classify(E{ status = 503, retry_after = 5, alternatives = 0 }),
         { action = "retry", class = "server", after = 5, cooldown = 0 })
    end)
    it("429 Retry-After 2 with a same-model candidate left: fail over at once", function()
      eq(classify(E{ status = 429, retry_after = 2, alternatives = 1 }),
         { action = "failover", class = "rate_limit", cooldown = -1 })
    end)
    it("503 Retry-After 2 with a same-model candidate left: fail over at once, no jitter retry", function()
      eq(classify(E{ status = 503, retry_after = 2, alternatives = 2 }),
         { action = "failover", class = "server", cooldown = 30 })
    end)
    it("Retry-After above 5 s: fail over", function()
      expect(classify(E{ status = 429, retry_after = 6, alternatives = 0 }).action).to_be("failover")
      expect(classify(E{ status = 503, retry_after = 6, alternatives = 0 }).action).to_be("failover")
    end)
    it("at most twice per account and request", function()
      expect(classify(E{ status = 429, retry_after = 1, alternatives = 0, retries = 1 }).action).to_be("retry")
      expect(classify(E{ status = 429, retry_after = 1, alternatives = 0, retries = 2 }).action).to_be("failover")
    end)
    it("a quota 429 is never waited out", function()
      expect(classify(E{ status = 429, retry_after = 2, alternatives = 0, error_code = "usage_limit_reached" }).class)
        .to_be("quota")
    end)
  end)

  describe("a 2xx that is not an answer fails over as bad_answer for 30 s", function()
    for _, why in ipairs({ "content_type", "empty_body", "no_output" }) do
      it(why, function()
        eq(classify(E{ status = 200, not_answer = why }), { action = "failover", class = "bad_answer", cooldown = 30 })
      end)
    end
  end)

  describe("context-window fallback", function()
    local ctx = { status = 400, error_type = "invalid_request_error", error_code = "context_length_exceeded",
                  error_message = "This model's maximum context length is 8192 tokens." }
    it("with a larger-context fallback left: context_fallback, no cooldown", function()
      ctx.context_fallbacks = 1
      eq(classify(E(ctx)), { action = "context_fallback", class = "context_length", cooldown = 0 })
    end)
    it("with none: returned unchanged", function()
      ctx.context_fallbacks = 0
      eq(classify(E(ctx)), { action = "return", class = "request", cooldown = 0 })
    end)
    it("other request errors are returned even with a fallback configured", function()
      eq(classify(E{ status = 400, error_code = "content_policy_violation", context_fallbacks = 1 }),
         { action = "return", class = "request", cooldown = 0 })
    end)
  end)

  it("network errors fail over for 20 s", function()
    eq(classify(fixtures.network_error()), { action = "failover", class = "network", cooldown = 20 })
  end)

  it("status 0 without a flag counts as a network error", function()
    expect(classify(E{ status = 0 }).class).to_be("network")
  end)

  it("timeouts fail over for 20 s", function()
    eq(classify(fixtures.timeout_event()), { action = "failover", class = "timeout", cooldown = 20 })
  end)

  describe("request errors are returned unchanged, never retried", function()
    local cases = {
      { 400, "context_length_exceeded" }, { 400, "content_policy_violation" },
      { 400, "invalid_request_error" }, { 413, "request_too_large" }, { 422, "unprocessable" },
    }
    for _, c in ipairs(cases) do
      it(c[1] .. " " .. c[2], function()
        local v = classify(E{ status = c[1], error_type = "invalid_request_error", error_code = c[2],
                              error_message = "Your request was rejected." })
        expect(v.action).to_be("return")
        expect(v.class).to_be("request")
      end)
    end
  end)

  describe("errors inside a 200 stream", function()
    it("quota error -> failover quota", function()
      eq(classify(fixtures.quota_stream_event()), { action = "failover", class = "quota", cooldown = -1 })
    end)
    it("rate_limit_exceeded code -> failover on the ladder", function()
      local v = classify(fixtures.stream_error_event{ error_code = "rate_limit_exceeded" })
      expect(v.action).to_be("failover")
      expect(v.cooldown).to_be(-1)
    end)
    it("server_error code -> retry once, then failover server 30", function()
      eq(classify(fixtures.stream_error_event{ error_type = "server_error", error_message = "oops", random = 0 }),
         { action = "retry", class = "server", after = 0.12, cooldown = 0 })
      eq(classify(fixtures.stream_error_event{ error_type = "server_error", error_message = "oops", retries = 1 }),
         { action = "failover", class = "server", cooldown = 30 })
    end)
    it("an overloaded / capacity message -> retry once", function()
      expect(classify(fixtures.stream_error_event{ error_message = "The model is at capacity" }).action)
        .to_be("retry")
    end)
    it("a request error (context_length_exceeded) is returned", function()
      local v = classify(fixtures.stream_error_event{ error_code = "context_length_exceeded" })
      expect(v.action).to_be("return")
      expect(v.class).to_be("stream")
    end)
    it("an unknown error is returned", function()
      expect(classify(fixtures.stream_error_event{ error_message = "something odd" }).action).to_be("return")
    end)
  end)

  describe("a stream cut after output", function()
    it("a text-only chat stream is resumed on the next candidate, the cut account resting 20 s", function()
      eq(classify(fixtures.cut_stream_event()), { action = "resume", class = "interrupted", cooldown = 20 })
      eq(classify(fixtures.cut_stream_event{ timeout = true, network_error = false }),
         { action = "resume", class = "interrupted", cooldown = 20 })
    end)
    it("a quota text never makes it fail over: it resumes like any cut", function()
      expect(classify(fixtures.cut_stream_event{ error_message = "usage_limit_reached" }).action).to_be("resume")
    end)
    it("with a tool call in flight it is returned as interrupted", function()
      eq(classify(fixtures.cut_stream_event{ tool_call = true }), { action = "return", class = "interrupted", cooldown = 0 })
    end)
    it("with no text delivered it is returned (nothing to continue)", function()
      expect(classify(fixtures.cut_stream_event{ delivered_chars = 0 }).action).to_be("return")
    end)
    it("a text-only Responses stream is resumed too (the continuation is spliced into the cut response)", function()
      eq(classify(fixtures.cut_stream_event{ endpoint = "/v1/responses" }),
         { action = "resume", class = "interrupted", cooldown = 20 })
      eq(classify(fixtures.cut_stream_event{ endpoint = "/v1/responses", tool_call = true }),
         { action = "return", class = "interrupted", cooldown = 0 })
    end)
    it("another endpoint's cut stream is returned as interrupted", function()
      expect(classify(fixtures.cut_stream_event{ endpoint = "/v1/completions" }).action).to_be("return")
    end)
    it("one the gateway cannot continue (ev.continuable false) is returned as interrupted", function()
      eq(classify(fixtures.cut_stream_event{ continuable = false }),
         { action = "return", class = "interrupted", cooldown = 0 })
    end)
  end)

  describe("a limit that ends a stream after output", function()
    it("after text only: the account takes the ladder and the answer goes on on the next candidate", function()
      eq(classify(fixtures.late_error_event()), { action = "resume", class = "quota", cooldown = -1 })
      eq(classify(fixtures.late_error_event{ endpoint = "/v1/chat/completions" }),
         { action = "resume", class = "quota", cooldown = -1 })
    end)
    it("after a tool call, on /v1/responses with another account: the client retries the turn", function()
      eq(classify(fixtures.late_error_event{ tool_call = true, continuable = false }),
         { action = "retry_turn", class = "quota", cooldown = -1 })
    end)
    it("with no other account the limit reaches the client as it came, and the account still rests", function()
      eq(classify(fixtures.late_error_event{ continuable = false, alternatives = 0 }),
         { action = "return", class = "quota", cooldown = -1 })
    end)
    it("a chat client has no turn retry to lean on: it gets the limit, the account rests", function()
      eq(classify(fixtures.late_error_event{ endpoint = "/v1/chat/completions", continuable = false }),
         { action = "return", class = "quota", cooldown = -1 })
    end)
    it("a rate limit and a capacity error are limits too", function()
      eq(classify(fixtures.late_error_event{ error_code = "rate_limit_exceeded", error_message = "slow down",
                                              continuable = false }),
         { action = "retry_turn", class = "rate_limit", cooldown = -1 })
      eq(classify(fixtures.late_error_event{ error_code = "server_is_overloaded", error_message = "busy",
                                              continuable = false }),
         { action = "retry_turn", class = "server", cooldown = 30 })
    end)
    it("an error about the request itself goes to the client and rests nothing", function()
      eq(classify(fixtures.late_error_event{ error_code = "invalid_prompt", error_message = "flagged" }),
         { action = "return", class = "stream", cooldown = 0 })
    end)
  end)

  it("a 2xx outside a stream is returned", function()
    expect(classify(E{ status = 200 }).action).to_be("return")
  end)

  it("a 429 never drains the local rate bucket by default (the ladder handles it)", function()
    expect(classify(E{ status = 429 }).drain_bucket).to_be(nil)
    expect(classify(fixtures.quota_stream_event()).drain_bucket).to_be(nil)
  end)

  it("never falls back to the C default on these inputs", function()
    expect(fallbacks()).to_be(0)
  end)
end)
