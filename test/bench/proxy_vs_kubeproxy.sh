#!/usr/bin/env bash
# Programming latency, svcenv-proxy vs kube-proxy v1.36 (built by test/k8s),
# on one real kube-apiserver holding the same cluster: BENCH_PX_SIZES
# ClusterIP Services x 10 ready endpoints (default "1000 10000"). For each
# size, mode (BENCH_PX_MODES, default "iptables nftables") and proxy, one
# after the other, each in a fresh child network namespace of the same kind
# (a veth to the root namespace, where the API server listens):
#   full     proxy start -> the last Service's ClusterIP rule is in the
#            kernel (KUBE-SERVICES is written last by both)
#   add      one Service + its EndpointSlice created through the API (with
#            N present) -> its ClusterIP rule in the kernel
#   ep       (iptables) the first Service's endpoints replaced through the
#            API -> the new endpoint's KUBE-SEP chain in the kernel
# Times are wall clock from the API write (or the process start) to the
# kernel, polled every 50 ms (iptables -S of one chain; nft get element of
# the service-ips map); the proxies' CPU seconds (utime+stime from /proc)
# over the run are printed too: the figure that survives a busy machine.
# Prints figures; asserts nothing. A phase that does not finish within
# BENCH_PX_TIMEOUT seconds (default 1800) is printed as "timeout".
# Needs root (network namespaces). Uses KUBE_DIR's control plane only if it
# listens on an address the namespaces reach: it starts its own otherwise.
#
#   BENCH_PX_SIZES="1000" BENCH_PX_MODES=iptables test/bench/proxy_vs_kubeproxy.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
SVCENV=${SVCENV:-$PWD/$BUILD/bin}
SIZES=${BENCH_PX_SIZES:-1000 10000}
MODES=${BENCH_PX_MODES:-iptables nftables}
TIMEOUT=${BENCH_PX_TIMEOUT:-1800}
EPS=10
CONTROLPLANE=test/k8s/controlplane
name=proxy_vs_kubeproxy

skip() {
        echo "$name: skipped: $*"
        exit 0
}
[ "$(id -u)" -eq 0 ] || skip "needs root for network namespaces"
for tool in ip iptables nft curl python3; do
        command -v "$tool" >/dev/null || skip "$tool is missing"
done
[ -x "$SVCENV/svcenv-proxy" ] || skip "$SVCENV/svcenv-proxy is not built"

work=$(mktemp -d /tmp/svcenv-pxbench.XXXXXX)
p=pb$$
HA=10.79.0.1 NA=10.79.0.2
pid=
cleanup() {
        [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        $CONTROLPLANE stop "$work/kube" >/dev/null 2>&1
        ip netns del "$p" 2>/dev/null
        ip link del "$p-v" 2>/dev/null
        rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

KUBE_DIR=$work/kube
mkdir -p "$KUBE_DIR"
# the root end of the namespaces' veth must exist before the API server binds it
ip link add "$p-v" type veth peer name "$p-x" || exit 1
ip addr add $HA/24 dev "$p-v" && ip link set "$p-v" up
$CONTROLPLANE start "$KUBE_DIR" --extra-ip $HA --bind-extra-ip >"$work/cp.out" 2>&1 ||
        { tail -20 "$work/cp.out"; exit 1; }
export KUBE_DIR
# shellcheck disable=SC1091
. "$KUBE_DIR/env"
# shellcheck disable=SC1091
. test/integration/bulk.bash
KP=$BIN_DIR/kube-proxy
[ -x "$KP" ] || echo "$name: $KP is not built: svcenv-proxy only"
kapi() { test/k8s/kapi "$KUBE_DIR" "$@"; }
sed "s#server: .*#server: https://$HA:$APISERVER_PORT#" "$KUBE_DIR/kubeconfig" >"$work/ns.kubeconfig"
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }

svc_ip() { echo "10.96.$((10 + $1 / 250)).$((1 + $1 % 250))"; }
ep_ip() { local k=$1; echo "10.$((128 + k / 65536)).$(((k / 256) % 256)).$((k % 256))"; }
svc_json() { # NS I
        printf '/api/v1/namespaces/%s/services\t{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc-%d"},"spec":{"clusterIP":"%s","ports":[{"name":"http","port":80,"targetPort":8080}]}}\n' \
                "$1" "$2" "$(svc_ip "$2")"
}
slice_body() { # I FIRST-ENDPOINT-NUMBER
        local e eps=
        for ((e = 0; e < EPS; e++)); do
                eps+="${eps:+,}{\"addresses\":[\"$(ep_ip $(($2 + e)))\"],\"conditions\":{\"ready\":true},\"nodeName\":\"node-$((e % 2 ? 1 : 2))\"}"
        done
        printf '{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"svc-%d-x","labels":{"kubernetes.io/service-name":"svc-%d"}},"addressType":"IPv4","ports":[{"name":"http","port":8080,"protocol":"TCP"}],"endpoints":[%s]}' \
                "$1" "$1" "$eps"
}
ns_of() { echo "bench-$(($1 / 1000))"; }

made=0
grow_to() { # the cluster holds svc-0..svc-(N-1)
        local target=$1 i
        for ((i = made / 1000; i <= (target - 1) / 1000; i++)); do
                printf '/api/v1/namespaces\t{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bench-%d"}}\n' $i
        done | kbulk POST application/json 2>/dev/null
        for ((i = made; i < target; i++)); do svc_json "$(ns_of $i)" $i; done |
                kbulk POST application/json || return 1
        for ((i = made; i < target; i++)); do
                printf '/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices\t%s\n' "$(ns_of $i)" "$(slice_body $i $((i * EPS)))"
        done | kbulk POST application/json || return 1
        made=$target
}
printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1","labels":{"kubernetes.io/hostname":"node-1"}},"status":{"addresses":[{"type":"InternalIP","address":"%s"}]}}' $NA >"$work/node.json"
kapi post /api/v1/nodes "$work/node.json" >/dev/null || { echo "$name: cannot create the Node"; exit 1; }

# kube-proxy's KUBE-SEP name: "KUBE-SEP-" + base32(sha256(spn + proto + ip:port))[:16]
sep_chain() { # NS SVC IP
        python3 -c 'import base64,hashlib,sys; print("KUBE-SEP-" + base64.b32encode(hashlib.sha256(sys.argv[1].encode()).digest()).decode()[:16])' "$1/$2:http""tcp""$3:8080"
}

inns() { ip netns exec "$p" "$@"; }
netns_up() {
        ip netns add "$p" || return 1
        ip link set "$p-x" netns "$p" 2>/dev/null ||
                { ip link del "$p-v" 2>/dev/null; ip link add "$p-v" type veth peer name "$p-x" netns "$p" &&
                        ip addr add $HA/24 dev "$p-v" && ip link set "$p-v" up; } || return 1
        inns ip link set lo up
        inns ip addr add $NA/24 dev "$p-x"
        inns ip link set "$p-x" up
}
netns_down() {
        # the veth end goes back to the root namespace for the next run
        inns ip link set "$p-x" netns 1 2>/dev/null
        ip netns del "$p"
        ip link set "$p-x" up 2>/dev/null
}

present() { # MODE TABLE IP: the ClusterIP rule is in the kernel
        if [ "$1" = iptables ]; then
                # grep reads it all: -q would end iptables by SIGPIPE (pipefail)
                inns iptables -w -t nat -S KUBE-SERVICES 2>/dev/null | grep -- "-d $3/32 " >/dev/null
        else
                inns nft get element ip "$2" service-ips "{ $3 . tcp . 80 }" >/dev/null 2>&1
        fi
}
chain_present() { inns iptables -w -t nat -S "$1" >/dev/null 2>&1; }
wait_for() { # wait_for T0_MS CMD...: ms from T0 until CMD succeeds, "timeout" past TIMEOUT
        local t0=$1 deadline=$((SECONDS + TIMEOUT))
        shift
        until "$@"; do
                [ $SECONDS -ge $deadline ] && { echo timeout; return 1; }
                sleep 0.05
        done
        echo $(($(now_ms) - t0))
}
cpu_s() { # utime+stime of PID and its reaped children, seconds
        awk '{ printf "%.1f", ($14 + $15 + $16 + $17) / 100 }' "/proc/$1/stat" 2>/dev/null
}
fmt() { [ "$1" = timeout ] && echo timeout || awk -v ms="$1" 'BEGIN { printf "%.2f s", ms / 1000 }'; }

run_one() { # SIZE MODE WHO
        local n=$1 mode=$2 who=$3 table full add ep cpu0 cpu1 t0 extra=$((n + 100))
        netns_up || { echo "$name: network namespace setup failed"; return 1; }
        if [ "$who" = kube-proxy ]; then
                table=kube-proxy
                ip netns exec "$p" "$KP" --kubeconfig "$work/ns.kubeconfig" --hostname-override node-1 \
                        --proxy-mode "$mode" --cluster-cidr 10.244.0.0/16 --conntrack-max-per-core 0 \
                        --v 1 >"$work/$who.$mode.$n.log" 2>&1 &
        else
                table=svcenv
                ip netns exec "$p" "$SVCENV/svcenv-proxy" --kubeconfig "$work/ns.kubeconfig" --hostname-override node-1 \
                        --backend "$mode" --cluster-cidr 10.244.0.0/16 -v 1 >"$work/$who.$mode.$n.log" 2>&1 &
        fi
        pid=$! # ip netns exec execs: the proxy itself
        t0=$(now_ms)
        full=$(wait_for "$t0" present "$mode" $table "$(svc_ip $((n - 1)))")
        cpu0=$(cpu_s $pid)
        add=timeout ep=-
        if [ "$full" != timeout ]; then
                sleep 2 # a sync already requested runs first
                cpu0=$(cpu_s $pid)
                svc_json "$(ns_of 0)" $extra | cut -f2 >"$work/svc.json"
                slice_body $extra $((extra * EPS)) >"$work/slice.json"
                t0=$(now_ms)
                kapi post "/api/v1/namespaces/$(ns_of 0)/services" "$work/svc.json" >/dev/null &&
                        kapi post "/apis/discovery.k8s.io/v1/namespaces/$(ns_of 0)/endpointslices" "$work/slice.json" >/dev/null
                add=$(wait_for "$t0" present "$mode" $table "$(svc_ip $extra)")
                if [ "$mode" = iptables ]; then
                        sleep 2
                        local first=$(((n + 200 + RANDOM % 1000) * EPS * 7))
                        slice_body 0 $first >"$work/slice0.json"
                        local chain
                        chain=$(sep_chain "$(ns_of 0)" svc-0 "$(ep_ip $first)")
                        t0=$(now_ms)
                        kapi put "/apis/discovery.k8s.io/v1/namespaces/$(ns_of 0)/endpointslices/svc-0-x" "$work/slice0.json" >/dev/null
                        ep=$(wait_for "$t0" chain_present "$chain")
                fi
        fi
        cpu1=$(cpu_s $pid)
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        pid=
        # a restore still running after a timeout would outlive its proxy
        # (ip netns pids: only what runs in our namespace)
        ip netns pids "$p" 2>/dev/null | xargs -r kill 2>/dev/null
        kapi delete "/api/v1/namespaces/$(ns_of 0)/services/svc-$extra" >/dev/null 2>&1
        kapi delete "/apis/discovery.k8s.io/v1/namespaces/$(ns_of 0)/endpointslices/svc-$extra-x" >/dev/null 2>&1
        netns_down
        printf '%-8s %6d svc x %d ep  %-12s full %-10s add %-9s' "$mode" "$n" $EPS "$who" "$(fmt "$full")" "$(fmt "$add")"
        [ "$ep" = - ] || printf ' ep change %-9s' "$(fmt "$ep")"
        printf ' (CPU: %s s to the full load, %s s after)\n' "${cpu0:-?}" \
                "$(awk -v a="${cpu1:-0}" -v b="${cpu0:-0}" 'BEGIN { printf "%.1f", a - b }')"
}

# the veth end for the namespaces
ip link set "$p-x" up
echo "== $name: kube-proxy $("$KP" --version 2>/dev/null | awk '{print $2}') vs svcenv-proxy; iptables $(iptables --version | awk '{print $2, $3}'), nft $(nft --version | awk '{print $2}')"
for n in $SIZES; do
        grow_to "$n" || { echo "$name: loading $n services failed"; exit 1; }
        for mode in $MODES; do
                for who in kube-proxy svcenv-proxy; do
                        [ "$who" = kube-proxy ] && [ ! -x "$KP" ] && continue
                        run_one "$n" "$mode" "$who"
                done
        done
done
