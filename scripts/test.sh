#!/usr/bin/env bash
# Builds switchyard and runs every test, in stages that each run whatever
# an earlier one did (a failure in one never hides the others' results):
#   release    a -Werror build (build-release) and the whole ctest suite: C unit
#              tests, Lua policy specs, end-to-end tests against the mock upstream
#   sanitizer  the same under AddressSanitizer + UBSan (build-asan, Debug)
#   package    the .deb built, installed, served and purged (scripts/deb-check.sh;
#              skipped unless root on a dpkg system)
#   types      Release, Debug, RelWithDebInfo and MinSizeRel with gcc and clang,
#              warnings as errors (scripts/build-types.sh)
#   fuzz       each libFuzzer target for 3 s (scripts/fuzz.sh; a smoke: long runs are
#              scripts/fuzz.sh 60 and more, outside the suite)
# Prints one summary line per stage at the end and exits 1 if any failed.
# Installs its own dependencies. Its build directories are its own, so it
# can run beside ./scripts/run.sh (which builds and serves from build/).
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh || { echo "test.sh: installing the dependencies failed" >&2; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
summary=()
failed=0

# stage NAME COMMAND...: runs it with its output shown and kept, then records
# "NAME ok|FAILED, what it said, how long".
stage() {
  local name=$1; shift
  local t0=$SECONDS rc
  echo "== $name =="
  "$@" 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  local said
  said=$(stage_said "$logs/$name.log")
  local took=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then
    summary+=("$(printf '%-10s ok      %-52s %3dm%02ds' "$name" "$said" $((took / 60)) $((took % 60)))")
  else
    failed=1
    summary+=("$(printf '%-10s FAILED  %-52s %3dm%02ds' "$name" "${said:-exit $rc}" $((took / 60)) $((took % 60)))")
  fi
}

# What a stage's log says of itself in a few words: ctest's tally, the
# package check's verdict, the build matrix's count.
stage_said() {
  local log=$1 line
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [ -n "$line" ]; then
    local total failedn
    total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
    failedn=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
    local failing
    failing=$(grep -E '^\s+[0-9]+ - ' "$log" | sed -E 's/^\s+[0-9]+ - ([^ ]+).*/\1/' | head -4 | paste -sd, -)
    echo "$((total - failedn))/$total passed${failing:+ (failed: $failing)}"
    return
  fi
  line=$(grep -E '^(deb-check|build-types): ' "$log" | tail -1)
  [ -n "$line" ] && echo "${line#*: }" | cut -c1-52
}

run_suite() {
  local dir=$1; shift
  cmake -S . -B "$dir" -DSY_WERROR=ON "$@" >/dev/null || return 1
  cmake --build "$dir" -j "$jobs" || return 1
  # twice the cores: the end-to-end tests spend most of their time waiting on
  # sockets and timers, not computing (the suite took 18 minutes at -j2, 13 at -j4)
  (cd "$dir" && ctest --output-on-failure -j "$((jobs * 2))")
}

sanitized() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite build-asan -DSY_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
}

stage release run_suite build-release
stage sanitizer sanitized
stage package ./scripts/deb-check.sh build-release
stage types ./scripts/build-types.sh
stage fuzz ./scripts/fuzz.sh 3

echo
echo "== summary =="
printf '%s\n' "${summary[@]}"
exit $failed
