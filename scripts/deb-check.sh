#!/usr/bin/env bash
# Packaging check (docs/operating.md, "Running as a service"): builds the .deb
# with cpack, installs it with apt-get, verifies the installed unit with
# systemd-analyze, runs the unit's ExecStart as the unit would (its user, its
# environment file, no privileges, MemoryDenyWriteExecute through the
# kernel's PR_SET_MDWE) without systemd as PID 1, sends one request through
# it to the mock upstream, reloads, stops it, and purges the package,
# checking that the user and the state went with it.
# Before any of that, the package's contents are checked as they are in the
# .deb (dpkg-deb, no root): what Debian wants in /usr/share/doc/switchyard
# (copyright in the machine-readable format, changelog.Debian.gz made with
# gzip -9n) beside the binary, unit and docs.
# Usage: scripts/deb-check.sh [BUILD_DIR] [--contents]   (default: build,
# already built; --contents: stop after the contents, installing nothing)
# The install skips (exit 0) unless run as root on a dpkg system, and on a
# machine where switchyard is already installed or its user exists: it never
# touches an installation it did not make.
set -euo pipefail
cd "$(dirname "$0")/.."
contents_only=""
[ "${2:-}" != --contents ] && [ "${1:-}" != --contents ] || contents_only=1
[ "${1:-}" != --contents ] || set -- build
build=$(realpath "${1:-build}")

skip() { echo "deb-check: skipped: $*"; exit 0; }
fail() { echo "deb-check: FAILED: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || skip "not a dpkg system (no dpkg-deb)"

echo "== cpack =="
rm -f "$build"/switchyard_*.deb
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/switchyard_*.deb)
echo "$deb"

echo "== contents =="
doc=./usr/share/doc/switchyard
listing=$(dpkg-deb -c "$deb")
for f in ./usr/bin/switchyard $doc/copyright $doc/changelog.Debian.gz $doc/README.md $doc/docs/operating.md; do
    grep -q " $f\$" <<<"$listing" || fail "$f is not in $deb"
done
tree=$(mktemp -d)
dpkg-deb -x "$deb" "$tree"
copyright=$tree/$doc/copyright changelog=$tree/$doc/changelog.Debian.gz
[ "$(head -1 "$copyright")" = 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ] ||
    fail "$doc/copyright is not in the machine-readable format (its first line)"
grep -q '^Files: \*$' "$copyright" || fail "$doc/copyright has no 'Files: *' paragraph"
grep -q '^License: ' "$copyright" || fail "$doc/copyright names no license"
version=$(dpkg-deb -f "$deb" Version)
gzip -t "$changelog" || fail "$doc/changelog.Debian.gz is not gzip"
gzip -dc "$changelog" | grep -q "^switchyard ($version) " ||
    fail "$doc/changelog.Debian.gz has no entry for version $version"
# gzip -n: no file name (flag 0x08) and no time stamp (bytes 4-7) in the header
[ "$(od -An -tx1 -N8 "$changelog" | tr -d ' \n')" = 1f8b080000000000 ] ||
    fail "$doc/changelog.Debian.gz was not made with gzip -n (a name or time stamp in its header)"
rm -rf "$tree"
echo "copyright (DEP-5) and changelog.Debian.gz ($version) in $doc"
[ -z "$contents_only" ] || { echo "deb-check: ok (contents)"; exit 0; }

[ "$(id -u)" -eq 0 ] || skip "needs root (it installs and purges the package)"
{ command -v dpkg && command -v apt-get; } >/dev/null || skip "not a dpkg/apt system"
! dpkg-query -W -f='${Status}' switchyard 2>/dev/null | grep -q "install ok" ||
    skip "a switchyard package is installed here already"
! getent passwd switchyard >/dev/null || skip "a user switchyard exists here already"
[ -x "$build/tests/mock_upstream" ] || fail "$build/tests/mock_upstream missing: build first"
command -v systemd-analyze >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null

unit=/lib/systemd/system/switchyard.service
db=/var/lib/switchyard/switchyard.db
tmp=$(mktemp -d)
mock_pid="" gw_pid="" installed=""
cleanup() {
    [ -z "$gw_pid" ] || kill -KILL "$gw_pid" 2>/dev/null || true
    [ -z "$mock_pid" ] || kill "$mock_pid" 2>/dev/null || true
    [ -z "$installed" ] || apt-get remove --purge -y -qq switchyard >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
as_switchyard() { runuser -u switchyard -- "$@"; }

echo "== apt-get install =="
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >/dev/null
for f in /usr/bin/switchyard "$unit" /etc/default/switchyard /usr/share/switchyard/policies/classify.lua \
    /usr/share/doc/switchyard/docs/operating.md /usr/share/doc/switchyard/copyright \
    /usr/share/doc/switchyard/changelog.Debian.gz; do
    [ -e "$f" ] || fail "$f missing after install"
done
[ "$(getent passwd switchyard | cut -d: -f6)" = /var/lib/switchyard ] || fail "user switchyard not made"
[ "$(stat -c '%U:%G %a' /var/lib/switchyard)" = "switchyard:switchyard 750" ] ||
    fail "/var/lib/switchyard is $(stat -c '%U:%G %a' /var/lib/switchyard)"

echo "== systemd-analyze verify =="
out=$(systemd-analyze verify "$unit" 2>&1) || fail "verify: $out"
[ -z "$out" ] || fail "verify says: $out"

echo "== the unit's ExecStart, as its user =="
"$build/tests/mock_upstream" --port 0 >"$tmp/mock.out" 2>"$tmp/mock.err" &
mock_pid=$!
for _ in $(seq 50); do grep -q "^listening on" "$tmp/mock.out" && break; sleep 0.1; done
mock_port=$(awk '/^listening on/{print $3; exit}' "$tmp/mock.out")
[ -n "$mock_port" ] || fail "mock upstream did not start"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[ -n "$exec_start" ] || fail "no ExecStart in $unit"
# the environment systemd gives the service: its EnvironmentFile (here the
# listen address is added to it, as an operator would) and the user's own
mapfile -t envs < <(grep -E '^[A-Z_][A-Z0-9_]*=' /etc/default/switchyard || true)
envs+=("SWITCHYARD_LISTEN=127.0.0.1:$port")
# MemoryDenyWriteExecute=: the kernel's PR_SET_MDWE (Linux 6.3+) refuses
# the same writable-and-executable mappings, and is inherited across exec
mdwe='import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).prctl(65, 1, 0, 0, 0) != 0:
    print("deb-check: no PR_SET_MDWE on this kernel; MemoryDenyWriteExecute not checked")
os.execv(sys.argv[1], sys.argv[1:])'
# shellcheck disable=SC2086 # ExecStart is split into words as systemd does
(cd / && umask 0077 && exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/switchyard \
    USER=switchyard LOGNAME=switchyard "${envs[@]}" \
    setpriv --reuid=switchyard --regid=switchyard --init-groups --no-new-privs \
    --inh-caps=-all --bounding-set=-all -- python3 -c "$mdwe" $exec_start) >"$tmp/gw.log" 2>&1 &
gw_pid=$!
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
curl -fs "http://127.0.0.1:$port/health" >/dev/null || { cat "$tmp/gw.log"; fail "gateway did not start"; }
[ "$(stat -c '%U %a' "$db")" = "switchyard 600" ] || fail "$db is $(stat -c '%U %a' "$db")"

as_switchyard switchyard account add --db "$db" --name deb --token sk-deb-check \
    --base-url "http://127.0.0.1:$mock_port/acct/deb/ok/v1" >/dev/null
key=$(as_switchyard switchyard key add --db "$db" --name deb-check | tail -n 1)
code=""
for _ in $(seq 50); do  # the running gateway reads new accounts within a second
    code=$(curl -s -o "$tmp/answer" -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
        -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
        -d '{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}')
    [ "$code" = 200 ] && break
    sleep 0.2
done
[ "$code" = 200 ] || { cat "$tmp/answer" "$tmp/gw.log"; fail "request through the gateway: $code"; }
echo "request through the packaged gateway: 200"

kill -HUP "$gw_pid"  # ExecReload
for _ in $(seq 50); do grep -q "SIGHUP: policies reloaded" "$tmp/gw.log" && break; sleep 0.1; done
grep -q "SIGHUP: policies reloaded" "$tmp/gw.log" || { cat "$tmp/gw.log"; fail "SIGHUP did not reload"; }
# stopping as systemd would: ExecStop (its $$ is systemd's escape for $),
# as the unit's user, with MAINPID set; idle, the gateway is gone by its end
stop=$(sed -n 's/^ExecStop=//p' "$unit" | sed 's/\$\$/$/g')
eval "as_switchyard env MAINPID=$gw_pid $stop"
! kill -0 "$gw_pid" 2>/dev/null || { cat "$tmp/gw.log"; fail "still running after ExecStop"; }
rc=0
wait "$gw_pid" || rc=$?
gw_pid=""
[ "$rc" -eq 0 ] || { cat "$tmp/gw.log"; fail "gateway exited $rc after ExecStop"; }
as_switchyard switchyard logs --db "$db" --limit 1 | grep -q " 200 " || fail "the request is not in the log"

echo "== apt-get remove --purge =="
apt-get remove --purge -y -qq switchyard >/dev/null
installed=""
! getent passwd switchyard >/dev/null || fail "user switchyard left after purge"
! getent group switchyard >/dev/null || fail "group switchyard left after purge"
for f in /var/lib/switchyard "$unit" /etc/default/switchyard /usr/bin/switchyard; do
    [ ! -e "$f" ] || fail "$f left after purge"
done
echo "deb-check: ok"
