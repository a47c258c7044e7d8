#!/usr/bin/env bash
# Builds the belljar kernel image (kernelspec/kubernetes/Containerfile) from Debian's packages
# alone: mmdebstrap makes the base root file system, podman imports it and builds the image on
# top with this checkout's belljar. Needs root (or a podman and mmdebstrap that work rootless).
#   scripts/build-image.sh [IMAGE]         default IMAGE: localhost/belljar-kernel:VERSION
# BUILD_DIR: an existing build to install from (default: build/, built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^project(belljar VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
image=${1:-localhost/belljar-kernel:$version}
base=localhost/belljar-base:bookworm
build=${BUILD_DIR:-$root/build}
# crun refuses hybrid cgroup hierarchies (as on this project's machines); runc takes them.
podman=(podman --runtime runc)

for tool in mmdebstrap podman runc; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
[ -x "$build/belljar" ] || BUILD_DIR="$build" "$root/scripts/build.sh"

context=$(mktemp -d /tmp/belljar-image.XXXXXX)
trap 'rm -rf "$context"' EXIT
cmake --install "$build" --prefix "$context/stage/usr/local" >/dev/null
cp "$root/kernelspec/kubernetes/Containerfile" "$context/"

# The base, made once per package set: Debian's Python stack and the runtime libraries, no
# recommends, no docs or locales, and the gateways' uid 1000 / gid 100 user.
packages=python3,python3-numpy,python3-pandas,python3-matplotlib,python3-ipython,libzmq5,libseccomp2,libssl3,ca-certificates
# fonttools (for matplotlib) wants scipy or munkres; scipy would bring a compiler with it.
packages+=,python3-munkres
stamp=$(echo "$packages" | sha256sum | cut -c1-12)
if [ "$("${podman[@]}" image inspect --format '{{index .Labels "belljar.packages"}}' "$base" 2>/dev/null)" != "$stamp" ]; then
  echo "build-image: making the base root file system with mmdebstrap (Debian bookworm)"
  mmdebstrap --quiet --variant=minbase --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --include="$packages" \
    --customize-hook='chroot "$1" useradd --uid 1000 --gid 100 --create-home --home-dir /home/jovyan --shell /bin/bash jovyan' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    bookworm "$context/rootfs.tar"
  "${podman[@]}" import --change "LABEL belljar.packages=$stamp" "$context/rootfs.tar" "$base" >/dev/null
  rm -f "$context/rootfs.tar"
fi

echo "build-image: building $image"
"${podman[@]}" build --quiet --network none --build-arg BASE="$base" -t "$image" -f "$context/Containerfile" "$context" >/dev/null
"${podman[@]}" image inspect --format '{{.Size}}' "$image" | awk -v i="$image" '{printf "build-image: %s, %.0f MB\n", i, $1 / 1e6}'
