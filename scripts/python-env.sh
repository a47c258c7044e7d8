#!/usr/bin/env bash
# Makes, or brings up to date, the venv BUILD_DIR/venvs/NAME from requirements/NAME.txt: exact
# versions with hashes (pip --require-hashes, nothing unpinned), on Debian's /usr/bin/python3,
# never in a system Python. pip's cache is reused, so a second machine-wide run takes seconds;
# a venv whose requirements file has not changed is left as it is.
#
#   scripts/python-env.sh NAME [BUILD_DIR]      prints the venv's path
#
# requirements/NAME.in says what is wanted and why; `pip-compile --generate-hashes NAME.in`
# (pip-tools, in a scratch venv) writes NAME.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=${1:?usage: scripts/python-env.sh NAME [BUILD_DIR]}
build=${2:-${BUILD_DIR:-$root/build}}
requirements=$root/requirements/$name.txt
[ -f "$requirements" ] || { echo "python-env: no $requirements" >&2; exit 2; }
venv=$build/venvs/$name
stamp=$venv/.requirements.sha256
want=$(sha256sum "$requirements" | cut -d' ' -f1)

if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  rm -rf "$venv"
  mkdir -p "$build/venvs"
  /usr/bin/python3 -m venv "$venv"
  # The pip Debian ships with venv is enough to install the pinned set; it is not upgraded
  # (an upgrade would be an unpinned download).
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --require-hashes --only-binary=:all: -r "$requirements" >&2
  echo "$want" >"$stamp"
fi
echo "$venv"
