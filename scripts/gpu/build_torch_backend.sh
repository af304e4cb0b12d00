#!/usr/bin/env bash
# Builds PrismLLM's c10d extension (docs/torch-backend.md) inside the GPU
# bundle, against the host's torch: torch_backend/ -> python/prism_torch/_c10d<ext>.so.
# Usage: bash build_torch_backend.sh [PYTHON]   (default: python3)
# Needs cmake, a C++20 compiler and torch's headers (a PyPI torch has them);
# ninja when there is one. About 1-2 minutes on 16 cores.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${1:-python3}
build=${PRISM_TORCH_BACKEND_BUILD:-$here/torch_backend/build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$here/torch_backend" -B "$build" "${generator[@]}" -DPYTHON="$(command -v "$python")" >"$build.log" 2>&1 ||
  { tail -20 "$build.log" >&2; echo "build_torch_backend.sh: cmake failed (log: $build.log)" >&2; exit 1; }
cmake --build "$build" -j "$(nproc)" >>"$build.log" 2>&1 ||
  { tail -30 "$build.log" >&2; echo "build_torch_backend.sh: build failed (log: $build.log)" >&2; exit 1; }
cp "$build"/_c10d*.so "$here/python/prism_torch/"
echo "build_torch_backend.sh: $(ls "$here"/python/prism_torch/_c10d*.so)"
