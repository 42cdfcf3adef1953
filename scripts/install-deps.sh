#!/bin/sh
# Installs the Debian 12 packages switchyard builds and tests with.
# Idempotent; run as root (or via sudo).
set -e
PKGS="build-essential cmake pkg-config liblua5.4-dev lua5.4 libevent-dev \
libcurl4-openssl-dev libsqlite3-dev sqlite3 lua-cjson lua-cjson-dev python3 curl"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
