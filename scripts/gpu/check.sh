#!/usr/bin/env bash
# The GPU check of issue 23 (docs/gpu.md), run from inside the bundle that
# scripts/gpu/bundle.sh makes (build/gpu-bundle/check.sh):
#
#   bash check.sh --dry-run     no GPU needed: the bundle's self-test
#   bash check.sh [options]     the GPU checks, <= 7 minutes, on a GPU host
#
# --dry-run: every MANIFEST file present with its size and sha256; ldd of
# every binary and library resolves (libcuda.so.1 excepted: only a GPU host
# has it, and the drop-in dlopens it); bin/prism runs; every shell script
# parses (bash -n) and every Python file compiles. One line per check, then
# a summary; exit 0 only when all pass.
#
# GPU checks, each bounded by a timeout inside an overall budget (--budget,
# 400 s), run in the order --only gives (default e,d,a,f,c,b,h,g,k,build: the
# simplest use of the drop-in first, so a broken GPU path shows early);
# figures go to OUT/figures.json, the log to OUT/check.log:
#   build  the c10d extension against the host's torch (build_torch_backend.sh)
#   (a)    examples/cuda_gpt/train.py (bf16, CUDA) as rank K of the 1,024-rank
#          DGX H100 job, LD_PRELOAD of the drop-in, through `prism emulate`:
#          --parallel ddp, fsdp, tp; emulated vs predicted iteration time
#   (b)    examples/megatron_gpt/train.py (Megatron-Core 0.16.1 from wheels/, GPT,
#          local spec, 1F1B) as rank K of a TP1 PP4 DP256 job through the drop-in
#   (c)    (a)'s program's GPU time per step (ddp), world size 1 (real NCCL) vs
#          emulated on a near-instant network (drop-in): percent apart
#   (d)    stream release: release_latency.py, 1,000 one-element all-reduces
#          between CUDA events, alone (real NCCL) and emulated (drop-in)
#   (e)    NCCL memory: gpu/nccl_footprint.py with torch's real libnccl
#          (nranks=1) and with the drop-in under `prism emulate`
#   (g)    kernels `prism simulate --kernels` lists for examples/validation
#          jobs on this GPU that data/kernels.csv lacks, measured with
#          scripts/measure_kernels.py (as many as the time allows)
#   (f)    capture on GPU: (a) ddp's capture, its `kernels` compute (CUDA
#          events of the held streams) vs the program's own step times, and
#          the replay of its graph (predicted) vs the emulated iteration
#   (k)    a Kineto trace of a real GPU step (torch.profiler), imported with
#          `prism import kineto`, and its kernel times taken with `prism
#          calibrate kineto` (the in-situ calibration path)
#   (i)    not in the default list: a profiled training step at an 8B model's
#          width (dim 4096, seq 4096), each kernel signature's time in the step
#          (`prism calibrate kineto`) against the same signature called alone
#          (scripts/measure_kernels.py: CUDA events, and its own profile)
#   (m)    not in the default list (minutes): every kernel signature the
#          validation jobs need on this GPU (the union of `prism simulate
#          --kernels` over examples/validation, CP-halved attention and fp8
#          GEMMs included), measured with scripts/measure_kernels.py --profile;
#          the profile's own kernel times (`prism calibrate kineto`) beside them
#   (h)    the coordinator gone while a stream is held: gpu/coordinator_gone.py
#          kills `prism` (SIGKILL) during (a) ddp's emulation; the orphaned
#          rank must end by itself, with the drop-in's error, within 60 s
#   (p)    perturbation diagnostics (not in the default list): (c)'s program
#          30 steps alone and emulated, profiled, and with the progress thread
#          polling every 5 us
# Run on an H200 on 2026-11-27 (docs/gpu.md, Results); each check ends
# with one error line rather than hanging, and the script ends every
# process of its session after each step and on exit (interrupts included).
#
# Options: --out DIR (default ./gpu-check-<UTC time>), --python PY (python3),
#   --rank K (the real rank, 5), --budget SECONDS (400), --only LIST (of e,d,a,f,c,b,h,g,k,build,p,i,m
#   in the order to run them), --a-modes LIST (ddp,fsdp,tp)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
args=("$@")
dry=0 out= python=python3 rank=5 budget=400 only=e,d,a,f,c,b,h,g,k,build a_modes=ddp,fsdp,tp
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) dry=1; shift ;;
    --out) out=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --rank) rank=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --a-modes) a_modes=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "check.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
done

# A copy that dropped the modes (a file transfer) still runs.
chmod u+x "$here"/bin/* "$here"/*.sh 2>/dev/null

# ---------------------------------------------------------------- dry run
if [ "$dry" = 1 ]; then
  pass=0 fail=0
  ok() { echo "ok    $*"; pass=$((pass + 1)); }
  bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
  if [ ! -f "$here/MANIFEST" ]; then
    bad "manifest: $here/MANIFEST missing"
  else
    n=0 wrong=0
    while read -r path size sum; do
      n=$((n + 1))
      if [ ! -e "$here/$path" ]; then
        bad "manifest: $path missing"; wrong=$((wrong + 1))
      elif [ "$(stat -L -c %s "$here/$path")" != "$size" ] ||
           [ "$(sha256sum <"$here/$path" | cut -d' ' -f1)" != "$sum" ]; then
        bad "manifest: $path differs from MANIFEST (size or sha256)"; wrong=$((wrong + 1))
      fi
    done <"$here/MANIFEST"
    [ "$wrong" = 0 ] && ok "manifest: $n files present, sizes and sha256 as listed"
  fi
  for f in "$here"/bin/* "$here"/lib/*.so*; do
    [ -L "$f" ] && continue
    [ -e "$f" ] || continue
    missing=$(env -u LD_LIBRARY_PATH ldd "$f" 2>&1 | awk '/not found/ {print $1}' | grep -v '^libcuda\.so\.1$' | tr '\n' ' ')
    # A library the bundle ships must come from the bundle (RUNPATH $ORIGIN).
    outside=$(env -u LD_LIBRARY_PATH ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
      while read -r name path; do
        [ -e "$here/lib/$name" ] && [ "$(readlink -f "$path")" != "$(readlink -f "$here/lib/$name")" ] && echo -n "$name=$path "
      done)
    if [ -n "$missing" ]; then bad "ldd ${f#"$here"/}: not found: $missing"
    elif [ -n "$outside" ]; then bad "ldd ${f#"$here"/}: not the bundle's copy: $outside"
    else ok "ldd ${f#"$here"/}: resolves (the bundle's libraries from lib/)"; fi
  done
  echo "note  libcuda.so.1 (CUDA's driver) is not looked for: only a GPU host has it; the drop-in dlopens it"
  if v=$(env -u LD_LIBRARY_PATH "$here/bin/prism" --version 2>&1); then ok "bin/prism runs: $v"
  else bad "bin/prism --version fails: $v"; fi
  while IFS= read -r f; do
    if e=$(bash -n "$f" 2>&1); then ok "bash -n ${f#"$here"/}"; else bad "bash -n ${f#"$here"/}: $e"; fi
  done < <(find "$here" -name '*.sh' -type f | LC_ALL=C sort)
  while IFS= read -r f; do
    if e=$(python3 -B -c 'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], "exec")' "$f" 2>&1); then
      ok "python compiles ${f#"$here"/}"
    else bad "python compiles ${f#"$here"/}: $(echo "$e" | tail -1)"; fi
  done < <(find "$here" -name '*.py' -type f -not -path '*/torch_backend/*' | LC_ALL=C sort)
  echo "dry run: $pass passed, $fail failed"
  [ "$fail" = 0 ]
  exit
fi

# ---------------------------------------------------------------- GPU run
if [ ! -f "$here/bin/prism" ]; then
  echo "check.sh: error: $here is not a bundle (no bin/prism): run it as build/gpu-bundle/check.sh, after scripts/gpu/bundle.sh" >&2
  exit 1
fi
out=${out:-$PWD/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
log=$out/check.log
figs=$out/figures.d
mkdir -p "$figs"
start=$SECONDS
# A session of its own, so that the steps and the trap can end
# everything started here; setsid --wait keeps the caller waiting for it.
read -r _ _ _ _ _ sid _ </proc/$$/stat
if [ "$sid" != "$$" ]; then
  exec setsid --wait bash "${BASH_SOURCE[0]}" "${args[@]}" --out "$out"
fi
# The session's processes other than this shell and its subshell: the ranks
# `prism emulate` starts are in process groups of their own, but in this session.
others() {
  local f p s
  for f in /proc/[0-9]*/stat; do
    read -r p _ _ _ _ s _ <"$f" 2>/dev/null || continue
    [ "$s" = "$$" ] && [ "$p" != "$$" ] && [ "$p" != "$BASHPID" ] && echo "$p"
  done
}
# Ends what a step left behind (TERM, then KILL 2 s later); says so.
reap() {
  local left; left=$(others)
  [ -z "$left" ] && return 0
  kill -TERM $left 2>/dev/null; sleep 2
  left=$(others); [ -n "$left" ] && kill -KILL $left 2>/dev/null
  say "$1: ended the processes left behind"
}
cleanup() {
  trap - EXIT
  trap '' INT TERM
  reap end
  say "end: $((SECONDS - start)) s; figures: $out/figures.json; log: $log"
  merge_figures
}
say() { echo "[check $(date -u +%H:%M:%S)] $*" | tee -a "$log"; }
fig() { printf '%s' "$2" >"$figs/$1.json"; }  # fig NAME JSON
merge_figures() {
  "$python" - "$figs" "$out/figures.json" <<'EOF' 2>>"$log" || cp /dev/null "$out/figures.json"
import json, os, sys
d, o = sys.argv[1], sys.argv[2]
r = {}
for n in sorted(os.listdir(d)):
    try:
        r[n[:-5]] = json.load(open(os.path.join(d, n)))
    except Exception as e:
        r[n[:-5]] = {"unparsed": open(os.path.join(d, n)).read()[:2000], "why": str(e)}
json.dump(r, open(o, "w"), indent=1, sort_keys=True)
EOF
  "$python" - "$out/figures.json" <<'EOF' 2>>"$log" | tee -a "$log"
import json, sys
f = json.load(open(sys.argv[1]))


def g(d, *keys):
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d


print("summary (figures.json):")
for m in ("ddp", "fsdp", "tp"):
    if "a_" + m in f:
        its = (g(f, "a_" + m, "report", "real_ranks") or [{}])[0].get("iteration_times_s") or []
        steady = sorted(its[1:])[len(its[1:]) // 2] if len(its) > 1 else None  # after the first
        print("  (a) %-4s exit %s, emulated %s s (median after the first: %s s) vs predicted %s s per iteration" % (
            m, g(f, "a_" + m, "exit"), g(f, "a_" + m, "report", "iteration_time_s"), steady,
            g(f, "a_" + m, "report", "predicted_iteration_time_s")))
if "e_memory" in f:
    print("  (e) NCCL footprint at init / connected, bytes: real %s / %s, drop-in %s / %s" % (
        g(f, "e_memory", "real", "footprint_init"), g(f, "e_memory", "real", "footprint_connected"),
        g(f, "e_memory", "dropin", "footprint_init"), g(f, "e_memory", "dropin", "footprint_connected")))
    for v in ("real", "real_nvls_off", "real_cumem_off", "real_eager_connect"):
        if g(f, "e_memory", v) is not None:
            print("      %-18s first communicator %s / %s, the next one %s / %s, left after destroy %s" % (
                v, g(f, "e_memory", v, "footprint_init"), g(f, "e_memory", v, "footprint_connected"),
                g(f, "e_memory", v, "next_comm_init"), g(f, "e_memory", v, "next_comm_connected"),
                (g(f, "e_memory", v, "used_after_destroy") or 0) - (g(f, "e_memory", v, "used_before") or 0)))
if "c_perturbation" in f:
    print("  (c) kernel time per step: emulated %s%% apart from alone (captured %s%%); steps %s ms alone, %s ms captured, %s ms emulated" % (
        g(f, "c_perturbation", "percent_apart"), g(f, "c_perturbation", "captured_kernel_percent_apart"),
        g(f, "c_perturbation", "alone_median_step_ms"), g(f, "c_perturbation", "captured_median_step_ms"),
        g(f, "c_perturbation", "emulated_median_step_ms")))
if "d_release" in f:
    print("  (d) p50/p99 us: alone %s/%s, captured %s/%s, emulated %s/%s" % (
        g(f, "d_release", "alone", "p50_us"), g(f, "d_release", "alone", "p99_us"),
        g(f, "d_release", "captured", "p50_us"), g(f, "d_release", "captured", "p99_us"),
        g(f, "d_release", "emulated", "p50_us"), g(f, "d_release", "emulated", "p99_us")))
if "b_megatron" in f:
    print("  (b) exit %s, emulated %s s vs predicted %s s" % (
        g(f, "b_megatron", "exit"), g(f, "b_megatron", "report", "iteration_time_s"),
        g(f, "b_megatron", "report", "predicted_iteration_time_s")))
if "f_capture" in f:
    print("  (f) capture: %s kernel compute events, %s ms of %s ms GPU time; predicted %s s vs emulated %s s (%s%%)" % (
        g(f, "f_capture", "kernel_compute_events"), g(f, "f_capture", "kernel_compute_ms"),
        g(f, "f_capture", "captured_run_gpu_ms"), g(f, "f_capture", "predicted_iteration_s"),
        g(f, "f_capture", "emulated_iteration_s"), g(f, "f_capture", "percent_apart")))
if "h_gone" in f:
    print("  (h) prism killed at the emulation's step %s: the rank ended by itself %s s later (exit %s): %s" % (
        g(f, "h_gone", "emulation_step"), g(f, "h_gone", "rank_ended_after_s"), g(f, "h_gone", "rank_exit"),
        (g(f, "h_gone", "rank_stderr_tail") or [None])[-1]))
if "k_kineto" in f:
    print("  (k) Kineto trace %s bytes, import exit %s: %s" % (
        g(f, "k_kineto", "trace_bytes"), g(f, "k_kineto", "import_exit"), g(f, "k_kineto", "summary")))
    print("      calibrate exit %s: %s signatures; %s" % (
        g(f, "k_kineto", "calibrate_exit"), g(f, "k_kineto", "signatures"),
        g(f, "k_kineto", "calibrate_summary")))
if "i_insitu" in f:
    for k in ("all", "gemm", "attn", "mem"):
        if g(f, "i_insitu", k) is not None:
            print("  (i) %s: %s signatures; in the step / alone: median %s (events), %s (kernels); "
                  "weighted %s, %s" % (k, g(f, "i_insitu", k, "signatures"),
                  g(f, "i_insitu", k, "step_over_events_median"), g(f, "i_insitu", k, "step_over_alone_median"),
                  g(f, "i_insitu", k, "step_over_events_weighted"), g(f, "i_insitu", k, "step_over_alone_weighted")))
if "m_kernels" in f:
    print("  (m) %s: %s signatures wanted, %s measured; the profile's calibration: %s signatures, "
          "median kernel/event time %s" % (
        g(f, "m_kernels", "gpu"), g(f, "m_kernels", "wanted"), g(f, "m_kernels", "measured"),
        g(f, "m_kernels", "calibrated"), g(f, "m_kernels", "median_calibrated_over_measured")))
if "p_perturbation" in f:
    med = lambda k: g(f, "p_perturbation", k, "median_step_ms")
    print("  (p) median step ms: alone %s; poll 50 us captured %s, emulated %s; poll 5 us captured %s, emulated %s" % (
        med("alone"), med("poll50_captured"), med("poll50_emulated"), med("poll5_captured"), med("poll5_emulated")))
if "g_kernels" in f:
    print("  (g) %s: %s signatures wanted, %s measured" % (
        g(f, "g_kernels", "gpu"), g(f, "g_kernels", "wanted"), g(f, "g_kernels", "measured")))
EOF
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM
left() { echo $((budget - (SECONDS - start))); }
# step NAME SECONDS CMD...: runs CMD with its output in OUT/NAME.out, bounded by
# min(SECONDS, what the budget has left); returns CMD's status (124: timed out).
step() {
  local name=$1 t=$2; shift 2
  local l; l=$(left)
  [ "$l" -lt "$t" ] && t=$l
  if [ "$t" -lt 10 ]; then say "$name: skipped: the budget is spent"; return 125; fi
  say "$name: start (timeout $t s): $*"
  local s=$SECONDS rc
  # In the background and waited for, so that a signal to this shell runs its
  # trap at once instead of after the step.
  timeout --kill-after=5 "$t" "$@" >"$out/$name.out" 2>&1 </dev/null &
  wait $!; rc=$?
  say "$name: exit $rc after $((SECONDS - s)) s$([ $rc = 124 ] && echo ' (TIMED OUT)')"
  reap "$name"
  [ $rc != 0 ] && tail -5 "$out/$name.out" | sed 's/^/    /' | tee -a "$log"
  return $rc
}
# line_json FILE TAG: the JSON after the last "TAG " in FILE (a rank's prefix
# allowed); first_json: the same for the first such line.
tagged_json() {  # tagged_json head|tail FILE TAG
  local s; s=$(grep -ao "$3 {.*}" "$2" 2>/dev/null | "$1" -1 | sed "s/^$3 //")
  echo "${s:-null}"
}
line_json() { tagged_json tail "$@"; }
first_json() { tagged_json head "$@"; }

B=$here
cd "$B" || exit 1
prism=$B/bin/prism
dropin=$B/lib/libnccl.so.2
fast=(--set cluster.network.latency_us=0 --set cluster.network.nic_Gbps=99999
      --set cluster.node.nvlink_link_GBps=9999)
say "bundle $B; out $out; budget $budget s; python $python; real rank $rank"

# Preflight: a GPU, torch with CUDA, the expected versions (warned, not required).
env_json=$("$python" -c '
import json, torch
ok = torch.cuda.is_available()
try:
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if ok else None
except Exception as e:
    nccl = "unknown: %s" % e
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "cuda_available": ok,
  "gpu": torch.cuda.get_device_name(0) if ok else None,
  "nccl": nccl}))' 2>>"$log")
say "host: $env_json"
fig host "${env_json:-null}"
# PRISM_CHECK_NO_GPU_OK=1 goes on without a GPU: only to test this script itself.
if ! echo "$env_json" | grep -q '"cuda_available": true' && [ "${PRISM_CHECK_NO_GPU_OK:-}" != 1 ]; then
  say "error: no usable GPU (torch.cuda.is_available() is not True, or torch does not import): nothing run"
  exit 1
fi
echo "$env_json" | grep -q '"torch": "2.11' || say "warning: torch is not 2.11 (the bundle was prepared for 2.11)"
gpu_name=$(echo "$env_json" | sed 's/.*"gpu": "\([^"]*\)".*/\1/')
[ -n "${PRISM_CHECK_GPU_NAME:-}" ] && gpu_name=$PRISM_CHECK_GPU_NAME  # testing only, as above

check_build() {
  step build 120 bash "$B/build_torch_backend.sh" "$python" && fig build '{"ok": true}' ||
    { fig build '{"ok": false}'; say "build: the c10d extension did not build; with PRISM_NCCL_DROPIN=1 it is not needed"; }
}

# (a) the drop-in under PyTorch, rank $rank of 1,024.
# ddp also keeps its capture (OUT/f_slices) and graph (OUT/f_graph.json) for (f).
check_a() {
  local mode job keep rc rep
  for mode in ${a_modes//,/ }; do
    job=examples/jobs/cuda-gpt-1024.yaml keep=()
    [ $mode = tp ] && job=examples/jobs/cuda-gpt-tp8-1024.yaml
    [ $mode = ddp ] && keep=(--slices "$out/f_slices" --save-graph "$out/f_graph.json")
    step a_$mode 100 "$prism" emulate $job --real-ranks "$rank" --timeout 60 "${keep[@]}" \
      --report "$out/a_$mode.report.json" \
      -- env LD_PRELOAD="$dropin" PRISM_NCCL_DROPIN=1 "$python" examples/cuda_gpt/train.py --parallel $mode --steps 6
    rc=$?
    rep=null; [ -s "$out/a_$mode.report.json" ] && rep=$(cat "$out/a_$mode.report.json")
    fig a_$mode "{\"exit\": $rc, \"report\": $rep, \"gpu_stats\": $(line_json "$out/a_$mode.out" GPU_STATS)}"
  done
}

# (e) NCCL's device memory: torch's real NCCL (nranks=1) and the drop-in (rank 0 of 1,024).
check_e() {
  local v
  # Torch's NCCL, one rank: two communicators one after the other (the second
  # costs what one more does once NCCL's kernels are loaded), NCCL's own
  # account of each allocation in the output (NCCL_DEBUG_SUBSYS=ALLOC), and
  # the knobs that change its memory.
  for v in default NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 NCCL_RUNTIME_CONNECT=0; do
    local name=e_real; [ $v != default ] && name=e_real_$(echo "${v%%=*}" | tr 'A-Z' 'a-z')
    step $name 30 env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC $([ $v != default ] && echo "$v") \
      "$python" gpu/nccl_footprint.py --lib real --label "$v" --comms 2
  done
  # --no-verify-roles: the footprint program runs only as rank 0 (it makes
  # the id), so a second rank of the role cannot run it.
  step e_dropin 60 "$prism" emulate examples/jobs/cuda-gpt-1024.yaml --real-ranks 0 --timeout 45 --no-verify-roles \
    -- env LD_PRELOAD="$dropin" "$python" gpu/nccl_footprint.py --lib "$dropin" --label dropin
  fig e_memory "{\"real\": $(line_json "$out/e_real.out" FOOTPRINT), \"real_nvls_off\": $(line_json "$out/e_real_nccl_nvls_enable.out" FOOTPRINT), \"real_cumem_off\": $(line_json "$out/e_real_nccl_cumem_enable.out" FOOTPRINT), \"real_eager_connect\": $(line_json "$out/e_real_nccl_runtime_connect.out" FOOTPRINT), \"dropin\": $(line_json "$out/e_dropin.out" FOOTPRINT), \"model\": \"not wired: compare by hand with the NCCL footprint model (docs/memory.md)\"}"
}

# (c) perturbation: the GPU time of a step alone vs emulated on a near-instant network.
check_c() {
  local alone capt emul rep pid_c pid_e kc ke
  local args=(examples/cuda_gpt/train.py --parallel ddp --steps 16 --warmup 2)
  step c_alone 60 "$python" "${args[@]}" --profile "$out/c_alone.%p.json"
  alone=$(line_json "$out/c_alone.out" GPU_STATS)
  step c_emulated 90 "$prism" emulate examples/jobs/cuda-gpt-1024.yaml "${fast[@]}" --real-ranks "$rank" --timeout 60 \
    --report "$out/c_emulated.report.json" \
    -- env LD_PRELOAD="$dropin" PRISM_NCCL_DROPIN=1 "$python" "${args[@]}" --profile "$out/c_emulated.%p.json"
  capt=$(first_json "$out/c_emulated.out" GPU_STATS)  # the capture: peers answer at once
  emul=$(line_json "$out/c_emulated.out" GPU_STATS)
  rep=null; [ -s "$out/c_emulated.report.json" ] && rep=$(cat "$out/c_emulated.report.json")
  # The primary figure: the GPU's kernel time per step (torch.profiler, the
  # last two steps) emulated against alone. The step times (CUDA events)
  # also hold the waits on held streams and differ run to run by a few
  # percent; the compute the emulation counted leaves out kernels that
  # overlapped a held collective.
  pid_c=$(echo "$capt" | sed -n 's/.*"pid": \([0-9]*\).*/\1/p')
  pid_e=$(echo "$emul" | sed -n 's/.*"pid": \([0-9]*\).*/\1/p')
  local ta; ta=$(ls "$out"/c_alone.*.json 2>/dev/null | head -1)
  kc=null ke=null
  if [ -n "$ta" ] && [ -n "$pid_c" ] && [ -s "$out/c_emulated.$pid_c.json" ]; then
    "$python" gpu/trace_kernels.py --alone "$ta" --emulated "$out/c_emulated.$pid_c.json" >"$out/c_kernels_captured.out" 2>&1
    kc=$(line_json "$out/c_kernels_captured.out" KERNELS)
  fi
  if [ -n "$ta" ] && [ -n "$pid_e" ] && [ "$pid_e" != "$pid_c" ] && [ -s "$out/c_emulated.$pid_e.json" ]; then
    "$python" gpu/trace_kernels.py --alone "$ta" --emulated "$out/c_emulated.$pid_e.json" >"$out/c_kernels_emulated.out" 2>&1
    ke=$(line_json "$out/c_kernels_emulated.out" KERNELS)
  fi
  fig c_perturbation "$("$python" -c '
import json, sys
a, c, e, r, kc, ke = (json.loads(s) for s in sys.argv[1:7])
med = lambda s: s and s["median_step_ms"]
pct = lambda x, y: None if not (x and y) else 100.0 * (x / y - 1)
comp = None
if r and r.get("real_ranks"):
    comp = 1e3 * r["real_ranks"][0]["compute_s"]
out = {"kernels_emulated": ke, "kernels_captured": kc,
       "percent_apart": ke and ke["percent_apart"], "captured_kernel_percent_apart": kc and kc["percent_apart"],
       "alone_median_step_ms": med(a), "captured_median_step_ms": med(c),
       "emulated_median_step_ms": med(e), "emulated_compute_ms_per_iteration": comp,
       "captured_step_percent_apart": pct(med(c), med(a)),
       "emulated_step_percent_apart": pct(med(e), med(a)),
       "counted_compute_percent_apart": pct(comp, med(a))}
out["within_1_percent"] = out["percent_apart"] is not None and abs(out["percent_apart"]) <= 1.0
print(json.dumps(out))' "$alone" "$capt" "$emul" "$rep" "$kc" "$ke")"
}

# (p) what perturbs the GPU step: (c)'s program for 30 steps alone and
# emulated (near-instant network), profiled (torch.profiler, the last two
# steps: OUT/p_*.<pid>.json, the capture's and the emulation's), and again
# with the drop-in's progress thread polling every 5 us instead of 50.
check_p() {
  local args=(examples/cuda_gpt/train.py --parallel ddp --steps 30 --warmup 5)
  step p_alone 45 "$python" "${args[@]}" --profile "$out/p_alone.%p.json"
  step p_poll50 75 "$prism" emulate examples/jobs/cuda-gpt-1024.yaml "${fast[@]}" --real-ranks "$rank" --timeout 60 \
    -- env LD_PRELOAD="$dropin" PRISM_NCCL_DROPIN=1 "$python" "${args[@]}" --profile "$out/p_poll50.%p.json"
  step p_poll5 75 "$prism" emulate examples/jobs/cuda-gpt-1024.yaml "${fast[@]}" --real-ranks "$rank" --timeout 60 \
    -- env LD_PRELOAD="$dropin" PRISM_NCCL_DROPIN=1 PRISM_NCCL_POLL_US=5 "$python" "${args[@]}"
  fig p_perturbation "{\"alone\": $(line_json "$out/p_alone.out" GPU_STATS), \"poll50_captured\": $(first_json "$out/p_poll50.out" GPU_STATS), \"poll50_emulated\": $(line_json "$out/p_poll50.out" GPU_STATS), \"poll5_captured\": $(first_json "$out/p_poll5.out" GPU_STATS), \"poll5_emulated\": $(line_json "$out/p_poll5.out" GPU_STATS)}"
}

# (h) the coordinator gone while a real rank's stream is held: prism killed
# during (a) ddp's emulation (after its step 3); the rank, orphaned, must end
# by itself with the drop-in's error within 60 s (its stderr kept in OUT/h/).
check_h() {
  step h_gone 150 "$python" gpu/coordinator_gone.py --prism "$prism" \
    --job examples/jobs/cuda-gpt-1024.yaml --dropin "$dropin" --out "$out/h" --python "$python" \
    --rank "$rank" --timeout 60 --within 60 --after-steps 3
  fig h_gone "$(line_json "$out/h_gone.out" GONE)"
}

# (d) stream release latency.
check_d() {
  step d_alone 45 "$python" gpu/release_latency.py --count 1000
  step d_emulated 75 "$prism" emulate examples/jobs/cuda-gpt-1024.yaml "${fast[@]}" --real-ranks "$rank" --timeout 45 \
    -- env LD_PRELOAD="$dropin" PRISM_NCCL_DROPIN=1 "$python" gpu/release_latency.py --count 1000
  # The capture's peers answer at once: its intervals are the release latency
  # (plus the enqueue and the event); the emulation's add the modelled
  # all-reduce of 1,024 ranks.
  fig d_release "{\"alone\": $(line_json "$out/d_alone.out" RELEASE), \"captured\": $(first_json "$out/d_emulated.out" RELEASE), \"emulated\": $(line_json "$out/d_emulated.out" RELEASE)}"
}

# (b) Megatron-Core's GPT and 1F1B schedule as rank K of TP1 PP4 DP256; the
# wheels unpacked (zip) into OUT/site, which PYTHONPATH carries through
# `prism emulate` (it puts python/ before it). One rank per stage captured side
# by side. Its last lines in the log say why when Megatron-Core cannot run so;
# every stage prints its Python stacks after 45 s (--stacks-after), so a stage
# that waits shows where; the rendezvous store says each NCCL id asked for and
# each group declared (PRISM_STORE_TRACE=1), and the drop-in each
# communicator asked for and made (NCCL_DEBUG=INFO).
check_b() {
  local rc rep
  "$python" -c '
import sys, zipfile
for w in sys.argv[2:]:
    zipfile.ZipFile(w).extractall(sys.argv[1])' "$out/site" wheels/*.whl 2>>"$log" ||
    say "b: the wheels do not unpack"
  step b_megatron 140 env PYTHONPATH="$out/site${PYTHONPATH:+:$PYTHONPATH}" PRISM_STORE_TRACE=1 \
    "$prism" emulate examples/jobs/megatron-gpt-pp4-1024.yaml --real-ranks "$rank" --capture-jobs 4 \
    --timeout 90 --report "$out/b_megatron.report.json" \
    -- env LD_PRELOAD="$dropin" PRISM_NCCL_DROPIN=1 NCCL_DEBUG=INFO "$python" examples/megatron_gpt/train.py --stacks-after 45
  rc=$?
  rep=null; [ -s "$out/b_megatron.report.json" ] && rep=$(cat "$out/b_megatron.report.json")
  fig b_megatron "{\"exit\": $rc, \"report\": $rep, \"gpu_stats\": $(line_json "$out/b_megatron.out" GPU_STATS)}"
}

# The validation jobs' kernel lists for this GPU, made once per run and shared
# by (g) and (m): OUT/lists/<job>.csv from `prism simulate --kernels` (jobs
# predicted out of memory write theirs too). Only the H100 rows (H100 jobs on
# an H100; on an H200 listed with --set cluster.preset=hgx-h200, for H200
# kernels): the A100 jobs' kernels cannot be measured here. Sets db.
validation_lists() {
  local job preset=()
  case $gpu_name in
    *H200*) db=H200-SXM-141GB preset=(--set cluster.preset=hgx-h200) ;;
    *H100*) db=H100-SXM5-80GB ;;
    *) db=none ;;
  esac
  [ -d "$out/lists" ] && return 0
  mkdir -p "$out/lists"
  for job in examples/validation/*.yaml; do
    grep -qi a100 "$job" && continue  # an A100 cluster's kernels: not this GPU's
    "$prism" simulate "$job" "${preset[@]}" --kernels "$out/lists/$(basename "$job" .yaml).csv" \
      >/dev/null 2>>"$log"
  done
}

# (g) kernel-database refresh for the validation jobs on this GPU: the
# signatures their lists give as `model` (not in data/kernels.csv). On
# 2026-11-27 the two H100 jobs lacked only `mem` signatures (modelled from
# bandwidth), hence --measure-mem.
check_g() {
  local db wanted_n measured
  validation_lists
  awk -F, -v db="$db" 'FNR > 1 && $4 == "model" && $1 == db {print $2}' "$out"/lists/*.csv \
    2>/dev/null | sort -u >"$out/g_wanted.txt"
  wanted_n=$(wc -l <"$out/g_wanted.txt")
  say "g: $wanted_n kernel signatures of $db modelled, not measured, in the validation jobs"
  if [ "$wanted_n" -gt 0 ]; then
    step g_measure 90 "$python" scripts/measure_kernels.py "$out/g_wanted.txt" --out "$out/g_kernels.csv" \
      --gpu "$db" --measure-mem --timeout-per-kernel 10
  fi
  measured=0; [ -s "$out/g_kernels.csv" ] && measured=$(($(wc -l <"$out/g_kernels.csv") - 1))
  fig g_kernels "{\"gpu\": \"$db\", \"wanted\": $wanted_n, \"measured\": $measured, \"csv\": \"g_kernels.csv\"}"
}

# (f) capture on GPU: (a)'s ddp capture (the drop-in reports each held
# stream's kernel time since its last release, CUDA events, as compute named
# `kernels`) against the program's own CUDA-event step times, and the replay
# of the graph built from it (predicted) against the emulated iteration.
check_f() {
  if [ ! -d "$out/f_slices" ]; then
    say "f: no capture of (a) ddp (run --only a,f): skipped"
    fig f_capture '{"skipped": "no capture of (a) ddp"}'
    return
  fi
  step f_analyse 30 "$python" gpu/capture_figures.py --slices "$out/f_slices" \
    --graph "$out/f_graph.json" --report "$out/a_ddp.report.json" --program-out "$out/a_ddp.out"
  fig f_capture "$(line_json "$out/f_analyse.out" CAPTURE)"
}

# (k) a Kineto trace of a real GPU step (torch.profiler, CPU and CUDA, world
# size 1) imported with `prism import kineto`: the in-situ calibration path.
check_k() {
  step k_profile 60 "$python" examples/cuda_gpt/train.py --parallel ddp --steps 4 --warmup 1 \
    --profile "$out/k_trace.json"
  step k_import 30 "$prism" import kineto "$out/k_trace.json" -o "$out/k_graph.json"
  local rc=$?
  step k_calibrate 30 "$prism" calibrate kineto "$out/k_trace.json" -o "$out/k_kernels.csv"
  local rc_cal=$?
  fig k_kineto "$("$python" -c '
import json, os, sys
t, rc, log, rc_cal, cal_log, csv = sys.argv[1:7]
def lines(p):
    return open(p).read().strip().splitlines() if os.path.exists(p) else []
last = lines(log)[-1:]
print(json.dumps({"import_exit": int(rc), "trace_bytes": os.path.getsize(t) if os.path.exists(t) else 0,
                  "summary": last[0] if last else None, "calibrate_exit": int(rc_cal),
                  "signatures": max(len(lines(csv)) - 1, 0), "calibrate_summary": lines(cal_log)[:2],
                  "csv": "k_kernels.csv"}))' "$out/k_trace.json" "$rc" "$out/k_import.out" "$rc_cal" \
    "$out/k_calibrate.out" "$out/k_kernels.csv")"
}

# (i) in situ against alone: a profiled training step at the width of an
# 8B model (examples/cuda_gpt/train.py, dim 4096, 32 heads, seq 4096, world
# size 1), its kernels' times by signature (`prism calibrate kineto`), and
# the same signatures called alone by scripts/measure_kernels.py, timed by
# CUDA events (as data/kernels.csv is measured) and by their own profile
# (gpu/insitu_figures.py puts them side by side).
check_i() {
  step i_profile 120 "$python" examples/cuda_gpt/train.py --parallel ddp --steps 6 --warmup 3 \
    --dim 4096 --heads 32 --seq 4096 --batch 2 --layers 4 --profile "$out/i_step.json"
  step i_step 30 "$prism" calibrate kineto "$out/i_step.json" -o "$out/i_step.csv"
  step i_alone 150 "$python" scripts/measure_kernels.py "$out/i_step.csv" --measure-mem \
    --repeats 20 --warmup 5 --timeout-per-kernel 8 --out "$out/i_events.csv" \
    --profile "$out/i_alone.json"
  step i_alone_kernels 30 "$prism" calibrate kineto "$out/i_alone.json" -o "$out/i_alone.csv"
  step i_figures 30 "$python" gpu/insitu_figures.py --insitu "$out/i_step.csv" \
    --events "$out/i_events.csv" --alone "$out/i_alone.csv" --table "$out/i_table.txt"
  fig i_insitu "$(line_json "$out/i_figures.out" INSITU)"
}

# (m) one run that measures every kernel signature the validation jobs need on
# this GPU: the union of their lists (validation_lists), measured whether or
# not data/kernels.csv has them, with a Kineto profile of the measurement;
# `prism calibrate kineto` of that profile gives the kernels' own device
# times beside the CUDA-event ones.
check_m() {
  local db
  validation_lists
  "$python" scripts/measure_kernels.py "$out"/lists/*.csv --dry-run >"$out/m_plan.txt" 2>>"$log"
  say "m: $(wc -l <"$out/m_plan.txt") signatures in the validation jobs' union (plan: m_plan.txt)"
  step m_measure 300 "$python" scripts/measure_kernels.py "$out"/lists/*.csv --gpu "$db" \
    --out "$out/m_kernels.csv" --profile "$out/m_profile.json" --measure-mem --repeats 10 --warmup 3 \
    --timeout-per-kernel 5
  step m_calibrate 60 "$prism" calibrate kineto "$out/m_profile.json" --gpu "$db" -o "$out/m_calibrated.csv"
  fig m_kernels "$("$python" -c '
import csv, json, os, statistics, sys
db, plan, measured, calibrated = sys.argv[1:5]
def rows(p):
    return {r["signature"]: float(r["us"]) for r in csv.DictReader(open(p))} if os.path.exists(p) else {}
m, c = rows(measured), rows(calibrated)
both = [c[s] / m[s] for s in m if s in c and m[s] > 0]
print(json.dumps({"gpu": db, "wanted": sum(1 for _ in open(plan)) if os.path.exists(plan) else 0,
                  "measured": len(m), "calibrated": len(c), "compared": len(both),
                  "median_calibrated_over_measured": statistics.median(both) if both else None,
                  "csv": "m_kernels.csv"}))' "$db" "$out/m_plan.txt" "$out/m_kernels.csv" "$out/m_calibrated.csv")"
}

for c in ${only//,/ }; do
  case $c in
    build | a | b | c | d | e | f | g | h | i | k | m | p) check_$c ;;
    *) say "unknown check '$c' (build, a, b, c, d, e, f, g, h, i, k, m, p): skipped" ;;
  esac
done

exit 0
