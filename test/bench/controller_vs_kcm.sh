#!/usr/bin/env bash
# svcenv-controller vs kube-controller-manager (endpoint + endpointslice
# controllers only) on a real API server: initial sync time and peak RSS for
# BENCH_SERVICES Services with BENCH_PODS pods each, then the latency from a
# pod's Ready flip (patch-status sent) to the Endpoints event a watcher
# receives, over BENCH_FLIPS flips. Peak RSS is VmHWM; "RSS now" is VmRSS at
# that moment (after the sync, after the flips). Prints figures; asserts nothing.
#
#   BENCH_SERVICES=1000 BENCH_PODS=10 BENCH_FLIPS=60 test/bench/controller_vs_kcm.sh
#
# Uses KUBE_DIR when set (a running test/k8s control plane), else starts one.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SVCENV=${SVCENV:-$PWD/$BUILD/bin}
SERVICES=${BENCH_SERVICES:-1000}
PODS=${BENCH_PODS:-10}
FLIPS=${BENCH_FLIPS:-60}
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
        rm -rf "$work"
}
trap cleanup EXIT
$CONTROLPLANE stop-kcm "$KUBE_DIR" >/dev/null 2>&1
now() { echo "${EPOCHREALTIME/./}"; } # microseconds
run=b$$
n_ns=$(((SERVICES + PER_NS - 1) / PER_NS))
nss=()
for i in $(seq 1 $n_ns); do nss+=("$run-$i"); done

echo "== controller_vs_kcm: $SERVICES services x $PODS pods ($((SERVICES * PODS)) pods) in $n_ns namespaces"
t0=$(now)
kapi post /api/v1/nodes - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$run-node\",\"labels\":{\"topology.kubernetes.io/zone\":\"z\"}}}" >/dev/null
for ns in "${nss[@]}"; do
        printf '/api/v1/namespaces\t{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"}}\n' "$ns"
done | kbulk POST application/json
for s in $(seq 0 $((SERVICES - 1))); do
        printf '/api/v1/namespaces/%s/services\t{"apiVersion":"v1","kind":"Service","metadata":{"name":"s%d"},"spec":{"selector":{"app":"s%d"},"ports":[{"name":"http","port":80,"targetPort":8080}]}}\n' \
                "${nss[$((s / PER_NS))]}" $s $s
done | kbulk POST application/json
pod_ip() { echo "10.$((($1 >> 16) & 255)).$((($1 >> 8) & 255)).$(($1 & 255))"; }
for s in $(seq 0 $((SERVICES - 1))); do
        for p in $(seq 0 $((PODS - 1))); do
                printf '/api/v1/namespaces/%s/pods\t{"apiVersion":"v1","kind":"Pod","metadata":{"name":"s%d-%d","labels":{"app":"s%d"}},"spec":{"nodeName":"%s","containers":[{"name":"c","image":"x"}]}}\n' \
                        "${nss[$((s / PER_NS))]}" $s $p $s "$run-node"
        done
done | kbulk POST application/json
for s in $(seq 0 $((SERVICES - 1))); do
        for p in $(seq 0 $((PODS - 1))); do
                ip=$(pod_ip $((s * PODS + p + 65536)))
                printf '/api/v1/namespaces/%s/pods/s%d-%d/status\t{"status":{"phase":"Running","podIP":"%s","podIPs":[{"ip":"%s"}],"conditions":[{"type":"Ready","status":"True"}]}}\n' \
                        "${nss[$((s / PER_NS))]}" $s $p "$ip" "$ip"
        done
done | kbulk PATCH application/merge-patch+json
echo "objects created in $((($(now) - t0) / 1000000)) s"

count_all() { # count_all PATH: items in our namespaces (one list call)
        kapi get "$1" | jq --arg p "$run-" '[.items[] | select(.metadata.namespace | startswith($p))] | length'
}
rss_kb() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
now_rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
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
        until converged; do sleep 1; done
        echo "scale=2; ($(now) - $start) / 1000000" | bc
}

# flips NAME: Ready flips of pods, each timed until a watcher sees it
flips() {
        local name=$1 rv i s ns pod ip out=$work/$1.watch
        rv=$(kapi get /api/v1/endpoints?limit=1 | jq -r .metadata.resourceVersion)
        . "$KUBE_DIR/env"
        {
                curl -sN --cacert "$CA_FILE" -H "Authorization: Bearer $ADMIN_TOKEN" \
                        "$APISERVER_URL/api/v1/endpoints?watch=1&resourceVersion=$rv&timeoutSeconds=600" &
                echo $! >"$work/curl.pid"
                wait
        } | while IFS= read -r line; do
                printf '%s %s\n' "${EPOCHREALTIME/./}" "$line"
        done >"$out" &
        local watch_pid=$!
        sleep 1
        : >"$work/$name.flips"
        for i in $(seq 1 "$FLIPS"); do
                s=$(((i * 7919) % SERVICES))
                ns=${nss[$((s / PER_NS))]}
                pod=s$s-$((i % PODS))
                ip=$(pod_ip $((s * PODS + i % PODS + 65536)))
                echo "$(now) $ns s$s $ip False" >>"$work/$name.flips"
                kapi patch-status "$ns" "$pod" '{"status":{"conditions":[{"type":"Ready","status":"False"}]}}' >/dev/null
                sleep 0.3
                echo "$(now) $ns s$s $ip True" >>"$work/$name.flips"
                kapi patch-status "$ns" "$pod" '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}' >/dev/null
                sleep 0.3
        done
        sleep 2
        kill "$(cat "$work/curl.pid")" 2>/dev/null
        wait "$watch_pid"
        # latency of each flip: first event after it that shows the new state
        python3 - "$work/$name.flips" "$out" <<'EOF'
import json, sys
flips = [l.split() for l in open(sys.argv[1])]
events = []
for l in open(sys.argv[2]):
    t, j = l.split(' ', 1)
    try:
        o = json.loads(j)['object']
        nr = [a['ip'] for ss in o.get('subsets') or [] for a in ss.get('notReadyAddresses') or []]
        events.append((int(t), {'n': o['metadata']['namespace'], 's': o['metadata']['name'], 'nr': nr}))
    except ValueError:
        pass
lat = []
for t, ns, svc, ip, state in flips:
    t = int(t)
    for et, e in events:
        if et < t or e.get('n') != ns or e.get('s') != svc:
            continue
        if (ip in e['nr']) == (state == 'False'):
            lat.append((et - t) / 1000.0)
            break
lat.sort()
def q(p):
    return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float('nan')
print("  flips measured %d/%d: p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (len(lat), len(flips), q(0.5), q(0.99), lat[-1] if lat else float('nan')))
EOF
}

# --- svcenv-controller ---
t0=$(now)
"$SVCENV/svcenv-controller" --kubeconfig "$KUBE_DIR/kubeconfig" --leader-elect=false \
        --metrics-bind-address 127.0.0.1:0 -v 1 >"$work/svcenv.log" 2>&1 &
ctl_pid=$!
secs=$(wait_converged "$t0")
echo "svcenv-controller: initial sync (start to all Endpoints+slices written) $secs s, peak RSS $(($(rss_kb $ctl_pid) / 1024)) MB, RSS now $(($(now_rss_kb $ctl_pid) / 1024)) MB"
flips svcenv
echo "  peak RSS after the flips $(($(rss_kb $ctl_pid) / 1024)) MB, RSS now $(($(now_rss_kb $ctl_pid) / 1024)) MB"
kill -TERM $ctl_pid
wait $ctl_pid 2>/dev/null
ctl_pid=
wipe
sleep 2

# --- kube-controller-manager ---
t0=$(now)
$CONTROLPLANE start-kcm "$KUBE_DIR" >"$work/kcm.out" 2>&1 || cat "$work/kcm.out"
kcm_pid=$(. "$KUBE_DIR/env" && echo "$KCM_PID")
secs=$(wait_converged "$t0")
echo "kube-controller-manager: initial sync $secs s, peak RSS $(($(rss_kb $kcm_pid) / 1024)) MB, RSS now $(($(now_rss_kb $kcm_pid) / 1024)) MB"
flips kcm
echo "  peak RSS after the flips $(($(rss_kb $kcm_pid) / 1024)) MB, RSS now $(($(now_rss_kb $kcm_pid) / 1024)) MB"
$CONTROLPLANE stop-kcm "$KUBE_DIR" >/dev/null 2>&1
