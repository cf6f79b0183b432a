#!/usr/bin/env bash
# svcenv-proxy --mode userspace vs HAProxy (Debian's, mode tcp, the same
# thread count, option splice-auto) vs iptables DNAT (svcenv rules --apply:
# the kernel's baseline), side by side in one run, in network namespaces made
# here (a client, a node, three backends; addresses only inside them). The
# load is test/bench/connload.c. For each subject:
#   conns/s     closed loop: BENCH_THREADS client threads connect, read the
#               backend's 3-byte answer to EOF, reset, again (BENCH_SECONDS)
#   cpu_s/100k  the subject's CPU (utime+stime of its process, /proc) per
#               100,000 of those connections (DNAT: in softirqs, not counted)
#   p99@N%      open loop at N % of DNAT's closed-loop rate (BENCH_OPEN_SECONDS):
#               connections started on schedule, p99 of scheduled start to
#               first byte in microseconds, then /failed connections
#               (BENCH_OPEN_BASE=RATE: that rate instead of DNAT's)
#   cpu@25%     cpu_s/100k again, in the open loop at 25 %: the same offered
#               load for every subject (a saturated closed loop batches more)
#   gbit/s x1/x8  bulk bytes from the backends through 1 and 8 streams
#               (BENCH_BULK_SECONDS)
# then closed loop again with one backend refusing (no listener): failed
# client connections. BENCH_RUNS rounds (the second in reverse order: the
# machine drifts). Prints a table; asserts nothing about time. Root only
# (skips otherwise); haproxy comes from `test/ensure-deps --bench`.
#
#   BENCH_SECONDS=5 BENCH_THREADS=16 BENCH_RUNS=2 test/bench/uproxy_vs_haproxy.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SVCENV=${SVCENV:-$PWD/$BUILD/bin}
SECS=${BENCH_SECONDS:-5}
THREADS=${BENCH_THREADS:-16}
OPEN_SECS=${BENCH_OPEN_SECONDS:-4}
BULK_SECS=${BENCH_BULK_SECONDS:-4}
RUNS=${BENCH_RUNS:-2}
NPROC=$(nproc)

if [ "$(id -u)" -ne 0 ]; then
        echo "uproxy_vs_haproxy: SKIP (needs root for network namespaces)"
        exit 0
fi
if ! command -v haproxy >/dev/null; then
        echo "uproxy_vs_haproxy: SKIP (haproxy missing: run test/ensure-deps --bench as root)"
        exit 0
fi

p=ub$$
NODE=$p-node CL=$p-cl
tmp=$(mktemp -d)
pids=()
PID=
cleanup() {
        # the subject too: interrupted mid-run, it would outlive its namespace
        [ -n "$PID" ] && kill "$PID" 2>/dev/null
        for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
        wait 2>/dev/null
        for ns in "$CL" "$p-b1" "$p-b2" "$p-b3" "$NODE"; do ip netns del "$ns" 2>/dev/null; done
        rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
must() { "$@" || { echo "failed: $*" >&2; exit 1; }; }

cc -O2 -pthread -o "$tmp/connload" test/bench/connload.c || exit 1

for ns in "$NODE" "$CL" "$p-b1" "$p-b2" "$p-b3"; do
        must ip netns add "$ns"
        must inns "$ns" ip link set lo up
        # many short connections: ports come back quickly
        inns "$ns" sysctl -qw net.ipv4.ip_local_port_range="10000 65000"
        inns "$ns" sysctl -qw net.ipv4.tcp_tw_reuse=1
done
must inns "$NODE" sysctl -qw net.ipv4.ip_forward=1
must ip link add vc netns "$CL" type veth peer name vn netns "$NODE"
must inns "$CL" ip addr add 10.99.0.2/24 dev vc
must inns "$CL" ip link set vc up
must inns "$CL" ip route add default via 10.99.0.1
must inns "$NODE" ip addr add 10.99.0.1/24 dev vn
must inns "$NODE" ip link set vn up
for k in 1 2 3; do
        must ip link add eth0 netns "$p-b$k" type veth peer name vb$k netns "$NODE"
        must inns "$NODE" ip addr add 10.244.$k.1/24 dev vb$k
        must inns "$NODE" ip link set vb$k up
        must inns "$p-b$k" ip addr add 10.244.$k.2/24 dev eth0
        must inns "$p-b$k" ip link set eth0 up
        must inns "$p-b$k" ip route add default via 10.244.$k.1
        ip netns exec "$p-b$k" "$tmp/connload" serve 8080 >"$tmp/b$k.log" 2>&1 &
        pids+=($!)
        ip netns exec "$p-b$k" "$tmp/connload" source 8090 >"$tmp/s$k.log" 2>&1 &
        pids+=($!)
done
sleep 0.5

cluster() { # cluster B3PORT
        cat >"$tmp/cluster.yaml" <<EOF
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {addresses: [{type: InternalIP, address: 10.99.0.1}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: b}
spec: {type: NodePort, clusterIP: 10.96.0.10, ports: [{name: p, port: 80, targetPort: 8080, nodePort: 30080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: b, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: p, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.244.1.2], conditions: {ready: true}}
- {addresses: [10.244.2.2], conditions: {ready: true}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-2, namespace: b, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: p, port: $1, protocol: TCP}]
endpoints:
- {addresses: [10.244.3.2], conditions: {ready: true}}
---
apiVersion: v1
kind: Service
metadata: {name: bulk, namespace: b}
spec: {type: NodePort, clusterIP: 10.96.0.11, ports: [{name: p, port: 80, targetPort: 8090, nodePort: 30081}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: bulk-1, namespace: b, labels: {kubernetes.io/service-name: bulk}}
addressType: IPv4
ports: [{name: p, port: 8090, protocol: TCP}]
endpoints:
- {addresses: [10.244.1.2], conditions: {ready: true}}
- {addresses: [10.244.2.2], conditions: {ready: true}}
- {addresses: [10.244.3.2], conditions: {ready: true}}
EOF
}

flush() {
        for t in nat mangle filter; do
                inns "$NODE" iptables -t $t -F
                inns "$NODE" iptables -t $t -X
        done
        inns "$NODE" nft delete table ip svcenv-userspace 2>/dev/null
}

cpu_ticks() { # utime+stime of PID (all its threads)
        awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

# start NAME B3PORT: the subject serving; sets WEB and BULK (its ports) and
# PID (its process; empty for the kernel). 1 when it did not come up.
start() {
        local name=$1 b3=$2
        cluster "$b3"
        flush
        PID= WEB=30080 BULK=30081
        case $name in
        dnat)
                inns "$NODE" "$SVCENV/svcenv" rules -f "$tmp/cluster.yaml" --node node-a \
                        --cluster-cidr 10.244.0.0/16 --backend iptables --apply >/dev/null ||
                        { echo "dnat: rules not applied" >&2; return 1; }
                ;;
        userspace)
                ip netns exec "$NODE" "$SVCENV/svcenv-proxy" -f "$tmp/cluster.yaml" \
                        --mode userspace --hostname-override node-a --healthz-bind-address "" \
                        --metrics-bind-address "" >"$tmp/proxy.log" 2>&1 &
                PID=$!
                sleep 1.5
                ;;
        haproxy)
                WEB=18080 BULK=18081
                cat >"$tmp/haproxy.cfg" <<EOF
global
        nbthread $NPROC
        maxconn 6000
defaults
        mode tcp
        timeout connect 1s
        timeout client 10s
        timeout server 10s
        retries 3
        option redispatch
        option splice-auto
listen web
        bind 10.99.0.1:$WEB
        balance roundrobin
        server b1 10.244.1.2:8080
        server b2 10.244.2.2:8080
        server b3 10.244.3.2:$b3
listen bulk
        bind 10.99.0.1:$BULK
        balance roundrobin
        server b1 10.244.1.2:8090
        server b2 10.244.2.2:8090
        server b3 10.244.3.2:8090
EOF
                ip netns exec "$NODE" haproxy -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 &
                PID=$!
                sleep 1
                ;;
        esac
        if [ -n "$PID" ] && ! kill -0 "$PID" 2>/dev/null; then
                echo "$name did not start" >&2
                return 1
        fi
}
stop() {
        [ -n "$PID" ] || return 0
        kill "$PID"
        wait "$PID" 2>/dev/null
        PID=
}

# closed PORT: sets RATE CONNS FAILED CPU (CPU: n/a for the kernel)
closed() {
        local c0=0 c1=0 out
        [ -n "$PID" ] && c0=$(cpu_ticks "$PID")
        out=$(inns "$CL" "$tmp/connload" run 10.99.0.1 "$1" "$THREADS" "$SECS")
        [ -n "$PID" ] && c1=$(cpu_ticks "$PID")
        read -r _ CONNS _ FAILED _ RATE <<<"$out"
        CPU=n/a
        if [ -n "$PID" ] && [ "${CONNS:-0}" -gt 0 ]; then
                CPU=$(awk -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v n="$CONNS" \
                        'BEGIN { printf "%.2f", t / hz / n * 100000 }')
        fi
}

# open_loop PORT RATE: sets P99 ("p99_us/failed") and CPU (as closed)
open_loop() {
        local c0=0 c1=0 out sent ok failed p50 p99
        [ -n "$PID" ] && c0=$(cpu_ticks "$PID")
        out=$(inns "$CL" "$tmp/connload" open 10.99.0.1 "$1" "$2" "$OPEN_SECS")
        [ -n "$PID" ] && c1=$(cpu_ticks "$PID")
        read -r _ sent _ ok _ failed _ p50 _ p99 <<<"$out"
        P99="${p99:-?}/${failed:-?}"
        CPU=n/a
        if [ -n "$PID" ] && [ "${ok:-0}" -gt 0 ]; then
                CPU=$(awk -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v n="$ok" \
                        'BEGIN { printf "%.2f", t / hz / n * 100000 }')
        fi
}

# bulk PORT STREAMS: Gbit/s
bulk() {
        local out
        out=$(inns "$CL" "$tmp/connload" bulk 10.99.0.1 "$1" "$2" "$BULK_SECS")
        echo "${out##* }"
}

row() { printf "%-10s %3s %8s %10s %8s %10s %10s %10s %8s %8s\n" "$@"; }

# BENCH_OPEN_BASE: a fixed base for the open loop instead of DNAT's first
# rate (which swings on a shared machine), to compare separate runs
DNAT_RATE=${BENCH_OPEN_BASE:-}
measure_all() { # measure_all NAME RUN
        local name=$1 run=$2
        start "$name" 8080 || return
        closed "$WEB"
        local rate=$RATE cpu=$CPU
        [ "$name" = dnat ] && [ -z "$DNAT_RATE" ] && DNAT_RATE=$rate
        local q=() pct cpu25
        for pct in 25 50 75; do
                open_loop "$WEB" $((DNAT_RATE * pct / 100))
                q+=("$P99")
                [ "$pct" = 25 ] && cpu25=$CPU
        done
        local g1 g8
        g1=$(bulk "$BULK" 1)
        g8=$(bulk "$BULK" 8)
        stop
        row "$name" "$run" "$rate" "$cpu" "$cpu25" "${q[@]}" "$g1" "$g8"
}

refusing() { # refusing NAME RUN: b3's port has no listener
        start "$1" 8081 || return
        closed "$WEB"
        stop
        printf "%-10s %3s %8s %8s %8s\n" "$1" "$2" "$RATE" "$CONNS" "$FAILED"
}

echo "uproxy_vs_haproxy: $NPROC threads each, $THREADS client threads, ${SECS}s closed," \
        "${OPEN_SECS}s open, ${BULK_SECS}s bulk runs, 3 backends, $RUNS rounds"
echo "p99@N%: open loop at N % of DNAT's first closed-loop rate (us to first byte/failed)"
order=(dnat userspace haproxy)
row subject run conns/s cpu_s/100k cpu@25% p99@25% p99@50% p99@75% gbit/s×1 gbit/s×8
for run in $(seq "$RUNS"); do
        for s in "${order[@]}"; do measure_all "$s" "$run"; done
        order=("${order[2]}" "${order[1]}" "${order[0]}")
done
echo "the open loop's base (DNAT's first closed-loop rate or BENCH_OPEN_BASE): $DNAT_RATE conns/s"
echo "one backend refusing (b3:8081 has no listener), closed loop:"
printf "%-10s %3s %8s %8s %8s\n" subject run conns/s conns failed
for run in $(seq "$RUNS"); do
        for s in dnat userspace haproxy; do refusing "$s" "$run"; done
done
