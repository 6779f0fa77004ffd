#!/usr/bin/env bash
# lab.sh — a small multi-host, multi-rail cluster on one machine, made of network namespaces, so
# efax's tcp runs go over real (if virtual) links between separate "hosts".
#
#   tests/lab.sh up [HOSTS] [RAILS] [RATE] [--slurm]
#                                            HOSTS 2..4 (default 2), RAILS 1..4 (default 2),
#                                            RATE a tc rate like 1gbit, 500mbit (default: unshaped);
#                                            --slurm: also a Slurm cluster over the hosts (below)
#   tests/lab.sh down                        remove everything up made (safe to run any time)
#   tests/lab.sh status                      namespaces, interfaces, addresses, qdiscs
#   tests/lab.sh exec HOST CMD...            run CMD in host HOST (h0, 0, efax-h0 or 10.77.0.10)
#   tests/lab.sh rail HOST RAIL rate RATE    make one rail of one host slower (or faster) than the
#                                            rest: tbf at RATE on both ends of HOST's veth on RAIL
#                                            (r0..r3 or 0..3), what it sends and what it receives
#   tests/lab.sh rail HOST RAIL loss PCT     drop PCT percent (1..50) of the packets HOST sends on
#                                            RAIL, on the wire: see "Loss" below
#   tests/lab.sh rail HOST RAIL heal         back to the lab's rate, nothing dropped
#                                            (`rail` faults are listed in env as LAB_FAULTS)
#
# Layout after `up`: hosts are namespaces efax-h0..efax-h{N-1}, each with its own hostname hN.
#   management: bridge efaxmgmt (10.77.0.1/24, root namespace); host i has mgmt0 = 10.77.0.(10+i)
#   rails:      rail k is its own switch, bridge efaxr$k (10.78.k.0/24, no address in the root
#               namespace); host i joins it through r$k = 10.78.k.(10+i). Every host names its rails
#               r0, r1, ... because efax matches NICs between hosts by name.
#   root-side veth ends are efax-hI-m and efax-hI-rK. IPv6 is off inside the hosts, so libfabric's
#   tcp provider sees one IPv4 address per rail.
# Shaping (RATE): tbf on BOTH ends of every rail veth — the host's r$k (what the host sends) and the
#   bridge's efax-hI-rK (what the switch delivers to the host). Shaping only the sender would let
#   several senders push N x RATE into one receiver; both ends make each rail a full-duplex link of
#   RATE, like a real switch port. burst = 4 ms of RATE (at least 64kb), latency 20ms.
#   Inside the hosts, TCP is set up the way a NIC's own transport (EFA's SRD) behaves, with
#   short queues and a steady rate: send buffers capped at 2 ms of RATE (at least 64 KiB), and
#   congestion control cubic, else reno, where a kernel defaults to BBR. With 4 MiB buffers each
#   of the flows that share a rail port in an all-to-all keeps ~30 ms queued, TCP shares the
#   port unevenly and rails idle at the end of every iteration; BBR left flows idle ~50 ms at a
#   time when each one carries one message per iteration (all2all 4x4@1gbit Split, 256 MiB:
#   82% of the rails with both, 92% with the cap, 94.7% with the cap and reno). One flow still
#   fills a rail (the veth round trip is ~0.1 ms).
# Loss (`rail HOST RAIL loss PCT`): this kernel has no netem, so an nftables rule (Debian's
#   nftables) drops them: `numgen random mod 100 < PCT drop` on the netdev ingress of the switch's
#   end of HOST's cable (efax-hI-rK, root namespace), and HOST's rK sends wire-sized packets
#   (gso_max_segs 1) so one drop is one packet. Inside HOST, the output hook would not do: a
#   packet its own stack drops is sent again before TCP counts it sent (nft's counter grew,
#   /proc/net/snmp RetransSegs stayed 0, the rail kept its rate). Out here TCP sees real loss:
#   at 200mbit, 2% dropped gave RetransSegs = the drops (681 of ~33,000 segments), and the rail
#   still moved 187 of 191 Mbit/s (a round trip of ~0.1 ms recovers fast): loss shows in the
#   OS's retransmit counters long before it shows in the rate.
# `up` also writes, under /run/efax-lab:
#   agent  Open MPI rsh agent (--mca plm_rsh_agent): `agent [-opts...] HOST CMD...` runs CMD in HOST
#   env    sourceable: LAB_HOSTS LAB_NHOSTS LAB_RAILS LAB_NICS LAB_RATE LAB_LINE_GBPS LAB_AGENT LAB_MGMT
#          LAB_FAULTS (what `rail` changed: "h1:r2:rate:250mbit h0:r1:loss:2")
# and adds "10.77.0.1I hI  # efax-lab" lines to /etc/hosts (down removes exactly those).
# --slurm: a real Slurm cluster (Debian's slurmctld, slurmd, munge; `srun --mpi=pmix` through
#   Slurm's PMIx plugin), all of it inside the lab's hosts and its state under /run/efax-lab/slurm:
#   munged (its own key and socket) and slurmctld in h0 on the management network
#   (10.77.0.10:6817), one slurmd per host (NodeName hI, NodeAddr 10.77.0.1I, port 6818 in its
#   own namespace, hostname hI, its own spool and TmpFS folders: the hosts share one file
#   system, as nodes share a home), partition `lab` with every host. `env` then
#   also has LAB_SLURM_CONF: clients need SLURM_CONF=$LAB_SLURM_CONF, e.g.
#     SLURM_CONF=$LAB_SLURM_CONF srun --mpi=pmix -N 2 --ntasks-per-node=1 hostname
#   `down` stops every daemon (and anything else still running in the hosts) before the
#   namespaces go.
# Example:
#   tests/lab.sh up 2 2 1gbit && . /run/efax-lab/env
#   mpirun -H $LAB_HOSTS -np 2 --mca plm_rsh_agent $LAB_AGENT --mca oob_tcp_if_include $LAB_MGMT \
#     --mca btl self,tcp --mca btl_tcp_if_include $LAB_MGMT --bind-to none -x EFAX_PROVIDER=tcp \
#     -x EFAX_NICS=$LAB_NICS build/write --line-rate $LAB_LINE_GBPS
# Needs root; without it every command prints a note and exits 77 (the test suite's "skipped").
set -Eeuo pipefail   # -E: the ERR trap in up() also fires inside the functions it calls

RUN=/run/efax-lab
MARK='# efax-lab'
MGMT_NET=10.77.0.0/24

die() { echo "lab.sh: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -Eeuo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }
nsx() { local i=$1; shift; ip netns exec "efax-h$i" "$@"; }   # run in host i's namespace

# host_index NAME -> prints I for h0 / 0 / efax-h0 / 10.77.0.10
host_index() {
  case $1 in
    h[0-9] | efax-h[0-9] | [0-9]) echo "${1: -1}" ;;
    10.77.0.1[0-9]) echo "${1#10.77.0.1}" ;;
    *) return 1 ;;
  esac
}

# rate_bps RATE -> bits per second (tc's units: kbit = 1000 bit); fails on anything else
rate_bps() {
  local r=${1,,}
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$ ]] || return 1
  awk -v n="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {
    m["bit"] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9; m["tbit"] = 1e12
    printf "%.0f\n", n * m[u] }'
}

hosts_clean() {   # rewrite in place (not sed -i): /etc/hosts may be a bind mount
  if grep -q "$MARK\$" /etc/hosts 2>/dev/null; then
    local keep; keep=$(grep -v "$MARK\$" /etc/hosts || true)
    printf '%s\n' "$keep" >/etc/hosts
  fi
}

# stop_lab_processes: the Slurm daemons by their pid files, then whatever still runs in a lab
# host (job steps, ranks): SIGTERM, up to 5 s, then SIGKILL
stop_lab_processes() {
  local f pids=() ns t
  for f in "$RUN"/slurm/*.pid "$RUN"/slurm/munge/munged.pid; do
    [ -s "$f" ] && pids+=("$(cat "$f")")
  done
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^efax-h/ { print $1 }'); do
    pids+=($(ip netns pids "$ns" 2>/dev/null))
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill "${pids[@]}" 2>/dev/null || true
  for t in $(seq 50); do
    kill -0 "${pids[@]}" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
}

down() {
  local l ns t
  stop_lab_processes
  # Deleting the root-side veth ends removes both ends at once; waiting for a deleted namespace to
  # release its veths is asynchronous, so a quick `up` after it could find the names still taken.
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' |
             grep -E '^efax' | sort -r); do     # sort -r: veths (efax-h*) before bridges (efaxr*)
    ip link del "$l" 2>/dev/null || true
  done
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^efax-h/ { print $1 }'); do
    ip netns del "$ns" 2>/dev/null || true
  done
  for t in $(nft list tables netdev 2>/dev/null | awk '$3 ~ /^efaxlab_/ { print $3 }'); do
    nft delete table netdev "$t" 2>/dev/null || true   # `rail ... loss` rules on the switch ports
  done
  hosts_clean
  rm -rf "$RUN"
}

# burst_of RATE: 4 ms worth of bytes, enough for tbf to keep a fast link busy between timer ticks
burst_of() {
  local bps; bps=$(rate_bps "$1") || return 1
  awk -v b="$bps" 'BEGIN { k = int(b / 8 * 0.004 / 1024); print (k < 64 ? 64 : k) "kb" }'
}

# shape DEV [NS-INDEX [RATE]]: tbf on DEV's egress, in host NS-INDEX or (no index) the root
# namespace, at RATE (default: the lab's)
shape() {
  local dev=$1 i=${2:-} rate=${3:-$RATE} pre=()
  [ -n "$i" ] && pre=(ip netns exec "efax-h$i")
  "${pre[@]}" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$(burst_of "$rate")" latency 20ms
  # TSO/GSO stay on: tbf counts each wire segment (one flow reads 95.6% of RATE, the TCP/IP
  # header ceiling), and 1500-byte packets cost a small VM its CPU long before 16 shaped rails do
}

# veth_into_host I ROOTNAME HOSTNAME BRIDGE ADDR: a veth from BRIDGE (root) to host I
veth_into_host() {
  local i=$1 outer=$2 inner=$3 br=$4 addr=$5
  ip link add "$outer" type veth peer name "$inner" netns "efax-h$i"
  ip link set "$outer" master "$br" up
  nsx "$i" ip addr add "$addr" dev "$inner"
  nsx "$i" ip link set "$inner" up
}

write_agent() {
  cat >"$RUN/agent" <<'EOF'
#!/bin/sh
# efax-lab rsh agent for Open MPI: agent [-options...] HOST CMD...  runs CMD (like ssh would: the
# words joined, then read by a shell) in HOST's namespace, with its own hostname (a UTS namespace),
# so Open MPI and efax see separate hosts. HOST: h0..h9, efax-hN or 10.77.0.1N.
while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
[ $# -ge 1 ] || { echo "efax-lab agent: no host given" >&2; exit 255; }
host=$1; shift
case $host in
  h[0-9] | efax-h[0-9]) n=${host#"${host%?}"} ;;
  10.77.0.1[0-9]) n=${host#10.77.0.1} ;;
  *) echo "efax-lab agent: unknown host '$host' (expected h0..h9 or 10.77.0.1N)" >&2; exit 255 ;;
esac
ip netns exec "efax-h$n" true 2>/dev/null || { echo "efax-lab agent: no namespace efax-h$n (tests/lab.sh up?)" >&2; exit 255; }
exec ip netns exec "efax-h$n" unshare --uts sh -c 'hostname "$0" && eval "$1"' "h$n" "$*"
EOF
  chmod 755 "$RUN/agent"
}

write_env() {
  local hosts=() nics=() i k gbps=
  for ((i = 0; i < NHOSTS; i++)); do hosts+=("h$i"); done
  for ((k = 0; k < RAILS; k++)); do nics+=("r$k"); done
  [ -n "$RATE" ] && gbps=$(awk -v b="$BPS" 'BEGIN { printf "%g\n", b / 1e9 }')
  {
    echo "# written by tests/lab.sh up $NHOSTS $RAILS $RATE"
    echo "LAB_HOSTS=$(IFS=,; echo "${hosts[*]}")"
    echo "LAB_NHOSTS=$NHOSTS"
    echo "LAB_RAILS=$RAILS"
    echo "LAB_NICS=$(IFS=,; echo "${nics[*]}")"
    echo "LAB_RATE=$RATE"
    echo "LAB_LINE_GBPS=$gbps"
    echo "LAB_AGENT=$RUN/agent"
    echo "LAB_MGMT=$MGMT_NET"
    echo "LAB_FAULTS=''"
  } >"$RUN/env"
}

# slurm_up: munged, slurmctld (both in h0) and one slurmd per host; waits until every node is idle
slurm_check() {
  local c
  for c in munged mungekey slurmctld slurmd srun sinfo; do
    command -v "$c" >/dev/null || die "--slurm needs $c: run tests/deps.sh slurm (as root it installs munge slurmctld slurmd slurm-client)"
  done
  [ -n "$(find /usr/lib /usr/lib64 -name 'mpi_pmix*.so' -path '*slurm*' 2>/dev/null | head -1)" ] ||
    die "--slurm needs Slurm's PMIx plugin (mpi_pmix.so, in slurm-wlm-basic-plugins)"
}

slurm_up() {
  local S=$RUN/slurm i t state cpus
  mkdir -p "$S/munge" "$S/ctld"
  chmod 755 "$S/munge"
  mungekey --create --keyfile="$S/munge/munge.key" --force
  chmod 400 "$S/munge/munge.key"
  nsx 0 munged --force --socket="$S/munge/munge.socket" --key-file="$S/munge/munge.key" \
    --pid-file="$S/munge/munged.pid" --log-file="$S/munge/munged.log" --seed-file="$S/munge/munged.seed"
  cpus=$(nproc)
  {
    echo "# written by tests/lab.sh up --slurm: the lab's Slurm cluster"
    echo "ClusterName=efaxlab"
    echo "SlurmctldHost=h0(10.77.0.10)"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$S/munge/munge.socket"
    echo "CredType=cred/munge"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "SlurmctldPort=6817"
    echo "SlurmdPort=6818"
    echo "StateSaveLocation=$S/ctld"
    echo "SlurmdSpoolDir=$S/%n"
    echo "TmpFS=$S/%n/tmp"          # the PMIx plugin's per-job folders: one per host, not /tmp
    echo "SlurmctldPidFile=$S/slurmctld.pid"
    echo "SlurmdPidFile=$S/slurmd-%n.pid"
    echo "SlurmctldLogFile=$S/slurmctld.log"
    echo "SlurmdLogFile=$S/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SwitchType=switch/none"
    echo "MpiDefault=none"
    echo "SchedulerType=sched/builtin"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "SlurmdParameters=config_overrides"
    echo "ReturnToService=2"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "JobCompType=jobcomp/none"
    echo "PropagateResourceLimits=NONE"
    echo "KillWait=5"
    echo "InactiveLimit=0"
    for ((i = 0; i < NHOSTS; i++)); do
      echo "NodeName=h$i NodeAddr=10.77.0.$((10 + i)) CPUs=$cpus State=UNKNOWN"
    done
    echo "PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
  } >"$S/slurm.conf"
  # slurmd loads a cgroup plugin even when nothing is tracked by cgroups; inside a host the
  # namespace's fresh /sys has no cgroup mounts, so each slurmd gets this machine's v1
  # hierarchies mounted again in its own mount namespace (nothing creates cgroups in them:
  # proctrack/linuxproc, task/none)
  echo "CgroupPlugin=cgroup/v1" >"$S/cgroup.conf"
  # shellcheck disable=SC2016 # $0 is for the inner sh
  nsx 0 env SLURM_CONF="$S/slurm.conf" unshare --uts sh -c 'hostname "$0" && exec slurmctld -i' h0
  for ((i = 0; i < NHOSTS; i++)); do
    mkdir -p "$S/h$i/tmp"
    # the host's own hostname
    # shellcheck disable=SC2016 # $0 is for the inner sh
    nsx "$i" env SLURM_CONF="$S/slurm.conf" unshare --uts sh -c '
      hostname "$0" &&
      mount -t tmpfs -o mode=755 efax-lab-cgroup /sys/fs/cgroup || exit 1
      for c in freezer cpuset memory devices cpu cpuacct pids; do
        mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c 2>/dev/null || rmdir /sys/fs/cgroup/$c
      done
      exec slurmd -N "$0"' "h$i"
  done
  for t in $(seq 150); do
    state=$(SLURM_CONF="$S/slurm.conf" sinfo -h -N -o '%T' 2>/dev/null | sort -u | tr '\n' ' ')
    [ "$state" = "idle " ] && break
    sleep 0.2
  done
  if [ "$state" != "idle " ]; then
    tail -n 5 "$S"/*.log >&2
    down
    die "slurm: nodes not idle after 30 s (state: ${state:-no answer}); torn down"
  fi
  echo "LAB_SLURM_CONF=$S/slurm.conf" >>"$RUN/env"
  echo "lab.sh: slurm: slurmctld on h0, slurmd on $(SLURM_CONF="$S/slurm.conf" sinfo -h -o '%N'), munge socket $S/munge/munge.socket"
}

up() {
  local i k
  NHOSTS=${1:-2} RAILS=${2:-2} RATE=${3:-} BPS='' BURST='' SNDBUF=''
  [[ $NHOSTS =~ ^[2-4]$ ]] || die "HOSTS must be 2..4, got '$NHOSTS'"
  [[ $RAILS =~ ^[1-4]$ ]] || die "RAILS must be 1..4, got '$RAILS'"
  if [ -n "$RATE" ]; then
    BPS=$(rate_bps "$RATE") || die "RATE must look like 1gbit, 500mbit, 100mbit; got '$RATE'"
    BURST=$(burst_of "$RATE")
    SNDBUF=$(awk -v b="$BPS" 'BEGIN { k = int(b / 8 * 0.002); print (k < 65536 ? 65536 : k) }')
  fi
  [ -z "$SLURM" ] || slurm_check
  down                                     # idempotent: always build from nothing
  trap 'echo "lab.sh: up failed (line $LINENO); tearing down" >&2; down' ERR
  mkdir -p "$RUN"
  ip link add efaxmgmt type bridge
  ip addr add 10.77.0.1/24 dev efaxmgmt
  ip link set efaxmgmt up
  for ((k = 0; k < RAILS; k++)); do
    ip link add "efaxr$k" type bridge
    ip link set "efaxr$k" up
  done
  for ((i = 0; i < NHOSTS; i++)); do
    ip netns add "efax-h$i"
    nsx "$i" ip link set lo up
    # IPv6 off: otherwise libfabric's tcp provider also lists link-local fe80:: fabrics per rail
    nsx "$i" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    # answer ARP only for the interface's own address, or a packet to rail 1 could cross rail 0
    nsx "$i" sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2
    # shaped rails: TCP send buffers of ~2 ms of RATE, and a loss-based congestion control
    # (see the header)
    if [ -n "$SNDBUF" ]; then
      nsx "$i" sysctl -qw net.ipv4.tcp_wmem="4096 16384 $SNDBUF"
      nsx "$i" sysctl -qw net.ipv4.tcp_congestion_control=cubic 2>/dev/null ||
        nsx "$i" sysctl -qw net.ipv4.tcp_congestion_control=reno 2>/dev/null || true
    fi
    veth_into_host "$i" "efax-h$i-m" mgmt0 efaxmgmt "10.77.0.$((10 + i))/24"
    for ((k = 0; k < RAILS; k++)); do
      veth_into_host "$i" "efax-h$i-r$k" "r$k" "efaxr$k" "10.78.$k.$((10 + i))/24"
      if [ -n "$RATE" ]; then shape "r$k" "$i"; shape "efax-h$i-r$k"; fi
    done
    printf '10.77.0.%d h%d  %s\n' $((10 + i)) "$i" "$MARK" >>/etc/hosts
  done
  write_agent
  write_env
  [ -z "$SLURM" ] || slurm_up
  trap - ERR
  echo "lab.sh: up: $NHOSTS hosts, $RAILS rails${RATE:+, shaped to $RATE (burst $BURST)}${SLURM:+, Slurm}; env in $RUN/env"
}

# faults_set KEY [VALUE]: LAB_FAULTS in env keeps one "hI:rK:what:arg" word per degraded rail;
# KEY (hI:rK) is replaced by VALUE, or removed without one
faults_set() {
  local key=$1 val=${2:-} cur w out=()
  cur=$(sed -n "s/^LAB_FAULTS='\(.*\)'$/\1/p" "$RUN/env")
  for w in $cur; do [[ $w == "$key":* ]] || out+=("$w"); done
  [ -z "$val" ] || out+=("$val")
  grep -v '^LAB_FAULTS=' "$RUN/env" >"$RUN/env.new" || true
  echo "LAB_FAULTS='${out[*]}'" >>"$RUN/env.new"
  mv "$RUN/env.new" "$RUN/env"
}

# rail HOST RAIL rate RATE | loss PCT | heal: one rail of one host made slow or lossy, or healed
rail() {
  local i k what=${3:-} arg=${4:-} table
  [ $# -ge 3 ] || die "usage: lab.sh rail HOST RAIL rate RATE | loss PCT | heal"
  [ -f "$RUN/env" ] || die "no lab here: tests/lab.sh up first"
  # shellcheck disable=SC1091
  . "$RUN/env"
  i=$(host_index "$1") || die "unknown host '$1' (h0..h$((LAB_NHOSTS - 1)))"
  [ "$i" -lt "$LAB_NHOSTS" ] || die "no host h$i in this lab (hosts $LAB_HOSTS)"
  k=${2#r}
  [[ $k =~ ^[0-9]$ ]] && [ "$k" -lt "$LAB_RAILS" ] || die "no rail '$2' in this lab (rails $LAB_NICS)"
  RATE=$LAB_RATE table=efaxlab_h${i}_r$k
  case $what in
    rate)
      rate_bps "$arg" >/dev/null || die "rate needs a tc rate like 250mbit, got '$arg'"
      shape "r$k" "$i" "$arg"
      shape "efax-h$i-r$k" "" "$arg"
      faults_set "h$i:r$k" "h$i:r$k:rate:$arg" ;;
    loss)
      [[ $arg =~ ^[0-9]+$ ]] && [ "$arg" -ge 1 ] && [ "$arg" -le 50 ] || die "loss needs a percentage in 1..50, got '$arg'"
      command -v nft >/dev/null || die "loss needs nft: apt-get install nftables (tests/deps.sh test installs it)"
      nsx "$i" ip link set dev "r$k" gso_max_segs 1
      # one transaction: the table is created if missing and emptied, then holds the one rule
      nft -f - <<EOF || die "nft refused the loss rule for h$i's r$k"
table netdev $table
flush table netdev $table
table netdev $table {
  chain in {
    type filter hook ingress device "efax-h$i-r$k" priority 0; policy accept;
    numgen random mod 100 < $arg counter drop
  }
}
EOF
      faults_set "h$i:r$k" "h$i:r$k:loss:$arg" ;;
    heal)
      nft delete table netdev "$table" 2>/dev/null || true
      nsx "$i" ip link set dev "r$k" gso_max_segs 65535
      if [ -n "$RATE" ]; then
        shape "r$k" "$i"
        shape "efax-h$i-r$k"
      else
        nsx "$i" tc qdisc del dev "r$k" root 2>/dev/null || true
        tc qdisc del dev "efax-h$i-r$k" root 2>/dev/null || true
      fi
      faults_set "h$i:r$k" ;;
    *) die "rail: expected rate RATE, loss PCT or heal, got '$what'" ;;
  esac
  echo "lab.sh: rail r$k of h$i: $what${arg:+ $arg}"
}

status() {
  local ns t
  [ -n "$(ip netns list | awk '$1 ~ /^efax-h/')" ] || { echo "lab.sh: no lab (tests/lab.sh up)"; return 0; }
  echo "== root namespace: bridges and their ports"
  ip -br link show type bridge | awk '$1 ~ /^efax/'
  ip -br link show | awk '$1 ~ /^efax-h/'
  ip -o link show | awk -F': ' '$2 ~ /^efax-h.*-r/ { sub(/@.*/, "", $2); print $2 }' |
    while read -r l; do echo "  $l: $(tc qdisc show dev "$l" | head -1)"; done
  for ns in $(ip netns list | awk '$1 ~ /^efax-h/ { print $1 }' | sort); do
    echo "== $ns"
    ip netns exec "$ns" ip -br -4 addr show
    ip netns exec "$ns" tc qdisc show | awk '$0 !~ /dev lo /' | sed 's/^/  qdisc: /'
  done
  for t in $(nft list tables netdev 2>/dev/null | awk '$3 ~ /^efaxlab_/ { print $3 }'); do
    echo "== loss $t: $(nft list table netdev "$t" | grep -E 'counter' | sed 's/^[[:space:]]*//')"
  done
  [ -f "$RUN/env" ] && { echo "== $RUN/env"; grep -v '^#' "$RUN/env"; }
  [ -f "$RUN/slurm/slurm.conf" ] && { echo "== slurm"; SLURM_CONF=$RUN/slurm/slurm.conf sinfo -N -l 2>&1 || true; }
  grep "$MARK\$" /etc/hosts | sed 's/^/== \/etc\/hosts: /' || true
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in -h | --help | help | "") usage 0 ;; esac
[ "$(id -u)" = 0 ] || { echo "lab.sh: needs root (network namespaces); skipped"; exit 77; }
case $cmd in
  up)
    SLURM='' args=()
    for a in "$@"; do if [ "$a" = --slurm ]; then SLURM=1; else args+=("$a"); fi; done
    up "${args[@]}" ;;
  down) down ;;
  status) status ;;
  rail) rail "$@" ;;
  exec)
    [ $# -ge 2 ] || die "usage: lab.sh exec HOST CMD..."
    i=$(host_index "$1") || die "unknown host '$1'"; shift
    # shellcheck disable=SC2016 # $0 and $@ are for the inner sh
    exec ip netns exec "efax-h$i" unshare --uts sh -c 'hostname "$0" && exec "$@"' "h$i" "$@" ;;
  *) usage 2 >&2 ;;
esac
