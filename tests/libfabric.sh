#!/usr/bin/env bash
# libfabric.sh — builds a libfabric source tarball into a prefix, once: the prefix is kept in a
# cache keyed by the tarball's checksum and the build options, so a second call only prints it.
#
#   tests/libfabric.sh TARBALL [cpu|cuda]    prints the prefix on stdout (the last line)
#   tests/libfabric.sh TARBALL fabtests      fabtests alone, against the libfabric installed here
#
#   cpu   (default) tcp, rxm, shm, sm2, and efa when rdma-core's headers are there
#         (libibverbs-dev): efa builds and answers "no device" here, which is what a program
#         sees on a machine without EFA
#   cuda  everything the tarball builds by default, --with-cuda=$CUDA_HOME (default
#         /usr/local/cuda): the GPU machine
#   fabtests  only the benchmarks, built against the libfabric pkg-config finds (Debian's 1.17:
#         libfabric-dev), from a fabtests release tarball (fabtests-1.17.0.tar.bz2, GitHub's
#         ofiwg/libfabric releases; `git archive --prefix=fabtests-X/ vX:fabtests` of its
#         repository works too, autogen.sh then runs) or a libfabric tarball's fabtests/. Take a
#         release of that libfabric's own line: fabtests use the API of their release (2.6.0's do
#         not build against 1.17). Then PATH=$prefix/bin:$PATH ./bench.sh compares with them on
#         that libfabric (Debian's libfabric-bin has fi_pingpong alone). A build that fails is
#         reported and leaves no prefix.
# cpu and cuda also build the tarball's fabtests (fi_rma_bw, fi_rdm_bw, ...: libfabric's own
# benchmarks, which bench.sh compares efax with) into the same prefix, once ($prefix/.fabtests; a
# prefix built before that gets them on the next call). A fabtests build that fails is reported
# and leaves the prefix usable.
#
# Then (cpu, cuda): make test LIBFABRIC=$prefix   (or PKG_CONFIG_PATH=$prefix/lib/pkgconfig and
# LD_LIBRARY_PATH=$prefix/lib for your own builds).
# EFAX_CACHE: where prefixes live (default ~/.cache/efax). Build logs: $prefix.log (libfabric),
# $prefix.fabtests.log (fabtests).
set -euo pipefail
tarball=${1:?usage: tests/libfabric.sh TARBALL [cpu|cuda|fabtests]}
flavour=${2:-cpu}
[ -f "$tarball" ] || { echo "libfabric.sh: no such tarball: $tarball" >&2; exit 2; }
tarball=$(realpath "$tarball")
case $flavour in
  cpu | cuda | fabtests) ;;
  *) echo "libfabric.sh: flavour '$flavour': use cpu, cuda or fabtests" >&2; exit 2 ;;
esac
cuda=${CUDA_HOME:-/usr/local/cuda}
jobs=$(nproc)

opts=(--disable-static --enable-debug=no)
system= # fabtests: the installed libfabric's prefix, which its fabtests build against
if [ "$flavour" = fabtests ]; then
  system=$(pkg-config --variable=prefix libfabric 2>/dev/null) || {
    echo "libfabric.sh: fabtests builds against the libfabric installed here, and pkg-config finds none:" \
      "apt-get install libfabric-dev" >&2
    exit 2
  }
  opts=(--with-libfabric="$system" "libfabric $(pkg-config --modversion libfabric)") # the cache key
elif [ "$flavour" = cpu ]; then
  opts+=(--enable-only --enable-tcp --enable-rxm --enable-shm --enable-sm2)
  [ -f /usr/include/infiniband/efadv.h ] && opts+=(--enable-efa)
else
  [ -x "$cuda/bin/nvcc" ] || { echo "libfabric.sh: cuda flavour needs CUDA at $cuda (set CUDA_HOME)" >&2; exit 2; }
  opts+=(--with-cuda="$cuda")
fi

sum=$( { sha256sum <"$tarball" | cut -c1-16; echo "${opts[*]}"; } | sha256sum | cut -c1-12)
name=$(basename "$tarball")
name=${name%.tar.*}
cache=${EFAX_CACHE:-${HOME:-/tmp}/.cache/efax}
prefix=$cache/$name-$flavour-$sum
# fabtests_src DIR: where the unpacked tarball's fabtests are: its fabtests/ (a libfabric tarball),
# else its top folder when that is fabtests (a fabtests tarball: benchmarks/ and common/ in it), else
# DIR itself (an archive without a top folder)
fabtests_src() {
  local d
  d=$(find "$1" -mindepth 2 -maxdepth 2 -type d -name fabtests | head -n 1)
  [ -n "$d" ] || d=$(find "$1" -mindepth 1 -maxdepth 1 -type d | head -n 1)
  [ -n "$d" ] && [ -d "$d/benchmarks" ] && [ -d "$d/common" ] && { echo "$d"; return 0; }
  [ -d "$1/benchmarks" ] && [ -d "$1/common" ] && echo "$1"
}
# fabtests (fabtests/ of the same tarball, or the fabtests tarball) into $prefix; 0 when they are there
fabtests() {
  local work src log=$prefix.fabtests.log start=$SECONDS why="libfabric itself is fine"
  [ -f "$prefix/.fabtests" ] && return 0
  [ -z "$system" ] || why="if the tarball is not of libfabric $(pkg-config --modversion libfabric)'s line: \
fabtests use their own release's API"
  work=$(mktemp -d "$cache/fabtests.XXXXXX")
  echo "libfabric.sh: building $name's fabtests into $prefix; log $log" >&2
  if ! tar xf "$tarball" -C "$work" >"$log" 2>&1; then
    echo "libfabric.sh: cannot unpack $tarball; the end of $log:" >&2
    tail -n 5 "$log" >&2
  elif ! src=$(fabtests_src "$work"); then
    echo "libfabric.sh: no fabtests in $tarball (no fabtests/ folder, nor a fabtests tarball's benchmarks/" \
      "and common/): give a fabtests release tarball, or a libfabric one" >&2
  elif [ ! -x "$src/configure" ] && ! { command -v autoreconf && command -v libtoolize; } >/dev/null; then
    echo "libfabric.sh: $name has no configure script (a git archive), and making one takes autoconf," \
      "automake and libtool: apt-get install autoconf automake libtool, or give a release tarball" >&2
  elif (cd "$src" && { [ -x configure ] || ./autogen.sh; } &&
        ./configure --prefix="$prefix" --with-libfabric="${system:-$prefix}" ${cudaopt:+"$cudaopt"} &&
        make -j"$jobs" install) >>"$log" 2>&1; then
    touch "$prefix/.fabtests"
    echo "libfabric.sh: fabtests built in $((SECONDS - start)) s" >&2
  else
    echo "libfabric.sh: fabtests failed to build ($why); the end of $log:" >&2
    tail -n 10 "$log" >&2
  fi
  rm -rf "$work"
}
cudaopt=; [ "$flavour" = cuda ] && cudaopt=--with-cuda="$cuda"
if [ "$flavour" = fabtests ]; then
  mkdir -p "$cache" "$prefix"
  ( fabtests )
  [ -f "$prefix/.fabtests" ] || { rm -rf "$prefix"; exit 1; }
  echo "$prefix"
  exit 0
fi
if [ -f "$prefix/.built" ]; then ( fabtests ); echo "$prefix"; exit 0; fi

mkdir -p "$cache"
log=$prefix.log
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "libfabric.sh: building $name ($flavour: ${opts[*]}) into $prefix; log $log" >&2
start=$SECONDS
{
  tar xf "$tarball" -C "$work"
  src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
  cd "$src"
  ./configure --prefix="$prefix" "${opts[@]}"
  make -j"$jobs" install
} >"$log" 2>&1 || { echo "libfabric.sh: build failed; the end of $log:" >&2; tail -n 20 "$log" >&2; rm -rf "$prefix"; exit 1; }
touch "$prefix/.built"
echo "libfabric.sh: built in $((SECONDS - start)) s" >&2
( fabtests )
echo "$prefix"
