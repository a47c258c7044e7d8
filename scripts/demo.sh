#!/usr/bin/env bash
# The main job: install everything, build belljar, install its kernelspec, start the course's
# chat stand-in on loopback, and execute the walkthrough notebook headless in the sandbox.
# Prints where the executed notebook and its HTML rendering are.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BELLJAR_DEMO_OUT:-$root/out/walkthrough}
tls=${BELLJAR_DEMO_TLS:-$root/out/demo-tls}  # outside the workspace: the sandbox never sees it
port=${BELLJAR_DEMO_PORT:-8765}

"$root/scripts/install-deps.sh"
BUILD_DIR="$root/build" "$root/scripts/build.sh"
# build.sh also makes the venvs from PyPI: a learner's Python (ipywidgets 8, numpy, pandas,
# matplotlib) the session runs in, and the Jupyter clients (nbconvert 7, nbclient 0.11).
learner_python=$root/build/venvs/sandbox-python/bin/python
jupyter=$root/build/venvs/frontends/bin/jupyter

# The course's API key, in the kernel's environment only (a real course would export its own).
# The chat stand-in plays the real API and wants exactly this key.
export OPENAI_API_KEY=sk-demo-kernel-environment-secret-0123456789

# The course's policy: a short time cap, and the key bound to the chat service, which is thereby
# the one allowlisted host (--allow-local-net: localhost is a loopback name). Inside the sandbox
# OPENAI_API_KEY is a placeholder; the egress proxy puts the real key into requests to that host.
# The stand-in serves HTTPS with a demo CA made for this run, which the kernelspec names with
# --upstream-ca (the proxy injects a key only over TLS it verified; the kernel's environment,
# SSL_CERT_FILE included, never decides whom it trusts).
rm -rf "$tls"
"$root/scripts/demo-ca.sh" "$tls" localhost
"$root/build/belljar" install --name belljar --python "$learner_python" --timeout 30 \
  --secret "OPENAI_API_KEY@localhost:$port" --allow-local-net "localhost:$port" \
  --upstream-ca "$tls/ca.crt" --set-env "CHAT_API_BASE=https://localhost:$port/v1"

mkdir -p "$out"
cp "$root/notebooks/walkthrough.ipynb" "$out/walkthrough.ipynb"
# A secret the sandbox must not show: a workspace .env.
printf 'OPENAI_API_KEY=sk-demo-workspace-secret-0123456789\n' > "$out/.env"

/usr/bin/python3 "$root/notebooks/services/chat_standin.py" --port "$port" \
  --tls-cert "$tls/localhost.crt" --tls-key "$tls/localhost-key.txt" &
standin=$!
trap 'kill $standin 2>/dev/null || true' EXIT
for _ in $(seq 100); do  # listening within 10 s
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

cd "$out"
# Executed by nbconvert, widget cells included, as a course's CI would run it.
"$jupyter" nbconvert --to notebook --execute --inplace \
  --ExecutePreprocessor.kernel_name=belljar --ExecutePreprocessor.timeout=300 walkthrough.ipynb
"$jupyter" nbconvert --to html walkthrough.ipynb >/dev/null 2>&1
echo
echo "executed walkthrough: $out/walkthrough.ipynb"
echo "HTML rendering:       $out/walkthrough.html"
