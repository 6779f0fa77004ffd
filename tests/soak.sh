#!/usr/bin/env bash
# soak.sh — every fault family at once (EFAX_FAULTS, efax.h >>faults) for a while: each driver's
# checked run, one after another, on tcp and shm, each with its own seed. `make soak` runs it for
# 10 minutes (SOAK_SECONDS=600).
#
# A run passes when it delivered every byte right (exit 0, no result with wrong bytes) or when an
# injected operation was lost and the rank that lost it said so (exit 1, "injected by
# EFAX_FAULTS="). Anything else fails the soak: a wrong byte, another exit, an unnamed failure, a
# run that outlived its time limit (a hang), a batch left ending on FI_MORE.
#
# Half the runs use EFAX_FAULTS=all:SEED (the first injected operation is dropped after 16-271
# injects: runs are short); the other half every family with injectfail=N and rxfail=M, N and M in
# [20000, 200000), and --duration 20, so those runs move many more bytes before (or without) their
# first loss.
#
#   tests/soak.sh                     10 minutes (SOAK_SECONDS), build/ (EFAX_BUILD)
#   SOAK_SECONDS=60 tests/soak.sh     a short one
# Prints one line per run and the totals: runs, transfers and bytes checked (the result rows'
# iterations x window x peers, and x size), faults per family (the ranks' EFAX_FAULTS lines), wrong
# bytes. Logs: $EFAX_BUILD/soak/.
set -u
cd "$(dirname "$0")/.." || exit 1
B=${EFAX_BUILD:-build}
SECONDS_WANTED=${SOAK_SECONDS:-600}
SEED0=${SOAK_SEED:-$(date +%s)}
LOG=$B/soak
mkdir -p "$LOG"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
for d in pingpong sendrecv write all2all bootstrap stream; do
  [ -x "$B/$d" ] || { echo "soak: $B/$d is not built (make host)"; exit 2; }
done
command -v jq >/dev/null || { echo "soak: needs jq"; exit 2; }

drivers=(pingpong sendrecv write all2all bootstrap stream)
provs=(tcp shm)
runs=0 delivered=0 lost=0 bad=0 transfers=0 bytes=0 wrong=0
declare -A fault=([held]=0 [deferred]=0 [refused]=0 [bursts]=0 [failed]=0 [errored]=0 [emulated]=0 [capped]=0 [batched]=0
  [interrupted]=0 [unrung]=0 [rxfailed]=0)
start=$SECONDS
echo "# soak: every fault family, $SECONDS_WANTED s, seeds from $SEED0, $(pkg-config --modversion libfabric 2>/dev/null || echo '?') ($B)"
while [ $((SECONDS - start)) -lt "$SECONDS_WANTED" ]; do
  i=$runs
  d=${drivers[$((i % ${#drivers[@]}))]}
  p=${provs[$((i / ${#drivers[@]} % 2))]}
  seed=$((SEED0 + i))
  nics=lo,lo
  [ "$p" = shm ] && nics=shm,shm
  if [ $((i / 10 % 2)) = 0 ]; then spec="all:$seed"; dur=""
  else spec="reorder,eagain,injectfail=$((20000 + (seed * 7919) % 180000)),emulated,smallrma,rxfail=$((20000 + (seed * 104729) % 180000)):$seed"; dur="--duration 20"; fi
  case $d in
    pingpong) np=2; args="-c -b 1 -e 256K -f 8 -n 100" ;;
    sendrecv) np=2; args="--nics $nics -c -b 1 -e 4M -f 16 -n 10 --mode all" ;;
    write) np=2; args="--nics $nics -c -b 1 -e 16M -f 16 -n 8 --mode all --window 4" ;;
    all2all) np=3; args="--nics $nics -c -b 3K -e 3M -f 16 -n 8 --mode all" ;;
    bootstrap) np=3; args="--nics $nics -s 64"; dur="" ;;
    # a ring of 4 slots under one data tag and one credit tag (the streaming recipe)
    stream) np=2; args="--nics $nics --mode all -c -b 4K -e 1M -f 16 -n 100" ;;
  esac
  out=$LOG/run-$i-$d-$p
  rm -f "$out.jsonl"
  [ "$d" = bootstrap ] || args="$args --json $out.jsonl $dur"
  # shellcheck disable=SC2086
  EFAX_TIMEOUT_MS=10000 EFAX_FAULTS=$spec timeout --kill-after=5 120 mpirun -np $np -x EFAX_TIMEOUT_MS -x EFAX_FAULTS \
    "$B/$d" --provider "$p" $args >"$out.log" 2>&1
  rc=$?
  runs=$((runs + 1))
  w=0 t=0 by=0
  if [ -s "$out.jsonl" ]; then
    read -r w t by < <(jq -s -r '[(map(.wrong | if . > 0 then . else 0 end) | add // 0),
      (map(.iters * ([.window, 1] | max) * ([.peers // 1, 1] | max)) | add // 0),
      (map(.size * .iters * ([.window, 1] | max) * ([.peers // 1, 1] | max)) | add // 0)] | map(tostring) | join(" ")' "$out.jsonl")
  fi
  [ "$d" = bootstrap ] && grep -q "pairs OK" "$out.log" && t=$((np * (np - 1) * 2 * 2)) && by=$((t * 64))
  grep -qi "wrong bytes\|data wrong" "$out.log" && [ "$w" = 0 ] && w=1
  for k in "${!fault[@]}"; do # each rank's last line: "reorder held=N ...; emulated nics=N; smallrma nics=N; ..."
    pat="[ ;]$k="
    [ "$k" = emulated ] && pat="emulated nics="
    [ "$k" = capped ] && pat="smallrma nics="
    [ "$k" = failed ] && pat="injectfail failed="
    [ "$k" = rxfailed ] && pat="rxfail failed="
    n=$(grep "EFAX_FAULTS=.* on rank" "$out.log" | grep -o "$pat[0-9]*" | cut -d= -f2 | paste -sd+ | bc 2>/dev/null)
    fault[$k]=$((fault[$k] + ${n:-0}))
  done
  transfers=$((transfers + t)) bytes=$((bytes + by)) wrong=$((wrong + w))
  verdict=
  if [ "$w" != 0 ]; then verdict="WRONG BYTES"
  elif grep -q "unrung=[1-9]" "$out.log"; then verdict="BATCH LEFT UNRUNG"
  elif [ $rc = 0 ]; then verdict=delivered; delivered=$((delivered + 1))
  elif [ $rc = 1 ] && grep -q "injected by EFAX_FAULTS=" "$out.log"; then verdict="lost op named"; lost=$((lost + 1))
  elif [ $rc = 124 ] || [ $rc = 137 ]; then verdict="HUNG (killed after 120 s)"
  else verdict="FAILED (exit $rc, not named)"; fi
  case $verdict in delivered|"lost op named") ;; *) bad=$((bad + 1)) ;; esac
  printf '%4d %-9s %-3s %-60s exit %d %6d transfers %s\n' "$i" "$d" "$p" "$spec" "$rc" "$t" "$verdict"
done
echo "# soak: $runs runs in $((SECONDS - start)) s: $delivered delivered everything, $lost lost an injected operation and named it, $bad failed"
echo "# checked: $transfers transfers, $bytes bytes, $wrong wrong"
echo "# faults (summed over the ranks that printed their line; a rank mpirun killed prints none):" \
  "reorder held=${fault[held]} deferred=${fault[deferred]}; eagain refused=${fault[refused]} bursts=${fault[bursts]};" \
  "injectfail failed=${fault[failed]} errored=${fault[errored]}; emulated nics=${fault[emulated]}; smallrma nics=${fault[capped]};" \
  "rxfail failed=${fault[rxfailed]};" \
  "FI_MORE batched=${fault[batched]} interrupted=${fault[interrupted]} unrung=${fault[unrung]}"
[ $bad = 0 ]
