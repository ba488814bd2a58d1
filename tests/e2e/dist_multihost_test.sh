# Two ranks on two "hosts": each host is a network namespace (joined to the other by a veth
# pair) and a UTS namespace (its own host name), both made by this test. mpirun runs on host 1
# with a hostfile of the two veth addresses; Open MPI starts its daemon on host 2 through a
# launch agent that enters host 2's namespaces (in place of ssh). Ranks talk over TCP only
# (btl tcp,self, pml ob1, both restricted to the veth subnet): no shared memory between them.
# Checks: the ranks see two host names and two network namespaces; `mpirun -np 2 ljperf
# benchmark --zero Z` (Z = 0, 1, 2) gives the losses of one process with --grad-accum 2, as on
# one host (dist_benchmark_test.sh); ljperf itself counts 2 hosts (its MFU peak is "2 hosts x");
# the veth carried at least the gradients' bytes.
# Skips (prints "SKIP: ...", which CTest reports as skipped) without mpirun or an MPI build, when
# not root, without iproute2's `ip` or util-linux's `unshare` and `nsenter`, or where the
# namespaces cannot be made (a container without CAP_SYS_ADMIN / CAP_NET_ADMIN).
# Usage: bash dist_multihost_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

mpi_e2e_init
skip() {
  echo "SKIP: $*"
  exit 0
}
[ "$(id -u)" -eq 0 ] || skip "not root: network and UTS namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN"
command -v ip >/dev/null 2>&1 || skip "no ip on PATH (install iproute2)"
for tool in unshare nsenter; do
  command -v $tool >/dev/null 2>&1 || skip "no $tool on PATH (install util-linux)"
done

readonly NET=10.213.0 HOST1=ljperf-host1 HOST2=ljperf-host2
# Each host's namespaces are held by one process (a sleep, bounded by CTest's 600 s timeout):
# no `ip netns add`, whose bind mount under /run/netns would outlive the test (and, in
# tools/fresh-debian.sh's chroot, keep the root from being removed); `ip -n` and `ip netns exec`
# also fail in a chroot ("mount --make-rslave /" failed: Invalid argument). Killing the holders
# removes the namespaces and the veth pair.
HOLDERS=()
ns_cleanup() {
  local p
  for p in "${HOLDERS[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap 'ns_cleanup; e2e_cleanup' EXIT
# in_host H COMMAND...: COMMAND in host H's (1 or 2) network and UTS namespaces.
in_host() {
  local pid=${HOLDERS[$1 - 1]}
  shift
  nsenter -t "$pid" --net --uts "$@"
}

echo "check: two hosts (network + UTS namespaces $HOST1 and $HOST2, a veth pair, $NET.1 and $NET.2)"
own_net=$(readlink /proc/self/ns/net)
for h in 1 2; do
  host=HOST$h
  unshare --net --uts /bin/sh -c "echo ${!host} >/proc/sys/kernel/hostname && exec sleep 600" 2>"ns$h.err" &
  HOLDERS+=($!)
  # unshare execs the shell in the same process: wait until it has its namespaces and name.
  for _ in $(seq 500); do
    [ "$(readlink "/proc/$!/ns/net" 2>/dev/null)" != "$own_net" ] &&
      [ "$(in_host "$h" cat /proc/sys/kernel/hostname 2>/dev/null)" = "${!host}" ] && break
    kill -0 $! 2>/dev/null || skip "cannot make network and UTS namespaces: $(head -1 "ns$h.err")"
    sleep 0.01
  done
  [ "$(in_host "$h" cat /proc/sys/kernel/hostname 2>/dev/null)" = "${!host}" ] ||
    fail "host $h's namespaces were not ready after 5 s"
done
# The pair is made inside host 1 with its peer in host 2: no interface appears on this host.
in_host 1 ip link add veth1 type veth peer name veth2 netns "${HOLDERS[1]}" 2>ns.err ||
  skip "cannot make a veth pair: $(head -1 ns.err)"
for h in 1 2; do
  in_host $h ip addr add "$NET.$h/24" dev "veth$h"
  in_host $h ip link set "veth$h" up
  in_host $h ip link set lo up
done
pass "veth1 $NET.1/24 on $HOST1, veth2 $NET.2/24 on $HOST2"

# Open MPI's launch agent, called as "AGENT [options] HOST COMMAND...": the command (Open MPI's
# daemon, as one shell line, as ssh would get it) runs in host 2's namespaces.
cat >agent.sh <<EOF
#!/bin/bash
while [ "\${1:-}" != "${NET}.2" ] && [ \$# -gt 0 ]; do shift; done
[ \$# -gt 0 ] || { echo "agent.sh: only host ${NET}.2 is known" >&2; exit 1; }
shift
exec nsenter -t ${HOLDERS[1]} --net --uts /bin/sh -c "\$*"
EOF
# host1.sh COMMAND...: runs COMMAND (mpirun) on host 1.
cat >host1.sh <<EOF
#!/bin/bash
exec nsenter -t ${HOLDERS[0]} --net --uts "\$@"
EOF
chmod +x agent.sh host1.sh
printf '%s slots=1\n%s slots=1\n' "$NET.1" "$NET.2" >hostfile
mpi_tcp=("${MPIRUN[@]:1}" --hostfile "$TMP/hostfile" --mca plm_rsh_agent "$TMP/agent.sh"
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$NET.0/24"
  --mca oob_tcp_if_include "$NET.0/24" -x OMP_NUM_THREADS -np 2)

echo "check: mpirun across the two hosts: each rank's host name and network namespace"
rc=0
timeout 120 ./host1.sh mpirun "${mpi_tcp[@]}" \
  /bin/sh -c 'echo "rank $OMPI_COMM_WORLD_RANK host $(cat /proc/sys/kernel/hostname) netns $(readlink /proc/self/ns/net)"' \
  >where.out 2>where.err || rc=$?
[ "$rc" -eq 0 ] || { cat where.out where.err >&2; fail "mpirun across the namespaces exited $rc"; }
sort where.out | sed 's/^/  /'
r0=$(grep '^rank 0 ' where.out || true)
r1=$(grep '^rank 1 ' where.out || true)
[[ "$r0" == "rank 0 host $HOST1 "* ]] || fail "rank 0 is not on $HOST1: '$r0'"
[[ "$r1" == "rank 1 host $HOST2 "* ]] || fail "rank 1 is not on $HOST2: '$r1'"
[ "${r0##* }" != "${r1##* }" ] || fail "both ranks are in one network namespace (${r0##* })"
pass "rank 0 on $HOST1, rank 1 on $HOST2, two network namespaces"

run=(benchmark --model tiny --steps 3 --seq-len 64 --batch-size 2)
echo "check: one process with --grad-accum 2 (the reference)"
"$LJ" "${run[@]}" --grad-accum 2 --out ref.jsonl >ref.out 2>ref.err || { cat ref.err >&2; fail "reference run failed"; }
ref_losses=$(json_get ref.jsonl 1 losses)
pass "reference losses $ref_losses"

# Bytes host 2 sent over the veth (its daemon's messages and rank 1's collectives).
tx2() { in_host 2 ip -j -s link show veth2 | perl -MJSON::PP -e 'print decode_json(join "", <STDIN>)->[0]{stats64}{tx}{bytes}'; }
for z in 0 1 2; do
  echo "check: mpirun -np 2 ljperf benchmark --zero $z, one rank per host, over TCP"
  before=$(tx2)
  rc=0
  timeout 300 ./host1.sh mpirun "${mpi_tcp[@]}" \
    "$LJ" "${run[@]}" --zero "$z" --out "$TMP/d$z.jsonl" >"d$z.out" 2>"d$z.err" || rc=$?
  sent=$(($(tx2) - before))
  [ "$rc" -eq 0 ] || { cat "d$z.out" "d$z.err" >&2; fail "--zero $z exited $rc"; }
  grep -Eq '^data parallel: 2 ranks \(communicator: mpi\)' "d$z.out" || { cat "d$z.out" >&2; fail "--zero $z: no data-parallel line"; }
  # Each rank counts the ranks with its host name (cli/dist_session.cc): one each, so 2 hosts.
  grep -Eq '^ +MFU .*\(of 2 hosts × ' "d$z.out" || { cat "d$z.out" >&2; fail "--zero $z: ljperf did not count 2 hosts"; }
  [ "$(json_get "d$z.jsonl" 1 config.world_size)" = 2 ] || fail "--zero $z: config.world_size is not 2"
  # At least half of the f32 gradients per step leave each of 2 ranks in any all-reduce or
  # reduce-scatter algorithm; the daemon's own messages are a few KB.
  params=$(json_get "d$z.jsonl" 1 config.params)
  need=$((3 * params * 4 / 2))
  [ "$sent" -ge "$need" ] || fail "--zero $z: host 2 sent $sent bytes over the veth, less than the $need of 3 steps' gradients"
  # Observed: bitwise-equal losses, as on one host; the bound is dist_benchmark_test.sh's.
  perl -MJSON::PP -e '
    my ($ref, $got, $z) = @ARGV;
    my @a = @{decode_json($ref)}; my @b = @{decode_json($got)};
    die "stage $z: ".scalar(@b)." losses, expected ".scalar(@a)."\n" unless @a == @b;
    my $max = 0;
    for my $i (0 .. $#a) { my $d = abs($a[$i] - $b[$i]); $max = $d if $d > $max; }
    die "stage $z: losses differ from one process with --grad-accum 2 by $max (bound 1e-6)\n" if $max > 1e-6;
    print "  ok: stage $z losses equal the reference (max |diff| $max)\n";' \
    "$ref_losses" "$(json_get "d$z.jsonl" 1 losses)" "$z" || fail "--zero $z: losses differ"
  pass "stage $z: 2 hosts, host 2 sent $sent bytes over the veth (gradients need >= $need)"
done

e2e_finish
