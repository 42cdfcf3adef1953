-- post.lua: wrk script for bench/run.sh. POSTs one fixed JSON body and, when
-- the run ends, prints one machine-readable line:
--   RESULT requests=N duration_us=N rps=F p50_us=N p99_us=N errors=N non2xx=N
-- Environment: BENCH_BODY (the JSON body, required), BENCH_KEY (sent as
-- "Authorization: Bearer ..." when set), BENCH_HEADERS (more request
-- headers, "Name: value" lines separated by newlines; bench/peers.sh uses it
-- for Portkey's x-portkey-* headers).
local body = os.getenv("BENCH_BODY") or '{"model":"gpt-bench","messages":[{"role":"user","content":"hi"}]}'
local key = os.getenv("BENCH_KEY")

wrk.method = "POST"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"
if key and key ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. key
end
for line in (os.getenv("BENCH_HEADERS") or ""):gmatch("[^\n]+") do
  local name, value = line:match("^%s*([^:]+):%s*(.-)%s*$")
  if name then
    wrk.headers[name] = value
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.timeout
  local secs = summary.duration / 1e6
  io.write(string.format(
    "RESULT requests=%d duration_us=%d rps=%.1f p50_us=%d p99_us=%d errors=%d non2xx=%d timeouts=%d\n",
    summary.requests, summary.duration, summary.requests / secs,
    latency:percentile(50), latency:percentile(99), errors, e.status, e.timeout))
end
