#!/usr/bin/env bash
# Installs every Debian package that belljar's build, tests, benchmark and demo need (what
# comes from PyPI goes into venvs in the build tree: scripts/python-env.sh).
# Idempotent: packages already present are skipped by apt.
set -euo pipefail

packages=(
  # build
  build-essential cmake pkg-config clang libclang-rt-14-dev clang-format
  # compiled objects kept between runs on one machine (scripts/test.sh, scripts/build.sh)
  ccache
  libzmq3-dev cppzmq-dev nlohmann-json3-dev libssl-dev libsodium-dev libseccomp-dev catch2
  # the MCP server's Streamable HTTP (Boost.Beast, header-only)
  libboost-dev
  # the worker's Python and what notebooks expect of it
  python3 python3-venv python3-ipython python3-numpy python3-matplotlib python3-pandas
  python3-requests python3-httpx
  # comms and widgets (issue 14): the `comm` package the worker hooks, ipywidgets 6 and the
  # notebook's widget extension (widgetsnbextension) that renders them
  python3-comm python3-ipywidgets python3-widgetsnbextension
  # Jupyter clients and test tools
  python3-jupyter-client python3-ipykernel python3-nbclient python3-nbformat
  python3-nbconvert python3-jupyter-kernel-test python3-jupyter-console
  jupyter-notebook python3-psutil python3-pytest
  # the benchmark's HTTPS stand-in (bench/brokered.py makes its CA)
  python3-cryptography
  # bench/checkpoints.py: dill, what users pickle a session with today
  python3-dill
  # the `jupyter kernelspec|console|nbconvert` commands the README shows (python3-* are modules only)
  jupyter-client jupyter-console jupyter-nbconvert
  # tests and tools: network namespaces, certificates (scripts/demo-ca.sh), a client the
  # secrets tests run inside the sandbox (curl), browser, a terminal jupyter console runs in
  # (tmux: tests/integration/test_console.py)
  iproute2 openssl curl procps git chromium chromium-driver tmux
  # the kernel image (scripts/build-image.sh, tests/image): a Debian root file system, podman
  mmdebstrap podman runc
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
command -v node >/dev/null || { echo "install-deps: node is required for the browser and MCP tests" >&2; exit 1; }
