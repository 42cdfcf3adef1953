# shellcheck shell=bash disable=SC2034
# bench/proxies.sh: the proxies the benchmarks put side by side, each started
# against a given bench/fast_upstream (sourced after bench/lib.sh, whose
# HOST, WORK, ROOT, PIDS, SY, FU, log, free_port and wait_http it uses).
#
#   fu_start [fast_upstream options]     another upstream         -> FU_PID FU_PORT
#   gateway_start UPORT [WRAPPER...]     switchyard, fresh db     -> SG_PID SG_PORT SG_HEADERS
#   nginx_find                           nginx binary             -> NGINX_BIN ("" if none)
#   nginx_start UPORT [WRAPPER...]       nginx, one process       -> NG_PID NG_PORT
#   portkey_find                         Portkey gateway (npm)    -> PORTKEY_JS ("" if none)
#   portkey_start UPORT [WRAPPER...]     Portkey on Node.js       -> PK_PID PK_PORT PK_HEADERS
#   proxy_stop PID                       TERM, wait (also what lib.sh's cleanup does)
#
# The start functions set globals rather than print, so that the process is
# a child of the calling shell and in PIDS (lib.sh's EXIT trap kills it).
# WRAPPER is a command the server runs under, e.g. valgrind (instructions.sh).
# Every server listens on 127.0.0.1 only and all proxy to 127.0.0.1:UPORT
# with kept-alive upstream connections. *_HEADERS are "Name: value" lines
# for bench/post.lua's BENCH_HEADERS and bench/peers_client.py.
#
# Peers are installed on demand, never by the test suite:
# - nginx: the `nginx` on PATH if any, else Debian's package fetched with
#   `apt-get download` and unpacked into $ROOT/.cache/bench-nginx (the binary
#   alone: `apt-get install` would also enable and start a system nginx on
#   port 80 where no policy-rc.d forbids it). BENCH_NGINX_BIN overrides.
# - Portkey: `@portkey-ai/gateway` (BENCH_PORTKEY_VERSION, default 1.15.2)
#   from npm into $ROOT/.cache/bench-portkey with `@hono/node-server` pinned
#   to 1.13.x (newer ones break its SSE), when `node` and `npm` exist.

PORTKEY_VERSION="${BENCH_PORTKEY_VERSION:-1.15.2}"
PORTKEY_DIR="$ROOT/.cache/bench-portkey"
NGINX_DIR="$ROOT/.cache/bench-nginx"

# waits for "listening on PORT" in a tool's output file; prints PORT
listening_port() { # file
  local i
  for ((i = 0; i < 100; i++)); do
    grep -q '^listening on' "$1" 2>/dev/null && break
    sleep 0.05
  done
  awk '/^listening on/ {print $3; exit}' "$1"
}

fu_start() {
  local out
  out=$(mktemp "$WORK/upstream-XXXX.out")
  "$FU" --host "$HOST" --port 0 "$@" >"$out" 2>&1 &
  FU_PID=$!; PIDS+=("$FU_PID")
  FU_PORT=$(listening_port "$out")
  [ -n "$FU_PORT" ] || { log "fast_upstream $* did not start"; cat "$out" >&2; return 1; }
}

gateway_start() {
  local uport=$1 db key
  shift
  db=$(mktemp -u "$WORK/gw-XXXX.db")
  "$SY" account add --db "$db" --name bench --base-url "http://$HOST:$uport/acct/bench/ok/v1" \
    --token bench-upstream-token >/dev/null
  key=$("$SY" key add --db "$db" --name bench | tail -n 1)
  SG_PORT=$(free_port)
  "$@" "$SY" serve --db "$db" --listen "$HOST:$SG_PORT" >"$db.log" 2>&1 &
  SG_PID=$!; PIDS+=("$SG_PID")
  SG_HEADERS="Authorization: Bearer $key"
  wait_http "http://$HOST:$SG_PORT/health" "${WAIT_SECONDS:-10}"
}

nginx_find() {
  NGINX_BIN="${BENCH_NGINX_BIN:-}"
  [ -z "$NGINX_BIN" ] && NGINX_BIN=$(command -v nginx 2>/dev/null || true)
  [ -z "$NGINX_BIN" ] && [ -x "$NGINX_DIR/usr/sbin/nginx" ] && NGINX_BIN="$NGINX_DIR/usr/sbin/nginx"
  if [ -z "$NGINX_BIN" ]; then
    log "nginx: fetching Debian's package into $NGINX_DIR (binary only, no service)"
    local tmp
    tmp=$(mktemp -d "$WORK/nginx-deb.XXXX")
    chmod 777 "$tmp" # apt-get download runs as _apt where it can
    if (cd "$tmp" && apt-get download -q nginx >/dev/null 2>&1 ||
          { ${SUDO:-} apt-get update -qq >/dev/null 2>&1 && apt-get download -q nginx >/dev/null 2>&1; }) &&
       mkdir -p "$NGINX_DIR" && dpkg-deb -x "$tmp"/nginx_*.deb "$NGINX_DIR"; then
      NGINX_BIN="$NGINX_DIR/usr/sbin/nginx"
    fi
  fi
  if [ -n "$NGINX_BIN" ] && ! "$NGINX_BIN" -v >/dev/null 2>&1; then
    log "nginx: $NGINX_BIN does not run (missing libraries?); leaving nginx out"
    NGINX_BIN=""
  fi
  [ -n "$NGINX_BIN" ] || log "nginx: not available; leaving it out"
}

nginx_start() {
  local uport=$1 dir
  shift
  dir=$(mktemp -d "$WORK/nginx.XXXX")
  NG_PORT=$(free_port)
  # one process (no master), an upstream keep-alive pool, no buffering: the
  # shape of a streaming LLM proxy; access log off (the gateway's request
  # log is in its measured cost, but nginx's would be a disk write per line)
  cat >"$dir/nginx.conf" <<NGX
worker_processes 1;
master_process off;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $dir; proxy_temp_path $dir;
  fastcgi_temp_path $dir; uwsgi_temp_path $dir; scgi_temp_path $dir;
  upstream mock { server $HOST:$uport; keepalive 1024; }
  server {
    listen $HOST:$NG_PORT;
    location = /_health { proxy_pass http://mock; }
    location / {
      proxy_pass http://mock/acct/bench/ok/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 600s;
    }
  }
}
NGX
  "$@" "$NGINX_BIN" -e "$dir/error.log" -p "$dir" -c "$dir/nginx.conf" >"$dir/out.log" 2>&1 &
  NG_PID=$!; PIDS+=("$NG_PID")
  wait_http "http://$HOST:$NG_PORT/_health" "${WAIT_SECONDS:-10}"
}

portkey_find() {
  PORTKEY_JS=""
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    log "Portkey: no node/npm; leaving it out"
    return 0
  fi
  local js="$PORTKEY_DIR/node_modules/@portkey-ai/gateway/build/start-server.js" have=""
  have=$(node -p "require('$PORTKEY_DIR/node_modules/@portkey-ai/gateway/package.json').version" 2>/dev/null || true)
  if [ ! -f "$js" ] || [ "$have" != "$PORTKEY_VERSION" ]; then
    log "Portkey: npm install @portkey-ai/gateway@$PORTKEY_VERSION into $PORTKEY_DIR"
    mkdir -p "$PORTKEY_DIR"
    cat >"$PORTKEY_DIR/package.json" <<JSON
{"name": "bench-portkey", "private": true,
 "dependencies": {"@portkey-ai/gateway": "$PORTKEY_VERSION", "@hono/node-server": "~1.13.8"},
 "overrides": {"@hono/node-server": "~1.13.8"}}
JSON
    if ! (cd "$PORTKEY_DIR" && npm install --no-audit --no-fund --loglevel=error >"$WORK/npm.log" 2>&1); then
      tail -n 20 "$WORK/npm.log" >&2; log "Portkey: npm install failed; leaving it out"
      return 0
    fi
  fi
  PORTKEY_JS="$js"
}

portkey_start() {
  local uport=$1
  shift
  PK_PORT=$(free_port)
  # start-server.js has --port but no host option: portkey_local.cjs makes
  # its listen() bind 127.0.0.1. --headless: no UI and no log stream.
  "$@" node --require "$ROOT/bench/portkey_local.cjs" "$PORTKEY_JS" --port="$PK_PORT" --headless \
    >"$WORK/portkey-$PK_PORT.log" 2>&1 &
  PK_PID=$!; PIDS+=("$PK_PID")
  # the documented way to reach an OpenAI-compatible host of one's own
  PK_HEADERS="Authorization: Bearer sk-bench
x-portkey-provider: openai
x-portkey-custom-host: http://$HOST:$uport/acct/bench/ok/v1"
  wait_http "http://$HOST:$PK_PORT/" "${WAIT_SECONDS:-30}"
}

proxy_stop() { # pid
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
