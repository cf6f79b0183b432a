#!/usr/bin/env bash
# svcenv-proxy --mode userspace vs HAProxy (Debian's, mode tcp, the same
# thread count, option splice-auto) vs iptables DNAT (svcenv rules --apply:
# the kernel's baseline), in network namespaces made here (a client, a node,
# three backends; addresses only inside them). For each subject, closed-loop
# new connections per second (test/bench/connload.c, BENCH_THREADS client
# threads, BENCH_SECONDS each) to the node's port, and the subject's CPU
# (utime+stime from /proc) per 100,000 connections; then the same with one
# backend refusing (no listener), counting failed client connections.
# Prints figures; asserts nothing about time. Root only (skips otherwise);
# installs haproxy (apt) when missing.
#
#   BENCH_SECONDS=10 BENCH_THREADS=16 test/bench/uproxy_vs_haproxy.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SVCENV=${SVCENV:-$PWD/$BUILD/bin}
SECS=${BENCH_SECONDS:-5}
THREADS=${BENCH_THREADS:-16}
NPROC=$(nproc)

if [ "$(id -u)" -ne 0 ]; then
        echo "uproxy_vs_haproxy: SKIP (needs root for network namespaces)"
        exit 0
fi
if ! command -v haproxy >/dev/null; then
        apt-get install -y -qq haproxy >/dev/null 2>&1 || {
                echo "uproxy_vs_haproxy: SKIP (haproxy missing and not installable)"
                exit 0
        }
fi

p=ub$$
NODE=$p-node CL=$p-cl
tmp=$(mktemp -d)
pids=()
cleanup() {
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

# measure NAME PORT PID: one closed-loop run; PID's CPU (empty: kernel, not measured)
measure() {
        local name=$1 port=$2 pid=${3:-} c0=0 c1=0
        [ -n "$pid" ] && c0=$(cpu_ticks "$pid")
        local out
        out=$(inns "$CL" "$tmp/connload" run 10.99.0.1 "$port" "$THREADS" "$SECS")
        [ -n "$pid" ] && c1=$(cpu_ticks "$pid")
        local conns failed rate cpu=n/a
        read -r _ conns _ failed _ rate <<<"$out"
        if [ -n "$pid" ] && [ "$conns" -gt 0 ]; then
                cpu=$(awk -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v n="$conns" \
                        'BEGIN { printf "%.2f", t / hz / n * 100000 }')
        fi
        printf "%-28s %10s %8s %8s %12s\n" "$name" "$rate" "$conns" "$failed" "$cpu"
}

subject() { # subject NAME B3PORT
        local name=$1 b3=$2 pid
        cluster "$b3"
        flush
        case $name in
        dnat)
                inns "$NODE" "$SVCENV/svcenv" rules -f "$tmp/cluster.yaml" --node node-a \
                        --cluster-cidr 10.244.0.0/16 --backend iptables --apply >/dev/null ||
                        { echo "dnat: rules not applied" >&2; return; }
                measure "iptables DNAT (b3:$b3)" 30080
                ;;
        userspace)
                ip netns exec "$NODE" "$SVCENV/svcenv-proxy" -f "$tmp/cluster.yaml" \
                        --mode userspace --hostname-override node-a --healthz-bind-address "" \
                        --metrics-bind-address "" >"$tmp/proxy.log" 2>&1 &
                pid=$!
                sleep 1.5
                measure "svcenv userspace (b3:$b3)" 30080 "$pid"
                kill "$pid"
                wait "$pid" 2>/dev/null
                ;;
        haproxy)
                cat >"$tmp/haproxy.cfg" <<EOF
global
        nbthread $NPROC
        maxconn 3000
defaults
        mode tcp
        timeout connect 1s
        timeout client 10s
        timeout server 10s
        retries 3
        option redispatch
        option splice-auto
listen web
        bind 10.99.0.1:18080
        balance roundrobin
        server b1 10.244.1.2:8080
        server b2 10.244.2.2:8080
        server b3 10.244.3.2:$b3
EOF
                ip netns exec "$NODE" haproxy -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 &
                pid=$!
                sleep 1
                measure "haproxy splice-auto (b3:$b3)" 18080 "$pid"
                kill "$pid"
                wait "$pid" 2>/dev/null
                ;;
        esac
}

echo "uproxy_vs_haproxy: $NPROC threads each, $THREADS client threads, ${SECS}s runs, 3 backends"
printf "%-28s %10s %8s %8s %12s\n" subject conns/s conns failed cpu_s/100k
for s in dnat userspace haproxy haproxy userspace dnat; do subject $s 8080; done
echo "one backend refusing (b3:8081 has no listener):"
for s in dnat userspace haproxy; do subject $s 8081; done
