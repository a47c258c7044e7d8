#!/usr/bin/env bash
# Fetches the peers' source distributions named in requirements/peer-sources.txt (exact versions,
# checked against their hashes by pip, from pip's cache when it has them) into
# BUILD_DIR/peer-suites, and unpacks each one's tests/ and pyproject.toml (its pytest settings)
# into BUILD_DIR/peer-suites/NAME: tests/peers/run_peer_suites.py runs them. Nothing is
# installed: the packages under test are the frontends venv's, of the same versions.
#
#   scripts/peer-sources.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${BUILD_DIR:-$root/build}}
sources=$root/requirements/peer-sources.txt
out=$build/peer-suites
stamp=$out/.sources.sha256
want=$(sha256sum "$sources" | cut -d' ' -f1)
[ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && exit 0

rm -rf "$out"
mkdir -p "$out/sdists"
# --no-build-isolation: pip reads each sdist's metadata with the venv's pinned hatchling rather
# than fetching an unpinned build backend.
"$build/venvs/frontends/bin/python" -m pip download --quiet --disable-pip-version-check \
  --no-input --no-deps --no-binary :all: --no-build-isolation --require-hashes \
  -r "$sources" -d "$out/sdists" >&2
for sdist in "$out"/sdists/*.tar.gz; do
  base=$(basename "$sdist" .tar.gz)   # e.g. jupyter_client-8.10.0
  name=${base%-*}
  mkdir -p "$out/$name"
  tar -xzf "$sdist" -C "$out/$name" --strip-components=1 "$base/tests" "$base/pyproject.toml"
done
echo "$want" >"$stamp"
