#!/usr/bin/env bash
# bench/dialects.sh: what a translation adds to a request (docs/clients.md),
# in one run, paired: the same chat client served by two gateway accounts on
# bench/fast_upstream, one that speaks Chat Completions (passthrough) and
# one declared --speaks responses (every request translated chat ->
# Responses and its answer back). For plain and streamed answers, N
# sequential keep-alive requests alternate between the two (so load and
# clock drift fall on both alike); prints p50 and p90 latency of each and
# the translated/passthrough ratio. Instructions per request, which do not
# swing with the machine, are bench/instructions.sh's:
#   BENCH_ACCOUNT_ARGS="--speaks responses" BENCH_TARGETS=gateway bench/instructions.sh
# Prints figures only; about 30 s.
#   BENCH_DIALECT_N   requests per path and kind (default 2000)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
N="${BENCH_DIALECT_N:-2000}"
LOGTAG=dialects
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"   # builds, starts fast_upstream (UPORT, BASE) and a gateway we do not use here

db="$WORK/dialects.db"
"$SY" account add --db "$db" --name native --base-url "$BASE" --token t-native --models gpt-native >/dev/null
"$SY" account add --db "$db" --name xlate --base-url "$BASE" --token t-xlate --speaks responses \
  --models gpt-xlate >/dev/null
key=$("$SY" key add --db "$db" --name bench | tail -n 1)
port=$(free_port)
"$SY" serve --db "$db" --listen "$HOST:$port" >"$WORK/dialects-gateway.log" 2>&1 &
PIDS+=("$!")
wait_http "http://$HOST:$port/health" 10

python3 - "$port" "$key" "$N" <<'PY'
import http.client, json, sys, time
port, key, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
hdrs = {"Content-Type": "application/json", "Authorization": "Bearer " + key}
def once(model, stream):
    body = {"model": model, "messages": [{"role": "user", "content": "Say hello."}]}
    if stream:
        body["stream"] = True
    t = time.perf_counter()
    c.request("POST", "/v1/chat/completions", json.dumps(body), hdrs)
    r = c.getresponse()
    data = r.read()
    dt = time.perf_counter() - t
    if r.status != 200 or (stream and b"[DONE]" not in data):
        sys.exit(f"{model}: status {r.status}: {data[:200]!r}")
    return dt
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]
print(f"latency per request, {n} sequential requests per cell, 1 client, paired (alternating)")
print(f"{'':10} {'passthrough p50':>16} {'translated p50':>15} {'ratio':>6} {'passthrough p90':>16} {'translated p90':>15}")
for stream in (False, True):
    for _ in range(50):  # warm-up of both paths
        once("gpt-native", stream), once("gpt-xlate", stream)
    a, b = [], []
    for _ in range(n):
        a.append(once("gpt-native", stream))
        b.append(once("gpt-xlate", stream))
    us = lambda x: f"{x * 1e6:.0f} us"
    print(f"{'stream' if stream else 'plain':10} {us(pct(a, .5)):>16} {us(pct(b, .5)):>15} {pct(b, .5) / pct(a, .5):6.2f} "
          f"{us(pct(a, .9)):>16} {us(pct(b, .9)):>15}")
PY
log "done"
