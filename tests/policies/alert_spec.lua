-- alert_spec.lua: policies/alert.lua: nothing is posted without a webhook
-- URL; with one, a Slack-compatible body ({"text": ...}) naming the event.
local URL = "https://hooks.slack.example/services/T0/B0/abc"
local function ev(o)
  local e = { kind = "account_held", subject = "k1", state = "key_refused",
              text = "account k1 is held: the upstream refuses this key as invalid", webhook_url = URL,
              now = 1700000000 }
  for k, v in pairs(o or {}) do e[k] = v end
  return e
end

describe("alert", function()
  it("posts nothing when no webhook URL is configured", function()
    expect(#alert(ev{ webhook_url = "" })).to_be(0)
  end)
  for _, kind in ipairs({ "account_needs_login", "account_held", "pool_exhausted", "budget", "breaker_open",
                          "db_degraded" }) do
    it(kind .. ": one post to the webhook with a Slack-compatible text body", function()
      local posts = alert(ev{ kind = kind, text = "something about " .. kind })
      expect(#posts).to_be(1)
      expect(posts[1].url).to_be(URL)
      eq(cjson.decode(posts[1].body), { text = "switchyard: something about " .. kind })
      eq(posts[1].headers, {})
    end)
  end
  it("the text is carried as JSON whatever it holds (quotes, newlines, non-ASCII)", function()
    local posts = alert(ev{ text = 'a "quoted"\nname – é' })
    eq(cjson.decode(posts[1].body), { text = 'switchyard: a "quoted"\nname – é' })
  end)
end)
