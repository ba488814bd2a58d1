#!/usr/bin/env bash
# Rehearses, on this machine and without a GPU, the first minute of the device call (issue 32):
# `tools/gpu_check.sh --configure-only` with this machine's own copies of the bundle's packages
# hidden, so the configure can only succeed against the bundle unpacked under /tmp.
#   - A private mount namespace (unshare -m; root) lays an overlay over /usr whose upper layer
#     holds a whiteout for every file of the -dev packages the bundle brings (oneDNN, fmt, CLI11,
#     nlohmann-json, GoogleTest, PCRE2's, utf8proc's and zlib's dev files, OpenCL, pkg-config), Open MPI's and
#     Google Benchmark's, and of NCCL (the CUDA toolkit's and /usr/local/include's). The runtime
#     libraries the system itself uses (libpcre2-8, zlib) stay, as they do on the device.
#   - NCCL then comes only from a stand-in for PyTorch's nvidia-nccl-cu13 wheel: a namespace
#     package nvidia/nccl (no __init__.py) with include/nccl.h and lib/libnccl.so.2 alone, on
#     PYTHONPATH. NOHEADER=1 leaves include/ out, to rehearse the bundle's fallback header.
#   - No network (unshare -n).
# The machine itself is left unchanged: the overlay exists only inside the namespace.
# What it does not show: the build and the tests (a full CUDA build takes hours on 2 cores), the
# device's own compiler and CMake (this machine's are used), and anything that needs the GPU.
#
# usage: sudo tools/gpu_rehearse_configure.sh [OUT_DIR]   (default /tmp/gpu_rehearse_out)
#   COMPILE=0 skips compiling one translation unit per dependency (about a minute on 2 cores).
# Needs: root, unshare, overlayfs, a CUDA toolkit here, and .gpu_bundle/ (tools/gpu_bundle.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
readonly out=${1:-/tmp/gpu_rehearse_out}
readonly scratch=/tmp/gpu_rehearse
[ "$(id -u)" -eq 0 ] || { echo "gpu_rehearse_configure: needs root (unshare -m, mount)" >&2; exit 2; }
[ -d .gpu_bundle ] || { echo "gpu_rehearse_configure: no .gpu_bundle/: run tools/gpu_bundle.sh" >&2; exit 2; }
cuda=$(readlink -f /usr/local/cuda)
nccl_lib=$(readlink -f "$cuda/lib/libnccl.so.2")
nccl_h=$cuda/include/nccl.h
if [ ! -f "$nccl_lib" ] || [ ! -f "$nccl_h" ]; then
  echo "gpu_rehearse_configure: no NCCL in $cuda" >&2
  exit 2
fi

hide_packages=(
  libdnnl-dev libdnnl2 libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  googletest libpcre2-dev zlib1g-dev libutf8proc-dev libutf8proc2 ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-c-headers
  opencl-clhpp-headers pkgconf pkgconf-bin pkg-config libpkgconf3 libopenmpi-dev openmpi-bin
  libbenchmark-dev libbenchmark1debian
)
rm -rf "$scratch"
mkdir -p "$scratch/upper" "$scratch/work" "$scratch/site/nvidia/nccl/lib" "$out"
# Whiteouts (character device 0:0) for each installed file under /usr (Debian 12 merges /lib into
# /usr/lib, so /lib/... is /usr/lib/...).
n=0
for pkg in "${hide_packages[@]}" ; do
  dpkg-query -W "$pkg" >/dev/null 2>&1 || continue
  while IFS= read -r f; do
    case $f in /lib/* | /lib64/* | /bin/* | /sbin/*) f=/usr$f ;; esac
    case $f in /usr/*) ;; *) continue ;; esac
    [ -d "$f" ] && [ ! -L "$f" ] && continue
    [ -e "$f" ] || [ -L "$f" ] || continue
    rel=${f#/usr/}
    mkdir -p "$scratch/upper/$(dirname "$rel")"
    mknod "$scratch/upper/$rel" c 0 0
    n=$((n + 1))
  done < <(dpkg -L "$pkg")
done
for f in "$cuda"/lib/libnccl.so* "$nccl_h" /usr/local/include/nccl.h; do
  [ -e "$f" ] || continue
  rel=${f#/usr/}
  mkdir -p "$scratch/upper/$(dirname "$rel")"
  mknod "$scratch/upper/$rel" c 0 0
  n=$((n + 1))
done
echo "gpu_rehearse_configure: $n files hidden under /usr"
if [ -z "${NOHEADER:-}" ]; then
  mkdir -p "$scratch/site/nvidia/nccl/include"
  cp "$nccl_h" "$scratch/site/nvidia/nccl/include/"
fi
: >"$scratch/site/nvidia/nccl/lib/libnccl.so.2"

# Inside: bind the real libnccl.so.2 onto the stand-in wheel's (before /usr is overlaid), overlay
# /usr, show what is gone, then the configure-only run in a copy of the tree (its build folder and
# scratch under /tmp).
# shellcheck disable=SC2016  # the script runs in the namespace's bash, with its own arguments
unshare -m -n bash -euo pipefail -c '
  scratch=$1 out=$2 nccl_lib=$3 cuda=$4
  mount --make-rprivate /
  mount --bind "$nccl_lib" "$scratch/site/nvidia/nccl/lib/libnccl.so.2"
  mount -t overlay overlay -o "lowerdir=/usr,upperdir=$scratch/upper,workdir=$scratch/work" /usr
  echo "inside: network interfaces: $(ls /sys/class/net | tr "\n" " ")"
  for f in /usr/include/dnnl.hpp /usr/include/fmt/core.h /usr/include/CLI/CLI.hpp \
    /usr/include/nlohmann/json.hpp /usr/include/gtest/gtest.h /usr/include/pcre2.h /usr/include/zlib.h \
    /usr/include/CL/cl.h /usr/lib/x86_64-linux-gnu/libdnnl.so.2 /usr/lib/x86_64-linux-gnu/cmake/dnnl/dnnl-config.cmake \
    /usr/share/cmake/CLI11/CLI11Config.cmake /usr/bin/pkg-config /usr/bin/mpicc "$cuda/include/nccl.h" \
    "$cuda/lib/libnccl.so" /usr/local/include/nccl.h; do
    if [ -e "$f" ]; then echo "inside: STILL VISIBLE $f"; exit 1; fi
  done
  echo "inside: the -dev files, pkg-config, MPI and the toolkit NCCL are hidden"
  command -v python3 >/dev/null && PYTHONPATH=$scratch/site python3 -c "import nvidia.nccl as m; print(\"inside: nvidia.nccl __file__ =\", m.__file__, \"__path__ =\", list(m.__path__))"
  rm -rf /tmp/gpu_rehearse_src /tmp/gpu_rehearse_build
  mkdir -p /tmp/gpu_rehearse_src
  git ls-files -z | xargs -0 cp --parents -t /tmp/gpu_rehearse_src
  cp -r .gpu_bundle /tmp/gpu_rehearse_src/
  cd /tmp/gpu_rehearse_src
  PATH=$cuda/bin:$PATH PYTHONPATH=$scratch/site BUILD_DIR=/tmp/gpu_rehearse_build \
    GPU_CHECK_WORK=$scratch/check bash tools/gpu_check.sh --configure-only "$out"
  # Where the build would read each dependency from: no include or link path of the build names
  # /usr for them.
  b=/tmp/gpu_rehearse_build
  if grep -oE "(-I|-isystem )/usr/include[^ ]*|(^|[ :=])/usr/lib/x86_64-linux-gnu/lib(dnnl|fmt|pcre2|z|OpenCL|gtest|gmock|nccl)[^ ]*" \
    "$b/build.ninja" | sort -u | grep .; then
    echo "inside: the build still names the system copies above"; exit 1
  fi
  echo "inside: build.ninja names no /usr/include and no system dnnl, fmt, pcre2, zlib, OpenCL, gtest or nccl"
  if [ "${COMPILE:-1}" = 0 ]; then exit 0; fi
  # One translation unit per dependency, compiled (no link: that needs the CUDA kernels built).
  t0=$(date +%s)
  ninja -C "$b" CMakeFiles/lj_tokenize.dir/src/tokenize/regex.cc.o \
    CMakeFiles/lj_tokenize.dir/src/tokenize/corpus.cc.o CMakeFiles/lj_backend_cpu.dir/src/backends/cpu/gemm.cc.o \
    CMakeFiles/lj_cli.dir/src/cli/run_config.cc.o CMakeFiles/lj_cli.dir/src/cli/ablation_command.cc.o \
    CMakeFiles/lj_dist.dir/src/dist/cuda/nccl_communicator.cc.o CMakeFiles/cuda_tests.dir/tests/cuda/nccl_host_test.cc.o
  echo "inside: compiled the PCRE2, zlib, oneDNN, CLI11/JSON, fmt, NCCL and GoogleTest units in $(( $(date +%s) - t0 )) s"
  # The headers each unit read (ninja keeps the dependency lists of the compiler).
  ninja -C "$b" -t deps | grep -E "\.o: #deps|/(oneapi/dnnl/dnnl.hpp|fmt/core.h|CLI/App.hpp|nlohmann/json.hpp|gtest/gtest.h|pcre2.h|zlib.h|nccl.h)$" |
    sed "s/ #deps.*//"
  # The runtime side: the bundle libraries resolve inside the prefix.
  p=$scratch/check/prefix
  LD_LIBRARY_PATH=$p/usr/lib/x86_64-linux-gnu:$p/lib/x86_64-linux-gnu ldd "$p/usr/lib/x86_64-linux-gnu/libdnnl.so.2" "$p/usr/lib/x86_64-linux-gnu/libfmt.so.9" "$p/usr/lib/x86_64-linux-gnu/libpcre2-8.so.0" | grep -E "^/|OpenCL|not found|libz|libgomp"
' _ "$scratch" "$out" "$nccl_lib" "$cuda"
