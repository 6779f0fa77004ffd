#!/usr/bin/env bash
# record.sh — (re)writes the topology fixtures tests/topo/p5, p4d and p6-b200: sysfs-like trees
# that efax reads through EFAX_SYSFS_ROOT (tests/unit.c's "topology" test). Only what efax reads
# is there: /sys/bus/pci/devices/<addr> links into /sys/devices/pci<domain:bus>/... (the PCI path
# from host bridge through root port and PCIe switch ports to the device), each device's
# numa_node, and its vendor and class (what tells a GPU, 0x10de / 0x03xxxx, and an EFA device,
# 0x1d0f, apart without CUDA: efax_topo_gpus). The trees are SYNTHETIC (each says so in its
# NOTE.md): bus numbers are made up; the shape is the instances':
#   p5:      8 GPUs, 32 EFA NICs; each GPU and 4 NICs behind one PCIe switch, one switch per host
#            bridge; GPUs 0-3 on NUMA node 0, 4-7 on node 1.
#   p4d:     8 GPUs, 4 EFA NICs; 2 GPUs and 1 NIC behind each of 4 PCIe switches, two switches
#            per host bridge; switches 0-1 on NUMA node 0, 2-3 on node 1.
#   p6-b200: 8 GPUs, 8 EFA NICs; 2 GPUs and 2 NICs behind each of 4 PCIe switches, one switch per
#            host bridge (the per-switch shape aws-ofi-nccl's platform-aws.cpp gives p5en and
#            p6-b200); switches 0-1 on NUMA node 0, 2-3 on node 1.
# GPUs are the PCI functions listed in <tree>/gpus, NICs in <tree>/nics (one address a line).
set -eu
cd "$(dirname "$0")"

dev() { # TREE NUMA KIND PATH...: the device at the end of the path (every component a directory)
  local tree=$1 numa=$2 kind=$3; shift 3
  local rel="devices/$(IFS=/; echo "$*")" leaf=${!#}
  mkdir -p "$tree/sys/$rel" "$tree/sys/bus/pci/devices"
  echo "$numa" >"$tree/sys/$rel/numa_node"
  case $kind in
    gpu) echo 0x10de >"$tree/sys/$rel/vendor"; echo 0x030200 >"$tree/sys/$rel/class" ;;
    nic) echo 0x1d0f >"$tree/sys/$rel/vendor"; echo 0x020000 >"$tree/sys/$rel/class" ;;
  esac
  ln -sfn "../../../$rel" "$tree/sys/bus/pci/devices/$leaf"
}

rm -rf p5 p4d p6-b200
for g in 0 1 2 3 4 5 6 7; do
  b=$((0x40 + 0x10 * g)) numa=$((g / 4))
  hb=$(printf 'pci0000:%02x' $b) rp=$(printf '0000:%02x:01.0' $b) up=$(printf '0000:%02x:00.0' $((b + 1)))
  for k in 0 1 2 3 4; do
    dn=$(printf '0000:%02x:%02x.0' $((b + 2)) $k) ep=$(printf '0000:%02x:00.0' $((b + 3 + k)))
    if [ $k = 0 ]; then kind=gpu; else kind=nic; fi
    dev p5 $numa $kind "$hb" "$rp" "$up" "$dn" "$ep"
    echo "$ep" >>p5/${kind}s
  done
done
for s in 0 1 2 3; do
  b=$((0x10 + 0x40 * (s / 2))) numa=$((s / 2))
  hb=$(printf 'pci0000:%02x' $b) rp=$(printf '0000:%02x:%02x.0' $b $((1 + s % 2)))
  sb=$((b + 1 + 0x10 * (s % 2)))
  up=$(printf '0000:%02x:00.0' $sb)
  for k in 0 1 2; do
    dn=$(printf '0000:%02x:%02x.0' $((sb + 1)) $k) ep=$(printf '0000:%02x:00.0' $((sb + 2 + k)))
    if [ $k = 2 ]; then kind=nic; else kind=gpu; fi
    dev p4d $numa $kind "$hb" "$rp" "$up" "$dn" "$ep"
    echo "$ep" >>p4d/${kind}s
  done
done
for s in 0 1 2 3; do
  b=$((0x20 + 0x20 * s)) numa=$((s / 2))
  hb=$(printf 'pci0000:%02x' $b) rp=$(printf '0000:%02x:01.0' $b) up=$(printf '0000:%02x:00.0' $((b + 1)))
  for k in 0 1 2 3; do
    dn=$(printf '0000:%02x:%02x.0' $((b + 2)) $k) ep=$(printf '0000:%02x:00.0' $((b + 3 + k)))
    if [ $k -lt 2 ]; then kind=gpu; else kind=nic; fi
    dev p6-b200 $numa $kind "$hb" "$rp" "$up" "$dn" "$ep"
    echo "$ep" >>p6-b200/${kind}s
  done
done
note() { # TREE WHAT: the tree says itself that it is made up (tests and docs point here)
  cat >"$1/NOTE.md" <<EOT
# tests/topo/$1 is SYNTHETIC

Written by \`tests/topo/record.sh\`, not recorded on a $1: the shape is the instance's as AWS and
aws-ofi-nccl describe it ($2), but every PCI bus number, the switch depth and the NUMA split are
made up. efax reads it through EFAX_SYSFS_ROOT (tests/unit.c "topology" and "host_nics",
tests/run.sh topo/host-nics-by-switch). A test passing on it shows that efax's grouping logic does
what it should on a tree of that shape; it does not show that a real $1's sysfs looks like this.
Replace it with a real tree (the same files, copied from a $1's /sys) when one is at hand.
EOT
}
note p5 "8 GPUs and 32 EFA NICs, each GPU and 4 NICs behind one PCIe switch"
note p4d "8 GPUs and 4 EFA NICs, 2 GPUs and 1 NIC behind each of 4 PCIe switches"
note p6-b200 "8 GPUs and 8 NICs, 2 GPUs and 2 NICs behind each of 4 PCIe switches, the per-switch
shape platform-aws.cpp gives p5en and p6-b200; a p5en's 16 NICs are not this tree"
for t in p5 p4d p6-b200; do printf '%s: %d GPUs, %d NICs; ' $t "$(wc -l <$t/gpus)" "$(wc -l <$t/nics)"; done
echo
