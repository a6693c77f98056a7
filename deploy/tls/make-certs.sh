#!/usr/bin/env bash
# Make a private CA and one certificate each for the Dask scheduler, the workers and the
# clients (mutual TLS: every side proves it holds a certificate of this CA), and DIR/dask.yaml,
# the Dask configuration that uses them (from dask-tls.yaml beside this script).
#
# Usage: make-certs.sh DIR [NAME ...]
#   DIR   new directory for the files (keys readable by their owner only)
#   NAME  extra DNS names or IP addresses the certificates are for (the scheduler's host
#         name, a private interface's address); localhost and 127.0.0.1 are always in.
# Environment: HETGRAPH_CERT_DAYS [365]. Needs openssl.
# Keep ca-key.pem away from the cluster once done: whoever holds it can join it.
set -euo pipefail
dir=${1:?usage: make-certs.sh DIR [NAME ...]}
shift
days=${HETGRAPH_CERT_DAYS:-365}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v openssl > /dev/null || { echo "make-certs.sh: needs openssl" >&2; exit 2; }

umask 077
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
san="DNS:localhost,IP:127.0.0.1"
for name in "$@"; do
  if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then san+=",IP:$name"; else san+=",DNS:$name"; fi
done
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2> /dev/null; }

key "$dir/ca-key.pem"
openssl req -x509 -new -key "$dir/ca-key.pem" -sha256 -days "$days" -subj "/CN=hetgraph Dask CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out "$dir/ca.pem"
for role in scheduler worker client; do
  key "$dir/$role-key.pem"
  openssl req -new -key "$dir/$role-key.pem" -subj "/CN=hetgraph-$role" -out "$dir/$role.csr"
  printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=$san" > "$dir/$role.ext"
  openssl x509 -req -in "$dir/$role.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" \
    -CAcreateserial -sha256 -days "$days" -extfile "$dir/$role.ext" -out "$dir/$role.pem" 2> /dev/null
  rm -f "$dir/$role.csr" "$dir/$role.ext"
done
rm -f "$dir/ca.srl"
sed "s|@TLS_DIR@|$dir|g" "$here/dask-tls.yaml" > "$dir/dask.yaml"
echo "certificates and $dir/dask.yaml written; export DASK_CONFIG=$dir/dask.yaml"
