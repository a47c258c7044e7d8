#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, build, every ctest suite as the current
# user and, when that is root, again as an unprivileged user (nobody) on the same build; then
# the unit tests under ASan+UBSan and the fuzzers for a bounded time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Each stage's start, in time since this script began: CI's budget is 90 minutes, ours 45.
stage() { echo "== $1 (at $((SECONDS / 60))m$((SECONDS % 60))s)"; }

"$root/scripts/install-deps.sh"

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
stage "ctest as $(id -un)"
ctest --test-dir "$work/build" --output-on-failure --timeout 900 -E '^fuzz:' || status=1

if [ "$work" != "$root" ]; then
  stage "ctest as nobody"
  mkdir -p "$work/home"
  chown -R nobody:nogroup "$work"
  runuser -u nobody -- env HOME="$work/home" \
    ctest --test-dir "$work/build" --output-on-failure --timeout 900 -E '^fuzz:' || status=1
  rm -rf "$work"
fi

if [ "${BELLJAR_SKIP_SANITIZERS:-}" != 1 ]; then
  stage "unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake -S "$root" -B "$root/build-asan" -DBELLJAR_SANITIZE=ON >/dev/null &&
    cmake --build "$root/build-asan" --target unit_tests -j"$(nproc)" || status=1
  ctest --test-dir "$root/build-asan" --output-on-failure -R '^unit:' || status=1

  stage "fuzzers (bounded time)"
  # 25 s a target (seven of them) keeps CI within its budget; BELLJAR_FUZZ_TIME=600 for a
  # longer search.
  CXX=clang++ cmake -S "$root" -B "$root/build-fuzz" -DBELLJAR_FUZZ=ON \
    -DFUZZ_TIME="${BELLJAR_FUZZ_TIME:-25}" >/dev/null &&
    cmake --build "$root/build-fuzz" --target fuzz_wire_message fuzz_worker_frames fuzz_tls_client_hello \
      fuzz_http_head fuzz_json_rpc fuzz_brokered_http fuzz_jail_records fuzz_kernel_frames -j"$(nproc)" || status=1
  ctest --test-dir "$root/build-fuzz" --output-on-failure -R '^fuzz:' || status=1
fi
stage "done, status $status"
exit $status
