#!/usr/bin/env bash
# gpu.sh — the GPU tests and benchmarks, run on the GPU machine (the `device` tool) in one go:
# unpacks the libfabric carried in .deb/ (that machine has none), builds everything, runs the
# checks (data verified in device memory for every variant and size), then the benchmarks, and
# leaves gpu.log, results.jsonl and summary.txt in $OUT (or build/gpu-out).
#
#   tests/gpu.sh [checks|bench|quick|ipc]   checks: the checks (4K..256M); bench: the benchmarks;
#                                       quick: checks with small sizes; ipc: the NVLink IPC checks
#                                       and benchmarks only; default: checks and benchmarks
# Ranks are started with efax's TCP rendezvous (no PMIx needed there), one per GPU, provider shm.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
LOG=$OUT/gpu.log
RES=$OUT/results.jsonl
: >"$LOG"; : >"$RES"
WHAT=${1:-all}
exec > >(tee -a "$LOG") 2>&1

FAB=/tmp/fab
if [ -d .deb ]; then # the libfabric carried in (Debian's 1.17), used whatever the machine has
  mkdir -p $FAB
  for d in .deb/*.deb; do dpkg -x "$d" $FAB; done
  export LD_LIBRARY_PATH=$FAB/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export FI_PROVIDER_PATH=$FAB/usr/lib/x86_64-linux-gnu/libfabric
  CFL="-I$FAB/usr/include" LIBS="-L$FAB/usr/lib/x86_64-linux-gnu -lfabric"
else
  CFL=$(pkg-config --cflags libfabric) LIBS=$(pkg-config --libs libfabric)
fi
export PATH=/usr/local/cuda/bin:$PATH
echo "== $(date -u +%FT%TZ) $(hostname): $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -8 | tr '\n' ';')"
nvidia-smi topo -m 2>/dev/null | head -6
NGPU=$(nvidia-smi -L | wc -l)
echo "== build ($NGPU GPUs)"
make -j16 host cuda EFAX_SKIP_DEPS=1 EFAX_DEFS=-DEFAX_NO_PMIX PKG_CFLAGS="$CFL" PKG_LIBS="$LIBS" NV_LIBS="$LIBS" \
  NVFLAGS="-O2 -g -arch=sm_90 -Xcompiler -Wall,-Wextra -Werror all-warnings" 2>&1 | grep -v "^cc \|^nvcc \|^/usr/local" | tail -20
export FI_PROVIDER=shm EFAX_PROVIDER=shm EFAX_TIMEOUT_MS=60000
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

pass=0 fail=0
# launch N CMD...: N ranks through the TCP rendezvous on this host
launch() {
  local n=$1 port=$((30000 + RANDOM % 20000)) pids=() r rc=0; shift
  for ((r = 1; r < n; r++)); do EFAX_RANK=$r EFAX_SIZE=$n EFAX_ROOT=127.0.0.1:$port EFAX_TOKEN=gpu "$@" >/dev/null 2>>"$OUT/ranks.err" & pids+=($!); done
  EFAX_RANK=0 EFAX_SIZE=$n EFAX_ROOT=127.0.0.1:$port EFAX_TOKEN=gpu "$@" || rc=$?
  for r in "${pids[@]}"; do wait "$r" || { [ "$rc" = 0 ] && rc=1; }; done
  return $rc
}
export OUT
export -f launch
# t NAME LIMIT CMD...: a check
t() {
  local name=$1 lim=$2; shift 2
  echo; echo "== $name"
  timeout --kill-after=5 "$lim" bash -c '"$@"' "$name" "$@"; local rc=$?
  if [ $rc = 0 ]; then pass=$((pass + 1)); echo "PASS $name"; else fail=$((fail + 1)); echo "FAIL $name (rc=$rc)"; fi
}
j() { echo "--json $OUT/$1.tmp"; }
collect() { [ -f "$OUT/$1.tmp" ] && cat "$OUT/$1.tmp" >>"$RES" && rm -f "$OUT/$1.tmp"; }

# ---- checks: every byte, every variant
MAXC=256M; [ "$WHAT" = quick ] && MAXC=16M
if [ "$WHAT" != bench ] && [ "$WHAT" != ipc ]; then
t affinity 60 build/affinity --json $OUT/aff.tmp; collect aff
t queue-check 300 build/queue -c $(j queue); collect queue
t proxy-semantics 120 launch 2 build/cuda_test
t write-check-all-memory 600 launch 2 build/write_cuda -c -b 4K -e $MAXC -f 4 -n 4 --mem all --mode single,split --nics shm,shm $(j wchk); collect wchk
t sendrecv-check-all-memory 600 launch 2 build/sendrecv_cuda -c -b 4K -e $MAXC -f 16 -n 4 --mem all $(j srchk); collect srchk
t all2all-check-all-memory 600 launch 2 build/all2all_cuda -c -b 64K -e $MAXC -f 16 -n 4 --mem all $(j a2achk); collect a2achk
t proxy-check 600 launch 2 build/proxy -c -b 64K -e 64M -f 16 -n 3 --mem dma $(j pxchk); collect pxchk
echo; echo "== checks: $pass passed, $fail failed"
fi
if [ "$NGPU" -ge 2 ] && [ "$WHAT" != bench ]; then
  t ipc-check 600 launch 2 build/ipc -b 1M -e 16M -f 16 $(j ipchk)
  t ipc-check-pull 600 launch 2 build/ipc -b 1M -e 16M -f 16 --dir pull $(j ipchkp)
  t ipc-check-tma 600 launch 2 build/ipc -b 1M -e 16M -f 16 --layout tma $(j ipchkt)
fi
if [ "$WHAT" = all ] || [ "$WHAT" = bench ]; then
# ---- benchmarks
t bench-write 600 launch 2 build/write_cuda -b 1M -e 256M -f 4 --mem all $(j w); collect w
t bench-proxy 600 launch 2 build/proxy -b 64K -e 256M -f 4 --mem dma $(j px); collect px
t bench-proxy-pin 600 launch 2 build/proxy -b 1M -e 256M -f 16 --mem pin $(j pxp); collect pxp
t bench-proxy-1producer 600 launch 2 build/proxy -b 64K -e 64M -f 4 --mem pin --producers 1 --bytes 64M $(j px1); collect px1
t bench-queue 300 build/queue $(j q); collect q
fi
if [ "$NGPU" -ge 2 ] && { [ "$WHAT" = all ] || [ "$WHAT" = bench ] || [ "$WHAT" = ipc ]; }; then
  t bench-ipc 600 launch 2 build/ipc -b 256K -e 1G -f 4 $(j ipc); collect ipc
  t bench-ipc-tma 600 launch 2 build/ipc -b 64M -e 1G -f 4 --layout tma $(j ipct); collect ipct
  t bench-ipc-pull 600 launch 2 build/ipc -b 64M -e 1G -f 4 --dir pull $(j ipcp); collect ipcp
  t bench-ipc-allpairs 600 launch 2 build/ipc -b 64M -e 1G -f 4 --pairs all $(j ipca); collect ipca
  t bench-ipc-allpairs-pull 600 launch 2 build/ipc -b 64M -e 1G -f 4 --pairs all --dir pull $(j ipcap); collect ipcap
fi
echo; echo "== all: $pass passed, $fail failed"
grep -h "PASS\|FAIL" "$LOG" >"$OUT/summary.txt"
exit $fail
