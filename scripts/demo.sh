#!/usr/bin/env bash
# The main job: install everything, build belljar, install its kernelspec, start the course's
# chat stand-in on loopback, and execute the walkthrough notebook headless in the sandbox.
# Prints where the executed notebook and its HTML rendering are.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BELLJAR_DEMO_OUT:-$root/out/walkthrough}
port=${BELLJAR_DEMO_PORT:-8765}

"$root/scripts/install-deps.sh"
BUILD_DIR="$root/build" "$root/scripts/build.sh"

# The course's policy: a short time cap and the chat service as the one allowlisted host.
"$root/build/belljar" install --name belljar --python /usr/bin/python3 --timeout 30 \
  --allow-net "127.0.0.1:$port" --set-env "CHAT_API_BASE=http://127.0.0.1:$port/v1"

mkdir -p "$out"
cp "$root/notebooks/walkthrough.ipynb" "$out/walkthrough.ipynb"
# Secrets the sandbox must not show: a workspace .env and a key in the kernel's environment.
printf 'OPENAI_API_KEY=sk-demo-workspace-secret-0123456789\n' > "$out/.env"
export OPENAI_API_KEY=sk-demo-kernel-environment-secret-0123456789

/usr/bin/python3 "$root/notebooks/services/chat_standin.py" --port "$port" &
standin=$!
trap 'kill $standin 2>/dev/null || true' EXIT

cd "$out"
/usr/bin/python3 -m nbconvert --to notebook --execute --inplace \
  --ExecutePreprocessor.kernel_name=belljar --ExecutePreprocessor.timeout=300 walkthrough.ipynb
/usr/bin/python3 -m nbconvert --to html walkthrough.ipynb >/dev/null 2>&1
echo
echo "executed walkthrough: $out/walkthrough.ipynb"
echo "HTML rendering:       $out/walkthrough.html"
