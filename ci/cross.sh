#!/usr/bin/env bash
# Builds nccl-perf for another Linux architecture of a Debian 12 machine (x86-64 <-> arm64)
# without emulating the build: runs COMMAND (a cargo build or test for TRIPLE) with the cross
# linker, and with --mpi the target's Open MPI, set up for cargo, cc, pkg-config and rsmpi's
# bindgen. On the machine's own architecture COMMAND runs unchanged. CI (ci/arm64.sh) and the
# Dockerfile's builder stage (TARGETARCH) use it.
#
# Nothing of the target architecture is installed on the machine: its runtime libraries come
# from Debian's packages for that architecture through `apt-get download`, unpacked into a
# sysroot folder (glibc, libgcc — enough for qemu-user to run the binaries from it — and with
# --mpi Open MPI's headers, pkg-config file, libmpi.so.40 and what it loads). Installing
# libopenmpi-dev for the other architecture instead (multiarch) would remove the machine's own
# compiler and Open MPI on Debian 12.
#
# Usage: ci/cross.sh [options] TRIPLE [-- COMMAND...]
#   TRIPLE            aarch64-unknown-linux-gnu or x86_64-unknown-linux-gnu; Docker's
#                     TARGETARCH names (arm64, amd64) are accepted too
#   --mpi             set up the mpi feature (Open MPI of the target)
#   --install         first install what the build needs, as root: `rustup target add`, and
#                     with apt the cross gcc (gcc-<arch>-linux-gnu, libc6-dev-<arch>-cross), the
#                     target architecture in apt's lists (dpkg --add-architecture), pkg-config
#                     and libclang-dev for --mpi — or, on the machine's own architecture, the
#                     native libopenmpi-dev openmpi-bin libclang-dev for --mpi
#   --sysroot DIR     where the target's libraries go
#                     (default ${CARGO_TARGET_DIR:-target}/sysroot/TRIPLE)
#   --print-triple    print the Rust target triple for TRIPLE and exit
#   -h, --help        this text
# Without COMMAND it only prepares (with --install: installs) and checks.
# A missing tool is an error (exit 2) naming the package, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "cross: $*" >&2; exit 2; }

mpi=0
install=0
sysroot=""
print=0
triple=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mpi) mpi=1; shift ;;
    --install) install=1; shift ;;
    --sysroot) [ $# -ge 2 ] || die "--sysroot needs a folder"; sysroot="$2"; shift 2 ;;
    --sysroot=*) sysroot="${1#*=}"; shift ;;
    --print-triple) print=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$triple" ] || die "one TRIPLE only: $triple, $1"; triple="$1"; shift ;;
  esac
done
[ -n "$triple" ] || die "no TRIPLE (see --help)"

case "$triple" in
  aarch64-unknown-linux-gnu|arm64|aarch64) triple=aarch64-unknown-linux-gnu; deb=arm64; gnu=aarch64-linux-gnu ;;
  x86_64-unknown-linux-gnu|amd64|x86_64) triple=x86_64-unknown-linux-gnu; deb=amd64; gnu=x86_64-linux-gnu ;;
  *) die "unsupported target $triple (aarch64-unknown-linux-gnu or x86_64-unknown-linux-gnu)" ;;
esac
if [ "$print" = 1 ]; then
  echo "$triple"
  exit 0
fi

host_deb="$(dpkg --print-architecture 2>/dev/null || true)"
[ -n "$host_deb" ] || die "needs a Debian or Ubuntu machine (dpkg)"
native=0
[ "$host_deb" = "$deb" ] && native=1

apt_install() {
  [ "$(id -u)" = 0 ] || die "--install needs root (apt-get install $*)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if [ "$install" = 1 ]; then
  apt-get update -qq
  if [ "$native" = 1 ]; then
    [ "$mpi" = 0 ] || apt_install libopenmpi-dev openmpi-bin libclang-dev
  else
    if ! dpkg --print-foreign-architectures | grep -qx "$deb"; then
      dpkg --add-architecture "$deb"
      apt-get update -qq
    fi
    pkgs=("gcc-${gnu//_/-}" "libc6-dev-$deb-cross")
    [ "$mpi" = 0 ] || pkgs+=(pkg-config libclang-dev)
    apt_install "${pkgs[@]}"
  fi
  rustup target list --installed | grep -qx "$triple" || rustup target add "$triple"
fi

if [ "$native" = 1 ]; then
  # Our own architecture: nothing to set up.
  [ $# -eq 0 ] || exec "$@"
  exit 0
fi

missing=()
command -v "$gnu-gcc" >/dev/null 2>&1 || missing+=("$gnu-gcc (gcc-${gnu//_/-} libc6-dev-$deb-cross)")
rustup target list --installed 2>/dev/null | grep -qx "$triple" \
  || missing+=("the Rust target (rustup target add $triple)")
dpkg --print-foreign-architectures | grep -qx "$deb" \
  || missing+=("$deb in apt's lists (dpkg --add-architecture $deb && apt-get update)")
if [ "$mpi" = 1 ]; then
  command -v pkg-config >/dev/null 2>&1 || missing+=("pkg-config")
  compgen -G '/usr/lib/llvm-*/lib/libclang*.so*' >/dev/null || missing+=("libclang (libclang-dev)")
fi
[ ${#missing[@]} -eq 0 ] || die "missing: $(printf '%s; ' "${missing[@]}")use --install as root"

sysroot="${sysroot:-${CARGO_TARGET_DIR:-target}/sysroot/$triple}"
mkdir -p "$sysroot"
sysroot="$(cd "$sysroot" && pwd)"
case "$sysroot" in
  *[[:space:]]*) die "the sysroot's path has white space: $sysroot" ;;
esac

# Debian 12 names. glibc and libgcc make the sysroot a root qemu-user can run the binaries
# from; the rest is Open MPI and what libmpi.so.40 and its components load (hwloc, libevent,
# zlib, udev, PMIx, libnl, munge).
pkgs=(libc6 libgcc-s1)
[ "$mpi" = 0 ] || pkgs+=(libopenmpi3 libopenmpi-dev libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 zlib1g libudev1 libpmix2 libnl-3-200 libmunge2)
want="$(printf "%s:$deb\n" "${pkgs[@]}")"
# A sysroot made with --mpi serves a build without it too.
if [ ! -f "$sysroot/.packages" ] || grep -qvxF -f "$sysroot/.packages" <<<"$want"; then
  echo "cross: fetching the $deb libraries into $sysroot: ${pkgs[*]}" >&2
  find "$sysroot" -mindepth 1 -delete
  mkdir "$sysroot/.debs"
  mapfile -t specs <<<"$want"
  if ! (cd "$sysroot/.debs" && apt-get download -q "${specs[@]}") >"$sysroot/.download.log" 2>&1; then
    cat "$sysroot/.download.log" >&2
    die "apt-get download failed (is $deb in apt's lists? see --install)"
  fi
  for p in "${pkgs[@]}"; do
    compgen -G "$sysroot/.debs/${p}_*_$deb.deb" >/dev/null || die "apt-get download did not fetch $p:$deb"
  done
  for d in "$sysroot"/.debs/*.deb; do
    dpkg-deb -x "$d" "$sysroot"
  done
  rm -rf "$sysroot/.debs" "$sysroot/.download.log"
  printf '%s\n' "$want" >"$sysroot/.packages"
fi

# cargo and cc: the cross gcc links (its own libc from libc6-dev-<arch>-cross).
t="$(echo "$triple" | tr 'a-z-' 'A-Z_')"
export "CARGO_TARGET_${t}_LINKER=$gnu-gcc"
export "CC_${triple//-/_}=$gnu-gcc"
export CROSS_SYSROOT="$sysroot"
if [ "$mpi" = 1 ]; then
  # rsmpi: Open MPI through pkg-config (MPI_PKG_CONFIG) rather than the machine's own mpicc;
  # bindgen takes the target from cargo. libmpi.so.40's own libraries are found at link time
  # through -rpath-link.
  export MPI_PKG_CONFIG=ompi-c PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_SYSROOT_DIR="$sysroot"
  export PKG_CONFIG_LIBDIR="$sysroot/usr/lib/$gnu/pkgconfig"
  flags_var="CARGO_TARGET_${t}_RUSTFLAGS"
  export "$flags_var=${!flags_var:-} -C link-arg=-Wl,-rpath-link,$sysroot/usr/lib/$gnu -C link-arg=-Wl,-rpath-link,$sysroot/lib/$gnu"
fi
[ $# -eq 0 ] || exec "$@"
