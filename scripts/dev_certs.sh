#!/usr/bin/env bash
# Makes a throwaway development PKI in DIR: a CA, a server certificate for
# 127.0.0.1 and localhost, and a client certificate, all signed by that CA.
# For local runs and tests only; never commit the output. Keys are mode 0600.
#   scripts/dev_certs.sh DIR
# Files: ca.pem ca.key server.pem server.key client.pem client.key
# Env: DEV_CERT_NAMES: more DNS names for the server certificate, space-separated
# (e.g. "rabbitmq payment_service" for the docker-compose network).
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir=$1
mkdir -p "$dir"
cd "$dir"
umask 077
days=30
san="IP:127.0.0.1,DNS:localhost"
for name in ${DEV_CERT_NAMES:-}; do
  [[ $name =~ ^[A-Za-z0-9.-]+$ ]] || { echo "$0: bad DNS name '$name' in DEV_CERT_NAMES" >&2; exit 2; }
  san+=",DNS:$name"
done

openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$days" \
  -subj "/CN=outbox dev CA" -keyout ca.key -out ca.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  2>/dev/null

# issue NAME CN EKU: NAME.key and NAME.pem signed by the CA.
issue() {
  local name=$1 cn=$2 eku=$3
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=$cn" \
    -keyout "$name.key" -out "$name.csr" 2>/dev/null
  printf '%s\n' \
    "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=$eku" \
    "subjectAltName=$san" >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 \
    -days "$days" -extfile "$name.ext" -out "$name.pem" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
# The server certificate may also act as a client one, so a service's
# --health_check can present it to an mTLS server.
issue server "outbox dev server" serverAuth,clientAuth
issue client "outbox dev client" clientAuth
rm -f ca.srl
chmod 600 ./*.key
chmod 644 ./*.pem
echo "dev certificates in $dir: ca.pem server.pem server.key client.pem client.key"
