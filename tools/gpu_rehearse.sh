#!/usr/bin/env bash
# Rehearses the device call of tools/gpu_check.sh on this machine, which has no GPU (issue 32,
# item 2; CI runs it): the very script, `gpu_check.sh --rehearsal`, in a root that has what the
# device has and nothing else, with no network.
#   - The root: Debian 12 (debootstrap minbase, this machine's apt mirror, as
#     ../shared/tools/fresh-debian.sh makes it) with the compiler (g++), cmake, ninja and python3
#     only, plus ccache (a compiler launcher, so that CI rebuilds cost what `tools/setup.sh
#     test-cuda` did; REHEARSE_CCACHE=0 disables it for a cold build). None of the -dev packages
#     of the bundle, no pkg-config, no Open MPI: the script checks that before it starts.
#     It is made once and kept read-only under $REHEARSE_ROOT_CACHE (keyed by its package list);
#     each run writes into an overlay on it, gone when the run ends.
#   - This machine's CUDA toolkit, mounted read-only at the root's /usr/local/cuda, with its NCCL
#     hidden (lib/libnccl.so*, include/nccl*): as on the device, NCCL comes from PyTorch's
#     nvidia-nccl-cu13 wheel, here a stand-in on PYTHONPATH (a namespace package nvidia/nccl
#     whose lib/ holds libnccl.so.2 alone, no header: the bundle's fallback header is used).
#   - The working tree as the device call sends it (tracked files and untracked ones git does
#     not ignore) and the carried .gpu_bundle/ (made with tools/gpu_bundle.sh when absent).
#   - No network: the run is in its own network namespace (unshare -n: only a loopback, down).
# Then, inside: the preflight (the bundle unpacked with dpkg-deb under /tmp, NCCL found through
# python3), the configure, the build of every target the device builds, the cuda_tests label,
# gpu_tests skipping cleanly, `ljperf doctor`; see gpu_check.sh's --rehearsal.
# Afterwards: the build's wall time here and an estimate for the device's 16 cores, from the
# build's .ninja_log (each edge's measured time replayed on 16 slots in the order ninja started
# them; edges that did not compile, the links, wait for every edge started before them). Edge
# times are wall times: on a loaded machine they are stretched (2026-12-04: 5.1-7.2 times the
# CPU time of the same compile alone), and the estimate is divided by that ratio.
#
# usage: tools/gpu_rehearse.sh [OUT_DIR]      (as root; default /tmp/gpu_rehearse_out)
#   OUT_DIR gets gpu_check.sh's files (summary.txt, build.log, tests.log, console.log),
#   ninja_log.txt and estimate.txt.
# Environment: REHEARSE_ROOT_CACHE (default /var/tmp/ljperf-gpu-root), REHEARSE_CCACHE (1 when
# this machine has ccache, else 0; the build uses every core, as gpu_check.sh does),
# REHEARSE_KEEP=1 (keep the last run's overlay, its build folder with it: the next run builds
# incrementally; a developer's loop, not CI's).
# Needs: root (debootstrap, chroot, unshare, overlayfs), /usr/local/cuda, about 1 GiB in /var/tmp
# for the root and 3 GiB in /tmp for the build.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly out=${1:-/tmp/gpu_rehearse_out}
readonly cache=${REHEARSE_ROOT_CACHE:-/var/tmp/ljperf-gpu-root}
readonly scratch=/tmp/gpu_rehearse
say() { echo "gpu_rehearse: $*"; }
die() {
  echo "gpu_rehearse: $*" >&2
  exit 2
}
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, chroot, unshare, mount)"
cuda=$(readlink -f /usr/local/cuda 2>/dev/null || true)
if [ -z "$cuda" ] || [ ! -x "$cuda/bin/nvcc" ]; then die "no CUDA toolkit in /usr/local/cuda"; fi
ccache_on=${REHEARSE_CCACHE:-$(command -v ccache >/dev/null && echo 1 || echo 0)}
t_start=$(date +%s)

# The bundle the device call carries.
if ! compgen -G ".gpu_bundle/*.deb" >/dev/null; then
  say "no .gpu_bundle/: tools/gpu_bundle.sh"
  bash tools/gpu_bundle.sh
fi

# The root, once per package list.
readonly packages=(g++ cmake ninja-build python3 ccache)
# shellcheck disable=SC2016  # apt's own format fields
mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
  awk '$2 == "bookworm" {print $1; exit}')
key=$(printf '%s\n' bookworm "$mirror" "${packages[@]}" | sha256sum | cut -c1-12)
base=$cache/$key
if [ ! -f "$base/.ready" ]; then
  [ -n "$mirror" ] || die "no bookworm mirror in apt's sources (run apt-get update)"
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
  say "making the root $base (debootstrap bookworm minbase from $mirror, then ${packages[*]})"
  rm -rf "$base"
  mkdir -p "$base"
  t0=$(date +%s)
  debootstrap --variant=minbase bookworm "$base" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -5 "$cache/debootstrap.log"; die "debootstrap failed"; }
  cp /etc/resolv.conf "$base/etc/resolv.conf"
  mount -t proc proc "$base/proc"
  set +e
  chroot "$base" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    bash -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${packages[*]} >/dev/null &&
      apt-get clean"
  rc=$?
  set -e
  umount "$base/proc"
  [ "$rc" -eq 0 ] || die "installing ${packages[*]} in the root failed"
  : >"$base/etc/resolv.conf"
  touch "$base/.ready"
  say "root made in $(($(date +%s) - t0)) s ($(du -sh "$base" | cut -f1))"
fi

# What the root must not have: the bundle's -dev packages, pkg-config, MPI, any NCCL.
forbidden=(libdnnl-dev libfmt-dev libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libpcre2-dev zlib1g-dev libutf8proc-dev ocl-icd-opencl-dev opencl-c-headers pkgconf pkg-config
  libopenmpi-dev openmpi-bin libnccl-dev libbenchmark-dev)
# shellcheck disable=SC2016  # dpkg-query's own format fields
installed=$(chroot "$base" dpkg-query -W -f '${Package} ${Status}\n' 2>/dev/null | awk '$4 == "installed" {print $1}')
for p in "${forbidden[@]}"; do
  if grep -qx "$p" <<<"$installed"; then die "the root has $p, which the device does not"; fi
done
say "the root's -dev packages (the compiler's own): $(grep -- '-dev$' <<<"$installed" | paste -sd' ')"

# The run's scratch: an overlay's upper layer, the toolkit's NCCL whiteouts, the wheel stand-in.
if [ "${REHEARSE_KEEP:-0}" = 1 ]; then
  rm -rf "$scratch/hide" "$scratch/root"
else
  rm -rf "$scratch"
fi
mkdir -p "$scratch"/{upper,work,root,hide/lib,hide/include} "$out"
for f in lib/libnccl.so lib/libnccl.so.2 include/nccl.h include/nccl_device.h include/nccl_device; do
  [ -e "$cuda/$f" ] || [ -L "$cuda/$f" ] || continue
  mknod "$scratch/hide/$f" c 0 0
done
nccl_lib=$(readlink -f "$cuda/lib/libnccl.so.2")
[ -f "$nccl_lib" ] || die "no libnccl.so.2 in $cuda/lib for the wheel stand-in"

# Inside a private mount and network namespace (both gone when it exits).
# shellcheck disable=SC2016  # the script runs in the namespace's bash, with its own arguments
unshare -m -n bash -euo pipefail -c '
  base=$1 scratch=$2 cuda=$3 nccl_lib=$4 ccache_on=$5
  r=$scratch/root
  mount --make-rprivate /
  mount -t overlay overlay -o "lowerdir=$base,upperdir=$scratch/upper,workdir=$scratch/work" "$r"
  mount -t proc proc "$r/proc"
  mount --bind /dev "$r/dev"
  mkdir -p "$r/usr/local/cuda" "$r/opt/wheel/nvidia/nccl/lib" "$r/src/project" "$r/out" "$r/ccache"
  # The toolkit, read-only, NCCL hidden (whiteouts in the upper of two lower layers).
  mount -t overlay overlay -o "lowerdir=$scratch/hide:$cuda" "$r/usr/local/cuda"
  : >"$r/opt/wheel/nvidia/nccl/lib/libnccl.so.2"
  mount --bind -o ro "$nccl_lib" "$r/opt/wheel/nvidia/nccl/lib/libnccl.so.2"
  if [ "$ccache_on" = 1 ]; then mount --bind "$(ccache -k cache_dir)" "$r/ccache"; fi
  git ls-files -z -co --exclude-standard | xargs -0 cp -P -p --parents -t "$r/src/project" 2>/dev/null || true
  cp -rp .gpu_bundle "$r/src/project/"
  echo "gpu_rehearse: inside: network interfaces: $(awk -F: "NR > 2 {print \$1}" /proc/net/dev | tr -d " " | paste -sd" ")"
  for f in /usr/include/dnnl.hpp /usr/include/fmt/core.h /usr/include/CLI/CLI.hpp \
    /usr/include/nlohmann/json.hpp /usr/include/gtest/gtest.h /usr/include/pcre2.h /usr/include/zlib.h \
    /usr/include/utf8proc.h /usr/include/CL/cl.h /usr/bin/pkg-config /usr/bin/pkgconf /usr/bin/mpicc \
    /usr/local/cuda/include/nccl.h /usr/local/cuda/lib/libnccl.so /usr/local/cuda/lib/libnccl.so.2; do
    if [ -e "$r$f" ]; then echo "gpu_rehearse: the root still has $f" >&2; exit 1; fi
  done
  echo "gpu_rehearse: inside: no -dev headers of the bundle, no pkg-config, no MPI, no toolkit NCCL; nvcc $(chroot "$r" /usr/local/cuda/bin/nvcc --version | sed -n "s/.*release \([0-9.]*\).*/\1/p")"
  cc_env=(CCACHE_DISABLE=1)
  [ "$ccache_on" = 1 ] && cc_env=(CCACHE_DIR=/ccache CCACHE_BASEDIR=/src/project CCACHE_COMPILERCHECK=content)
  set +e
  chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
    PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONPATH=/opt/wheel CI="${CI:-}" "${cc_env[@]}" \
    bash -c "cd /src/project && bash tools/gpu_check.sh --rehearsal /out"
  rc=$?
  set -e
  cp "$r"/out/* "$scratch/" 2>/dev/null || true
  cp "$r/src/project/build-gpu/.ninja_log" "$scratch/ninja_log.txt" 2>/dev/null || true
  exit $rc
' _ "$base" "$scratch" "$cuda" "$nccl_lib" "$ccache_on" && rc=0 || rc=$?
for f in summary.txt build.log tests.log console.log ninja_log.txt; do
  if [ -f "$scratch/$f" ]; then cp "$scratch/$f" "$out/"; fi
done

# The build's time here, and on the device's 16 cores.
if [ -f "$out/ninja_log.txt" ]; then
  python3 - "$out/ninja_log.txt" "$(nproc)" "$ccache_on" >"$out/estimate.txt" <<'PY' || true
import heapq, sys
edges = []  # (start, end, output) of the last build, in start order
for line in open(sys.argv[1]):
    if line.startswith("#"):
        continue
    start, end, _, name, _ = line.rstrip("\n").split("\t")
    edges.append((int(start), int(end), name))
# Keep the last ninja invocation: lines are written as edges end, so within one invocation the
# end times never go down; they restart at 0 with the next.
last = 0
for i in range(1, len(edges)):
    if edges[i][1] < edges[i - 1][1] - 1000:
        last = i
edges = sorted(edges[last:])
wall = max(e for _, e, _ in edges) / 1000
work = sum(e - s for s, e, _ in edges) / 1000
def replay(slots):
    free = [0.0] * slots
    done_by = 0.0  # when every edge started so far has finished (a link waits for it)
    finish = 0.0
    for s, e, name in edges:
        d = (e - s) / 1000
        t = heapq.heappop(free)
        if not name.endswith(".o"):
            t = max(t, done_by)
        heapq.heappush(free, t + d)
        done_by = max(done_by, t + d)
        finish = max(finish, t + d)
    return finish
cu = [(e - s) / 1000 for s, e, n in edges if n.endswith(".cu.o")]
print("edges %d (CUDA %d), wall %.0f s on %s cores here (%s), compile and link time summed %.0f s"
      % (len(edges), len(cu), wall, sys.argv[2],
         "ccache on: not a cold build" if sys.argv[3] == "1" else "no ccache: a cold build", work))
print("replayed on %s slots: %.0f s (check of the replay against this run's wall time)"
      % (sys.argv[2], replay(int(sys.argv[2]))))
print("replayed on 16 slots (the device): %.0f s; longest edge %.0f s" %
      (replay(16), max((e - s) / 1000 for s, e, _ in edges)))
print("edge times are wall times under this machine's load: divide by the ratio of an edge's wall"
      " time to its CPU time compiled alone (/usr/bin/time) to get the device's figure")
PY
  cat "$out/estimate.txt"
fi
say "exit $rc after $(($(date +%s) - t_start)) s (out: $out)"
exit "$rc"
