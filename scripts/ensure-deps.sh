#!/usr/bin/env bash
# Installs the system packages Weir's build and tests need, when they are missing:
#   libclang-dev       RocksDB's Rust bindings are generated with bindgen, which needs libclang
#   postgresql-client  psql, for the test that drives the real psql binary
# Run as root (it uses apt-get); otherwise it prints what to install and fails.
set -euo pipefail

missing=()
# libclang.so or libclang-NN.so, not libclang-cpp (which lld and other LLVM tools pull in).
if ! ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* \
        /usr/lib/x86_64-linux-gnu/libclang.so* /usr/lib/x86_64-linux-gnu/libclang-[0-9]*.so* >/dev/null 2>&1; then
  missing+=(libclang-dev)
fi
if [[ "${1:-}" == "--test" ]] && ! command -v psql >/dev/null 2>&1; then
  missing+=(postgresql-client)
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
