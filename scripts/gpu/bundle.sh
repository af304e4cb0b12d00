#!/usr/bin/env bash
# Makes the GPU bundle (docs/gpu.md): one folder with everything a GPU host
# with no network (Ubuntu 24.04-like, newer glibc, python 3.12, torch 2.11 +
# CUDA 13, cmake, ninja) needs to run scripts/gpu/check.sh there:
#   bin/       prism, rank_player (RUNPATH $ORIGIN/../lib)
#   lib/       libnccl.so.2 (the drop-in; no libnccl.so link), libprism_client.so, and the Debian
#              libraries they need that are not glibc's or libstdc++'s (libfmt,
#              libyaml-cpp, abseil, ...; RUNPATH $ORIGIN)
#   python/    prism_torch and sitecustomize, as source
#   torch_backend/  the C++ sources and headers of the c10d extension and a
#              minimal CMake project for it; build_torch_backend.sh builds it
#              there against the host's torch into python/prism_torch/
#   examples/, data/kernels.csv, scripts/measure_kernels.py (+ kernel_signatures.py), gpu/ (check programs)
#   wheels/    pinned wheels (megatron-core), downloaded here with pip
#   check.sh, MANIFEST (path, bytes, sha256 of every other file)
#
# Usage: scripts/gpu/bundle.sh [--build DIR] [--out DIR] [--no-wheels]
#   --build DIR   the CMake build folder (default: build)
#   --out DIR     the bundle (default: BUILD/gpu-bundle); made anew
#   --no-wheels   leave wheels/ empty (no download; the CI test uses it)
# Wheels are kept in $PRISM_WHEELHOUSE/gpu (default ~/.cache/prismllm/wheels/gpu)
# and downloaded there only when missing.
# Fails, saying why, when a file is missing or the bundle passes 60 MiB.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$repo/build
out=
wheels_too=1
limit_mib=${PRISM_BUNDLE_LIMIT_MIB:-60}  # the limit; lower only to test the refusal
# megatron-core 0.16.1: the newest release pip offers for python 3.12 here
# (2026-11-27); it supports torch 2.11. A cp312 manylinux wheel (compiled
# dataset helpers), not pure Python: it needs the host's python 3.12.
# Its dependencies: torch and numpy are on the host with torch; packaging
# (pure Python) may not be, so it comes too.
wheel_specs=("megatron-core==0.16.1" "packaging==25.0")

while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-wheels) wheels_too=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bundle.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
done
out=${out:-$build/gpu-bundle}

die() { echo "bundle.sh: error: $*" >&2; exit 1; }
need() { [ -e "$1" ] || die "missing $1${2:+ ($2)}"; }

need "$build/bin/prism" "build prism first: cmake --build --preset release"
need "$build/bin/rank_player"
need "$build/lib/libnccl.so.2" "the drop-in: needs nccl.h and cuda.h at configure time"
need "$build/lib/libprism_client.so"
command -v patchelf >/dev/null || die "patchelf not found (scripts/setup.sh installs it)"

rm -rf "$out"
mkdir -p "$out"/{bin,lib,python,torch_backend,examples,data,scripts,gpu,wheels}
out=$(cd "$out" && pwd)

cp "$build/bin/prism" "$build/bin/rank_player" "$out/bin/"
cp "$build/lib/libnccl.so.2" "$build/lib/libprism_client.so" "$out/lib/"
# No libnccl.so link: links may not survive the copy to the host, and
# LD_PRELOAD names libnccl.so.2 itself.

# Shared libraries: every one ldd resolves for the binaries, except glibc's,
# libstdc++/libgcc_s (the host's are newer) and CUDA's driver.
system_lib='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libutil|libresolv|libstdc\+\+|libgcc_s|libcuda|libnvidia)[.-]'
mapfile -t deps < <(for f in "$out"/bin/* "$out"/lib/*.so*; do ldd "$f"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $1 " " $3}' | sort -u)
for d in "${deps[@]}"; do
  name=${d%% *} path=${d#* }
  [[ $name =~ $system_lib ]] && continue
  [ -e "$out/lib/$name" ] && continue
  cp -L "$path" "$out/lib/$name"
done
for f in "$out"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$out"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f"; done

# The Python side, as source (the c10d extension is built on the host).
cp -r "$repo/src/shim/torch/python/." "$out/python/"
find "$out/python" -name __pycache__ -prune -exec rm -rf {} +

# The c10d extension's sources: src/shim/torch and the client's closure
# (client, wire, util, include/prism), plus the header-only parts of the
# libraries they use (asio; fmt in header-only mode) that the host lacks.
tb=$out/torch_backend
mkdir -p "$tb"/src/{shim/torch,client,wire,util} "$tb"/include "$tb"/third_party
cp "$repo"/src/shim/torch/*.{cc,h} "$tb/src/shim/torch/"
for d in client wire util; do cp "$repo"/src/$d/*.{cc,h} "$tb/src/$d/"; done
cp -r "$repo/include/prism" "$tb/include/"
cp -r /usr/include/asio /usr/include/asio.hpp /usr/include/fmt "$tb/third_party/"
cp "$repo/scripts/gpu/torch_backend.cmake" "$tb/CMakeLists.txt"
cp "$repo/scripts/gpu/build_torch_backend.sh" "$out/"

cp -r "$repo"/examples/{ddp_gpt,pipeline_gpt,cuda_gpt,megatron_gpt,jobs,validation} "$out/examples/"
mkdir -p "$out/examples/rank_player" && cp "$repo"/examples/rank_player/* "$out/examples/rank_player/"
cp "$repo/data/kernels.csv" "$out/data/"
cp "$repo/scripts/measure_kernels.py" "$repo/scripts/kernel_signatures.py" "$out/scripts/"
cp "$repo"/scripts/gpu/{release_latency.py,nccl_footprint.py,capture_figures.py,trace_kernels.py,coordinator_gone.py,insitu_figures.py,sustained_clocks.py} "$out/gpu/"
cp "$repo/scripts/gpu/check.sh" "$out/"
find "$out" -name __pycache__ -prune -exec rm -rf {} +

if [ "$wheels_too" = 1 ]; then
  house=${PRISM_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/prismllm/wheels}/gpu
  mkdir -p "$house"
  for spec in "${wheel_specs[@]}"; do
    name=${spec%%==*} version=${spec#*==}
    pattern="${name//-/_}-${version}-*.whl"
    if ! compgen -G "$house/$pattern" >/dev/null; then
      echo "bundle.sh: downloading $spec (python 3.12, manylinux x86_64) into $house"
      python3 -m pip download --quiet --disable-pip-version-check --no-deps \
        --python-version 3.12 --only-binary=:all: --platform manylinux_2_28_x86_64 \
        --platform manylinux2014_x86_64 --platform any --dest "$house" "$spec" ||
        die "cannot download $spec (no network? --no-wheels leaves wheels out)"
    fi
    cp "$house"/$pattern "$out/wheels/"
  done
fi

# MANIFEST: every file but itself, sorted: path, bytes, sha256.
(cd "$out" && find . -path ./MANIFEST -prune -o -type f -print | sed 's|^\./||' |
  LC_ALL=C sort | while read -r f; do
    printf '%s %s %s\n' "$f" "$(stat -L -c %s "$f")" "$(sha256sum <"$f" | cut -d' ' -f1)"
  done) >"$out/MANIFEST"

bytes=$(du -sb "$out" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}')
files=$(wc -l <"$out/MANIFEST")
if [ "$bytes" -gt $((limit_mib * 1048576)) ]; then
  die "the bundle $out is $mib MiB, over the $limit_mib MiB limit"
fi
echo "bundle.sh: $out: $files files, $mib MiB (limit $limit_mib MiB)"
