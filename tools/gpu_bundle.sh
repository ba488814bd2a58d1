#!/usr/bin/env bash
# Fetches, on this machine, the Debian 12 packages that the CUDA build (tools/gpu_check.sh) includes
# or links, with their runtime libraries, into a git-ignored folder that the device call carries
# (issue 32). The device machine has nvcc, CMake, ninja, a C++ compiler and Python with PyTorch,
# but no apt, no network and none of these; gpu_check.sh unpacks each .deb there with `dpkg -x`
# into a prefix under /tmp and builds against it.
#
#   oneDNN        libdnnl-dev, libdnnl2 (runtime; Debian 12's oneDNN is 2.6)
#   OpenCL        ocl-icd-opencl-dev, ocl-icd-libopencl1, opencl-c-headers, opencl-clhpp-headers:
#                 dnnl-config.cmake runs find_package(OpenCL REQUIRED), and libdnnl.so.2 links
#                 libOpenCL.so.1
#   fmt           libfmt-dev, libfmt9
#   CLI11, JSON   libcli11-dev, nlohmann-json3-dev (header-only)
#   GoogleTest    libgtest-dev, libgmock-dev (static libraries and headers; googletest, their
#                 source package, is not needed to build)
#   PCRE2         libpcre2-dev and every library its .so links point at (8, 16, 32, posix)
#   zlib          zlib1g-dev, zlib1g
#   utf8proc      libutf8proc-dev, libutf8proc2 (tokenizer.json's Unicode normalizers)
#   pkg-config    pkgconf, pkgconf-bin, libpkgconf3: CMakeLists.txt finds PCRE2 with
#                 pkg_check_modules, and the device may have no pkg-config
# Left out: Open MPI (one GPU, one rank: -DLJ_MPI=OFF), Google Benchmark (-DLJ_BENCH=OFF), OpenMP
# (it comes with the device's compiler), NCCL (the device's PyTorch brings nvidia-nccl-cu13; see
# gpu_check.sh). A copy of this machine's nccl.h goes along as a fallback header only, used when
# the NCCL found there has no header of its own.
#
# usage: tools/gpu_bundle.sh [DIR]     (default .gpu_bundle/, which .gitignore ignores)
# Fails when the folder is over 40 MiB: a device call carries 64 MiB, the working tree included.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly dir=${1:-.gpu_bundle}
readonly max_mib=40
readonly packages=(
  libdnnl-dev libdnnl2
  ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-c-headers opencl-clhpp-headers
  libfmt-dev libfmt9
  libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  zlib1g-dev zlib1g
  libutf8proc-dev libutf8proc2
  pkgconf pkgconf-bin libpkgconf3
)

# The device is x86-64. On another architecture apt is pointed at amd64 with lists of its own.
apt_opts=()
if [ "$(dpkg --print-architecture)" != amd64 ]; then
  mkdir -p /tmp/gpu_bundle_lists/partial
  apt_opts=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64
            -oDir::State::Lists=/tmp/gpu_bundle_lists)
fi
# apt-get update only when a package has no candidate (fresh machine, lists not fetched yet).
need_update=0
[ ${#apt_opts[@]} -gt 0 ] && [ ! -s /tmp/gpu_bundle_lists/lock ] && need_update=1
for p in "${packages[@]}"; do
  [ $need_update -eq 1 ] && break
  apt-cache "${apt_opts[@]}" show --no-all-versions "$p" >/dev/null 2>&1 || need_update=1
done
if [ $need_update -eq 1 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && [ ${#apt_opts[@]} -eq 0 ] && sudo="sudo"
  echo "gpu_bundle: apt-get update"
  $sudo apt-get "${apt_opts[@]}" update -qq
fi

mkdir -p "$dir"
rm -f "$dir"/*.deb "$dir"/MANIFEST.txt
rm -rf "$dir"/nccl
# As root, apt's download sandbox user (_apt) cannot write into the folder: download as root.
[ "$(id -u)" -eq 0 ] && apt_opts+=(-oAPT::Sandbox::User=root)
(cd "$dir" && apt-get "${apt_opts[@]}" download -q "${packages[@]}")
for p in "${packages[@]}"; do
  ls "$dir/${p}_"*.deb >/dev/null 2>&1 || { echo "gpu_bundle: $p was not downloaded" >&2; exit 1; }
done

# The fallback header: nccl.h of this machine's CUDA toolkit (or the system's), when there is one.
for h in /usr/local/cuda/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h; do
  if [ -f "$h" ]; then
    mkdir -p "$dir/nccl/include"
    cp "$h" "$dir/nccl/include/nccl.h"
    break
  fi
done

{
  echo "# tools/gpu_bundle.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ): package version bytes sha256"
  for f in "$dir"/*.deb; do
    printf '%s %s %s %s\n' "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)" \
      "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
  done
  if [ -f "$dir/nccl/include/nccl.h" ]; then
    echo "nccl/include/nccl.h $(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
      "$dir/nccl/include/nccl.h" | paste -sd.) $(stat -c %s "$dir/nccl/include/nccl.h") (fallback header)"
  fi
} >"$dir/MANIFEST.txt"
sed 1d "$dir/MANIFEST.txt" | column -t
kib=$(du -sk "$dir" | cut -f1)
echo "gpu_bundle: $dir holds $(find "$dir" -type f | wc -l) files, $((kib / 1024)).$(((kib % 1024) * 10 / 1024)) MiB"
if [ "$kib" -gt $((max_mib * 1024)) ]; then
  echo "gpu_bundle: over ${max_mib} MiB: a device call carries 64 MiB with the working tree" >&2
  exit 1
fi
