#!/usr/bin/env bash
# svcenv-proxy against a real kube-apiserver, in network namespaces made
# here: Services and EndpointSlices written through the API become rules and
# real traffic; endpoint removal, a flushed nat table, /healthz, /metrics,
# the health-check node port, SIGTERM and --cleanup. Side by side, kube-proxy
# v1.36 (built by test/k8s) runs for the same Node in another namespace and
# the two iptables-save outputs must match after normalisation.
#
# The daemons run inside namespaces, which cannot reach the shared control
# plane on 127.0.0.1: this test starts its own with --extra-ip (the root end
# of the veth, an address made here) and --bind-extra-ip: it listens on
# that address only. Needs root.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/cli/lib.bash # TAP: ok, not_ok, check, until_ok
. test/integration/netns.bash # inns, must, netns_*
here=$PWD/test/e2e
netns_require proxy ip iptables-save curl python3 conntrack

p=px$$
A=$p-a B=$p-b C=$p-c B1=$p-b1 B2=$p-b2
HA=10.77.0.1 NA=10.77.0.2
tmp=$(mktemp -d /tmp/svcenv-px.XXXXXX)
KD=$tmp/kube
pids=()
cleanup() {
        for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
        for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
        test/k8s/controlplane stop "$KD" >/dev/null 2>&1
        for ns in "$A" "$B" "$C" "$B1" "$B2"; do ip netns del "$ns" 2>/dev/null; done
        ip link del "$p-va" 2>/dev/null
        ip link del "$p-vb" 2>/dev/null
        ip link del "$p-vc" 2>/dev/null
        [ -n "${PX_KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- network: A (svcenv-proxy), B (kube-proxy), C (a fresh svcenv-proxy),
# each with a veth to the root namespace; backends b1, b2 behind A ----
setup() {
        local k ns
        for ns in "$A" "$B" "$C" "$B1" "$B2"; do
                must ip netns add "$ns"
                must inns "$ns" ip link set lo up
        done
        k=0
        for ns in "$A" "$B" "$C"; do
                local v=$p-v${ns##*-}
                must ip link add "$v" type veth peer name eth0 netns "$ns"
                must ip addr add 10.7$((7 + k)).0.1/24 dev "$v"
                must ip link set "$v" up
                must inns "$ns" ip addr add 10.7$((7 + k)).0.2/24 dev eth0
                must inns "$ns" ip link set eth0 up
                [ $k -gt 0 ] && must inns "$ns" ip route add $HA/32 via 10.7$((7 + k)).0.1
                # service IPs routed somewhere so that local traffic reaches nat OUTPUT
                must inns "$ns" ip link add up0 type veth peer name up1
                must inns "$ns" ip link set up1 up
                must inns "$ns" ip link set up0 up
                must inns "$ns" ip route add 10.96.0.0/16 dev up0
                k=$((k + 1))
        done
        must inns "$A" sysctl -qw net.ipv4.ip_forward=1
        for k in 1 2; do
                ns=$p-b$k
                must ip link add "$p-e$k" netns "$A" type veth peer name eth0 netns "$ns"
                must inns "$A" ip addr add 10.244.$k.1/24 dev "$p-e$k"
                must inns "$A" ip link set "$p-e$k" up
                must inns "$ns" ip addr add 10.244.$k.2/24 dev eth0
                must inns "$ns" ip link set eth0 up
                must inns "$ns" ip route add default via 10.244.$k.1
        done
}
netns_setup setup
netns_backends "$p-b1" "$p-b2"

# ---- control plane reachable from the namespaces ----
netns_controlplane $HA "$tmp/ns.kubeconfig"

# ---- cluster objects ----
yaml_post() { kapi post "$1" "$2" >/dev/null; }
cat >"$tmp/node.yaml" <<EOF
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
status: {addresses: [{type: InternalIP, address: $NA}]}
EOF
cat >"$tmp/ns.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: px}
EOF
svc() { # svc NAME IP PROTO PORT [EXTRA-SPEC]
        cat >"$tmp/svc-$1.yaml" <<EOF
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: px}
spec: {clusterIP: $2, ports: [{name: p, protocol: $3, port: $4, targetPort: 8080${6:-}}]${5:-}}
EOF
        yaml_post /api/v1/namespaces/px/services "$tmp/svc-$1.yaml"
}
slice_yaml() { # slice_yaml SVC PROTO ENDPOINT...  (ENDPOINT = ip@node)
        local svc=$1 proto=$2
        shift 2
        local now
        now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
        cat <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: $svc-1
  namespace: px
  labels: {kubernetes.io/service-name: $svc}
  annotations: {endpoints.kubernetes.io/last-change-trigger-time: "$now"}
addressType: IPv4
ports: [{name: p, port: 8080, protocol: $proto}]
endpoints:
EOF
        for ep in "$@"; do
                echo "- {addresses: [${ep%@*}], nodeName: ${ep#*@}, conditions: {ready: true}}"
        done
}
slice_post() { slice_yaml "$@" >"$tmp/slice.yaml" && yaml_post /apis/discovery.k8s.io/v1/namespaces/px/endpointslices "$tmp/slice.yaml"; }
# the headless label: on a ClusterIP Service (proxied all the same), on a
# slice (unseen: its Service has no endpoints), as kube-proxy v1.36
headless_labels() {
        cat >"$tmp/svc-hlsvc.yaml" <<EOF
apiVersion: v1
kind: Service
metadata: {name: hlsvc, namespace: px, labels: {service.kubernetes.io/headless: ""}}
spec: {clusterIP: 10.96.100.14, ports: [{name: p, protocol: TCP, port: 80, targetPort: 8080}]}
EOF
        yaml_post /api/v1/namespaces/px/services "$tmp/svc-hlsvc.yaml" &&
                slice_post hlsvc TCP 10.244.1.2@node-a &&
                svc hlslice 10.96.100.15 TCP 80 &&
                slice_yaml hlslice TCP 10.244.1.2@node-a |
                sed 's#labels: {kubernetes.io/service-name: hlslice}#labels: {kubernetes.io/service-name: hlslice, service.kubernetes.io/headless: ""}#' \
                        >"$tmp/slice.yaml" &&
                yaml_post /apis/discovery.k8s.io/v1/namespaces/px/endpointslices "$tmp/slice.yaml"
}
slice_put() {
        slice_yaml "$@" >"$tmp/slice.yaml" &&
                kapi put "/apis/discovery.k8s.io/v1/namespaces/px/endpointslices/$1-1" "$tmp/slice.yaml" >/dev/null
}
objects() {
        yaml_post /api/v1/nodes "$tmp/node.yaml" &&
                yaml_post /api/v1/namespaces "$tmp/ns.yaml" &&
                svc web 10.96.100.10 TCP 80 &&
                svc dns 10.96.100.11 UDP 53 &&
                svc empty 10.96.100.12 TCP 80 &&
                svc lb 10.96.100.13 TCP 80 ", type: LoadBalancer, externalTrafficPolicy: Local, healthCheckNodePort: 32000" ", nodePort: 30080" &&
                slice_post web TCP 10.244.1.2@node-a 10.244.2.2@node-b &&
                slice_post dns UDP 10.244.1.2@node-a &&
                slice_post lb TCP 10.244.1.2@node-a &&
                headless_labels
}
check "Node, Services and EndpointSlices created through the API" objects

# ---- snapshots for --cleanup: A already has a rule of someone else's ----
inns "$A" iptables -N SOMEONE-ELSE
inns "$A" iptables -A INPUT -p tcp --dport 9999 -j SOMEONE-ELSE
own_lines() { # the chains and rules in NS, without counters and built-in policies
        inns "$1" iptables-save | grep -E '^(:|-A)' | grep -vE '^:[A-Z]+ (ACCEPT|DROP) ' |
                sed 's/ \[[0-9]*:[0-9]*\]$//' | sort
}
own_lines "$A" >"$tmp/before"

# ---- svcenv-proxy in A ----
start_proxy() { # start_proxy NS LOG [FLAGS]
        local ns=$1 log=$2
        shift 2
        ip netns exec "$ns" "$SVCENV/svcenv-proxy" --kubeconfig "$tmp/ns.kubeconfig" \
                --hostname-override node-a --cluster-cidr 10.244.0.0/16 -v "${PX_V:-2}" "$@" >"$log" 2>&1 &
        pids+=($!)
        last_pid=$!
}
start_proxy "$A" "$tmp/pxa.log"
pxa=$last_pid
healthz() { inns "$1" curl -s -o "$tmp/healthz.$1" -w '%{http_code}' http://127.0.0.1:10256/healthz; }
healthy() { [ "$(healthz "$1")" = 200 ]; }
# synced NS: the first full sync is applied (healthz is 200 before it, as kube-proxy's)
synced() {
        local v
        v=$(inns "$1" curl -s http://127.0.0.1:10249/metrics | awk '$1 == "svcenv_proxy_syncs_total{kind=\"full\"}" { print $2 }')
        [ "${v:-0}" -ge 1 ]
}
# generous: on a loaded machine the informers' first lists take a while
check "svcenv-proxy: first full sync applied" until_ok 90 synced "$A"
check "/healthz answers 200" healthy "$A"
# kube-proxy's JSON: encoding/json of its ProxyHealth, RFC 3339 times
body_ok() {
        grep -qE '^\{"lastUpdated":"[0-9-]+T[0-9:.]+(Z|[+-][0-9:]+)","currentTime":"[^"]+","nodeEligible":true,"healthy":true,"status":\{"IPv4":\{"lastUpdated":"[^"]+","healthy":true\}(,"IPv6":\{"lastUpdated":"[^"]+","healthy":true\})?\}\}$' "$tmp/healthz.$A"
}
check "/healthz body is kube-proxy's JSON (an IPv6 entry where the host has IPv6)" body_ok
body_ok || sed 's/^/# /' "$tmp/healthz.$A"
livez_json() { # the /livez body is valid JSON without nodeEligible
        inns "$A" curl -s http://127.0.0.1:10256/livez >"$tmp/livez.$A" &&
                python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d["healthy"] is True and "nodeEligible" not in d))' "$tmp/livez.$A"
}
check "/livez body is valid JSON, without nodeEligible" livez_json || sed 's/^/# /' "$tmp/livez.$A"

spread() { # spread NS PROTO IP PORT N NAMES...: every NAME answered, nothing failed
        local ns=$1 proto=$2 ip=$3 port=$4 count=$5
        shift 5
        inns "$ns" python3 "$here/netpeer.py" "$proto" "$ip" "$port" "$count" 1 >"$tmp/traffic" 2>&1
        ! grep -q ERR "$tmp/traffic" || return 1
        for b in "$@"; do grep -qx "$b" "$tmp/traffic" || return 1; done
        for b in b1 b2; do
                [[ " $* " == *" $b "* ]] || ! grep -qx "$b" "$tmp/traffic" || return 1
        done
}
check "TCP to the ClusterIP reaches both endpoints" until_ok 10 spread "$A" tcp 10.96.100.10 80 30 b1 b2
check "UDP to the ClusterIP reaches its endpoint" spread "$A" udp 10.96.100.11 53 5 b1
rejected() { inns "$A" python3 "$here/netpeer.py" tcp 10.96.100.12 80 1 1 >"$tmp/rej"; grep -q 'ERR' "$tmp/rej" || return 1; grep -qi 'refused' "$tmp/rej" || { sed 's/^/# /' "$tmp/rej"; return 1; }; }
check "a Service without endpoints is REJECTed" rejected
check "a ClusterIP Service labelled service.kubernetes.io/headless is proxied" \
        spread "$A" tcp 10.96.100.14 80 5 b1
refused() { inns "$A" python3 "$here/netpeer.py" tcp "$1" "$2" 1 1 >"$tmp/ref"; grep -qi 'refused' "$tmp/ref"; }
check "an EndpointSlice labelled service.kubernetes.io/headless is unseen (REJECT)" refused 10.96.100.15 80
hc() { inns "$A" curl -s -o "$tmp/hc" -w '%{http_code}' http://$NA:32000/; }
hc_ok() {
        [ "$(hc)" = 200 ] && [ "$(tr -d '\t\n' <"$tmp/hc")" = '{"service": {"namespace": "px","name": "lb"},"localEndpoints": 1,"serviceProxyHealthy": true}' ]
}
check "health-check node port: 200 with kube-proxy's body (1 local endpoint)" until_ok 5 hc_ok
metrics() { inns "$A" curl -s http://127.0.0.1:10249/metrics; }
metric() { metrics | awk -v m="$1" '$1 == m { print $2 }'; }
metrics_ok() {
        local c
        c=$(metric kubeproxy_sync_proxy_rules_duration_seconds_count)
        [ "${c:-0}" -ge 1 ] &&
                awk 'BEGIN { exit !(ARGV[1] > 1e9) }' "$(metric kubeproxy_sync_proxy_rules_last_timestamp_seconds)" &&
                [ "$(metric kubeproxy_network_programming_duration_seconds_count)" -ge 1 ]
}
check "/metrics: sync duration, last sync time, network programming latency" metrics_ok

# ---- an endpoint removed through the API ----
udp_before=$(metric svcenv_proxy_conntrack_deletions_total)
partial_before=$(metric 'svcenv_proxy_syncs_total{kind="partial"}')
slice_put web TCP 10.244.1.2@node-a
check "endpoint removed through the API: traffic goes to the other one only" until_ok 10 spread "$A" tcp 10.96.100.10 80 20 b1
partial_after=$(metric 'svcenv_proxy_syncs_total{kind="partial"}')
check "that change was a partial sync" [ "${partial_after:-0}" -gt "${partial_before:-0}" ]
inns "$A" python3 "$here/netpeer.py" udp 10.96.100.11 53 1 1 >/dev/null
slice_put dns UDP 10.244.2.2@node-b
ct_done() { [ "$(metric svcenv_proxy_conntrack_deletions_total)" -gt "${udp_before:-0}" ]; }
check "UDP endpoint replaced: its conntrack entries deleted, traffic moves" \
        until_ok 10 eval 'ct_done && spread "$A" udp 10.96.100.11 53 5 b2'
slice_put lb TCP 10.244.2.2@node-b
hc_down() { [ "$(hc)" = 503 ] && grep -q '"localEndpoints": 0' "$tmp/hc"; }
check "health-check node port: 503 once no endpoint is local" until_ok 5 hc_down
slice_put web TCP 10.244.1.2@node-a 10.244.2.2@node-b
check "endpoint back: both answer again" until_ok 10 spread "$A" tcp 10.96.100.10 80 30 b1 b2

bytes() { [ "$(metric svcenv_proxy_restore_bytes)" -gt 0 ] && [ "$(metric svcenv_proxy_restore_bytes)" -lt 4096 ]; }
check "that endpoint change wrote < 4 KiB of restore input ($(metric svcenv_proxy_restore_bytes) bytes)" bytes
# services added and removed by partial syncs (single -I/-D rules in KUBE-SERVICES)
svc aaa 10.96.100.5 TCP 80 && slice_post aaa TCP 10.244.2.2@node-b
svc zzz 10.96.100.99 TCP 80 ", type: NodePort" ", nodePort: 30099" && slice_post zzz TCP 10.244.1.2@node-a
check "service added by a partial sync: traffic flows" until_ok 10 spread "$A" tcp 10.96.100.5 80 10 b2
check "NodePort service added: traffic to the node port flows" until_ok 10 spread "$A" tcp $NA 30099 10 b1
kapi delete /api/v1/namespaces/px/services/aaa >/dev/null
kapi delete /apis/discovery.k8s.io/v1/namespaces/px/endpointslices/aaa-1 >/dev/null
# (grep -q would stop reading early: iptables-save's SIGPIPE fails the pipeline under pipefail)
gone() { ! inns "$A" iptables-save -t nat | grep 'px/aaa:p' >/dev/null; }
check "service deleted: its rules go" until_ok 10 gone

# ---- after these partial syncs, the rules equal a fresh full sync (C) ----
start_proxy "$C" "$tmp/pxc.log"
pxc=$last_pid
until_ok 30 synced "$C"
norm() { # iptables-save of NS, nat and filter, without counters and the canary, sorted
        inns "$1" iptables-save -t "$2" | grep -E "^(:|-A)" | grep -v -e SOMEONE-ELSE |
                sed 's/ \[[0-9]*:[0-9]*\]$//' | sort
}
same_as_fresh() {
        local t
        for t in nat filter; do
                norm "$A" $t >"$tmp/a.$t"
                norm "$C" $t >"$tmp/c.$t"
                diff -u "$tmp/c.$t" "$tmp/a.$t" >"$tmp/diff.$t" ||
                        { sed 's/^/# /' "$tmp/diff.$t" | head -30; return 1; }
        done
}
check "rules after partial syncs == a fresh full sync's (iptables-save nat+filter)" same_as_fresh
kill "$pxc" && wait "$pxc" 2>/dev/null

# ---- a failing iptables-restore (injected by a wrapper first on PATH) in C ----
mkdir -p "$tmp/bin"
printf '#!/bin/sh\n[ -e "%s" ] && { echo "injected failure" >&2; exit 1; }\nexec "%s" "$@"\n' \
        "$tmp/fail" "$(command -v iptables-restore)" >"$tmp/bin/iptables-restore"
chmod +x "$tmp/bin/iptables-restore"
PATH=$tmp/bin:$PATH start_proxy "$C" "$tmp/pxc2.log" --sync-period 2s
pxc=$last_pid
until_ok 30 synced "$C"
has_old_ep() { inns "$C" iptables-save -t nat | grep "px/web:p -> 10.244.2.2" >/dev/null; }
until_ok 10 has_old_ep
touch "$tmp/fail"
slice_put web TCP 10.244.1.2@node-a
cmetric() { inns "$C" curl -s http://127.0.0.1:10249/metrics | awk -v m="$1" '$1 == m { print $2 }'; }
unhealthy() { [ "$(healthz "$C")" = 503 ] && grep -q '"nodeEligible":true,"healthy":false' "$tmp/healthz.$C"; }
check "restore failing: /healthz turns 503 once the change is 2 x sync-period late" until_ok 10 unhealthy
check "... the previous rules stay (the removed endpoint is still programmed)" \
        has_old_ep
check "... failures counted in kubeproxy_sync_proxy_rules_iptables_restore_failures_total" \
        eval '[ "$(cmetric kubeproxy_sync_proxy_rules_iptables_restore_failures_total)" -ge 1 ]'
full_before=$(cmetric 'svcenv_proxy_syncs_total{kind="full"}')
rm -f "$tmp/fail"
recovered() { healthy "$C" && ! has_old_ep; }
check "restore working again: a full resync programs the change, /healthz 200" until_ok 10 recovered
fulls() { [ "$(cmetric 'svcenv_proxy_syncs_total{kind="full"}')" -gt "$full_before" ]; }
check "... and it was a full sync" fulls
kill "$pxc" && wait "$pxc" 2>/dev/null
slice_put web TCP 10.244.1.2@node-a 10.244.2.2@node-b

# ---- conntrack not installed (C with a PATH of ip and the packet-filter tools only) ----
mkdir -p "$tmp/noct"
for t in ip iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore nft; do
        p=$(command -v "$t") && ln -sf "$p" "$tmp/noct/$t"
done
PATH=$tmp/noct start_proxy "$C" "$tmp/pxc3.log"
pxc=$last_pid
until_ok 30 synced "$C"
ct_missing() { [ "$(cmetric 'svcenv_proxy_tool_missing_total{tool="conntrack"}')" -ge "$1" ]; }
ct0=$(cmetric 'svcenv_proxy_tool_missing_total{tool="conntrack"}') # the first sync may count some
slice_put dns UDP 10.244.1.2@node-a # b2 -> b1: b2's flows would be deleted
until_ok 10 ct_missing $((${ct0:-0} + 1))
slice_put dns UDP 10.244.2.2@node-b # and back: counted again, not logged again
check "conntrack missing: every stale flow left is counted (svcenv_proxy_tool_missing_total)" \
        until_ok 10 ct_missing $((${ct0:-0} + 2))
check "... and logged once" [ "$(grep -c 'conntrack is not installed' "$tmp/pxc3.log")" = 1 ]
kill "$pxc" && wait "$pxc" 2>/dev/null

# ---- nat flushed under us: repaired long before the 30 s sync period ----
repairs_before=$(metric svcenv_proxy_canary_resyncs_total)
inns "$A" iptables -t nat -F
check "iptables -t nat -F: detected and repaired by the next sync" \
        until_ok 8 spread "$A" tcp 10.96.100.10 80 20 b1 b2
check "the repair was a canary/jump-check full resync" [ "$(metric svcenv_proxy_canary_resyncs_total)" -gt "${repairs_before:-0}" ]
repairs_before=$(metric svcenv_proxy_canary_resyncs_total)
# (iptables-nft may call the chain incompatible while the daemon touches mangle: retry)
until_ok 5 inns "$A" iptables -t mangle -X KUBE-PROXY-CANARY 2>/dev/null
canary_back() {
        inns "$A" iptables -t mangle -S KUBE-PROXY-CANARY >/dev/null 2>&1 &&
                [ "$(metric svcenv_proxy_canary_resyncs_total)" -gt "${repairs_before:-0}" ]
}
check "canary chain deleted: noticed, full resync recreates it" until_ok 8 canary_back

# health_answer NS PATH: the status, the content headers and the body with
# its RFC 3339 times as TIME (no two answers share them)
health_answer() {
        inns "$1" curl -s -D "$tmp/ha.hdr" -o "$tmp/ha.body" -w '%{http_code}\n' "http://127.0.0.1:10256$2"
        tr -d '\r' <"$tmp/ha.hdr" | grep -iE '^(content-type|x-content-type-options):' | tr 'A-Z' 'a-z' | sort
        sed -E 's/"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})"/"TIME"/g' "$tmp/ha.body"
        echo
}
# same_health NS-SVCENV NS-KUBE-PROXY. kube-proxy runs an IPv6 proxier on
# this IPv4-only node too (issue 16, "IPv6 base rules"); while svcenv-proxy
# runs IPv4 alone, the IPv6 entry of kube-proxy's status is left out, said.
same_health() {
        local path
        for path in /healthz /livez; do
                health_answer "$1" $path >"$tmp/ha.svcenv"
                health_answer "$2" $path >"$tmp/ha.kube-proxy"
                if ! grep -q '"IPv6":' "$tmp/ha.svcenv" && grep -q '"IPv6":' "$tmp/ha.kube-proxy"; then
                        echo "# $path: kube-proxy's IPv6 status entry left out (svcenv-proxy runs IPv4 only)"
                        sed -i -E 's/,"IPv6":\{"lastUpdated":"TIME","healthy":(true|false)\}//' "$tmp/ha.kube-proxy"
                fi
                diff -u "$tmp/ha.kube-proxy" "$tmp/ha.svcenv" >"$tmp/ha.diff" ||
                        { echo "# $path:"; sed 's/^/# /' "$tmp/ha.diff"; return 1; }
        done
}

# ---- side by side: kube-proxy v1.36 for the same Node in B ----
if [ -x "$BIN_DIR/kube-proxy" ]; then
        ip netns exec "$B" "$BIN_DIR/kube-proxy" --kubeconfig "$tmp/ns.kubeconfig" \
                --hostname-override node-a --proxy-mode iptables --cluster-cidr 10.244.0.0/16 \
                --conntrack-max-per-core 0 --v 2 >"$tmp/kube-proxy.log" 2>&1 &
        kp=$!
        pids+=($kp)
        check "kube-proxy v1.36 syncs in its namespace" until_ok 60 healthy "$B"
        sleep 2 # its first sync may be followed by a second
        side_by_side() {
                local t
                for t in nat filter; do
                        norm "$A" $t >"$tmp/a.$t"
                        norm "$B" $t >"$tmp/b.$t"
                        diff -u "$tmp/b.$t" "$tmp/a.$t" >"$tmp/sbs.$t" ||
                                { sed 's/^/# /' "$tmp/sbs.$t" | head -40; return 1; }
                done
        }
        check "iptables-save nat+filter: svcenv-proxy == kube-proxy (sorted, no counters, no canary)" side_by_side
        # an IPv4-only node: both write their IPv6 base chains all the same
        norm6() { inns "$1" ip6tables-save | grep -E "^(\*|:|-A)" | grep -v CANARY | sed 's/ \[[0-9]*:[0-9]*\]$//' | sort; }
        side_by_side6() {
                norm6 "$A" >"$tmp/a.6"
                norm6 "$B" >"$tmp/b.6"
                grep -q KUBE-SERVICES "$tmp/b.6" && diff -u "$tmp/b.6" "$tmp/a.6" >"$tmp/sbs.6" ||
                        { sed 's/^/# /' "$tmp/sbs.6" | head -40; return 1; }
        }
        check "ip6tables-save on the IPv4-only node: svcenv-proxy == kube-proxy" side_by_side6
        check "/healthz and /livez, synced: svcenv-proxy == kube-proxy (times aside)" \
                same_health "$A" "$B"
        kill "$kp" 2>/dev/null && wait "$kp" 2>/dev/null

        # ---- never synced: a user that may read Nodes but not Services ----
        kapi post /apis/rbac.authorization.k8s.io/v1/clusterroles - >/dev/null <<<'{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"px-nodes-only"},"rules":[{"apiGroups":[""],"resources":["nodes"],"verbs":["get","list","watch"]}]}'
        kapi post /apis/rbac.authorization.k8s.io/v1/clusterrolebindings - >/dev/null <<<'{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"px-nodes-only"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"px-nodes-only"},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"limited"}]}'
        sed "s#server: .*#server: https://$HA:$APISERVER_PORT#" "$KD/kubeconfig-limited" >"$tmp/limited.kubeconfig"
        ip netns exec "$B" "$BIN_DIR/kube-proxy" --kubeconfig "$tmp/limited.kubeconfig" \
                --hostname-override node-a --proxy-mode iptables --cluster-cidr 10.244.0.0/16 \
                --conntrack-max-per-core 0 --v 2 >"$tmp/kube-proxy-unsynced.log" 2>&1 &
        kp=$!
        pids+=($kp)
        start_proxy "$C" "$tmp/pxc-unsynced.log" --kubeconfig "$tmp/limited.kubeconfig"
        pxc=$last_pid
        answers() { [ "$(healthz "$B")" != 000 ] && [ "$(healthz "$C")" != 000 ]; }
        until_ok 60 answers
        check "/healthz and /livez, never synced (Services forbidden): svcenv-proxy == kube-proxy" \
                same_health "$C" "$B"
        kill "$kp" "$pxc" 2>/dev/null
        wait "$kp" "$pxc" 2>/dev/null

        # ---- a Node that does not exist: /healthz 503 (kube-proxy waits 30 s for it) ----
        ip netns exec "$B" "$BIN_DIR/kube-proxy" --kubeconfig "$tmp/limited.kubeconfig" \
                --hostname-override node-x --proxy-mode iptables --cluster-cidr 10.244.0.0/16 \
                --conntrack-max-per-core 0 --v 2 >"$tmp/kube-proxy-nonode.log" 2>&1 &
        kp=$!
        pids+=($kp)
        start_proxy "$C" "$tmp/pxc-nonode.log" --kubeconfig "$tmp/limited.kubeconfig" \
                --hostname-override node-x
        pxc=$last_pid
        until_ok 90 answers
        check "no such Node: /healthz 503 (nodeEligible false), /livez 200, as kube-proxy" \
                eval '[ "$(healthz "$C")" = 503 ] && same_health "$C" "$B"'
        kill "$kp" "$pxc" 2>/dev/null
        wait "$kp" "$pxc" 2>/dev/null
else
        not_ok "kube-proxy binary in BIN_DIR ($BIN_DIR)"
fi

# ---- SIGTERM, then --cleanup ----
kill -TERM "$pxa"
stopped() { ! kill -0 "$pxa" 2>/dev/null; }
check "SIGTERM: svcenv-proxy exits" until_ok 5 stopped
wait "$pxa"
check "... with status 0" [ $? -eq 0 ]
check "--cleanup exits 0" inns "$A" "$SVCENV/svcenv-proxy" --cleanup
own_lines "$A" >"$tmp/after"
same_before() { diff -u "$tmp/before" "$tmp/after" >"$tmp/cleanup.diff" || { sed 's/^/# /' "$tmp/cleanup.diff" | head -20; return 1; }; }
check "--cleanup leaves exactly what was there before (iptables-save)" same_before
# nftables backend: its table made, then removed by --cleanup
start_proxy "$A" "$tmp/pxn.log" --backend nftables
pxn=$last_pid
check "svcenv-proxy --backend nftables syncs" until_ok 90 eval 'synced "$A" && inns "$A" nft list table ip svcenv >/dev/null 2>&1'
check "nftables: TCP to the ClusterIP reaches both endpoints" until_ok 10 spread "$A" tcp 10.96.100.10 80 30 b1 b2
# cluster-ips-check, the range from the API server's own ServiceCIDR "kubernetes"
check "nftables: a port the ClusterIP lacks is refused (cluster-ips-check)" refused 10.96.100.10 81
# the ServiceCIDR informer's list may land after the first sync: wait for its resync
check "nftables: the ServiceCIDR from the API server is dropped when unallocated" \
        until_ok 30 eval 'inns "$A" nft list chain ip svcenv cluster-ips-check | grep -q "ip daddr 10.96.0.0/16 drop"' 
slice_put web TCP 10.244.2.2@node-b
check "nftables: endpoint removed through the API, traffic to the other only" until_ok 10 spread "$A" tcp 10.96.100.10 80 20 b2
svc bbb 10.96.100.6 TCP 80 && slice_post bbb TCP 10.244.1.2@node-a
check "nftables: service added (one map element), traffic flows" until_ok 10 spread "$A" tcp 10.96.100.6 80 10 b1
repairs_before=$(metric svcenv_proxy_canary_resyncs_total)
inns "$A" nft flush ruleset
check "nftables: nft flush ruleset detected and repaired by the next sync" \
        until_ok 8 spread "$A" tcp 10.96.100.10 80 10 b2
check "... as a canary full resync" [ "$(metric svcenv_proxy_canary_resyncs_total)" -gt "${repairs_before:-0}" ]
repairs_before=$(metric svcenv_proxy_canary_resyncs_total)
inns "$A" nft flush table ip svcenv
check "nftables: nft flush table (chains kept, rules gone) repaired too" \
        until_ok 8 spread "$A" tcp 10.96.100.6 80 10 b1
check "... as a canary full resync" [ "$(metric svcenv_proxy_canary_resyncs_total)" -gt "${repairs_before:-0}" ]
kill "$pxn" && wait "$pxn" 2>/dev/null
inns "$A" "$SVCENV/svcenv-proxy" --cleanup
check "--cleanup removes the nftables table" eval '! inns "$A" nft list table ip svcenv >/dev/null 2>&1'
# ---- the userspace mode against the API: the Node and the syncs reach /healthz ----
start_proxy "$A" "$tmp/pxu.log" --mode userspace
pxu=$last_pid
us_healthy() { healthy "$A" && grep -q '"nodeEligible":true,"healthy":true' "$tmp/healthz.$A"; }
check "userspace: /healthz 200, the Node seen (nodeEligible true)" until_ok 90 us_healthy
check "userspace: TCP to the ClusterIP through the proxy" until_ok 10 spread "$A" tcp 10.96.100.10 80 10 b2
# (grep reads it all: a grep -q that quits early kills curl with SIGPIPE,
# which pipefail takes for a failure)
us_picks() { metrics | grep '^svcenv_proxy_scheduler_picks_total{service="px/web:p",protocol="TCP",endpoint="10.244.2.2:8080",scheduler="rr"} [1-9]' >/dev/null; }
check "userspace: /metrics counts the scheduler's picks per endpoint" until_ok 5 us_picks
kill "$pxu" && wait "$pxu" 2>/dev/null
inns "$A" "$SVCENV/svcenv-proxy" --cleanup
