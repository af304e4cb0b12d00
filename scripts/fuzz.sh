#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (the `fuzz` preset: clang, ASan +
# UBSan, build-fuzz/) and runs them (docs/fuzzing.md).
#
#   scripts/fuzz.sh --smoke             every target for $PRISM_FUZZ_SMOKE_S seconds (default 60),
#                                       $PRISM_FUZZ_JOBS (default 2) at a time: what CI runs
#   scripts/fuzz.sh --seconds N [T...]  the targets T (default: all) for N seconds each
#   scripts/fuzz.sh --runs N [T...]     the targets T for N executions each
#
# Each target starts from its seeds (fuzz/corpus/T/, the tests' files, and
# build-fuzz/seeds/T/, made by fuzz_make_seeds with the project's writers)
# and its dictionary (fuzz/dict/T.dict); inputs it finds that add coverage go
# to build-fuzz/corpus/T/, a crashing input to build-fuzz/artifacts/, its log
# to build-fuzz/logs/T.log. Any crash, leak, sanitizer report or timeout
# (an input taking over 30 s) fails the script with the log's end.
# Without clang++-14 and its libFuzzer runtime the script says so and
# exits 0: the fuzz build is skipped, not failed.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

targets_all=(graph_json job_yaml cluster_yaml chakra_et kineto_json memory_snapshot capture_file
             wire_frames tcpstore)
mode=""
amount=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) mode=seconds; amount=${PRISM_FUZZ_SMOKE_S:-60}; shift ;;
    --seconds|--runs) mode=${1#--}; amount=${2:?"error: fuzz.sh: $1 needs a number"}; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ -z "$mode" ]; then
  echo "error: fuzz.sh: say --smoke, --seconds N or --runs N (--help)" >&2
  exit 2
fi
if ! [[ "$amount" =~ ^[1-9][0-9]*$ ]]; then
  echo "error: fuzz.sh: --$mode $amount is not a positive integer" >&2
  exit 2
fi
[ ${#targets[@]} -eq 0 ] && targets=("${targets_all[@]}")
for t in "${targets[@]}"; do
  if ! printf '%s\n' "${targets_all[@]}" | grep -qx "$t"; then
    echo "error: fuzz.sh: unknown target $t (${targets_all[*]})" >&2
    exit 2
  fi
done

# clang++-14 with libFuzzer's runtime (Debian: clang-14, libclang-rt-14-dev).
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  >"$probe/p.cc"
if ! command -v clang++-14 >/dev/null 2>&1 ||
   ! clang++-14 -fsanitize=fuzzer,address,undefined "$probe/p.cc" -o "$probe/p" >/dev/null 2>&1; then
  echo "fuzz: skipped: clang++-14 with libFuzzer (Debian: clang-14, libclang-rt-14-dev) is not installed"
  exit 0
fi

build=$repo/build-fuzz
start=$SECONDS
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake --preset fuzz >"$probe/configure.log" 2>&1 || { cat "$probe/configure.log"; exit 1; }
fi
cmake --build --preset fuzz >"$probe/build.log" 2>&1 || { tail -50 "$probe/build.log"; exit 1; }
echo "fuzz: build-fuzz built in $((SECONDS - start)) s"
rm -rf "$build/seeds"
"$build/bin/fuzz_make_seeds" "$repo" "$build/seeds"
mkdir -p "$build/logs" "$build/artifacts"

# Runs target $1; prints one line; returns nonzero on a finding.
run_one() {
  local t=$1
  local log=$build/logs/$t.log
  local limit=(-runs="$amount")
  [ "$mode" = seconds ] && limit=(-max_total_time="$amount")
  mkdir -p "$build/corpus/$t"
  local seeds=("$build/corpus/$t")
  [ -d "fuzz/corpus/$t" ] && seeds+=("fuzz/corpus/$t")
  [ -d "$build/seeds/$t" ] && seeds+=("$build/seeds/$t")
  local dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  local rc=0
  "$build/bin/fuzz_$t" "${limit[@]}" "${dict[@]}" -timeout=30 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "${seeds[@]}" >"$log" 2>&1 ||
    rc=$?
  local runs per_s
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  per_s=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $t: FAILED (exit $rc) after ${runs:-?} executions; the end of $log:"
    tail -40 "$log"
    return 1
  fi
  echo "fuzz: $t: ${runs:-?} executions (${per_s:-?}/s), no crash, leak or sanitizer report"
}

jobs=${PRISM_FUZZ_JOBS:-2}
failed=0
pids=()
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
  run_one "$t" >"$build/logs/$t.summary" 2>&1 &
  pids+=($!)
done
# In the targets' order, whatever order they ended in.
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed=$((failed + 1))
  cat "$build/logs/${targets[$i]}.summary"
done
if [ "$failed" -ne 0 ]; then
  echo "error: fuzz: $failed target(s) found a crash, leak or sanitizer report (build-fuzz/artifacts/)"
  exit 1
fi
echo "fuzz: ${#targets[@]} target(s) passed in $((SECONDS - start)) s"
