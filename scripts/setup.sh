#!/usr/bin/env bash
# Installs what PrismLLM needs to build and test on Debian 12: Debian's
# packages with apt-get, and PyTorch 2.11.0 from PyPI into .venv (in the
# repository, git-ignored) with pip. Idempotent: installed packages are left
# alone, the package index is refreshed only when something is missing, and
# .venv is left as it is when it already has the pinned set.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
  build-essential cmake ninja-build
  nlohmann-json3-dev libcli11-dev libfmt-dev libyaml-cpp-dev libabsl-dev libasio-dev
  libgtest-dev libgmock-dev
  protobuf-compiler libprotobuf-dev
  clang-format
  # scripts/fuzz.sh: the fuzz targets (docs/fuzzing.md) are built by clang
  # with libFuzzer, ASan and UBSan, whose runtimes libclang-rt-14-dev holds.
  clang-14 libclang-rt-14-dev
  # scripts/gpu/bundle.sh: the bundle's binaries find their libraries via $ORIGIN.
  patchelf
  # PyTorch programs as real ranks: .venv (below) is made with Debian's
  # python3 and its venv module, and the c10d backend needs its Python.h.
  python3 python3-venv python3-dev
  # tests/scripts/html_report_test.py opens the --html reports in headless
  # chromium (loads, no console error, a non-blank screenshot); about 410 MB
  # with its libraries, some 30 s to install.
  chromium
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
else
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
  echo "setup: installing ${missing[*]}"
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# PyTorch: the pinned set of scripts/requirements-torch.txt in .venv, each
# package installed with --no-deps (the file pins them all). Wheels are
# kept outside the repository, in $PRISM_WHEELHOUSE (default
# ~/.cache/prismllm/wheels), and installed from there without the network:
# pip's own cache keeps nothing here, as the registry's answers carry no
# caching headers. A fresh clone (CI) makes its .venv again from them.
venv=$repo/.venv
wheels=${PRISM_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/prismllm/wheels}
requirements=("$repo/scripts/requirements-torch.txt" "$repo/scripts/requirements-torch-cuda.txt")
pinned=$(cat "${requirements[@]}" | sha256sum | cut -d' ' -f1)

# Installs requirements file $1 into .venv, downloading what the wheelhouse lacks.
pip_install() {
  local pip=("$venv/bin/python" -m pip --disable-pip-version-check)
  if ! "${pip[@]}" install --dry-run --quiet --no-deps --no-index --find-links "$wheels" \
      -r "$1" >/dev/null 2>&1; then
    echo "setup: downloading the wheels of ${1#"$repo"/} into $wheels"
    "${pip[@]}" download --quiet --no-deps --dest "$wheels" -r "$1"
  fi
  "${pip[@]}" install --quiet --no-deps --no-index --find-links "$wheels" -r "$1"
}

if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.prism-pinned" 2>/dev/null)" = "$pinned" ]; then
  echo "setup: .venv already has torch $("$venv/bin/python" -c \
    'import importlib.metadata as m; print(m.version("torch"))')"
else
  start=$SECONDS
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  pip_install "${requirements[0]}"
  if ! "$venv/bin/python" -c 'import torch' >/dev/null 2>&1; then
    echo "setup: torch needs its own CUDA libraries here (none in /usr/local/cuda-13.0)"
    pip_install "${requirements[1]}"
  fi
  version=$("$venv/bin/python" -c 'import torch; print(torch.__version__)')
  echo "$pinned" >"$venv/.prism-pinned"
  echo "setup: .venv: torch $version installed in $((SECONDS - start)) s ($(du -sh "$venv" | cut -f1))"
fi
