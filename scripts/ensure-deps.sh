#!/usr/bin/env bash
# Installs the system packages Weir's build and tests need, when they are missing:
#   libclang-dev       RocksDB's Rust bindings are generated with bindgen, which needs libclang
#   libssl-dev, pkg-config  the schema registry client (avro-confluent) talks TLS through OpenSSL
#   postgresql-client  psql, for the test that drives the real psql binary
#   chromium           headless, for the test that opens the web page (tests/web.rs)
# Run as root (it uses apt-get); otherwise it prints what to install and fails.
set -euo pipefail

missing=()
# libclang.so or libclang-NN.so, not libclang-cpp (which lld and other LLVM tools pull in).
# (One match is enough: `ls` over all the patterns would fail when any one of them matches nothing.)
found_libclang=no
for f in /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* \
         /usr/lib/x86_64-linux-gnu/libclang.so* /usr/lib/x86_64-linux-gnu/libclang-[0-9]*.so*; do
  if [[ -e "$f" ]]; then
    found_libclang=yes
    break
  fi
done
if [[ $found_libclang == no ]]; then
  missing+=(libclang-dev)
fi
if [[ ! -f /usr/include/openssl/ssl.h ]]; then
  missing+=(libssl-dev)
fi
if ! command -v pkg-config >/dev/null 2>&1; then
  missing+=(pkg-config)
fi
if [[ "${1:-}" == "--test" ]] && ! command -v psql >/dev/null 2>&1; then
  missing+=(postgresql-client)
fi
if [[ "${1:-}" == "--test" ]] && ! command -v chromium >/dev/null 2>&1; then
  missing+=(chromium)
fi
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "Weir needs these Debian packages: ${missing[*]}" >&2
  echo "Install them with: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing ${missing[*]} ..." >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
