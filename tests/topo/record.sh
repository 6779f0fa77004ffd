#!/usr/bin/env bash
# record.sh — (re)writes the topology fixtures tests/topo/p5 and tests/topo/p4d: sysfs-like trees
# that efax reads through EFAX_SYSFS_ROOT (tests/unit.c's "topology" test). Only what efax reads
# is there: /sys/bus/pci/devices/<addr> links into /sys/devices/pci<domain:bus>/... (the PCI path
# from host bridge through root port and PCIe switch ports to the device) and each device's
# numa_node. The trees are SYNTHETIC (each says so in its NOTE.md): bus numbers are made up; the
# shape is the instances':
#   p5:  8 GPUs, 32 EFA NICs; each GPU and 4 NICs behind one PCIe switch, one switch per host
#        bridge; GPUs 0-3 on NUMA node 0, 4-7 on node 1.
#   p4d: 8 GPUs, 4 EFA NICs; 2 GPUs and 1 NIC behind each of 4 PCIe switches, two switches per
#        host bridge; switches 0-1 on NUMA node 0, 2-3 on node 1.
# GPUs are the PCI functions listed in <tree>/gpus, NICs in <tree>/nics (one address a line).
set -eu
cd "$(dirname "$0")"

dev() { # TREE NUMA PATH...: the device at the end of the path (every component a directory)
  local tree=$1 numa=$2; shift 2
  local rel="devices/$(IFS=/; echo "$*")" leaf=${!#}
  mkdir -p "$tree/sys/$rel" "$tree/sys/bus/pci/devices"
  echo "$numa" >"$tree/sys/$rel/numa_node"
  ln -sfn "../../../$rel" "$tree/sys/bus/pci/devices/$leaf"
}

rm -rf p5 p4d
for g in 0 1 2 3 4 5 6 7; do
  b=$((0x40 + 0x10 * g)) numa=$((g / 4))
  hb=$(printf 'pci0000:%02x' $b) rp=$(printf '0000:%02x:01.0' $b) up=$(printf '0000:%02x:00.0' $((b + 1)))
  for k in 0 1 2 3 4; do
    dn=$(printf '0000:%02x:%02x.0' $((b + 2)) $k) ep=$(printf '0000:%02x:00.0' $((b + 3 + k)))
    dev p5 $numa "$hb" "$rp" "$up" "$dn" "$ep"
    if [ $k = 0 ]; then echo "$ep" >>p5/gpus; else echo "$ep" >>p5/nics; fi
  done
done
for s in 0 1 2 3; do
  b=$((0x10 + 0x40 * (s / 2))) numa=$((s / 2))
  hb=$(printf 'pci0000:%02x' $b) rp=$(printf '0000:%02x:%02x.0' $b $((1 + s % 2)))
  sb=$((b + 1 + 0x10 * (s % 2)))
  up=$(printf '0000:%02x:00.0' $sb)
  for k in 0 1 2; do
    dn=$(printf '0000:%02x:%02x.0' $((sb + 1)) $k) ep=$(printf '0000:%02x:00.0' $((sb + 2 + k)))
    dev p4d $numa "$hb" "$rp" "$up" "$dn" "$ep"
    if [ $k = 2 ]; then echo "$ep" >>p4d/nics; else echo "$ep" >>p4d/gpus; fi
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
echo "p5: $(wc -l <p5/gpus) GPUs, $(wc -l <p5/nics) NICs; p4d: $(wc -l <p4d/gpus) GPUs, $(wc -l <p4d/nics) NICs"
