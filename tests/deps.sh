#!/usr/bin/env bash
# deps.sh — makes sure the system packages efax needs are installed.
#   tests/deps.sh build   compiler, pkg-config, libfabric and PMIx headers
#   tests/deps.sh test    + Open MPI (mpirun), fi_info/fi_pingpong, jq, iproute2, clang, clang-format, valgrind,
#                         gnuplot, python3, chromium (renders bench.sh's results page), Slurm, and
#                         nftables (the lab's lossy rail: this kernel has no netem)
#   tests/deps.sh bench   + Open MPI, fi_pingpong, gnuplot, ss (iproute2)
#   tests/deps.sh slurm   Slurm for the lab's cluster: munge, slurmctld, slurmd, srun, Slurm's
#                         PMIx plugin (slurm-wlm-basic-plugins; on a machine with systemd the
#                         packages enable their own services, which efax does not use)
# As root it installs what is missing with apt-get; otherwise it prints the one command that
# would, and exits 1. Debian/Ubuntu package names.
set -u
what=${1:-build}
need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
want_pkg() { need+=("$1"); }

have_cmd cc || want_pkg gcc
have_cmd make || want_pkg make
have_cmd pkg-config || want_pkg pkg-config
pkg-config --exists libfabric 2>/dev/null || want_pkg libfabric-dev
pkg-config --exists pmix 2>/dev/null || want_pkg libpmix-dev
if [ "$what" = test ] || [ "$what" = bench ]; then
  have_cmd mpirun || want_pkg openmpi-bin
  have_cmd fi_pingpong || want_pkg libfabric-bin
fi
if [ "$what" = test ]; then
  have_cmd jq || want_pkg jq
  have_cmd ip || want_pkg iproute2
  have_cmd tc || want_pkg iproute2
  have_cmd nft || want_pkg nftables   # tests/lab.sh rail HOST RAIL loss PCT
  have_cmd clang || want_pkg clang
  have_cmd valgrind || want_pkg valgrind
  have_cmd clang-format || want_pkg clang-format   # the layout check (.clang-format)
  # rdma-core's headers: the libfabric 2.x build of the test matrix compiles its efa provider
  [ -f /usr/include/infiniband/efadv.h ] || want_pkg libibverbs-dev
  [ -e "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] 2>/dev/null || \
    { have_cmd clang && want_pkg "libclang-rt-$(clang --version | sed -n 's/.*version \([0-9]*\).*/\1/p' | head -1)-dev"; }
fi
if [ "$what" = bench ] || [ "$what" = test ]; then
  have_cmd gnuplot || want_pkg gnuplot-nox
  have_cmd ss || want_pkg iproute2   # bench.sh waits for fabtests' servers to listen
fi
if [ "$what" = test ]; then
  have_cmd python3 || want_pkg python3
  have_cmd chromium || have_cmd chromium-browser || want_pkg chromium
fi
if [ "$what" = slurm ] || [ "$what" = test ]; then
  have_cmd munged || want_pkg munge
  have_cmd slurmctld || want_pkg slurmctld
  have_cmd slurmd || want_pkg slurmd
  have_cmd srun || want_pkg slurm-client
fi
[ ${#need[@]} -eq 0 ] && exit 0
# unique, in order
mapfile -t need < <(printf '%s\n' "${need[@]}" | awk '!seen[$0]++')
if [ "$(id -u)" = 0 ] && have_cmd apt-get; then
  echo "efax: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}"; } >/tmp/efax-apt.log 2>&1 || {
    echo "efax: apt-get install failed (log: /tmp/efax-apt.log):" >&2; tail -5 /tmp/efax-apt.log >&2; exit 1; }
  exit 0
fi
echo "efax: missing packages. Install them with:" >&2
echo "  sudo apt-get install -y ${need[*]}" >&2
exit 1
