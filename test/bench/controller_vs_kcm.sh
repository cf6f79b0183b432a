#!/usr/bin/env bash
# svcenv-controller vs kube-controller-manager (endpoint + endpointslice
# controllers only) on a real API server: initial sync time and peak RSS for
# BENCH_SERVICES Services with BENCH_PODS pods each, then the latency from a
# pod's Ready flip (patch sent) to the Endpoints event a watcher receives,
# for BENCH_FLIPS flips at BENCH_FLIP_RATE per second (test/bench/flips.py).
# Peak RSS is VmHWM; "RSS now" is VmRSS at that moment. Prints figures;
# asserts nothing.
#
#   BENCH_SERVICES=1000 BENCH_PODS=10 BENCH_FLIPS=600 test/bench/controller_vs_kcm.sh
#
# Uses KUBE_DIR when set (a running test/k8s control plane), else starts one.
# For the issue's scale (10,000 x 15) creating the objects takes minutes:
# BENCH_RUN=NAME names them, and a later run with the same NAME and
# KUBE_DIR reuses them (BENCH_KEEP=1 keeps them at the end);
# BENCH_ONLY=svcenv|kcm runs one side.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SVCENV=${SVCENV:-$PWD/$BUILD/bin}
SERVICES=${BENCH_SERVICES:-1000}
PODS=${BENCH_PODS:-10}
FLIPS=${BENCH_FLIPS:-600}
FLIP_RATE=${BENCH_FLIP_RATE:-100}
ONLY=${BENCH_ONLY:-both}
# Client rate limits: at the defaults (ours 40 qps in all, KCM 20 per
# controller) 100 flips/s (200 writes/s) queue up behind the limiter on both
# sides; BENCH_QPS gives each side's clients room (KCM: per controller).
QPS=${BENCH_QPS:-500}
PER_NS=100
CONTROLPLANE=test/k8s/controlplane
work=$(mktemp -d)
own_cp=
if [ -z "${KUBE_DIR:-}" ]; then
        KUBE_DIR=$work/kube
        mkdir -p "$KUBE_DIR"
        $CONTROLPLANE start "$KUBE_DIR" >"$work/cp.out" 2>&1 || { cat "$work/cp.out"; exit 1; }
        own_cp=1
fi
export KUBE_DIR
. test/integration/bulk.bash
kapi() { test/k8s/kapi "$KUBE_DIR" "$@"; }
ctl_pid=
cleanup() {
        [ -n "$ctl_pid" ] && kill -TERM "$ctl_pid" 2>/dev/null
        $CONTROLPLANE stop-kcm "$KUBE_DIR" >/dev/null 2>&1
        [ -n "$own_cp" ] && $CONTROLPLANE stop "$KUBE_DIR" >/dev/null 2>&1
        [ -z "$own_cp" ] && [ -z "${BENCH_KEEP:-}" ] && for ns in "${nss[@]}"; do
                kapi delete "/api/v1/namespaces/$ns" >/dev/null 2>&1
        done
        rm -rf "$work"
}
trap cleanup EXIT
$CONTROLPLANE stop-kcm "$KUBE_DIR" >/dev/null 2>&1
now() { echo "${EPOCHREALTIME/./}"; } # microseconds
run=${BENCH_RUN:-b$$}
n_ns=$(((SERVICES + PER_NS - 1) / PER_NS))
nss=()
for i in $(seq 1 $n_ns); do nss+=("$run-$i"); done

echo "== controller_vs_kcm: $SERVICES services x $PODS pods ($((SERVICES * PODS)) pods) in $n_ns namespaces"
# pod_ip N: sets $ip to 10.x.y.z for number N (no subshell: 150,000 calls)
pod_ip() { ip="10.$((($1 >> 16) & 255)).$((($1 >> 8) & 255)).$(($1 & 255))"; }
for ((s = 0; s < SERVICES; s++)); do
        for ((p = 0; p < PODS; p++)); do
                pod_ip $((s * PODS + p + 65536))
                echo "${nss[$((s / PER_NS))]} s$s-$p s$s $ip"
        done
done >"$work/pods"
if kapi get "/api/v1/namespaces/${nss[$((n_ns - 1))]}" >/dev/null 2>&1 &&
        [ "$(kapi get "/api/v1/namespaces/${nss[$((n_ns - 1))]}/pods/s$((SERVICES - 1))-$((PODS - 1))" 2>/dev/null | jq -r .status.podIP)" != null ]; then
        echo "objects of run $run exist: reused"
else
t0=$(now)
kapi post /api/v1/nodes - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$run-node\",\"labels\":{\"topology.kubernetes.io/zone\":\"z\"}}}" >/dev/null
for ns in "${nss[@]}"; do
        printf '/api/v1/namespaces\t{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"}}\n' "$ns"
done | kbulk POST application/json
for ((s = 0; s < SERVICES; s++)); do
        printf '/api/v1/namespaces/%s/services\t{"apiVersion":"v1","kind":"Service","metadata":{"name":"s%d"},"spec":{"selector":{"app":"s%d"},"ports":[{"name":"http","port":80,"targetPort":8080}]}}\n' \
                "${nss[$((s / PER_NS))]}" $s $s
done | kbulk POST application/json
for ((s = 0; s < SERVICES; s++)); do
        for ((p = 0; p < PODS; p++)); do
                printf '/api/v1/namespaces/%s/pods\t{"apiVersion":"v1","kind":"Pod","metadata":{"name":"s%d-%d","labels":{"app":"s%d"}},"spec":{"nodeName":"%s","containers":[{"name":"c","image":"x"}]}}\n' \
                        "${nss[$((s / PER_NS))]}" $s $p $s "$run-node"
        done
done | kbulk POST application/json
for ((s = 0; s < SERVICES; s++)); do
        for ((p = 0; p < PODS; p++)); do
                pod_ip $((s * PODS + p + 65536))
                printf '/api/v1/namespaces/%s/pods/s%d-%d/status\t{"status":{"phase":"Running","podIP":"%s","podIPs":[{"ip":"%s"}],"conditions":[{"type":"Ready","status":"True"}]}}\n' \
                        "${nss[$((s / PER_NS))]}" $s $p "$ip" "$ip"
        done
done | kbulk PATCH application/merge-patch+json
echo "objects created in $((($(now) - t0) / 1000000)) s"
fi

count_all() { # count_all PATH: items in our namespaces (one list call)
        kapi get "$1" | jq --arg p "$run-" '[.items[] | select(.metadata.namespace | startswith($p))] | length'
}
rss_kb() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
wipe() { # delete every Endpoints and EndpointSlice of our namespaces
        for ns in "${nss[@]}"; do
                kapi delete /api/v1/namespaces/$ns/endpoints >/dev/null
                kapi delete /apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices >/dev/null
        done
}
# converged: every Service has its Endpoints with all its pods, and a slice
converged() {
        [ "$(kapi get /api/v1/endpoints | jq --arg p "$run-" --argjson n "$PODS" '[.items[] | select((.metadata.namespace | startswith($p)) and ([.subsets[]?.addresses[]?] | length) == $n)] | length')" = "$SERVICES" ] &&
                [ "$(count_all /apis/discovery.k8s.io/v1/endpointslices)" -ge "$SERVICES" ]
}
wait_converged() { # prints seconds
        local start=$1
        until converged; do sleep 2; done
        echo "scale=2; ($(now) - $start) / 1000000" | bc
}

# flips: Ready flips at FLIP_RATE/s, each timed until a watcher sees it
flips() { python3 test/bench/flips.py "$KUBE_DIR" "$FLIP_RATE" "$FLIPS" "$work/pods"; }
rss_now_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

# --- svcenv-controller ---
if [ "$ONLY" != kcm ]; then
wipe
t0=$(now)
"$SVCENV/svcenv-controller" --kubeconfig "$KUBE_DIR/kubeconfig" --leader-elect=false \
        --metrics-bind-address 127.0.0.1:0 --kube-api-qps "$QPS" --kube-api-burst $((QPS * 2)) \
        -v 1 >"$work/svcenv.log" 2>&1 &
ctl_pid=$!
secs=$(wait_converged "$t0")
echo "svcenv-controller: initial sync (start to all Endpoints+slices written) $secs s, peak RSS $(($(rss_kb $ctl_pid) / 1024)) MB, RSS now $(($(rss_now_kb $ctl_pid) / 1024)) MB"
flips
echo "  peak RSS after the flips $(($(rss_kb $ctl_pid) / 1024)) MB, RSS now $(($(rss_now_kb $ctl_pid) / 1024)) MB, CPU $(ps -o cputime= -p $ctl_pid)"
kill -TERM $ctl_pid
wait $ctl_pid 2>/dev/null
ctl_pid=
fi

# --- kube-controller-manager ---
if [ "$ONLY" != svcenv ]; then
wipe
sleep 2
t0=$(now)
KCM_SYNC_TIMEOUT=600 KCM_EXTRA_ARGS="--kube-api-qps=$QPS --kube-api-burst=$((QPS * 2))" \
        $CONTROLPLANE start-kcm "$KUBE_DIR" >"$work/kcm.out" 2>&1 || cat "$work/kcm.out"
kcm_pid=$(. "$KUBE_DIR/env" && echo "$KCM_PID")
secs=$(wait_converged "$t0")
echo "kube-controller-manager: initial sync $secs s, peak RSS $(($(rss_kb $kcm_pid) / 1024)) MB, RSS now $(($(rss_now_kb $kcm_pid) / 1024)) MB"
flips
echo "  peak RSS after the flips $(($(rss_kb $kcm_pid) / 1024)) MB, RSS now $(($(rss_now_kb $kcm_pid) / 1024)) MB, CPU $(ps -o cputime= -p $kcm_pid)"
$CONTROLPLANE stop-kcm "$KUBE_DIR" >/dev/null 2>&1
fi
