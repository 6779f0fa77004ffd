#!/usr/bin/env bash
# gpu.sh — the GPU tests and benchmarks, run on a GPU machine in one go, on both libfabric lines:
#   2.6.0  built here with CUDA (and its fabtests) from the tarball in .fab/ (tests/libfabric.sh):
#          every check once per device-memory path (EFAX_MEM_PATH=dmabuf, hmem, staged), and the
#          benchmarks, beside libfabric's own fi_rma_bw and the cudaMemcpyPeerAsync ceiling
#   1.17   Debian's packages carried in .deb/ (no CUDA in that libfabric): the staged path
# Leaves gpu.log, results.jsonl (every row, with run.libfabric and mem_path), ceilings.txt (each
# device-memory run's ceiling: best and spread) and summary.txt (checks, then the ratios the docs
# quote: efax's write beside fi_rma_bw at every size) in $OUT (or build/gpu-out).
#
#   tests/gpu.sh [all|quick|checks|bench|ipc|compare|staged]
#       all     checks (4K..256M), benchmarks and compare  quick   checks with small sizes
#       checks  the checks only                            bench   the benchmarks only
#       ipc     the NVLink IPC checks and benchmarks only
#       staged  device memory without GPUDirect (EFAX_MEM_PATH=staged) against the pinned host path
#               and a device-to-host copy, in EFAX_ROUNDS interleaved rounds: each ratio's spread
#       compare efax beside NCCL and NVSHMEM on every GPU count (tests/gpu_compare.sh: one rank per
#               GPU, interleaved rounds, ratios with their spreads, scaling.png and scaling.md)
#   EFAX_GPU_LINES="2.6 1.17"   which libfabric lines (default both that are carried in)
#   EFAX_GPU_PATHS="dmabuf hmem staged"   which device-memory paths the 2.6 checks force
#   EFAX_GPUS="2 4", EFAX_ROUNDS=3, EFAX_A2A_CANDIDATES=1   compare's (tests/gpu_compare.sh)
#
# Ranks are started with efax's TCP rendezvous (no PMIx needed there), one per GPU, provider shm.
# On a one-GPU machine both ranks share GPU 0: two processes, two CUDA contexts taking turns on it
# (docs/testing.md says what that measures); gpu_share then measures what two processes sharing the
# GPU can do without efax, and the summary shows it beside efax's all2all and proxy.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
LOG=$OUT/gpu.log
RES=$OUT/results.jsonl
SUM=$OUT/summary.txt
: >"$LOG"; : >"$RES"; : >"$SUM"; : >"$OUT/ceilings.txt"
WHAT=${1:-all}
case $WHAT in all|quick|checks|bench|ipc|compare|staged) ;; *) echo "gpu.sh: '$WHAT': use all, quick, checks, bench, ipc, compare or staged" >&2; exit 2 ;; esac
exec > >(tee -a "$LOG") 2>&1
export PATH=/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FI_PROVIDER=shm EFAX_PROVIDER=shm EFAX_TIMEOUT_MS=60000
echo "== $(date -u +%FT%TZ) $(hostname): $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -8 | tr '\n' ';')"
NGPU=$(nvidia-smi -L | wc -l)
nvidia-smi topo -m 2>/dev/null | head -n $((NGPU + 2))
. tests/gpu_compare.sh
COMPARE=0
if [ "$WHAT" = all ] || [ "$WHAT" = compare ]; then
  COMPARE=1
  [ "$NGPU" -lt 2 ] || compare_prebuild # nccl-tests and nvshmem_bench build meanwhile
fi
# fi_rma_bw's server and efax's rank 1 use GPU 1 where there is one; on one GPU both use GPU 0
GPU_B=$((NGPU > 1 ? 1 : 0))
[ "$NGPU" -ge 2 ] || echo "== one GPU: both ranks share GPU 0 (two processes, two CUDA contexts taking turns on it; docs/testing.md)"

LINES=${EFAX_GPU_LINES:-}
if [ -z "$LINES" ]; then
  ls .fab/libfabric-*.tar.gz >/dev/null 2>&1 && LINES="2.6"
  [ -d .deb ] && LINES="$LINES 1.17"
fi
[ -n "$LINES" ] || { echo "gpu.sh: no libfabric carried in (.fab/libfabric-*.tar.gz or Debian's .deb/)"; exit 2; }

# ---- libfabric: build 2.6 (CUDA + fabtests), unpack 1.17
declare -A PFX
for L in $LINES; do
  if [ "$L" = 2.6 ]; then
    t0=$SECONDS
    PFX[$L]=$(EFAX_CACHE=/tmp/efax-cache tests/libfabric.sh "$(ls .fab/libfabric-*.tar.gz | head -n 1)" cuda | tail -n 1) ||
      { echo "gpu.sh: libfabric 2.6 build failed"; exit 1; }
    echo "== libfabric 2.6 with CUDA in ${PFX[$L]} ($((SECONDS - t0)) s)"
  else
    PFX[$L]=/tmp/fab117
    mkdir -p "${PFX[$L]}"
    for d in .deb/*.deb; do dpkg -x "$d" "${PFX[$L]}"; done
  fi
done
export PFX_26=${PFX[2.6]:-} PFX_117=${PFX[1.17]:-}
if [ "$COMPARE" = 1 ] && [ -n "$PFX_26" ] && [ "${EFAX_A2A_CANDIDATES:-0}" = 1 ] && [ "$NGPU" -ge 2 ]; then
  compare_base "$PFX_26" &
  CMP_BASE_PID=$!
fi
# env_for L: the variables that make a binary use line L's libfabric
env_for() {
  if [ "$1" = 1.17 ]; then
    echo "LD_LIBRARY_PATH=$PFX_117/usr/lib/x86_64-linux-gnu FI_PROVIDER_PATH=$PFX_117/usr/lib/x86_64-linux-gnu/libfabric"
  else
    echo "LD_LIBRARY_PATH=$PFX_26/lib"
  fi
}

# ---- efax, once per line, into build/gpu-<line>
for L in $LINES; do
  B=build/gpu-$L
  if [ "$L" = 1.17 ]; then inc=${PFX[$L]}/usr/include lib=${PFX[$L]}/usr/lib/x86_64-linux-gnu; else inc=${PFX[$L]}/include lib=${PFX[$L]}/lib; fi
  t0=$SECONDS
  what="host cuda"
  [ "$WHAT" != compare ] || what="$B/all2all_cuda $B/write_cuda $B/proxy $B/ipc $B/gpu_share $B/cuda_test $B/incast_cuda" # compare's
  [ "$WHAT" != staged ] || what="$B/write_cuda $B/gpu_share"
  # shellcheck disable=SC2086
  make -j"$(nproc)" $what B="$B" EFAX_SKIP_DEPS=1 EFAX_DEFS=-DEFAX_NO_PMIX PKG_CFLAGS="-I$inc" PKG_LIBS="-L$lib -lfabric -Wl,-rpath,$lib" \
    NV_LIBS="-L$lib -lfabric -Xlinker -rpath -Xlinker $lib" 2>&1 | grep -v "^cc \|^nvcc \|^/usr/local" | tail -20
  echo "== efax built against libfabric $L in $B ($((SECONDS - t0)) s)"
done

pass=0 fail=0
# launch N CMD...: N ranks through the TCP rendezvous on this host
launch() {
  local n=$1 port=$((20000 + RANDOM % 12000)) pids=() r rc=0; shift
  for ((r = 1; r < n; r++)); do EFAX_RANK=$r EFAX_SIZE=$n EFAX_ROOT=127.0.0.1:$port EFAX_TOKEN=gpu "$@" >/dev/null 2>>"$OUT/ranks.err" & pids+=($!); done
  EFAX_RANK=0 EFAX_SIZE=$n EFAX_ROOT=127.0.0.1:$port EFAX_TOKEN=gpu "$@" || rc=$?
  for r in "${pids[@]}"; do wait "$r" || { [ "$rc" = 0 ] && rc=1; }; done
  return $rc
}
export OUT
export -f launch
# t NAME LIMIT CMD...: a check or benchmark; its JSON (written to $OUT/cur.tmp) goes to results.jsonl,
# its ceiling and shared-GPU header lines to ceilings.txt
t() {
  local name=$1 lim=$2 rc err0 t0=$SECONDS; shift 2
  echo; echo "== $name"
  rm -f "$OUT/cur.tmp"
  err0=$(cat "$OUT/ranks.err" 2>/dev/null | wc -l)
  timeout --kill-after=5 "$lim" bash -c '"$@"' "$name" "$@" | tee "$OUT/cur.log"; rc=${PIPESTATUS[0]}
  grep -E '^# (ceiling|GPU shared):' "$OUT/cur.log" | sed "s|^# |$name: |" >>"$OUT/ceilings.txt"
  [ -f "$OUT/cur.tmp" ] && [ -z "${CMP_ROWS:-}" ] && cat "$OUT/cur.tmp" >>"$RES"
  # a run that was asked for JSON and wrote no row measured nothing: that is no pass
  if [ $rc = 0 ] && [[ " $* " == *" --json "* ]] && [ ! -s "$OUT/cur.tmp" ]; then echo "$name: exit 0 but no result rows"; rc=1; fi
  if [ $rc = 0 ]; then pass=$((pass + 1)); echo "PASS $name ($((SECONDS - t0)) s)" | tee -a "$SUM"; else
    fail=$((fail + 1)); echo "FAIL $name (rc=$rc, $((SECONDS - t0)) s)" | tee -a "$SUM"
    tail -n +$((err0 + 1)) "$OUT/ranks.err" 2>/dev/null | sed 's/^/  other ranks: /' # what ranks 1.. said
  fi
}
# doctor_gpus CMD...: the doctor (CMD) exits 0, and its JSON has a GPUDirect finding per GPU and no FAIL
doctor_gpus() {
  "$@" --json "$OUT/doctor.jsonl" || return 1
  jq -e -s --argjson n "$(nvidia-smi -L | wc -l)" '([.[] | select(.check == "gpudirect")] | length) == $n
    and ([.[] | select(.level == "FAIL")] | length) == 0' "$OUT/doctor.jsonl"
}
export -f doctor_gpus
J="--json $OUT/cur.tmp"
MAXC=256M; [ "$WHAT" = quick ] && MAXC=16M

# checks L PATH: every check on libfabric L with device memory forced through PATH
checks() {
  local L=$1 P=$2 B=build/gpu-$1 e
  e="env $(env_for "$L") EFAX_MEM_PATH=$P"
  t "$L/$P/cuda-test" 300 launch 2 $e $B/cuda_test
  t "$L/$P/write-check" 600 launch 2 $e $B/write_cuda -c -b 4K -e $MAXC -f 8 -n 3 --mem dma --mode single,split --nics shm,shm $J
  t "$L/$P/sendrecv-check" 600 launch 2 $e $B/sendrecv_cuda -c -b 4K -e $MAXC -f 16 -n 3 --mem dma $J
  t "$L/$P/all2all-check" 600 launch 2 $e $B/all2all_cuda -c -b 64K -e $MAXC -f 16 -n 3 --mem dma $J
  t "$L/$P/proxy-check" 600 launch 2 $e $B/proxy -c -b 64K -e 64M -f 16 -n 3 --mem dma $J
  # the streaming recipe: a ring of 4 slots under one data tag and one credit tag (arrivals in any order)
  t "$L/$P/stream-check" 300 launch 2 $e $B/stream_cuda -c -b 4K -e 1M -f 256 -n 200 --mem dma --slots 4 \
    --mode single,split --nics shm,shm $J
  # the KV-cache recipe: a batch of scattered pages a layer, every page checked
  t "$L/$P/kvcache-check" 300 launch 2 $e $B/kvcache_cuda -c -b 64K -e 64K -n 3 --layers 16 --pages 32 --mem dma \
    --mode single,split --nics shm,shm $J
}
if [ "$WHAT" != bench ] && [ "$WHAT" != ipc ] && [ "$WHAT" != compare ] && [ "$WHAT" != staged ]; then
  for L in $LINES; do
    B=build/gpu-$L
    if [ "$L" = 1.17 ]; then checks 1.17 staged; else for P in ${EFAX_GPU_PATHS:-dmabuf hmem staged}; do checks "$L" "$P"; done; fi
    t "$L/affinity" 60 env $(env_for "$L") $B/affinity $J
    t "$L/queue-check" 300 env $(env_for "$L") $B/queue -c $J
    t "$L/host-and-pinned-check" 600 launch 2 env $(env_for "$L") $B/write_cuda -c -b 4K -e 16M -f 16 -n 3 --mem host,pin $J
    # the doctor's GPU findings for real (#32): every GPU described and its GPUDirect tried (a
    # registration with the provider forbidden to call CUDA, then a write that lands: shm refuses
    # that option, so on shm it is a WARN naming the fix; on efa a FAIL), no FAIL, exit 0
    if [ "$L" != 1.17 ]; then
      t "$L/doctor-gpus" 120 doctor_gpus env $(env_for "$L") $B/doctor_cuda --provider shm
    fi
    # efa's device-memory paths rehearsed on shm (docs/efa.md): the pre-Hopper flush forced on
    # (cudaDeviceFlushGPUDirectRDMAWrites before every read), and "no GPUDirect" (staged, said in every row)
    if [ "$L" != 1.17 ]; then
      t "$L/gdr-flush-forced-check" 600 bash -c 'launch 2 "$@" && jq -e -s "all(.[]; .run.device_memory | test(\"flushed before GPU reads\"))" "$OUT/cur.tmp"' _ \
        env $(env_for "$L") EFAX_GDR_FLUSH=1 EFAX_MEM_PATH=dmabuf $B/write_cuda -c -b 4K -e 16M -f 16 -n 3 --mem dma --nics shm,shm $J
      t "$L/no-gpudirect-staged-check" 600 bash -c 'launch 2 "$@" && jq -e -s "all(.[]; .mem_path == \"staged (no GPUDirect)\")" "$OUT/cur.tmp"' _ \
        env $(env_for "$L") EFAX_CAPS_OVERRIDE=gpudirect=0 $B/write_cuda -c -b 4K -e 16M -f 16 -n 3 --mem dma --nics shm,shm $J
    fi
  done
  echo; echo "== checks: $pass passed, $fail failed"
fi

# ---- benchmarks (libfabric 2.6, shm's CUDA IPC path, device memory on both sides)
# fi_rma_bw SIZE: libfabric's own RMA benchmark, the server on GPU $GPU_B, the writer on GPU 0, 16
# writes in flight as efax's --window 16 (its default 64 would hold 2 x 64 x 256 MiB of device
# memory per process), enough iterations that each size runs for milliseconds; prints Gbps
rma_bw() {
  local port=$((20000 + RANDOM % 12000)) size=$1 out gbps rc iters
  iters=$((size <= 4194304 ? 2000 : size <= 16777216 ? 500 : size <= 67108864 ? 200 : 100))
  [ -x "$PFX_26/bin/fi_rma_bw" ] || { echo "no fi_rma_bw"; return 1; }
  env $(env_for 2.6) timeout 60 "$PFX_26/bin/fi_rma_bw" -p shm -o writedata -D cuda -i "$GPU_B" -W 16 -S "$size" -I "$iters" -E="$port" >/dev/null 2>&1 &
  # the client connects once the server listens: a fixed second was too short for the first
  # server on a fresh machine, whose CUDA start-up took longer ("connect: Connection refused")
  local i
  for ((i = 0; i < 300; i++)); do
    if command -v ss >/dev/null; then ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break; elif [ "$i" -ge 10 ]; then break; fi
    sleep 0.1
  done
  out=$(env $(env_for 2.6) timeout 60 "$PFX_26/bin/fi_rma_bw" -p shm -o writedata -D cuda -i 0 -W 16 -S "$size" -I "$iters" -E="$port" 127.0.0.1 2>&1); rc=$?
  wait
  echo "$out" | tail -n 3
  [ $rc = 0 ] || { echo "fi_rma_bw $size: exit $rc (stalled or failed)"; return 1; }
  # Gbps from the usec/xfer column (the second last): at 256 MiB the MB/sec column runs into the time
  # column before it ("0.02s1126034.88"), so counting fields from the left or MB/sec cannot be trusted
  gbps=$(echo "$out" | awk -v s="$size" '/^[0-9]/ && NF >= 5 {u = $(NF-1)} END {if (u + 0 > 0) printf "%.3f", s * 8 / (u * 1000)}')
  [ -n "$gbps" ] || return 1
  echo "{\"schema\":1,\"driver\":\"fi_rma_bw\",\"variant\":\"fi_rma_bw\",\"memory\":\"device\",\"mem_path\":\"fabtests\",\"size\":$size,\"gbps\":$gbps,\"run\":{\"libfabric\":\"2.6\",\"command\":\"fi_rma_bw -p shm -o writedata -D cuda -i $GPU_B/0 -W 16 -S $size -I $iters\"}}" >"$OUT/cur.tmp"
}
export -f rma_bw env_for
export GPU_B
if { [ "$WHAT" = all ] || [ "$WHAT" = bench ]; } && [[ " $LINES " == *" 2.6 "* ]]; then
  L=2.6 B=build/gpu-2.6 E="env $(env_for 2.6)"
  for P in ${EFAX_GPU_PATHS:-dmabuf hmem staged}; do
    t "bench/write-$P" 600 launch 2 $E EFAX_MEM_PATH=$P $B/write_cuda -b 1M -e 256M -f 4 --mem dma --window 16 $J
  done
  t "bench/write-default" 600 launch 2 $E $B/write_cuda -b 1M -e 256M -f 4 --mem dma --window 16 $J
  for s in 1048576 4194304 16777216 67108864 268435456; do t "bench/fi_rma_bw-$s" 130 rma_bw $s; done
  t "bench/sendrecv" 600 launch 2 $E $B/sendrecv_cuda -b 1M -e 256M -f 4 --mem dma --window 16 $J
  t "bench/all2all" 600 launch 2 $E $B/all2all_cuda -b 1M -e 256M -f 4 --mem dma $J
  # two iterations in flight, as write keeps 16 messages: the next iteration's copies queue behind
  # the current one's instead of waiting for the host to see it end (drivers/all2all.c)
  t "bench/all2all-window2" 600 launch 2 $E $B/all2all_cuda -b 1M -e 256M -f 4 --mem dma --window 2 $J
  t "bench/proxy" 600 launch 2 $E $B/proxy -b 1M -e 256M -f 4 --mem dma $J
  t "bench/write-pinned" 600 launch 2 $E $B/write_cuda -b 1M -e 256M -f 4 --mem pin --window 16 $J
  # staged device memory (no GPUDirect) against what it is made of: the pinned host path beside it and
  # gpu_share's device-to-host copy (the summary's staged line); on a machine of two GPUs once more
  # with both ranks on GPU 0, as a one-GPU machine runs it
  if [ "$NGPU" -ge 2 ]; then
    t "bench/write-staged-1gpu" 600 launch 2 $E CUDA_VISIBLE_DEVICES=0 EFAX_MEM_PATH=staged $B/write_cuda -b 1M -e 256M \
      -f 4 --mem dma --window 16 $J
    t "bench/write-pinned-1gpu" 600 launch 2 $E CUDA_VISIBLE_DEVICES=0 $B/write_cuda -b 1M -e 256M -f 4 --mem pin \
      --window 16 $J
  fi
  # two processes without efax: what the all2all and proxy figures are read against (one GPU: both
  # on it; two: one on each, and a2a/q-* is what the GPUs and their link allow all2all)
  if [ "$NGPU" -ge 2 ]; then
    t "bench/gpu-share" 300 bash -c "$B/gpu_share -d 0,1 -s 64M -n 50 && $B/gpu_share -d 0,1 -s 256M -n 20"
    cp "$OUT/cur.log" "$OUT/gpu_share.txt"
  fi
  if [ "$NGPU" -lt 2 ]; then
    t "bench/gpu-share" 300 $B/gpu_share -s 64M -n 20
    cp "$OUT/cur.log" "$OUT/gpu_share.txt"
    # all2all and the proxy again with the two processes under MPS, which runs both ranks' work on
    # the GPU at once instead of by time slices: what the slices cost (EFAX_GPU_MPS=0 skips it;
    # EFAX_GPU_MPS=1 in a row's env marks these runs)
    if [ "${EFAX_GPU_MPS:-1}" != 0 ] && command -v nvidia-cuda-mps-control >/dev/null; then
      export CUDA_MPS_PIPE_DIRECTORY=/tmp/efax-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/efax-mps-log
      mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
      if nvidia-cuda-mps-control -d; then
        echo "== MPS: control daemon started (pipes in $CUDA_MPS_PIPE_DIRECTORY)"
        t "bench/all2all-mps" 600 launch 2 $E EFAX_GPU_MPS=1 $B/all2all_cuda -b 1M -e 256M -f 4 --mem dma $J
        t "bench/proxy-mps" 600 launch 2 $E EFAX_GPU_MPS=1 $B/proxy -b 1M -e 256M -f 4 --mem dma $J
        echo quit | timeout 10 nvidia-cuda-mps-control
        sleep 1
        echo "== MPS: stopped"
      else
        echo "== MPS: nvidia-cuda-mps-control -d failed: all2all and the proxy under MPS not run"
      fi
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    else
      echo "== MPS: not run (EFAX_GPU_MPS=0 or no nvidia-cuda-mps-control)"
    fi
  fi
fi
if { [ "$WHAT" = all ] || [ "$WHAT" = bench ]; } && [[ " $LINES " == *" 1.17 "* ]]; then
  t "bench/1.17-write-staged" 600 launch 2 env $(env_for 1.17) build/gpu-1.17/write_cuda -b 1M -e 256M -f 4 --mem dma --window 16 $J
fi
if [ "$NGPU" -ge 2 ] && [ "$WHAT" != checks ] && [ "$WHAT" != quick ] && [ "$WHAT" != compare ] && [ "$WHAT" != staged ]; then
  L=${LINES%% *} B=build/gpu-${LINES%% *}
  t ipc-check 600 launch 2 env $(env_for "$L") $B/ipc -b 1M -e 16M -f 16 $J
  t ipc-check-pull 600 launch 2 env $(env_for "$L") $B/ipc -b 1M -e 16M -f 16 --dir pull $J
  if [ "$WHAT" != ipc ] || true; then
    t bench-ipc 600 launch 2 env $(env_for "$L") $B/ipc -b 256K -e 1G -f 4 $J
  fi
fi

# staged_summary: staged device memory (no GPUDirect) against the slower of the pinned host path and
# gpu_share's device-to-host copy (issue to done), per libfabric line, GPUs and size. Rows are compared
# within their round (EFAX_ROUND; one round outside `staged`), and each figure is min..max over them.
staged_summary() {
  local d2h
  d2h=$(grep -m1 '^d2h ' "$OUT/gpu_share.txt" 2>/dev/null | awk '{print $4}')
  echo; echo "== staged device memory against the pinned host path (same round) and a device-to-host copy (${d2h:-?} GB/s)"
  jq -r -s --arg d2h "${d2h:-0}" '
    def gpus: if (.run.env.CUDA_VISIBLE_DEVICES // "") == "0" then "1 GPU" else "GPUs as launched" end;
    def r2: . * 100 | round / 100;
    def span(f): map(f) | map(select(. != null)) | if length == 0 then "-" elif min == max then "\(min | r2)"
      else "\(min | r2)..\(max | r2)" end;
    [.[] | select(.driver == "write" and (.run.check | not))]
    | group_by([.run.libfabric, gpus, .size, (.run.env.EFAX_ROUND // "")])
    | map((map(select(.mem_path | test("staged"))) | .[0]) as $st | (map(select(.memory == "pinned")) | .[0]) as $pin
          | select($st != null and $pin != null)
          | ([($pin.gbps / 8), ($d2h | tonumber)] | map(select(. > 0)) | min) as $ceil
          | {lf: $st.run.libfabric, g: ($st | gpus), size: $st.size, behind: $st.confirmed_behind, st: ($st.gbps / 8),
             pin: ($pin.gbps / 8), ratio: ($st.gbps / $pin.gbps), of_slower: ($st.gbps / 8 / $ceil)})
    | group_by([.lf, .g, .size])[]
    | "libfabric \(.[0].lf) \(.[0].g) \(.[0].size / 1048576)M: staged \(span(.st)) GB/s, pinned \(span(.pin)) GB/s; staged/pinned \(span(.ratio)), of the slower \(span(.of_slower)) (goal 0.8; \(length) round(s); windows confirmed behind \(span(.behind)))"' "$RES" 2>&1
}
# ---- staged device memory (no GPUDirect) against what it is made of, round by round: the pinned
# host path (same machine, same round) and a device-to-host copy (gpu_share's d2h, issue to done).
# The goal is 80% of the slower of the two at every size; each round measures both at each size
# back to back, so a ratio is taken within one round and its spread over the rounds is what is quoted.
# On two GPUs once more with both ranks on GPU 0, as a one-GPU machine runs it.
if [ "$WHAT" = staged ]; then
  L=${LINES%% *} B=build/gpu-${LINES%% *}
  E="env $(env_for "$L")"
  if [ "$NGPU" -ge 2 ]; then t "staged/gpu-share" 300 $B/gpu_share -d 0,1 -s 64M -n 20; else t "staged/gpu-share" 300 $B/gpu_share -s 64M -n 20; fi
  cp "$OUT/cur.log" "$OUT/gpu_share.txt"
  SHAPES="as-launched"; [ "$NGPU" -lt 2 ] || SHAPES="as-launched gpu0"
  for R in $(seq "${EFAX_ROUNDS:-3}"); do
    for S in $SHAPES; do
      V=""; [ "$S" = gpu0 ] && V="CUDA_VISIBLE_DEVICES=0"
      # both kinds in one run: each size's pinned and staged rows are measured one after the other,
      # in an order that alternates by round
      K=pin,dma; [ $((R % 2)) = 1 ] || K=dma,pin
      t "staged/r$R/$S/$K" 600 launch 2 $E $V EFAX_ROUND=$R EFAX_MEM_PATH=staged $B/write_cuda -b 1M -e 256M -f 4 \
        --mem $K --window 16 $J
    done
  done
  {
    staged_summary
    echo; echo "wrong bytes in any row: $(jq -s '[.[] | select((.wrong // 0) > 0)] | length' "$RES") row(s)"
  } | tee -a "$SUM"
fi

# ---- the ratios the issue and docs quote, from this run's rows
if [ "$WHAT" != staged ] && [ -s "$RES" ] && command -v jq >/dev/null; then
  {
    echo; echo "== ratios (this run)"
    # every device-memory run measured its own ceiling: best and spread, as its header said
    grep '^bench/' "$OUT/ceilings.txt"
    # --argjson shared: both ranks on one GPU, where all2all copies both ranks' buffers within its
    # memory: busbw can reach at most a quarter of the copy ceiling (2 ranks: each iteration copies
    # 2 x size bytes; busbw = size / time / 2)
    jq -r -s --argjson shared "$((NGPU < 2))" '
      def r0: . * 10 | round / 10;
      def pct(a; b): if (b // 0) > 0 then "\(a / b * 100 | r0)%" else "-" end;
      def mps: (.run.env.EFAX_GPU_MPS // "") == "1";
      def b26: [.[] | select(.memory == "device" and (.run.libfabric // "") == "2.6" and (.run.env.EFAX_MEM_PATH // "") == "")];
      def mpsnote: if mps then " (MPS)" else "" end;
      (b26 | map(select(.driver == "write" and .variant == "SingleDMA" and (.run.check | not))) | map({key: (.size | tostring), value: .gbps}) | from_entries) as $w
      | ([.[] | select(.driver == "fi_rma_bw")] | map({key: (.size | tostring), value: .gbps}) | from_entries) as $f
      | (.[] | select(.driver == "write" and .variant == "SingleDMA" and .memory == "device" and .ceiling_gbps != null and (.run.check | not)) |
          "write \(.run.libfabric) \(.run.env.EFAX_MEM_PATH // "default") (\(.mem_path)) \(.size / 1048576)M: \(.gbps | r0) Gbps = \(pct(.gbps; .ceiling_gbps)) of its run\u0027s ceiling (best copy \(.ceiling_gbps | r0))"),
        "efax write (default path, --window 16) beside fi_rma_bw (-W 16), Gbps:",
        (($w | keys) + ($f | keys) | unique | map(tonumber) | sort[] | tostring |
          "  \(tonumber / 1048576)M: efax \($w[.] // null | if . then r0 else "no result" end), fi_rma_bw \($f[.] // null | if . then r0 else "no result" end)" +
          (if ($w[.] // 0) > 0 and ($f[.] // 0) > 0 then " = \($w[.] / $f[.] * 100 | round / 100)x" else "" end)),
        (b26[] | select(.driver == "sendrecv" and (.variant | test("Stream"))) |
          "sendrecv Stream \(.size / 1048576)M: \(.gbps | r0) Gbps = \(pct(.gbps; $w[.size | tostring])) of write"),
        (b26[] | select(.driver == "all2all") |
          "all2all\(mpsnote) window \(.window) \(.size / 1048576)M: busbw \(.busbw_gbs * 8 | r0) Gbps = \(pct(.busbw_gbs * 8; $w[.size | tostring])) of write" +
          (if $shared == 1 then ", \(pct(.busbw_gbs * 8; (.ceiling_gbps // 0) / 4)) of what one GPU allows (ceiling / 4)" else "" end)),
        (b26 | map(select(.driver == "proxy")) | group_by([mps, .size])[] | (map({key: .variant, value: .gbps}) | from_entries) as $p |
          "proxy\(.[0] | mpsnote) \(.[0].size / 1048576)M: CPU \($p.CPU // 0 | r0), GPU-NBI \($p["GPU-NBI"] // 0 | r0) = \(pct($p["GPU-NBI"] // 0; $p.CPU)) of CPU, GPU-Blocking \($p["GPU-Blocking"] // 0 | r0) Gbps")
    ' "$RES" 2>&1
    if [ -s "$OUT/gpu_share.txt" ]; then
      echo; echo "== two processes without efax ($(grep -m1 '^gpu_share:' "$OUT/gpu_share.txt" | cut -d: -f2-); GB/s; a2a busbw as all2all_cuda reports it)"
      grep -E '^(pull|h2d|d2h|a2a)' "$OUT/gpu_share.txt"
    fi
    staged_summary
    echo; echo "wrong bytes in any row: $(jq -s '[.[] | select((.wrong // 0) > 0)] | length' "$RES") row(s)"
  } | tee -a "$SUM"
fi
# ---- efax beside NCCL and NVSHMEM (tests/gpu_compare.sh), on libfabric 2.6 with CUDA
if [ "$COMPARE" = 1 ]; then
  if [[ " $LINES " == *" 2.6 "* ]]; then
    CMP_ROWS=1 # its rows go to results.jsonl tagged (lib, label, gpus, round), after the ratios above
    compare_main "$PFX_26"
    unset CMP_ROWS
  else
    echo "compare: not run: it needs libfabric 2.6 with CUDA (.fab/libfabric-*.tar.gz)" | tee -a "$SUM"
  fi
fi
echo; echo "== all: $pass passed, $fail failed" | tee -a "$SUM"
exit $fail
