#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies; one release build and every ctest suite on
# it as the current user, in parallel; when that user is root, again as an unprivileged user
# (nobody) for the tests whose outcome depends on who runs them (label `privileged`, set in
# tests/CMakeLists.txt); then one clang build, instrumented, for the unit tests under
# ASan+UBSan and the fuzzers (side by side, a bounded time each).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Each stage's start, in time since this script began: CI's budget is 90 minutes, ours 25.
stage() { echo "== $1 (at $((SECONDS / 60))m$((SECONDS % 60))s)"; }
jobs=$(nproc)

"$root/scripts/install-deps.sh"

# Every test's scratch goes into one folder, removed at the end, whatever a suite or a killed
# kernel left there (kernels' socket folders, connection files, workspaces, a debugger's cell
# files): nothing is left in /tmp. 1777 like /tmp itself, for the sandbox's user and nobody.
scratch=$(mktemp -d /tmp/belljar-tests.XXXXXX)
chmod 1777 "$scratch"
export TMPDIR=$scratch
trap 'rm -rf "$scratch"' EXIT

work=$root
if [ "$(id -u)" = 0 ] && [ "${BELLJAR_SKIP_NOBODY:-}" != 1 ]; then
  # CI's clone may sit where nobody can't enter (/root is 0700): build and test a copy that
  # nobody can read, so one build serves both users.
  work=$(mktemp -d /tmp/belljar-ci.XXXXXX)
  chmod 755 "$work"
  git -C "$root" ls-files -z --cached --others --exclude-standard | \
    (cd "$root" && xargs -0 cp --parents -t "$work")
fi

stage "build"
BUILD_DIR="$work/build" "$work/scripts/build.sh"

status=0
# One clang build at -O1 -g1 (-Os and full debug info cost compile time the checks don't need):
# every object instrumented once, linked into the unit tests and the fuzzers alike. It is made
# beside the suites, at the lowest priority: they mostly wait on sandboxes, and the build takes
# the CPU they leave (in turn, it took ten minutes of the run's 31 when a change touched many
# files). Its log is shown when it fails.
sanitizer_build=""
if [ "${BELLJAR_SKIP_SANITIZERS:-}" != 1 ]; then
  stage "build: ASan+UBSan and libFuzzer (clang), beside the suites at the lowest priority"
  ( CXX=clang++ BUILD_DIR="$root/build-check" BELLJAR_VENVS=0 BUILD_TYPE=Debug \
      nice -n 19 "$root/scripts/build.sh" \
      -DBELLJAR_FUZZ=ON -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DFUZZ_TIME="${BELLJAR_FUZZ_TIME:-15}" \
      >"$scratch/sanitizer-build.log" 2>&1 ) &
  sanitizer_build=$!
fi

# Suites mostly wait on sandboxes, so they run side by side, one more than the cores (at one
# per core the CPUs were busy 40% of the time); ctest starts the longest first from the times it
# kept (build/Testing/Temporary/CTestCostData.txt).
suites=$((jobs + 1))
stage "ctest as $(id -un)"
ctest --test-dir "$work/build" --output-on-failure --timeout 900 -j"$suites" -E '^fuzz:' || status=1

if [ "$work" != "$root" ]; then
  stage "ctest as nobody (label privileged)"
  mkdir -p "$work/home"
  chown -R nobody:nogroup "$work"
  runuser -u nobody -- env HOME="$work/home" \
    ctest --test-dir "$work/build" --output-on-failure --timeout 900 -j"$suites" -L privileged \
    || status=1
  rm -rf "$work"
fi

if [ -n "$sanitizer_build" ]; then
  stage "build: ASan+UBSan and libFuzzer (clang), waited for"
  if ! wait "$sanitizer_build"; then
    tail -n 60 "$scratch/sanitizer-build.log"
    status=1
  fi
  # 15 s a fuzzer keeps CI within its budget; BELLJAR_FUZZ_TIME=600 for a longer search.
  stage "unit tests under ASan+UBSan, and the fuzzers"
  ctest --test-dir "$root/build-check" --output-on-failure -j"$jobs" -R '^(unit|fuzz):' || status=1
fi
stage "done, status $status"
exit $status
