#!/usr/bin/env bash
# bench.sh — efax's main job: measure what the network itself does, and keep the evidence.
#
#   ./bench.sh                                  the default local sweep on this host (see below)
#   ./bench.sh write -b 1M -e 1G --mode split   one driver with its options (any of build/*)
#   ./bench.sh -H node1,node2 write --mode all  two nodes through Open MPI's mpirun
#   ./bench.sh --np 4 incast -c                 three ranks write into one at once (MoE combine, KV gather)
#   ./bench.sh --slurm write                    Slurm: srun --mpi=pmix -N 2 (in or out of an allocation)
#   ./bench.sh --lab 2x2@1gbit --slurm write -c  the same in the lab's own Slurm cluster
#   ./bench.sh --libfabric PREFIX --lab 2x1     the lab's two hosts: tcp WRITE, efax beside fi_rma_bw
#   ./bench.sh --libfabric PREFIX               the default sweep on another libfabric (its fabtests too)
#
# Launch options (before the driver name):
#   -H HOSTS        comma-separated hosts for mpirun (one rank per host unless --np says more)
#   --np N          ranks (default 2)
#   --out DIR       results folder (default results/<date-time>)
#   --lab HxR[@RATE]  bring up the two-host lab (tests/lab.sh: H hosts, R rails, each shaped
#                   to RATE, e.g. 2x4@1gbit), run there, take it down
#   --slurm         launch with srun --mpi=pmix over 2 nodes (the lab: all its hosts, through
#                   the Slurm cluster tests/lab.sh up --slurm starts there) instead of mpirun
#   --libfabric P   build efax against the libfabric installed in prefix P (make LIBFABRIC=P) and
#                   take the reference tools (fi_pingpong, fabtests' fi_rma_bw) from P/bin;
#                   tests/libfabric.sh TARBALL builds such a prefix with its fabtests
#   -h              this text
#
# Every run leaves in its results folder: each driver's log, .jsonl and .csv, commands.txt,
# PNG plots, summary.txt (the figures, and which runs failed and why) and index.html (one page
# with the plots and the summary). On a terminal a one-line progress indicator runs while a
# driver is quiet; piped, the output is the driver's alone.
# Exit status: 0 when every run passed; 1 when a run failed, including a -c run that found
# wrong bytes; 2 for bad options.
#
# The default sweep (no driver named) opens with the doctor (is this host ready? WARN and FAIL
# lines; ./bench.sh doctor prints every finding); then for each of the shm and tcp providers present,
# 2 ranks on this host run pingpong, sendrecv and write; libfabric's own tools run beside them as references:
# fi_pingpong (libfabric-bin) interleaved with efax's ping-pong, fabtests' fi_rma_bw -o writedata
# with 64 writes in flight beside efax's write with 64 in flight (tcp; when fi_rma_bw is found:
# --libfabric, or on PATH), and this host's single-thread memcpy as the ceiling for shm. The
# summary compares them, one verdict per line: ping-pong within 2% of fi_pingpong at every size
# (SLOWER only when efax was more than 2% behind in every round, else level: see the summary's legend);
# tcp write at least 1.1x fi_rma_bw at 64 KiB - 4 MiB; shm write at 16 MiB at least the in-cache
# memcpy rate and at 256 MiB at least 75% of the memcpy ceiling. Then the message rate (Mmsg/s) at
# 8 B - 64 KiB with 64 messages in flight on both sides, on each provider, in 5 interleaved rounds:
# efax's write beside fabtests' fi_rma_bw -o writedata and efax's sendrecv (Stream) beside
# fi_rdm_bw, each with the tool's footprint: fi_rma_bw writes each message of its window to its own
# offset, as efax's write does (fabtests 1.19 on; before, all to the same bytes: efax's write then
# runs with --one-slot); fi_rdm_bw sends every one from and into the same bytes, so efax's
# sendrecv runs with --one-slot (with a slot each, 64 messages of 64 KiB span 4 MiB a side and fall
# out of this VM's 4 MiB L2: ~0.6x at 32-64 KiB on shm, measured); both with the same messages a
# size, ~0.2-0.6 s of them (mr_msgs: shorter runs measured this VM's stalls). The paired ratio (median over
# the rounds of efax / fabtests in the same round) with its spread; ok when the paired median is at
# least 1, BELOW when efax's rate was below the tool's in every round, level between. Without
# fabtests (Debian's libfabric-bin has fi_pingpong alone; tests/libfabric.sh
# fabtests-1.17.0.tar.bz2 fabtests builds its line's, then PATH=PREFIX/bin:$PATH) efax's rate is
# printed alone.
# Where this host offers efa (an EFA instance), the sweep runs it too, each rank's writes through the
# NIC, and beside efax's write with 64 in flight both fabtests' fi_rma_bw and libfabric 2.6's
# fi_efa_rma_bw (-o writedata -W 64; the EFA one posts and polls without blocking at window
# boundaries, as perftest does), on each efa fabric offered (efa, efa-direct: the tools' -f names it,
# since they would take efa-direct, listed first, for hints without tags).
# With --lab and no driver: tcp WRITE between the lab's first two hosts (one rail), efax's write
# (64 and 1 in flight) beside fi_rma_bw -o writedata (64 in flight), interleaved, twice.
# Each run leaves its log, .jsonl, .csv, the exact commands and PNG plots in the results folder.
# Missing packages are installed when run as root (apt-get), or the one command that installs
# them is printed.
set -uo pipefail
cd "$(dirname "$0")"

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "bench.sh: $*" >&2; exit 2; }

HOSTS="" NP=2 OUT="" LAB="" SLURM="" LIBFABRIC_PREFIX=""
while [ $# -gt 0 ]; do
  case $1 in
    -H) [ $# -ge 2 ] || die "-H needs a host list (e.g. -H node1,node2)"; HOSTS=$2; shift 2 ;;
    --np) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] && [ "$2" -le 4096 ] || die "--np needs a rank count in 1..4096"; NP=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; OUT=$2; shift 2 ;;
    --lab) [ $# -ge 2 ] || die "--lab needs HOSTSxRAILS[@RATE], e.g. 2x4@1gbit"; LAB=$2; shift 2 ;;
    --slurm) SLURM=1; shift ;;
    --libfabric) [ $# -ge 2 ] || die "--libfabric needs an install prefix (e.g. what tests/libfabric.sh TARBALL prints)"
      [ -f "$2/lib/pkgconfig/libfabric.pc" ] || [ -f "$2/lib64/pkgconfig/libfabric.pc" ] ||
        die "--libfabric $2: no lib/pkgconfig/libfabric.pc there; give the prefix libfabric was installed to, or build one with tests/libfabric.sh TARBALL"
      LIBFABRIC_PREFIX=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown launch option '$1' (see ./bench.sh -h)" ;;
    *) break ;;
  esac
done
DRIVER=${1:-}; [ $# -gt 0 ] && shift
if [ -n "$DRIVER" ] && [ ! -f "drivers/$DRIVER.c" ] && [ ! -f "drivers/$DRIVER.cu" ] && [[ $DRIVER != *_cuda ]]; then
  die "unknown driver '$DRIVER': one of $(ls drivers | sed 's/\.cu\{0,1\}$//' | sort -u | tr '\n' ' ')"
fi

# --- what it needs: packages, then the drivers
tests/deps.sh bench || exit 1
# the build folder: EFAX_BUILD when the test suite runs us (its libfabric's build), else build/
# (build/lf-NAME for --libfabric, as make LIBFABRIC=... names it)
MK=()
if [ -n "$LIBFABRIC_PREFIX" ]; then
  MK=(LIBFABRIC="$LIBFABRIC_PREFIX")
  BUILD=${EFAX_BUILD:-build/lf-$(basename "$LIBFABRIC_PREFIX")}
  export PATH="$LIBFABRIC_PREFIX/bin:$PATH"   # its fi_info, fi_pingpong, fi_rma_bw
  export LD_LIBRARY_PATH="$LIBFABRIC_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  BUILD=${EFAX_BUILD:-build}
fi
make -s host B="$BUILD" "${MK[@]}" >/dev/null || { echo "bench.sh: build failed (run make to see why)" >&2; exit 1; }
if [[ $DRIVER == *_cuda ]] || [ -f "drivers/$DRIVER.cu" ]; then make -s cuda B="$BUILD" "${MK[@]}" >/dev/null || exit 1; fi

OUT=${OUT:-results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || die "cannot create $OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
: >"$OUT/commands.txt"
: >"$OUT/runs.tsv"
if [ -n "$SLURM" ] && [ -z "$LAB" ] && ! command -v srun >/dev/null; then
  die "--slurm needs srun (Slurm's client); on a Slurm cluster run bench.sh where srun is"
fi

# --- how ranks are launched: the lab, mpirun across hosts, srun in Slurm, or mpirun here
LAUNCH=()
if [ -n "$LAB" ]; then
  [[ $LAB =~ ^([0-9]+)x([0-9]+)(@([0-9.]+[kmg]?bit))?$ ]] || die "--lab $LAB: expected HOSTSxRAILS[@RATE], e.g. 2x4@1gbit"
  LAB_H=${BASH_REMATCH[1]} LAB_R=${BASH_REMATCH[2]} LAB_RATE=${BASH_REMATCH[4]}
  if [ -n "$SLURM" ]; then tests/deps.sh slurm || exit 1; fi
  tests/lab.sh up "$LAB_H" "$LAB_R" ${LAB_RATE:+"$LAB_RATE"} ${SLURM:+--slurm} >"$OUT/lab.log" 2>&1 || { cat "$OUT/lab.log" >&2; exit 1; }
  trap 'tests/lab.sh down >>"$OUT/lab.log" 2>&1' EXIT
  # shellcheck disable=SC1091
  . /run/efax-lab/env   # LAB_HOSTS, LAB_AGENT, LAB_NICS, LAB_LINE_GBPS, LAB_MGMT, LAB_SLURM_CONF
  [ "$NP" = 2 ] && NP=$LAB_H
  per=$(( (NP + LAB_H - 1) / LAB_H ))   # ranks per host: hosts get per slots each, filled in order
  if [ -n "$SLURM" ]; then
    # the lab's slurmds run in the hosts; srun runs here, like on a login node
    LAUNCH=(env SLURM_CONF="$LAB_SLURM_CONF" EFAX_PROVIDER=tcp EFAX_NICS="$LAB_NICS" ${LAB_LINE_GBPS:+EFAX_LINE_GBPS=$LAB_LINE_GBPS}
            srun --mpi=pmix -N "$LAB_H" -n "$NP" --ntasks-per-node="$per")
  else
  LAUNCH=(mpirun -H "$(echo "$LAB_HOSTS" | sed "s/\([^,]*\)/\1:$per/g")" -np "$NP" --mca plm_rsh_agent "$LAB_AGENT" --mca oob_tcp_if_include "$LAB_MGMT"
          --mca btl self,tcp --mca btl_tcp_if_include "$LAB_MGMT" --bind-to none
          -x EFAX_PROVIDER=tcp -x EFAX_NICS="$LAB_NICS" ${LAB_LINE_GBPS:+-x EFAX_LINE_GBPS=$LAB_LINE_GBPS}
          -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM)
  fi
elif [ -n "$SLURM" ]; then
  nodes=2; [ "$NP" -lt 2 ] && nodes=1
  LAUNCH=(srun --mpi=pmix -N "$nodes" -n "$NP")
elif [ -n "$HOSTS" ]; then
  LAUNCH=(mpirun -H "$HOSTS" -np "$NP" --map-by node)
elif [ -n "${SLURM_JOB_ID:-}" ] && command -v srun >/dev/null; then
  LAUNCH=(srun --mpi=pmix -n "$NP")
else
  extra=(); [ "$NP" -gt "$(nproc)" ] && extra=(--oversubscribe --bind-to none)
  LAUNCH=(mpirun -np "$NP" "${extra[@]}")
fi

# here NP BIN ARGS...: NP ranks on this host without a launcher, through efax's own TCP rendezvous
# (EFAX_RANK/EFAX_SIZE/EFAX_ROOT/EFAX_TOKEN on 127.0.0.1), the way fi_pingpong and fi_rma_bw run:
# two plain processes. The default sweep launches so: under mpirun its daemons and its output
# forwarding share this host's cores with the ranks, and efax's ping-pong read 2-4% slower than
# the same binary launched so (tcp, 1 B - 16 KiB, three interleaved rounds). Exits with the
# first failing rank's status.
# pin N: the command prefix that runs a process on core N modulo this host's cores (taskset), so that
# the two ends of a pair, efax's ranks or a fabtests server and client alike, have a core each.
# Unpinned, this 2-core VM's scheduler now and then ran both spinning ends on one core for whole
# sizes: efax's shm write at 8 B moved 1.2-2 Mmsg/s then and ~6 otherwise. Nothing where taskset is
# missing or there is one core.
PIN=0
[ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null && PIN=1
pin() { [ "$PIN" = 0 ] || echo "taskset -c $(($1 % $(nproc)))"; }
here() {
  local np=$1 port=$((20000 + RANDOM % 12000)) token="bench$$-$RANDOM" i rc=0 r pids=(); shift
  for ((i = np - 1; i >= 1; i--)); do
    # shellcheck disable=SC2046
    EFAX_RANK=$i EFAX_SIZE=$np EFAX_ROOT=127.0.0.1:$port EFAX_TOKEN=$token $(pin $i) "$@" &
    pids+=($!)
  done
  # shellcheck disable=SC2046
  EFAX_RANK=0 EFAX_SIZE=$np EFAX_ROOT=127.0.0.1:$port EFAX_TOKEN=$token $(pin 0) "$@" || rc=$?
  for i in "${pids[@]}"; do wait "$i" || { r=$?; [ "$rc" != 0 ] || rc=$r; }; done
  return "$rc"
}

# show NAME: copies the driver's output (stdin) to the terminal and $OUT/NAME.log. On a terminal,
# while the driver is quiet, one line says how long it has run, how many results it has written
# and the last one (from NAME.jsonl), redrawn every second and cleared before the next line of
# output; piped, nothing is added.
show() {
  local name=$1 log=$OUT/$1.log line='' pending='' t0=$SECONDS n last rc
  if [ ! -t 1 ]; then tee "$log"; return; fi
  : >"$log"
  while :; do
    IFS= read -r -t 1 line; rc=$?
    if [ "$rc" = 0 ]; then
      line=$pending$line pending=''
      printf '\r\033[K%s\n' "$line"
      printf '%s\n' "$line" >>"$log"
      continue
    fi
    if [ "$rc" -le 128 ]; then   # end of output (a last line without a newline stays)
      line=$pending$line
      [ -z "$line" ] || { printf '\r\033[K%s\n' "$line"; printf '%s\n' "$line" >>"$log"; }
      break
    fi
    pending+=$line
    n=0 last=''
    if [ -s "$OUT/$name.jsonl" ]; then
      n=$(wc -l <"$OUT/$name.jsonl")
      last=$(tail -n 1 "$OUT/$name.jsonl" | sed -n 's/.*"variant":"\([^"]*\)".*"size":\([0-9]*\).*/\1 \2/p' |
             awk '{ b = $2; i = 1; split("B K M G", u); while (b >= 1024 && b % 1024 == 0 && i < 4) { b /= 1024; i++ }
                    printf "%s %d%s", $1, b, u[i] }')
    fi
    printf '\r\033[K[%s %ds] %d result(s)%s' "$name" $((SECONDS - t0)) "$n" "${last:+, last: $last}"
  done
  printf '\r\033[K'
}

# run NAME DRIVER ARGS...: one driver run, its table on the terminal, everything in $OUT;
# its status goes to runs.tsv (name, exit code, the line that says why it failed)
run() {
  local name=$1 drv=$2 why; shift 2
  local cmd=("${LAUNCH[@]}" "$PWD/$BUILD/$drv" "$@" --json "$OUT/$name.jsonl" --csv "$OUT/$name.csv")
  if [ "${LAUNCH[0]}" = here ]; then   # as a user would type it
    echo "$(for ((i = LAUNCH[1] - 1; i >= 0; i--)); do printf 'EFAX_RANK=%d EFAX_SIZE=%d EFAX_ROOT=127.0.0.1:PORT EFAX_TOKEN=T %s%s' "$i" "${LAUNCH[1]}" "${cmd[*]:2}" "$([ "$i" = 0 ] || echo ' & ')"; done)" >>"$OUT/commands.txt"
  else
    echo "${cmd[*]}" >>"$OUT/commands.txt"
  fi
  echo; echo "== $name"
  "${cmd[@]}" 2>&1 | show "$name"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" != 0 ]; then
    echo "bench.sh: $name failed (exit $rc, log $OUT/$name.log)" >&2
    why=$(grep -m 1 -E ': wrong bytes in ' "$OUT/$name.log" | sed 's/^/WRONG BYTES: /')
    [ -n "$why" ] || why=$(grep -m 1 -E '(^efax: error: |^[a-z0-9_]+: )' "$OUT/$name.log")
  fi
  printf '%s\t%s\t%s\n' "$name" "$rc" "${why:-}" >>"$OUT/runs.tsv"
  plot "$name"
  return "$rc"
}

# runs_report: one line per run (ok, or FAILED with its exit code and why), then the count
runs_report() {
  local name rc why n=0 bad=0
  echo "-- runs"
  while IFS=$'\t' read -r name rc why; do
    n=$((n + 1))
    if [ "$rc" = 0 ]; then printf '  %-24s ok\n' "$name"
    else bad=$((bad + 1)); printf '  %-24s FAILED (exit %s)%s\n' "$name" "$rc" "${why:+: $why}"; fi
  done <"$OUT/runs.tsv"
  if [ $bad = 0 ]; then echo "all $n run(s) passed"; else echo "FAILED: $bad of $n run(s)"; fi
}

# html FILE: FILE's text with &, < and > escaped
html() { sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g' "$1"; }

# page: index.html in $OUT, one page to open: the verdict, every PNG plot, the summary, the
# commands and the files. A line under the title counts the plots that loaded (a script,
# so a broken image is named rather than missed).
page() {
  local f verdict cls=ok
  verdict=$(runs_report | tail -n 1)
  [[ $verdict == FAILED* ]] && cls=fail
  {
    echo '<!doctype html>'
    echo '<html><head><meta charset="utf-8"><title>efax results '"$(basename "$OUT")"'</title>'
    echo '<style>body{font-family:sans-serif;margin:1em 2em;max-width:1200px}'
    echo 'img{display:block;width:1100px;max-width:100%;border:1px solid #ccc;margin:.3em 0 1.2em}'
    echo 'pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:12px}'
    echo '.ok{color:#070;font-weight:bold}.fail{color:#b00;font-weight:bold}</style></head><body>'
    echo "<h1>efax results: $(basename "$OUT")</h1>"
    echo "<p class=\"$cls\">$verdict</p>"
    echo '<p id="plots"></p>'
    for f in "$OUT"/*.png; do
      [ -e "$f" ] || continue
      f=$(basename "$f")
      echo "<h2>${f%.png}</h2><img class=\"plot\" src=\"$f\" alt=\"plot ${f%.png}\">"
    done
    echo '<h2>summary</h2><pre>'; html "$OUT/summary.txt"; echo '</pre>'
    echo '<h2>commands</h2><pre>'; html "$OUT/commands.txt"; echo '</pre>'
    echo '<h2>files</h2><ul>'
    for f in "$OUT"/*; do f=$(basename "$f"); echo "<li><a href=\"$f\">$f</a></li>"; done
    echo '</ul>'
    cat <<'JS'
<script>
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('img.plot'), bad = [], p = document.getElementById('plots');
  imgs.forEach(function (i) {
    var r = i.getBoundingClientRect();
    i.dataset.rect = [Math.round(r.left + scrollX), Math.round(r.top + scrollY), Math.round(r.width), Math.round(r.height)].join(',');
    if (!(i.complete && i.naturalWidth > 0)) bad.push(i.getAttribute('src'));
  });
  p.textContent = imgs.length + ' plot(s)' + (bad.length ? '; did not load: ' + bad.join(', ') : ', all shown');
  p.className = bad.length ? 'fail' : 'ok';
  p.dataset.loaded = imgs.length - bad.length;
  p.dataset.total = imgs.length;
  document.body.dataset.height = document.documentElement.scrollHeight;
});
</script>
JS
    echo '</body></html>'
  } >"$OUT/index.html"
}

# plot NAME: bandwidth against size, one line per variant, from NAME.csv
plot() {
  local csv="$OUT/$1.csv" clauses="" v
  command -v gnuplot >/dev/null && [ -s "$csv" ] || return 0
  head -1 "$csv" | grep -q '^driver,variant,' || return 0   # findings (doctor), not results
  while IFS= read -r v; do
    clauses+="${clauses:+, }'< awk -F, -v v=\"$v\" \"\\\$2 == v\" $csv' using 7:11 with linespoints title \"$v\""
  done < <(tail -n +2 "$csv" | cut -d, -f2 | awk '!seen[$0]++')
  [ -n "$clauses" ] || return 0
  gnuplot <<GP 2>>"$OUT/gnuplot.log"
set terminal pngcairo size 1100,650 font ",11"
set output "$OUT/$1.png"
set datafile separator ","
set logscale x 2
set format x "%.0b%B"
set xlabel "message size (bytes)"
set ylabel "Gbit/s (10^9 bit/s)"
set title "efax $1 — $(head -1 "$OUT/$1.log" | sed 's/^# //'), $(sed -n 2p "$OUT/$1.log" | sed 's/^# //')" noenhanced
set key left top noenhanced
set grid
plot $clauses
GP
}

if [ -n "$DRIVER" ]; then
  run "$DRIVER" "$DRIVER" "$@"; rc=$? # a driver's binary has its name (write, write_cuda, proxy)
  {
    echo "==================== summary ($(date -u +%FT%TZ)) ===================="
    echo "$(head -n 1 "$OUT/commands.txt")"
    echo
    cat "$OUT/$DRIVER.log"
    echo
    runs_report
  } >"$OUT/summary.txt"
  page
  echo; runs_report | tail -n 1
  echo "results: $OUT (open $OUT/index.html)"
  [ "$rc" = 0 ] || [ "$rc" = 2 ] || rc=1   # a launcher's own codes (137: killed) count as failed runs
  exit $rc
fi

# wait_listen PREFIX PORT: until a fabtests server (run under PREFIX: nothing here, a lab host's
# exec in the lab) listens on its out-of-band TCP PORT, at most 30 s; a fixed sleep let a loaded
# machine start the client first, which then failed with "connection refused"
wait_listen() {
  local i
  for ((i = 0; i < 300; i++)); do
    # shellcheck disable=SC2086
    $1 ss -Hltn "sport = :$2" 2>/dev/null | grep -q . && return 0
    sleep 0.1
  done
  echo "bench.sh: the fabtests server did not listen on port $2 within 30 s (its log says why)" >&2
  return 1
}
# fi_bw NAME SIZE ITERS [SERVER_PREFIX CLIENT_PREFIX SERVER_ADDR SERVER_ARGS CLIENT_ARGS]: fabtests' RMA
# bandwidth benchmark, -o writedata with 64 writes in flight (its default window), the plain
# fi_writedata loop efax's write is compared with; its client's output to $OUT/NAME.txt. By default
# both ends run here (127.0.0.1); in the lab SERVER_PREFIX / CLIENT_PREFIX run them in two hosts.
# FIBW_PROV (default tcp), FIBW_TOOL (default fi_rma_bw) and FIBW_FABRIC (-f, none by default) pick
# another provider, the EFA tool (fi_efa_rma_bw, libfabric 2.6's fabtests, the same output) or a fabric.
FI_RMA_BW=$(command -v fi_rma_bw || true)
FI_EFA_RMA_BW=$(command -v fi_efa_rma_bw || true)
fi_bw() {
  local name=$1 sz=$2 it=$3 sp=${4:-$(pin 1)} cp=${5:-$(pin 0)} addr=${6:-127.0.0.1} port=$((20000 + RANDOM % 12000)) server
  local args=(-p "${FIBW_PROV:-tcp}" ${FIBW_FABRIC:+-f "$FIBW_FABRIC"} -o writedata -W 64 -S "$sz" -I "$it" -E="$port")
  local tool=${FIBW_TOOL:-$FI_RMA_BW} src=$((10000 + RANDOM % 9998))
  echo "$sp ${tool##*/} ${args[*]} -B $src ${7:-} & $cp ${tool##*/} ${args[*]} -B $((src + 1)) ${8:-} $addr" \
    >>"$OUT/commands.txt"
  # shellcheck disable=SC2086
  timeout 120 $sp "$tool" "${args[@]}" -B "$src" ${7:-} >>"$OUT/$name.server.txt" 2>&1 &
  server=$!
  wait_listen "$sp" "$port" || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; return 1; }
  # shellcheck disable=SC2086
  timeout 120 $cp "$tool" "${args[@]}" -B $((src + 1)) ${8:-} "$addr" >>"$OUT/$name.txt" 2>&1
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
}
# fi_bw_table FILE: fi_rma_bw's result lines -> "size Gbps"
fi_bw_table() { grep -E '^[0-9]' "$1" | awk '{ v = $1; m = 1; if (v ~ /k$/) m = 1024; if (v ~ /m$/) m = 1048576; sub(/[kmg]$/, "", v); printf "%d %.6f\n", v * m, $5 * 8 / 1000 }'; }
# write_vs_fi EFAX_JSONL... : the table efax write (window 64, window 1) vs fi_rma_bw; reads $BW_TSV
write_vs_fi() {
  printf '%10s %14s %14s %14s %8s %s\n' size "efax w64 Gbps" "efax w1 Gbps" "fi_rma_bw Gbps" "w64/fi" verdict
  sort -k1,1n -k2,2gr "$BW_TSV" | awk '!s[$1]++' | while read -r sz fg; do   # the best of the rounds
    local e64 e1
    e64=$(cat "$@" | jq -r --argjson s "$sz" 'select(.variant=="Single" and .size==$s and .window==64) | .gbps' | sort -g | tail -1)
    e1=$(cat "$@" | jq -r --argjson s "$sz" 'select(.variant=="Single" and .size==$s and .window==1) | .gbps' | sort -g | tail -1)
    [ -n "$e64" ] || continue
    awk -v sz="$sz" -v a="$e64" -v b="${e1:-0}" -v f="$fg" 'BEGIN { r = f > 0 ? a / f : 0;
      printf "%10d %14.3f %14.3f %14.3f %8.2f %s\n", sz, a, b, f, r, (r >= 1.1 ? "ok" : "BELOW 1.1x") }'
  done
}

# ---------------- the lab sweep (--lab, no driver): tcp WRITE between two hosts ----------------
if [ -n "$LAB" ]; then
  T0=$SECONDS
  [ -n "$FI_RMA_BW" ] || die "the lab sweep compares with fabtests' fi_rma_bw, which is not on PATH: build it with tests/libfabric.sh TARBALL and pass --libfabric PREFIX"
  h0=${LAB_HOSTS%%,*}; h1=$(echo "$LAB_HOSTS" | cut -d, -f2)
  a0=$(tests/lab.sh exec "$h0" ip -4 -o addr show dev r0 | awk '{sub(/\/.*/, "", $4); print $4}')
  a1=$(tests/lab.sh exec "$h1" ip -4 -o addr show dev r0 | awk '{sub(/\/.*/, "", $4); print $4}')
  [ -n "$a0" ] && [ -n "$a1" ] || die "the lab's hosts $h0, $h1 have no rail r0 address"
  echo "# efax lab write sweep: $h0 ($a0) -> $h1 ($a1) over rail r0, libfabric $(fi_info --version 2>/dev/null | sed -n 's/^libfabric: //p')"
  [ "$LAB_H" = 2 ] && [ "$NP" = 2 ] || die "the lab sweep runs between two hosts: --lab 2xRAILS (and no --np)"
  BW_TSV=$OUT/fi_rma_bw-lab.tsv; : >"$BW_TSV"
  status=0
  run doctor doctor --quiet || status=1   # both hosts, and whether they agree
  for r in 1 2; do
    for sz in 65536 262144 1048576 4194304; do
      n=$(( 1073741824 / (64 * sz) ))   # 1 GiB a run: shorter ones measured the lab's tcp moods
      run write-lab-w64.$sz.r$r write -b "$sz" -e "$sz" --window 64 -n "$n" -w 1 --quiet || status=1
      run write-lab-w1.$sz.r$r write -b "$sz" -e "$sz" -n $((n * 64)) -w 4 --quiet || status=1
      echo; echo "== fi_rma_bw-lab.$sz.r$r"
      fi_bw fi_rma_bw-lab.$sz.r$r "$sz" $((n * 64)) "tests/lab.sh exec $h1 env LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" \
        "tests/lab.sh exec $h0 env LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" "$a1" "-s $a1" "-s $a0"
      fi_bw_table "$OUT/fi_rma_bw-lab.$sz.r$r.txt" | tee -a "$BW_TSV"
    done
  done
  {
    echo
    echo "==================== lab summary ($(date -u +%FT%TZ), $((SECONDS - T0)) s) ===================="
    echo
    echo "-- tcp write $h0 -> $h1 (one rail): efax write with 64 and 1 message(s) in flight vs fi_rma_bw -o writedata -W 64 (best of 2 interleaved rounds each)"
    write_vs_fi "$OUT"/write-lab-*.jsonl
    echo
    runs_report
    echo
    echo "results: $OUT (logs, .jsonl, .csv, commands.txt, index.html)"
  } | tee "$OUT/summary.txt"
  page
  exit $status
fi

# ---------------- the default sweep ----------------
# ranks on this host as the reference tools run: plain processes (here), not under mpirun
[ "${LAUNCH[0]}" = mpirun ] && [ -z "$HOSTS" ] && LAUNCH=(here "$NP")
T0=$SECONDS LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# efax bench on $(hostname): $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), libfabric $(fi_info --version 2>/dev/null | sed -n 's/^libfabric: //p')"
# first, is this host ready? (drivers/doctor.c: one line per finding; a FAIL fails the sweep)
status=0
run doctor doctor --quiet || status=1
"$BUILD/info" | tee "$OUT/info.txt"
MEMCPY_BIG=$("$BUILD/info" --memcpy 256M | awk '{print $(NF-1)}')
MEMCPY_16M=$("$BUILD/info" --memcpy 16M | awk '{print $(NF-1)}')
echo "memcpy ceiling (one thread, 256 MiB buffers, beyond this host's caches): $MEMCPY_BIG GB/s; in cache (16 MiB): $MEMCPY_16M GB/s" | tee "$OUT/memcpy.txt"

# fi_pingpong NAME PROVIDER SIZEARGS...: the reference ping-pong from libfabric's own tests
fi_pp() {
  local name=$1 prov=$2 port=$((20000 + RANDOM % 12000)) server; shift 2
  echo "fi_pingpong -p $prov -e rdm -B $port $* & fi_pingpong -p $prov -e rdm -P $port $* 127.0.0.1" >>"$OUT/commands.txt"
  # shellcheck disable=SC2046
  timeout 120 $(pin 1) fi_pingpong -p "$prov" -e rdm -B "$port" "$@" >"$OUT/$name.server.txt" 2>&1 &
  server=$!
  wait_listen "" "$port" || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; return 1; }
  # shellcheck disable=SC2046
  timeout 120 $(pin 0) fi_pingpong -p "$prov" -e rdm -P "$port" "$@" 127.0.0.1 >>"$OUT/$name.txt" 2>&1
  kill "$server" 2>/dev/null   # its own server only: it is left waiting when the client failed
  wait "$server" 2>/dev/null
}

# The message-rate sizes in three groups, each run with as many messages as take ~0.2-0.6 s a size
# here: runs of 1000 windows (~15 ms at 8 B on shm) were decided by whether one of this VM's 4 ms
# stalls (a vCPU not scheduled) fell into them: efax / fi_rma_bw at 8 B read 0.24-1.70 over 14
# rounds of 64,000 messages, 0.92-1.04 over 5 rounds of 1,280,000. mr_msgs PROVIDER GROUP: the count.
MR_GROUPS=("8 32 128" "512 2048" "8192 32768 65536") MR_W=64 MR_ROUNDS=5
mr_msgs() {
  local shm=(1280000 640000 128000) tcp=(128000 64000 25600)
  if [ "$1" = shm ]; then echo "${shm[$2]}"; else echo "${tcp[$2]}"; fi
}
# fi_rate NAME TOOL PROVIDER GROUP [ARGS...]: a fabtests bandwidth tool (fi_rma_bw, fi_rdm_bw) over
# the sizes of message-rate group GROUP, $MR_W in flight, mr_msgs messages a size, both ends here,
# one run per size (every run the journal reports ran so). Each end gets its own source port (-B):
# fabtests 1.17's shm names an endpoint after it, and two ends on the default one collide (the
# second fails in fi_endpoint or fi_enable); below 20000, clear of the OOB ports (-E) and of
# Linux's ephemeral ports. The client's output is appended to $OUT/NAME.txt.
# SEND/RECV's tool: fi_rdm_bw (untagged sends on an RDM endpoint, as efax's sendrecv makes), new in
# fabtests 1.22; before it fi_rdm_tagged_bw, the same loop with tagged sends.
FI_RDM_BW=$(command -v fi_rdm_bw || command -v fi_rdm_tagged_bw || true)
fi_rate() {
  local name=$1 tool=$2 prov=$3 g=$4 port src server s sizes args; shift 4
  read -ra sizes <<<"${MR_GROUPS[$g]}"
  for s in "${sizes[@]}"; do
    port=$((20000 + RANDOM % 12000))
    src=$((10000 + RANDOM % 9998))
    args=(-p "$prov" "$@" -W "$MR_W" -S "$s" -I "$(mr_msgs "$prov" "$g")" -E="$port")
    echo "${tool##*/} ${args[*]} -B $src & ${tool##*/} ${args[*]} -B $((src + 1)) 127.0.0.1" \
      >>"$OUT/commands.txt"
    # shellcheck disable=SC2046
    timeout 300 $(pin 1) "$tool" "${args[@]}" -B "$src" >>"$OUT/$name.server.txt" 2>&1 &
    server=$!
    wait_listen "" "$port" || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; return 1; }
    # shellcheck disable=SC2046
    timeout 300 $(pin 0) "$tool" "${args[@]}" -B $((src + 1)) 127.0.0.1 >>"$OUT/$name.txt" 2>&1
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null
  done
}
# one_slot EFAX_DRIVER TOOL: whether efax runs with --one-slot beside TOOL, the tool's footprint:
# fi_rdm_bw (and fi_rdm_tagged_bw) send every message from and into the same bytes; fi_rma_bw writes
# each message of its window to its own offset from fabtests 1.19 on (told by its -S taking a size
# list, l:1,..., new in the same release), before that all of them to the same bytes. The help is
# read whole before grep looks: a fabtests tool exits 1 after -h, which pipefail would take as no.
one_slot() {
  [ "$1" = write ] || return 0
  [ -n "$2" ] && ! grep -q 'l:1,' <<<"$("$2" -h 2>&1)"
}
# mrate_pair EFAX_DRIVER TOOL PROVIDER ROUND [TOOL_ARGS...]: one round of the message rate: for each
# size group, efax's driver over its sizes with the same window and count, and the tool (when
# found), efax first in odd rounds; efax's rows of the round gathered in mrate-DRIVER-PROVIDER.rROUND.jsonl
mrate_pair() {
  local drv=$1 tool=$2 p=$3 r=$4 rc=0 slots=() g sz; shift 4
  one_slot "$drv" "$tool" && slots=(--one-slot) # the tool's footprint (see the top)
  : >"$OUT/mrate-$drv-$p.r$r.jsonl"
  for g in "${!MR_GROUPS[@]}"; do
    read -ra sz <<<"${MR_GROUPS[$g]}"
    if [ -n "$tool" ] && [ $((r % 2)) = 0 ]; then fi_rate "${tool##*/}-$p.r$r" "$tool" "$p" "$g" "$@"; fi
    run "mrate-$drv-$p.r$r.g$g" "$drv" --provider "$p" -b "${sz[0]}" -e "${sz[-1]}" -f 4 --window "$MR_W" \
      "${slots[@]}" -n $(($(mr_msgs "$p" "$g") / MR_W)) -w 20 --quiet || rc=1
    cat "$OUT/mrate-$drv-$p.r$r.g$g.jsonl" >>"$OUT/mrate-$drv-$p.r$r.jsonl" 2>/dev/null
    if [ -n "$tool" ] && [ $((r % 2)) = 1 ]; then fi_rate "${tool##*/}-$p.r$r" "$tool" "$p" "$g" "$@"; fi
  done
  return $rc
}

PROVS=()
for p in shm tcp efa; do "$BUILD/info" --provider $p >/dev/null 2>&1 && PROVS+=($p); done
EFA_FABRICS=efa # and efa-direct where this host offers it (libfabric 2.x on a device with unsolicited write recv)
"$BUILD/info" --provider efa-direct >/dev/null 2>&1 && EFA_FABRICS="efa efa-direct"
[ ${#PROVS[@]} -gt 0 ] || { echo "bench.sh: neither shm nor tcp is available from libfabric here" >&2; exit 1; }
ROUNDS=5
for p in "${PROVS[@]}"; do
  # the ping-pong against fi_pingpong: interleaved rounds, the best of each per size (this
  # host's timings drift between runs, and within one for seconds at a time, by more than the
  # difference being measured). efax times SEND/RECV alone here, the one message sequence
  # fi_pingpong times (size after size, the same kind); its WRITE echo has a run of its own.
  # Odd rounds run efax first, even rounds fi_pingpong first, so neither always follows the other.
  for r in $(seq $ROUNDS); do
    q=(); [ "$r" = 1 ] || q=(--quiet)
    [ $((r % 2)) = 1 ] || fi_pp fi_pingpong-$p.r$r $p -S all -I 2000
    run pingpong-$p.r$r pingpong --provider $p -b 1 -e 1M -n 2000 --variant sendrecv "${q[@]}" || status=1  # as many as fi_pingpong -I 2000
    [ $((r % 2)) = 0 ] || fi_pp fi_pingpong-$p.r$r $p -S all -I 2000
  done
  run pingpong-$p-writeimm pingpong --provider $p -b 1 -e 1M -n 2000 --variant writeimm --quiet || status=1
  run sendrecv-$p sendrecv --provider $p -b 1K -e 64M || status=1
  run write-$p write --provider $p -b 4K -e 256M || status=1
  echo; echo "== fi_pingpong-$p (reference, $ROUNDS rounds; and 16M, 64M, 256M)"
  for s in 16777216 67108864 268435456; do fi_pp fi_pingpong-$p.big $p -S $s -I 20; done
  grep -hE '^[0-9]' "$OUT/fi_pingpong-$p.r1.txt" "$OUT/fi_pingpong-$p.big.txt" | tail -6
  if [ "$p" = tcp ] && [ -n "$FI_RMA_BW" ]; then
    # tcp write with 64 in flight against fabtests' fi_rma_bw -o writedata -W 64: the same 1 GiB
    # per size (shorter runs measured this host's tcp moods, not the tools), two interleaved rounds
    for r in 1 2; do
      for s in 65536 262144 1048576 4194304; do
        run write-tcp-w64.$s.r$r write --provider tcp -b $s -e $s --window 64 -n $((1073741824 / (64 * s))) -w 2 --quiet || status=1
        fi_bw fi_rma_bw-tcp "$s" $((1073741824 / s))
      done
    done
    echo; echo "== fi_rma_bw-tcp (reference: -o writedata, 64 in flight)"
    grep -hE '^[0-9]' "$OUT/fi_rma_bw-tcp.txt"
  fi
  if [ "$p" = efa ]; then
    # efa write with 64 in flight against fabtests' fi_rma_bw and libfabric 2.6's fi_efa_rma_bw (each
    # where found), -o writedata -W 64, on each efa fabric, 4 GiB per size, two interleaved rounds
    for f in $EFA_FABRICS; do
      for r in 1 2; do
        for s in 65536 1048576 16777216; do
          run write-$f-w64.$s.r$r write --provider $f -b $s -e $s --window 64 -n $((4294967296 / (64 * s))) -w 2 --quiet || status=1
          [ -z "$FI_RMA_BW" ] || FIBW_PROV=efa FIBW_FABRIC=$f fi_bw fi_rma_bw-$f "$s" $((4294967296 / s))
          [ -z "$FI_EFA_RMA_BW" ] || FIBW_PROV=efa FIBW_FABRIC=$f FIBW_TOOL=$FI_EFA_RMA_BW fi_bw fi_efa_rma_bw-$f "$s" $((4294967296 / s))
        done
      done
    done
  fi
  # the message rate, 8 B - 64 KiB, windows of $MR_W: efax's write against fabtests' fi_rma_bw -o
  # writedata, efax's sendrecv (its Stream) against fi_rdm_bw (untagged sends on an RDM endpoint).
  # fabtests' sender waits for its own completions after each window, then for the target's
  # message; efax's target confirms every window (write) or half window (Stream, the other half
  # moving meanwhile). $MR_ROUNDS interleaved rounds, each pair side by side; without
  # the fabtests one round of efax alone
  nr=$MR_ROUNDS; [ -n "$FI_RMA_BW$FI_RDM_BW" ] || nr=1
  for r in $(seq $nr); do
    mrate_pair write "$FI_RMA_BW" $p $r -o writedata || status=1
    mrate_pair sendrecv "$FI_RDM_BW" $p $r || status=1
  done
done

# ---------------- the summary: figures side by side ----------------
bytes() { awk '{v=$1; m=1; if (v ~ /k$/) m=1024; if (v ~ /m$/) m=1048576; if (v ~ /g$/) m=1073741824; sub(/[kmg]$/, "", v); printf "%d\n", v*m}'; }
# fi_pingpong lines: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec  ->  size usec MB/s
# fi_pingpong prints both to two decimals, and 0.22 us is +-2.3%: the one-way time is taken from
# whichever of usec/xfer and size / MB/sec (the same elapsed time) has the smaller rounding error.
fi_table() { grep -E '^[0-9]' "$1" | while read -r sz _ _ _ _ mbs us _; do
  echo "$(echo "$sz" | bytes) $mbs $us" | awk '{ u = $3; if ($1 > 0 && $2 > 0 && $2 > u) u = $1 / $2; printf "%d %.4f %s\n", $1, u, $2 }'; done; }
# fabtests' bandwidth lines: bytes iters total time MB/sec usec/xfer Mxfers/sec -> "size Mmsg/s", as
# MB/sec / size: Mxfers/sec is printed to two decimals (0.04 is +-12%), MB/sec with size times the digits
fi_rate_table() { grep -E '^[0-9]' "$1" | while read -r sz _ _ _ mbs _; do
  echo "$(echo "$sz" | bytes) $mbs" | awk '$1 > 0 { printf "%d %.6f\n", $1, $2 / $1 }'; done; }
# efax_rate_table JSONL VARIANT: "size Mmsg/s" of efax's rows of VARIANT with $MR_W in flight
efax_rate_table() { jq -r --arg v "$2" --argjson w "$MR_W" 'select(.variant == $v and .window == $w) | "\(.size) \(.mmsgs)"' "$1" 2>/dev/null; }
# tool_silent NAME CLIENT_LOG SERVER_LOG: a reference tool that printed no result says so, with why
tool_silent() {
  echo "   $1 printed no result; the end of its logs ($2, $3):"
  tail -n 2 "$2" "$3" 2>/dev/null | sed 's/^/     /'
}
# mrate_summary PROVIDER DRIVER VARIANT TOOL LABEL: efax's message rate beside the tool's, per size:
# the best round of each, and paired: the median over the rounds of efax / tool within a round
# (the two ran seconds apart), with the lowest and highest of those ratios (the spread)
mrate_summary() {
  local p=$1 drv=$2 var=$3 tool=$4 label=$5 name=${4##*/} r
  echo
  if [ -z "$tool" ]; then
    echo "-- $p: $drv message rate, $MR_W in flight, Mmsg/s: no ${label%% *} (fabtests) here to compare with (Debian's"
    echo "   libfabric-bin has fi_pingpong alone: tests/libfabric.sh TARBALL builds libfabric with its"
    echo "   fabtests, then ./bench.sh --libfabric PREFIX; tests/libfabric.sh fabtests-X.tar.bz2 fabtests"
    echo "   builds this libfabric's line's, then PATH=PREFIX/bin:\$PATH ./bench.sh); efax alone, one round:"
    printf '%10s %14s\n' size "efax Mmsg/s"
    efax_rate_table "$OUT/mrate-$drv-$p.r1.jsonl" "$var" | sort -n | awk '{ printf "%10d %14.4f\n", $1, $2 }'
    return
  fi
  echo "-- $p: message rate, efax $drv ($var) vs $label, $MR_W in flight, 8 B - 64 KiB, Mmsg/s (10^6 messages/s):"
  one_slot "$drv" "$tool" &&
    echo "   efax with --one-slot: its $MR_W messages from and into the same bytes, as $name's (and osu_mbw_mr's)"
  echo "   best of $MR_ROUNDS interleaved rounds each; paired: the median over the rounds of efax / $name in the same"
  echo "   round, spread: the lowest and highest of those ratios; ok when the paired median is at least 1,"
  echo "   BELOW when efax was below $name in every round, level when the rounds disagree (this host's noise)"
  grep -qs '"level":"WARN","check":"cores"' "$OUT/doctor.jsonl" &&
    echo "   (the doctor's cores WARN above: this host's CPUs move closer and farther apart as it runs, and both tools' rates with them)"
  for r in $(seq $MR_ROUNDS); do
    efax_rate_table "$OUT/mrate-$drv-$p.r$r.jsonl" "$var" | sort -k1,1 >"$OUT/mrate-$drv-$p.r$r.tsv"
    fi_rate_table "$OUT/$name-$p.r$r.txt" | sort -k1,1 >"$OUT/$name-$p.r$r.tsv"
    [ -s "$OUT/$name-$p.r$r.tsv" ] ||
      tool_silent "$name (round $r)" "$OUT/$name-$p.r$r.txt" "$OUT/$name-$p.r$r.server.txt"
  done
  for r in $(seq $MR_ROUNDS); do
    join "$OUT/mrate-$drv-$p.r$r.tsv" "$OUT/$name-$p.r$r.tsv" | awk -v r="$r" '$3 > 0 { print $1, r, $2, $3, $2 / $3 }'
  done | sort -k1,1n -k5,5g | awk '
    { k = $1; c[k]++; ratio[k, c[k]] = $5; if ($3 > e[k]) e[k] = $3; if ($4 > f[k]) f[k] = $4; if (!(k in seen)) { seen[k] = 1; keys[++m] = k } }
    END {
      printf "%10s %12s %12s %8s %17s %7s %s\n", "size", "efax Mmsg/s", "fi Mmsg/s", "paired", "spread", "rounds", "verdict"
      for (i = 1; i <= m; i++) {
        k = keys[i]; med = ratio[k, int((c[k] + 1) / 2)]
        if (c[k] % 2 == 0) med = (ratio[k, c[k] / 2] + ratio[k, c[k] / 2 + 1]) / 2
        v = med >= 1 ? "ok" : ratio[k, c[k]] < 1 ? "BELOW" : "level" # ratio[k, c[k]]: the highest
        printf "%10d %12.4f %12.4f %8.3f %8.3f - %6.3f %7d %s\n", k, e[k], f[k], med, ratio[k, 1], ratio[k, c[k]], c[k], v
      }
    }'
}
{
echo
echo "==================== summary ($(date -u +%FT%TZ), $((SECONDS - T0)) s) ===================="
echo "load average before the sweep $LOAD0, after it $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores here; the sweep's own ranks make ~2, more is other work sharing them)"
echo
echo "-- doctor: what needs fixing on this host (every finding: doctor.log, doctor.jsonl)"
grep -E '^(WARN|FAIL) |^# doctor:' "$OUT/doctor.log" | sed 's/^/   /'
# best (lowest time) of the rounds per size: "size usec MB/s"
best_fi() { cat "$@" | sort -k1,1n -k2,2g | awk '!seen[$1]++'; }
for p in "${PROVS[@]}"; do
  for r in $(seq $ROUNDS); do fi_table "$OUT/fi_pingpong-$p.r$r.txt" >"$OUT/fi_pingpong-$p.r$r.tsv"; done
  { best_fi "$OUT"/fi_pingpong-$p.r*.tsv; fi_table "$OUT/fi_pingpong-$p.big.txt"; } >"$OUT/fi_pingpong-$p.tsv"
  # beside the verdict, round by round: efax's time over fi_pingpong's in the same round (seconds
  # apart, so mostly in one of this host's moods): per size "size median behind rounds", behind the
  # rounds in which efax took more than 2% longer
  for r in $(seq $ROUNDS); do
    jq -r 'select(.variant=="SendRecv") | "\(.size) \(.lat_us.avg)"' "$OUT/pingpong-$p.r$r.jsonl" | sort -k1,1 |
      join - <(sort -k1,1 "$OUT/fi_pingpong-$p.r$r.tsv") | awk '$3 > 0 {print $1, $2 / $3}'
  done | sort -k1,1n -k2,2g | awk '{v[$1, ++n[$1]] = $2; b[$1] += $2 > 1.02}
    END {for (s in n) print s, v[s, int((n[s] + 1) / 2)], b[s], n[s]}' >"$OUT/paired-$p.tsv"
  echo
  echo "-- $p: ping-pong one-way latency (half the round trip, average; best of $ROUNDS interleaved rounds each) and bandwidth: efax vs fi_pingpong"
  echo "   (paired: the median over the rounds of efax / fi_pingpong within each round; fi_pp spread: how far fi_pingpong's"
  echo "   slowest round lies above its fastest, the host's noise at that size); verdict: ok when efax's best"
  echo "   round is within 2% of fi_pingpong's best, SLOWER when efax took more than 2% longer in every round,"
  echo "   level when the rounds disagree: a difference this host's noise hides (fi_pingpong against itself,"
  echo "   so interleaved, is more than 2% apart by the best of each at about half the sizes of a run)"
  printf '%10s %14s %14s %12s %12s %8s %14s %s\n' size "efax us" "fi_pp us" "efax Gbps" "fi_pp Gbps" paired "fi_pp spread" verdict
  cat "$OUT"/pingpong-$p.r*.jsonl | jq -r 'select(.variant=="SendRecv") | [.size, .lat_us.avg] | @tsv' | sort -k1,1n -k2,2g | awk '!seen[$1]++' |
  while read -r sz us; do
    ref=$(awk -v s="$sz" '$1==s {print $2, $3}' "$OUT/fi_pingpong-$p.tsv")
    [ -n "$ref" ] || continue
    set -- $ref
    read -r pr behind nr < <(awk -v s="$sz" '$1==s {print $2, $3, $4}' "$OUT/paired-$p.tsv")
    sp=$(cat "$OUT"/fi_pingpong-$p.r*.tsv | awk -v s="$sz" '$1==s && $2 > 0 {if (!n++ || $2 < lo) lo = $2; if ($2 > hi) hi = $2} END {if (n > 1) printf "%.1f", 100 * (hi - lo) / lo}')
    awk -v sz="$sz" -v us="$us" -v fus="$1" -v fmb="$2" -v pr="${pr:-0}" -v sp="${sp:--}" -v behind="${behind:-0}" \
      -v nr="${nr:-0}" 'BEGIN {
      g = sz*8/(us*1000); fg = fmb*8/1000;
      v = us <= fus*1.02 ? "ok" : (behind == nr ? "SLOWER" : "level") # no rounds to pair: the best of each decides
      printf "%10d %14.2f %14.2f %12.3f %12.3f %8.3f %13s%% %s\n", sz, us, fus, g, fg, pr, sp, v }'
  done
done
# the message rate, efax beside fabtests, per provider (mrate_pair's runs)
for p in "${PROVS[@]}"; do
  mrate_summary "$p" write "Single" "$FI_RMA_BW" "fi_rma_bw -o writedata -W $MR_W"
  mrate_summary "$p" sendrecv "Single Stream" "$FI_RDM_BW" "$(basename "${FI_RDM_BW:-fi_rdm_bw}") -W $MR_W"
done
if printf '%s\n' "${PROVS[@]}" | grep -qx tcp; then
  echo
  echo "-- tcp: write bandwidth (one-way, Single) vs fi_pingpong's bandwidth, sizes >= 64 KiB"
  printf '%10s %14s %14s %8s\n' size "write Gbps" "fi_pp Gbps" ratio
  jq -r 'select(.variant=="Single" and .size >= 65536) | [.size, .gbps] | @tsv' "$OUT/write-tcp.jsonl" |
  while read -r sz g; do
    fmb=$(awk -v s="$sz" '$1==s {print $3}' "$OUT/fi_pingpong-tcp.tsv"); [ -n "$fmb" ] || continue
    awk -v sz="$sz" -v g="$g" -v fmb="$fmb" 'BEGIN { fg = fmb*8/1000; printf "%10d %14.3f %14.3f %8.2f %s\n", sz, g, fg, g/fg, (g >= fg ? "ok" : "BELOW") }'
  done
fi
if printf '%s\n' "${PROVS[@]}" | grep -qx tcp; then
  echo
  if [ -n "$FI_RMA_BW" ]; then
    echo "-- tcp: write with 64 in flight (and the sweep's 1) vs fabtests' fi_rma_bw -o writedata -W 64, sizes 64 KiB - 4 MiB"
    BW_TSV=$OUT/fi_rma_bw-tcp.tsv
    fi_bw_table "$OUT/fi_rma_bw-tcp.txt" >"$BW_TSV"
    [ -s "$BW_TSV" ] || tool_silent fi_rma_bw "$OUT/fi_rma_bw-tcp.txt" "$OUT/fi_rma_bw-tcp.server.txt"
    write_vs_fi "$OUT"/write-tcp-w64.*.jsonl "$OUT/write-tcp.jsonl"
  else
    echo "-- tcp: no fi_rma_bw (fabtests) here to compare the write with: tests/libfabric.sh TARBALL builds libfabric with its fabtests; then ./bench.sh --libfabric PREFIX"
  fi
fi
if printf '%s\n' "${PROVS[@]}" | grep -qx efa; then
  for f in $EFA_FABRICS; do
    echo
    echo "-- $f: write with 64 in flight vs fabtests' fi_rma_bw and fi_efa_rma_bw (-o writedata -W 64), Gbps, the best of 2 rounds"
    printf '%10s %12s %14s %18s %8s %8s %s\n' size "efax Gbps" "fi_rma_bw Gbps" "fi_efa_rma_bw Gbps" "efax/fi" "efax/efa" verdict
    for s in 65536 1048576 16777216; do
      e=$(cat "$OUT"/write-$f-w64.$s.r*.jsonl 2>/dev/null | jq -r 'select(.variant=="Single") | .gbps' | sort -g | tail -1)
      a=$(cat "$OUT/fi_rma_bw-$f.txt" 2>/dev/null | fi_bw_table /dev/stdin | awk -v s=$s '$1 == s {print $2}' | sort -g | tail -1)
      b=$(cat "$OUT/fi_efa_rma_bw-$f.txt" 2>/dev/null | fi_bw_table /dev/stdin | awk -v s=$s '$1 == s {print $2}' | sort -g | tail -1)
      awk -v s=$s -v e="${e:-0}" -v a="${a:-0}" -v b="${b:-0}" 'BEGIN {
        ra = a > 0 ? e / a : 0; rb = b > 0 ? e / b : 0; m = a > b ? a : b
        ce = e > 0 ? sprintf("%.3f", e) : "no result"; ca = a > 0 ? sprintf("%.3f", a) : "-"
        cb = b > 0 ? sprintf("%.3f", b) : "-"; qa = a > 0 ? sprintf("%.2f", ra) : "-"; qb = b > 0 ? sprintf("%.2f", rb) : "-"
        v = (e <= 0 || m <= 0) ? "-" : (e >= m ? "ok" : "BELOW the faster tool")
        printf "%10d %12s %14s %18s %8s %8s %s\n", s, ce, ca, cb, qa, qb, v }'
    done
    [ -n "$FI_RMA_BW$FI_EFA_RMA_BW" ] ||
      echo "   no fabtests here: tests/libfabric.sh TARBALL builds libfabric 2.6 with them (fi_efa_rma_bw with its efa), then ./bench.sh --libfabric PREFIX"
  done
fi
if printf '%s\n' "${PROVS[@]}" | grep -qx shm; then
  echo
  echo "-- shm: write bandwidth vs single-thread memcpy: in cache ($MEMCPY_16M GB/s at 16 MiB; want >= 100% at 16 MiB) and the ceiling ($MEMCPY_BIG GB/s at 256 MiB; want >= 75% at 256 MiB)"
  printf '%10s %12s %24s %16s %s\n' size "write GB/s" "% of in-cache memcpy" "% of ceiling" verdict
  jq -r 'select(.variant=="Single" and .size >= 16777216) | [.size, .gbs] | @tsv' "$OUT/write-shm.jsonl" |
  while read -r sz gbs; do
    awk -v sz="$sz" -v g="$gbs" -v c="$MEMCPY_BIG" -v c16="$MEMCPY_16M" 'BEGIN {
      v = sz == 16777216 ? (g >= c16 ? "ok" : "BELOW 100% of in-cache memcpy") : sz == 268435456 ? (g >= 0.75*c ? "ok" : "BELOW 75% of the ceiling") : "-";
      printf "%10d %12.2f %23.1f%% %15.1f%% %s\n", sz, g, 100*g/c16, 100*g/c, v }'
  done
  case $(jq -r '.run.libfabric' "$OUT/write-shm.jsonl" | head -1) in
    1.*) echo "(libfabric 1.x: each write is one kernel copy, and 1.x's shm cannot overlap the writer's copy with the target's; with 2.x efax copies a write of 512 KiB or more half on each side at once: ./bench.sh --libfabric PREFIX)" ;;
    *) echo "(libfabric 2.x: writes of 512 KiB or more are copied half by the writer and half by the target at once; EFAX_SHM_SPLIT=0 turns that off)" ;;
  esac
fi
echo
runs_report
echo
echo "results: $OUT (logs, .jsonl, .csv, commands.txt, plots: $(ls "$OUT"/*.png 2>/dev/null | wc -l) PNG, index.html)"
} | tee "$OUT/summary.txt"
page
exit $status
