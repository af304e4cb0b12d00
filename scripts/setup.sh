#!/usr/bin/env bash
# Installs what PrismLLM needs to build and test on Debian 12, from Debian's
# own packages only. Idempotent: installed packages are left alone, and the
# package index is refreshed only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build
  nlohmann-json3-dev libcli11-dev libfmt-dev libyaml-cpp-dev libabsl-dev libasio-dev
  libgtest-dev libgmock-dev
  protobuf-compiler libprotobuf-dev
  clang-format
  # PyTorch programs as real ranks: the c10d backend builds against
  # libtorch-dev and pybind11 and runs under python3-torch (CPU).
  python3-torch libtorch-dev python3-dev pybind11-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
echo "setup: installing ${missing[*]}"
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
