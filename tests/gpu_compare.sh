# shellcheck shell=bash
# gpu_compare.sh — sourced by tests/gpu.sh (compare, all): efax beside NCCL and NVSHMEM on the same
# GPUs, in the same run, in interleaved rounds (each round runs every library once at every GPU
# count, so a slow spell of the machine falls on all of them). One rank per GPU throughout: efax's
# ranks and NVSHMEM's PEs through efax's TCP rendezvous, nccl-tests with -g N (one process driving N
# GPUs: its build here has no MPI). Sizes 1 MiB .. 256 MiB by 4, busbw by nccl-tests' formula.
#
#   NCCL     nccl-tests 2.19.6 (.fab/nccl-tests-*.tar.gz, built here against the image's NCCL, the
#            nvidia-nccl-cu13 Python package): alltoall_perf beside efax's all2all, sendrecv_perf
#            beside efax's write (2 GPUs)
#   NVSHMEM  tests/nvshmem_bench.cu (built here against the nvidia-nvshmem-cu13 package): its
#            host-initiated all-to-all beside all2all, device-initiated puts (blocking, NBI) beside
#            efax's proxy (2 GPUs), put bandwidth beside efax's ipc (rank 0 -> each GPU, all pairs)
#   efax     all2all --window 1 and 2; with EFAX_A2A_CANDIDATES=1 also, at every 2x size, --pace 0,
#            --pace 1 and --pace 1 --pace-gate arrived (more than 2 GPUs) and, where .fab/base/ holds an
#            earlier efax (efax.h, efax_cuda.h, efax_bench.h, drivers/all2all.c), that one's all2all
#            ("base": what a change is measured against)
#
#   EFAX_GPUS="4 2"   GPU counts to compare on (default: 8, 4, 2, those this machine has); each
#                     runs on GPUs 0 .. N-1 (CUDA_VISIBLE_DEVICES)
#   EFAX_ROUNDS=3     interleaved rounds
# Rows (JSON Lines) go to results.jsonl with "lib", "label", "gpus" and "round" added; the summary
# prints each figure's range over the rounds and each ratio's range (efax / the other library,
# round by round), and scaling.png / scaling.md: busbw against GPU count at 256 MiB and 16 MiB.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1, set by gpu.sh).

CMP_SIZES="-b 1M -e 256M -f 4"
CMP_DIR=/tmp/efax-compare
export CMP_SIZES

# compare_prebuild: nccl-tests and a compile-only check of nvshmem_bench, in the background from the
# start (they need no libfabric build), so that a build error shows at once; compare_wait collects
# them. NCCL and NVSHMEM are found as the image's Python packages.
compare_prebuild() {
  mkdir -p "$CMP_DIR"
  NCCL_PKG=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
  NVSHMEM_PKG=$(python3 -c 'import nvidia.nvshmem as m; print(list(m.__path__)[0])' 2>/dev/null)
  export NCCL_PKG NVSHMEM_PKG
  echo "== compare: NCCL package ${NCCL_PKG:-not found}, NVSHMEM package ${NVSHMEM_PKG:-not found}"
  if [ -n "$NCCL_PKG" ] && ls .fab/nccl-tests-*.tar.gz >/dev/null 2>&1; then
    (
      set -e
      cd "$CMP_DIR"
      rm -rf nccl-home nccl-tests-* && mkdir -p nccl-home/lib
      ln -s "$NCCL_PKG/include" nccl-home/include
      ln -s "$(ls "$NCCL_PKG"/lib/libnccl.so.* | head -n 1)" nccl-home/lib/libnccl.so
      tar xzf "$OLDPWD"/.fab/nccl-tests-*.tar.gz
      cd nccl-tests-*/
      make -C src -j"$(nproc)" CUDA_HOME=/usr/local/cuda NCCL_HOME="$CMP_DIR/nccl-home" \
        NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR="$CMP_DIR/nccl-bin" \
        "$CMP_DIR/nccl-bin/alltoall_perf" "$CMP_DIR/nccl-bin/sendrecv_perf"
    ) >"$CMP_DIR/nccl-tests.log" 2>&1 &
    CMP_NCCL_PID=$!
  fi
  if [ -n "$NVSHMEM_PKG" ]; then
    (
      set -e
      mkdir -p "$CMP_DIR/lfinc" "$CMP_DIR/nvshmem-lib"
      tar xzf "$(ls .fab/libfabric-*.tar.gz | head -n 1)" -C "$CMP_DIR/lfinc" --strip-components=1 --wildcards '*/include/rdma/*'
      ln -sf "$NVSHMEM_PKG/lib/libnvshmem_host.so.3" "$CMP_DIR/nvshmem-lib/libnvshmem_host.so"
      /usr/local/cuda/bin/nvcc -O2 -rdc=true -arch=sm_90 -Xcompiler -Wall,-Wextra -Werror all-warnings \
        -DEFAX_NO_PMIX -I. -isystem "$NVSHMEM_PKG/include" -I"$CMP_DIR/lfinc/include" -c tests/nvshmem_bench.cu \
        -o "$CMP_DIR/nvshmem_bench.o"
    ) >"$CMP_DIR/nvshmem-build.log" 2>&1 &
    CMP_NVSHMEM_PID=$!
  fi
}

# compare_wait LIBFABRIC_PREFIX: the background builds' outcome; links nvshmem_bench against that
# libfabric. Sets CMP_NCCL (the nccl-tests folder) and CMP_NVSHMEM (the binary) where they built.
compare_wait() {
  local lf=$1
  CMP_NCCL='' CMP_NVSHMEM=''
  if [ -n "${CMP_NCCL_PID:-}" ]; then
    if wait "$CMP_NCCL_PID" && [ -x "$CMP_DIR/nccl-bin/alltoall_perf" ]; then CMP_NCCL=$CMP_DIR/nccl-bin; echo "== compare: nccl-tests built"
    else echo "== compare: nccl-tests did not build:"; tail -n 25 "$CMP_DIR/nccl-tests.log"; fi
  fi
  if [ -n "${CMP_NVSHMEM_PID:-}" ]; then
    if wait "$CMP_NVSHMEM_PID" &&
      /usr/local/cuda/bin/nvcc -O2 -rdc=true -arch=sm_90 -cudart shared "$CMP_DIR/nvshmem_bench.o" -o "$CMP_DIR/nvshmem_bench" \
        -L"$CMP_DIR/nvshmem-lib" -L"$NVSHMEM_PKG/lib" -lnvshmem_host -lnvshmem_device \
        -L/usr/local/cuda/lib64/stubs -lcuda -L"$lf/lib" -lfabric -ldl -Xlinker -rpath -Xlinker /usr/local/cuda/lib64 \
        -Xlinker -rpath -Xlinker "$NVSHMEM_PKG/lib" -Xlinker -rpath -Xlinker "$lf/lib" >>"$CMP_DIR/nvshmem-build.log" 2>&1; then
      CMP_NVSHMEM=$CMP_DIR/nvshmem_bench; echo "== compare: nvshmem_bench built"
    else echo "== compare: nvshmem_bench did not build:"; tail -n 25 "$CMP_DIR/nvshmem-build.log"; fi
  fi
}

# compare_base LIBFABRIC_PREFIX: .fab/base's all2all (an earlier efax), where it is there (gpu.sh
# starts it in the background once libfabric is built: CMP_BASE_PID).
compare_base() {
  local lf=$1
  [ -f .fab/base/drivers/all2all.c ] || return 0
  mkdir -p build/gpu-base
  /usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -x cu -DEFAX_NO_PMIX -I.fab/base .fab/base/drivers/all2all.c \
    -o build/gpu-base/all2all_cuda -I"$lf/include" -L"$lf/lib" -lfabric -ldl -Xlinker -rpath -Xlinker "$lf/lib" \
    >"$CMP_DIR/base-build.log" 2>&1 || { echo "== compare: .fab/base's all2all did not build:"; tail "$CMP_DIR/base-build.log"; }
}

# tagged LIB LABEL G ROUND: appends cur.tmp's rows to results.jsonl with those fields
tagged() {
  [ -s "$OUT/cur.tmp" ] || return 0
  jq -c --arg lib "$1" --arg label "$2" --argjson g "$3" --argjson round "$4" \
    '. + {lib: $lib, label: $label, gpus: $g, round: $round}' "$OUT/cur.tmp" >>"$OUT/cmp.jsonl"
  rm -f "$OUT/cur.tmp"
}

# nccl_rows BINARY VARIANT G: runs an nccl-tests binary on G GPUs and writes its out-of-place rows
# to cur.tmp as JSON (busbw and algbw as it prints them; its #wrong)
nccl_rows() {
  local bin=$1 variant=$2 g=$3 log=$OUT/cur.log
  NCCL_DEBUG=VERSION LD_LIBRARY_PATH="$NCCL_PKG/lib" "$bin" $CMP_SIZES -g "$g" -n 50 -w 10 -c 1 >"$log" 2>&1
  local rc=$? ver
  ver=$(grep -o -m 1 'NCCL version [^ ]*' "$log" | cut -d' ' -f3)
  grep -E '^#  *(Avg bus|nThread|Using devices)|^#  *Rank|NCCL version' "$log" | head -n 8
  awk -v v="$variant" -v g="$g" -v ver="${ver:-?}" -v cmd="$(basename "$bin") $CMP_SIZES -g $g -n 50 -w 10 -c 1" '
    $1 ~ /^[0-9]+$/ && NF >= 13 {
      w = ($9 ~ /^[0-9]+$/) ? $9 : "null"
      printf "{\"schema\":1,\"driver\":\"nccl-tests\",\"variant\":\"%s\",\"kind\":\"%s\",\"memory\":\"device\",", v, v == "alltoall" ? "alltoall" : "oneway"
      printf "\"mem_path\":\"nccl\",\"size\":%s,\"seconds\":%g,\"algbw_gbs\":%s,\"busbw_gbs\":%s,\"gbs\":%s,\"wrong\":%s,", $1, $6 / 1e6, $7, $8, $7, w
      printf "\"run\":{\"command\":\"%s\",\"nccl\":\"%s\",\"ranks\":%d}}\n", cmd, ver, g
    }' "$log" >"$OUT/cur.tmp"
  [ $rc = 0 ] && [ -s "$OUT/cur.tmp" ] || { tail -n 15 "$log"; return 1; }
  ! jq -e -s 'any(.[]; (.wrong // 0) > 0)' "$OUT/cur.tmp" >/dev/null || { echo "nccl-tests reported wrong elements"; return 1; }
}
export -f nccl_rows

# compare_round R: one round at every GPU count
compare_round() {
  local R=$1 G B=build/gpu-2.6 E EN vis w p a
  for G in $CMP_GPUS; do
    vis=$(seq -s, 0 $((G - 1)))
    export CUDA_VISIBLE_DEVICES=$vis
    E="env $(env_for 2.6)"
    EN="env $(env_for 2.6):$NVSHMEM_PKG/lib" # NVSHMEM's bootstrap plugins beside its library
    echo; echo "==== round $R, $G GPUs ($vis)"
    if [ -n "$CMP_NCCL" ]; then
      t "cmp/r$R/g$G/nccl-alltoall" 180 nccl_rows "$CMP_NCCL/alltoall_perf" alltoall "$G"; tagged nccl alltoall "$G" "$R"
      if [ "$G" = 2 ]; then t "cmp/r$R/g$G/nccl-sendrecv" 180 nccl_rows "$CMP_NCCL/sendrecv_perf" sendrecv "$G"; tagged nccl sendrecv "$G" "$R"; fi
    fi
    if [ -n "$CMP_NVSHMEM" ]; then
      t "cmp/r$R/g$G/nvshmem-a2a" 180 launch "$G" $EN "$CMP_NVSHMEM" a2a $CMP_SIZES --json "$OUT/cur.tmp"; tagged nvshmem alltoall "$G" "$R"
    fi
    for w in 1 2; do
      t "cmp/r$R/g$G/efax-all2all-w$w" 180 launch "$G" $E $B/all2all_cuda $CMP_SIZES --mem dma --window $w $J; tagged efax "all2all-w$w" "$G" "$R"
      if [ "${EFAX_A2A_CANDIDATES:-0}" = 1 ] && [ "$G" -gt 2 ]; then # every 2x size, each way to pace
        for p in pace0 pace1 arrived; do
          case $p in pace0) a="--pace 0" ;; pace1) a="--pace 1" ;; *) a="--pace 1 --pace-gate arrived" ;; esac
          # shellcheck disable=SC2086
          t "cmp/r$R/g$G/efax-all2all-w$w-$p" 180 launch "$G" $E $B/all2all_cuda -b 1M -e 256M -f 2 --mem dma --window $w $a $J
          tagged efax "all2all-w$w-cand-$p" "$G" "$R"
        done
      fi
      if [ "${EFAX_A2A_CANDIDATES:-0}" = 1 ] && [ -x build/gpu-base/all2all_cuda ]; then
        t "cmp/r$R/g$G/base-all2all-w$w" 180 launch "$G" $E build/gpu-base/all2all_cuda $CMP_SIZES --mem dma --window $w $J
        tagged efax-base "all2all-w$w" "$G" "$R"
      fi
    done
    if [ "$G" = 2 ]; then
      t "cmp/r$R/g2/efax-write" 180 launch 2 $E $B/write_cuda $CMP_SIZES --mem dma --window 16 $J; tagged efax write 2 "$R"
      t "cmp/r$R/g2/efax-proxy" 240 launch 2 $E $B/proxy $CMP_SIZES --mem dma $J; tagged efax proxy 2 "$R"
      if [ -n "$CMP_NVSHMEM" ]; then
        t "cmp/r$R/g2/nvshmem-put" 240 launch 2 $EN "$CMP_NVSHMEM" put $CMP_SIZES --json "$OUT/cur.tmp"; tagged nvshmem put 2 "$R"
      fi
    fi
    # the NVLink figures: rank 0 -> each GPU and every pair at once (ipc sweeps its copy kernels)
    if [ "$R" = 1 ] || [ "${EFAX_IPC_ROUNDS:-1}" = all ]; then
      t "cmp/r$R/g$G/efax-ipc" 300 launch "$G" $E $B/ipc $CMP_SIZES $J; tagged efax ipc "$G" "$R"
      t "cmp/r$R/g$G/efax-ipc-all" 300 launch "$G" $E $B/ipc $CMP_SIZES --pairs all $J; tagged efax ipc-all "$G" "$R"
      if [ -n "$CMP_NVSHMEM" ]; then
        t "cmp/r$R/g$G/nvshmem-bw" 300 launch "$G" $EN "$CMP_NVSHMEM" bw $CMP_SIZES --json "$OUT/cur.tmp"; tagged nvshmem bw "$G" "$R"
      fi
    fi
    if [ "$R" = 1 ]; then # the all-to-all as measured, every byte checked, at this GPU count
      t "cmp/g$G/all2all-check" 180 launch "$G" $E $B/all2all_cuda -c -b 1M -e 64M -f 8 -n 3 --mem dma $J; rm -f "$OUT/cur.tmp"
      if [ "$G" -gt 2 ]; then # paced at every size, both gates
        t "cmp/g$G/all2all-check-paced" 180 launch "$G" $E $B/all2all_cuda -c -b 1M -e 64M -f 8 -n 3 --mem dma --pace 1 $J
        t "cmp/g$G/all2all-check-arrived" 180 launch "$G" $E $B/all2all_cuda -c -b 1M -e 64M -f 8 -n 3 --mem dma --pace 1 --pace-gate arrived $J
        rm -f "$OUT/cur.tmp"
      fi
      if [ "$G" -gt 2 ]; then # one settle for every writer's bytes (incast's writers into one target)
        t "cmp/g$G/incast-check" 180 launch "$G" $E $B/incast_cuda -c -b 64K -e 64M -f 8 -n 3 --mem dma $J
        rm -f "$OUT/cur.tmp"
      fi
      if [ "$G" = 2 ]; then # the device-memory checks of what changed: marks, a settle a writer, the pace
        t "cmp/g2/cuda-test" 300 launch 2 $E $B/cuda_test
        t "cmp/g2/write-check" 180 launch 2 $E $B/write_cuda -c -b 4K -e 64M -f 8 -n 3 --mem dma --mode single $J
        rm -f "$OUT/cur.tmp"
      fi
      if [ "$G" = 2 ]; then # what two processes' copies allow one iteration at a time, without efax (gpu_share)
        t "cmp/g2/gpu-share" 120 $B/gpu_share -d 0,1 -s 4M -n 100
        cp "$OUT/cur.log" "$OUT/gpu_share.txt"
      fi
    fi
  done
  unset CUDA_VISIBLE_DEVICES
}

# compare_summary: the ranges and ratios, from cmp.jsonl (appended to results.jsonl too)
compare_summary() {
  local f=$OUT/cmp.jsonl
  [ -s "$f" ] || { echo "== compare: no rows"; return 0; }
  cat "$f" >>"$RES"
  echo; echo "== efax beside NCCL and NVSHMEM (this run; each figure: lowest-highest over the rounds; each"
  echo "   ratio: efax / the other, taken round by round, lowest-highest; GB/s = 1e9 B/s)"
  jq -r -s '
    def r1: . * 10 | round / 10;
    def r2: . * 100 | round / 100;
    def r1z: if . > 0 then r1 else "-" end;
    def rng(f): [.[] | f | select(. != null)] as $v | if ($v | length) == 0 then "-" else
      ($v | min) as $a | ($v | max) as $b | if ($a | r1) == ($b | r1) then "\($a | r1)" else "\($a | r1)-\($b | r1)" end end;
    def rrng: if length == 0 then "-" else (min | r2) as $a | (max | r2) as $b | if $a == $b then "\($a)x" else "\($a)-\($b)x" end end;
    def key: "\(.lib)/\(.label)/\(.variant)";
    def mb: "\(.size / 1048576 | floor) MiB";
    . as $all
    # one figure a row: busbw for all-to-alls, GB/s otherwise
    | def val: if .busbw_gbs != null and (.kind == "alltoall" or .driver == "all2all") then .busbw_gbs else .gbs end;
    def pick($lb; $lab; $vr; $g; $size): [$all[] | select(.lib == $lb and .label == $lab and
        ($vr == null or .variant == $vr) and .gpus == $g and .size == $size)];
    def ratios($a; $b): [$a[] as $x | $b[] | select(.round == $x.round) | select(val > 0) | ($x | val) / val];
    ([$all[].gpus] | unique) as $gs | ([$all[] | select(.lib == "nccl" and .label == "alltoall") | .size] | unique) as $sizes
    | ($gs[] as $g |
        "\n-- all-to-all, \($g) GPUs: busbw GB/s (NCCL alltoall_perf -g \($g); NVSHMEM alltoallmem_on_stream; efax all2all --window 1 / 2)",
        ($sizes[] as $s |
          pick("nccl"; "alltoall"; null; $g; $s) as $n | pick("nvshmem"; "alltoall"; null; $g; $s) as $v |
          pick("efax"; "all2all-w1"; null; $g; $s) as $w1 | pick("efax"; "all2all-w2"; null; $g; $s) as $w2 |
          "  \($s / 1048576 | floor) MiB: NCCL \($n | rng(val)), NVSHMEM \($v | rng(val)), efax w1 \($w1 | rng(val)), w2 \($w2 | rng(val));" +
          " w1/NCCL \(ratios($w1; $n) | rrng), w2/NCCL \(ratios($w2; $n) | rrng), w1/NVSHMEM \(ratios($w1; $v) | rrng), w2/NVSHMEM \(ratios($w2; $v) | rrng)"),
        [$all[] | select(.gpus == $g and .driver == "all2all" and (.lib == "efax-base" or (.label | test("-cand-"))))] as $cr |
        if ($cr | length) > 0 then
          "   candidates, busbw GB/s (all2all --pace 0 / --pace 1 / --pace 1 --pace-gate arrived; base: the efax in .fab/base):",
          (["1", "2"][] as $w | ([$cr[].size] | unique)[] as $s |
            ([$cr[] | select(.size == $s and (.label | test("-w\($w)")))] | group_by(.lib + .label) |
              map("\(.[0].label | sub("all2all-w[0-9]-cand-"; "") | sub("all2all-w[0-9]"; "base")) \(rng(val))") | join(", ")) as $line |
            "    w\($w) \($s / 1048576) MiB: \($line); this efax \(pick("efax"; "all2all-w\($w)"; null; $g; $s) | rng(val))")
        else empty end),
      ([$all[] | select(.lib == "nccl" and .label == "sendrecv")] | if length == 0 then empty else
        "\n-- 2 GPUs, one way: NCCL sendrecv_perf -g 2 busbw (both GPUs send at once) beside efax write (rank 0 -> 1, --window 16), GB/s",
        ($sizes[] as $s | pick("nccl"; "sendrecv"; null; 2; $s) as $n | pick("efax"; "write"; "SingleDMA"; 2; $s) as $w |
          "  \($s / 1048576 | floor) MiB: NCCL sendrecv \($n | rng(.busbw_gbs)), efax write \($w | rng(.gbs)); write/sendrecv \([$w[] as $x | $n[] | select(.round == $x.round and .busbw_gbs > 0) | $x.gbs / .busbw_gbs] | rrng)") end),
      ([$all[] | select(.lib == "nvshmem" and .label == "put")] | if length == 0 then empty else
        "\n-- 2 GPUs, device-initiated: NVSHMEM puts (SMs move the bytes) beside efax proxy (GPU commands, the CPU proxy posts, shm copies), GB/s",
        ($sizes[] as $s | pick("nvshmem"; "put"; "put-blocking"; 2; $s) as $vb | pick("nvshmem"; "put"; "put-nbi"; 2; $s) as $vn |
          pick("efax"; "proxy"; "GPU-Blocking"; 2; $s) as $pb | pick("efax"; "proxy"; "GPU-NBI"; 2; $s) as $pn |
          "  \($s / 1048576 | floor) MiB: blocking NVSHMEM \($vb | rng(.gbs)), efax \($pb | rng(.gbs)) (\(ratios($pb; $vb) | rrng)); NBI NVSHMEM \($vn | rng(.gbs)), efax \($pn | rng(.gbs)) (\(ratios($pn; $vn) | rrng))") end),
      ($gs[] as $g | [$all[] | select(.gpus == $g and .lib == "nvshmem" and .label == "bw")] | if length == 0 then empty else
        "\n-- \($g) GPUs, NVLink: NVSHMEM put bandwidth beside efax ipc (best copy kernel; cudaMemcpyPeerAsync), GB/s",
        ($sizes[] as $s |
          ([range(1; $g)] | map(. as $k | pick("nvshmem"; "bw"; "put-0-to-\($k)"; $g; $s) as $v |
            (if $g > 2 then "-to-\($k)" else "" end) as $to |
            ([$all[] | select(.lib == "efax" and .label == "ipc" and .gpus == $g and .size == $s and (.variant | test("^g[0-9]+xb[0-9]+\($to)$")))] | map(.gbs) | max // 0) as $ib |
            ([$all[] | select(.lib == "efax" and .label == "ipc" and .gpus == $g and .size == $s and .variant == "memcpyPeer\($to)")] | map(.gbs) | max // 0) as $im |
            "0->\($k): NVSHMEM \($v | rng(.gbs)), efax ipc \($ib | r1z), memcpyPeer \($im | r1z)") | join("; ")) as $pp |
          pick("nvshmem"; "bw"; "put-all-pairs"; $g; $s) as $va | pick("nvshmem"; "bw"; "put-all-aggregate"; $g; $s) as $vg |
          ([$all[] | select(.lib == "efax" and .label == "ipc-all" and .gpus == $g and .size == $s and (.variant | test("^g[0-9]+xb[0-9]+$")))] | map(.gbs) | max // 0) as $iab |
          ([$all[] | select(.lib == "efax" and .label == "ipc-all" and .gpus == $g and .size == $s and (.variant | test("^g[0-9]+xb[0-9]+-aggregate$")))] | map(.gbs) | max // 0) as $iag |
          ([$all[] | select(.lib == "efax" and .label == "ipc-all" and .gpus == $g and .size == $s and .variant == "memcpyPeer-aggregate")] | map(.gbs) | max // 0) as $imag |
          "  \($s / 1048576 | floor) MiB: \($pp)\n     every pair at once, per pair: NVSHMEM \($va | rng(.gbs)), efax ipc \($iab | r1z); aggregate: NVSHMEM \($vg | rng(.gbs)), efax ipc \($iag | r1z), memcpyPeer \($imag | r1z)") end),
      "\nwrong bytes in any compared row: \([$all[] | select((.wrong // 0) > 0)] | length) row(s)"
  ' "$f" 2>&1
}

# compare_plot: scaling.dat/.md and scaling.png: busbw against GPU count (the median of the rounds)
compare_plot() {
  local f=$OUT/cmp.jsonl
  [ -s "$f" ] || return 0
  jq -r -s '
    def med: sort | if length == 0 then null else .[(length - 1) / 2 | floor] end;
    [.[] | select(.kind == "alltoall" or .driver == "all2all") | select(.lib != "efax-base" and (.label | test("pace") | not))] as $a
    | ([$a[].gpus] | unique) as $gs
    | (["alltoall nccl", "alltoall nvshmem", "all2all-w1 efax", "all2all-w2 efax"]) as $series
    | ([16777216, 268435456][] as $s | $gs[] as $g |
        [$s, $g] + ($series | map(split(" ") as $p | [$a[] | select(.label == $p[0] and .lib == $p[1] and .gpus == $g and .size == $s) | .busbw_gbs] | med))
        | map(if . == null then "NaN" else tostring end) | join(" "))' "$f" >"$OUT/scaling.dat"
  {
    echo "| size | GPUs | NCCL alltoall | NVSHMEM all-to-all | efax all2all window 1 | efax all2all window 2 |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
    awk '{ printf "| %d MiB | %d |", $1 / 1048576, $2; for (i = 3; i <= 6; i++) printf " %s |", ($i == "NaN" ? "-" : sprintf("%.1f", $i)); print "" }' "$OUT/scaling.dat"
  } >"$OUT/scaling.md"
  echo; echo "== busbw against GPU count (GB/s, median of the rounds): scaling.png"; cat "$OUT/scaling.md"
  if command -v gnuplot >/dev/null; then
    gnuplot <<EOF 2>&1 | tail -n 3
set terminal pngcairo size 1000,450 noenhanced
set output "$OUT/scaling.png"
set multiplot layout 1,2 title "all-to-all busbw against GPU count (one rank per GPU; $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1))"
set xlabel "GPUs"; set ylabel "busbw GB/s"; set key bottom right; set grid; set yrange [0:*]
set logscale x 2; set xtics (2, 4, 8); set xrange [1.8:8.8]
do for [s in "16777216 268435456"] {
  set title sprintf("%d MiB", int(s) / 1048576)
  plot for [c=3:6] sprintf("< awk '\$1 == %s' $OUT/scaling.dat", s) using 2:c with linespoints lw 2 \
    title word("NCCL NVSHMEM efax-window-1 efax-window-2", c - 2)
}
unset multiplot
EOF
  else
    python3 - "$OUT/scaling.dat" "$OUT/scaling.png" <<'EOF' 2>&1 | tail -n 3
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
names = ["NCCL", "NVSHMEM", "efax window 1", "efax window 2"]
fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
for ax, size in zip(axes, ("16777216", "268435456")):
    pts = [r for r in rows if r[0] == size]
    for i, name in enumerate(names):
        xy = [(int(r[1]), float(r[2 + i])) for r in pts if r[2 + i] != "NaN"]
        if xy:
            ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o", label=name)
    ax.set_title("%d MiB" % (int(size) >> 20))
    ax.set_xscale("log", base=2)
    ax.set_xticks([2, 4, 8])
    ax.set_xticklabels(["2", "4", "8"])
    ax.set_xlabel("GPUs")
    ax.set_ylabel("busbw GB/s")
    ax.set_ylim(bottom=0)
    ax.grid(True)
    ax.legend(loc="lower right")
fig.suptitle("all-to-all busbw against GPU count (one rank per GPU)")
fig.savefig(sys.argv[2], dpi=100)
EOF
  fi
}

# compare_main LIBFABRIC_PREFIX: the whole comparison (after efax was built against that libfabric)
compare_main() {
  local lf=$1 R
  : >"$OUT/cmp.jsonl"
  echo; echo "== efax beside NCCL and NVSHMEM"
  if [ "$NGPU" -lt 2 ]; then
    {
      echo "compare: NCCL not run: one GPU here, and NCCL refuses two ranks on one device (ncclInvalidUsage,"
      echo "  \"Duplicate GPU detected\"): its figures need a GPU per rank"
      echo "compare: NVSHMEM not run: one GPU here; nvshmem_bench runs one PE per GPU, as the seed study does"
      echo "compare: efax's one-GPU figures (both ranks on GPU 0) are in the bench section above"
    } | tee -a "$SUM"
    return 0
  fi
  # every PE on this host: NVSHMEM's bootstrap on loopback, and no remote transport to look for
  export NVSHMEM_REMOTE_TRANSPORT=none NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo
  compare_wait "$lf"
  [ -z "${CMP_BASE_PID:-}" ] || wait "$CMP_BASE_PID"
  [ -n "$CMP_NCCL" ] || echo "compare: NCCL not run: nccl-tests did not build here (no .fab/nccl-tests-*.tar.gz, or no nvidia-nccl-cu13 package)" | tee -a "$SUM"
  [ -n "$CMP_NVSHMEM" ] || echo "compare: NVSHMEM not run: nvshmem_bench did not build here (no nvidia-nvshmem-cu13 package, or the build failed)" | tee -a "$SUM"
  CMP_GPUS=${EFAX_GPUS:-}
  if [ -z "$CMP_GPUS" ]; then for g in 8 4 2; do [ "$g" -le "$NGPU" ] && CMP_GPUS="$CMP_GPUS $g"; done; fi
  for g in $CMP_GPUS; do [ "$g" -le "$NGPU" ] || { echo "compare: EFAX_GPUS has $g, this machine $NGPU GPUs"; return 1; }; done
  echo "== compare on $(echo $CMP_GPUS) GPUs, ${EFAX_ROUNDS:-3} interleaved rounds"
  for R in $(seq "${EFAX_ROUNDS:-3}"); do compare_round "$R"; done
  compare_summary | tee -a "$SUM"
  compare_plot | tee -a "$SUM"
}
