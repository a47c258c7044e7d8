#!/usr/bin/env bash
# Configures and builds belljar into BUILD_DIR (default build/); extra args go to cmake.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
# ccache (installed by install-deps.sh) keeps compiled objects between builds on one machine;
# a file compiles to the same object wherever the tree is cloned (paths taken from the root).
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=true
fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
# The build tree's Python from PyPI, exact versions with hashes, each in a venv of its own
# (scripts/python-env.sh; seconds once pip's cache has them): ruff, for `style: ruff`; a
# learner's venv of current PyPI releases the notebooks run in (tests/integration/test_notebooks);
# and the Jupyter frontends and clients the tests drive (JupyterLab, Notebook 7, nbclient,
# papermill, jupyter_kernel_test, ipykernel as the baseline); and the official MCP Python SDK, as
# an agent's client. BELLJAR_VENVS=0 skips them (the sanitizer build, whose tests are the unit
# tests and the fuzzers).
if [ "${BELLJAR_VENVS:-1}" != 0 ]; then
  for name in lint sandbox-python frontends mcp-sdk; do
    "$root/scripts/python-env.sh" "$name" "$build" >/dev/null
  done
  # The peers' test suites, from their sdists (tests/peers/run_peer_suites.py runs them).
  "$root/scripts/peer-sources.sh" "$build"
fi
