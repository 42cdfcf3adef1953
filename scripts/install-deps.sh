#!/bin/sh
# Installs the Debian 12 packages switchyard builds and tests with.
# Idempotent; run as root (or via sudo).
set -e
# chromium: the dashboard's real-browser test (tests/e2e/test_dashboard.py);
# clang-14, libclang-rt-14-dev: the libFuzzer stage (scripts/fuzz.sh);
# libzstd-dev, zlib1g-dev: compressed request bodies (src/http/body_decode.c),
# zstd: the command-line tool that makes them in tests/e2e/test_compressed_bodies.py;
# libwslay-dev: WebSocket framing for the Responses WebSocket (src/http/ws.c);
# libssl-dev: libcrypto's SHA-1 for its handshake;
# libhiredis-dev: the Redis client of scale-out mode (src/core/redis_link.c,
# docs/scale-out.md), redis-server: the real Redis tests/e2e/test_redis.py starts
PKGS="build-essential cmake pkg-config liblua5.4-dev lua5.4 libevent-dev \
libcurl4-openssl-dev libsqlite3-dev sqlite3 lua-cjson lua-cjson-dev python3 curl chromium \
clang-14 libclang-rt-14-dev libzstd-dev zlib1g-dev zstd libwslay-dev libssl-dev \
libhiredis-dev redis-server"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# node and npm drive the browser tests (playwright-core, the Codex CLI); a
# node from elsewhere (e.g. NodeSource, which bundles npm) is kept as it is
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
updated=""
if [ -n "$missing" ]; then
  $SUDO apt-get update -qq
  updated=1
  $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
# promtool validates /metrics in the suite. It ships inside Debian's
# prometheus package, whose installation would also create a user and start
# a Prometheus server; only the static promtool binary is taken from the
# package instead.
if ! command -v promtool >/dev/null 2>&1; then
  [ -n "$updated" ] || $SUDO apt-get update -qq
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1 || $SUDO apt-get download prometheus)
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
  $SUDO install -m 0755 "$tmp/x/usr/bin/promtool" /usr/local/bin/promtool
  rm -rf "$tmp"
fi
