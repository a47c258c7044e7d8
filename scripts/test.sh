#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, build, every ctest suite as the current
# user, the suites again as an unprivileged user (nobody), the unit tests under ASan+UBSan,
# and the fuzzers for a bounded time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

"$root/scripts/install-deps.sh"
BUILD_DIR="$root/build" "$root/scripts/build.sh"

status=0
echo "== ctest as $(id -un)"
ctest --test-dir "$root/build" --output-on-failure --timeout 900 || status=1

if [ "$(id -u)" = 0 ] && [ "${BELLJAR_SKIP_NOBODY:-}" != 1 ]; then
  # CI's clone may sit where nobody can't enter (/root is 0700): give nobody its own copy.
  copy=$(mktemp -d /tmp/belljar-nobody.XXXXXX)
  chmod 755 "$copy"
  git -C "$root" ls-files -z --cached --others --exclude-standard | \
    (cd "$root" && xargs -0 cp --parents -t "$copy")
  chown -R nobody:nogroup "$copy"
  echo "== build and ctest as nobody in $copy"
  runuser -u nobody -- env HOME="$copy/home" BUILD_DIR="$copy/build" \
    "$copy/scripts/build.sh" || status=1
  runuser -u nobody -- env HOME="$copy/home" \
    ctest --test-dir "$copy/build" --output-on-failure --timeout 900 || status=1
  rm -rf "$copy"
fi

if [ "${BELLJAR_SKIP_SANITIZERS:-}" != 1 ]; then
  echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  BUILD_DIR="$root/build-asan" "$root/scripts/build.sh" -DBELLJAR_SANITIZE=ON || status=1
  ctest --test-dir "$root/build-asan" --output-on-failure -R '^unit: ' || status=1

  echo "== fuzzers (bounded time)"
  CXX=clang++ BUILD_DIR="$root/build-fuzz" "$root/scripts/build.sh" -DBELLJAR_FUZZ=ON || status=1
  ctest --test-dir "$root/build-fuzz" --output-on-failure -R '^fuzz: ' || status=1
fi
exit $status
