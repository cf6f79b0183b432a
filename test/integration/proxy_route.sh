#!/usr/bin/env bash
# Per-Service routing online: svcenv-proxy --kubeconfig in iptables and in
# nftables mode against a real kube-apiserver, in network namespaces made
# here (a client, the node, two backends). A Service created with
# svcenv.io/scheduler: lc gets redirects and no kernel Service rules, and
# the client's traffic is answered through the proxy; a plain Service
# annotated by a PATCH moves to the proxy (the time from PATCH to redirect
# is printed), and back when the annotation is removed; `svcenv rules` and
# `svcenv trace --kubeconfig` agree with what the daemon applied; an invalid
# value keeps kube-proxy's rules and is logged once. The offline twin is
# test/e2e/proxy_route.sh.
#
# The daemon runs inside a namespace, which cannot reach the shared control
# plane on 127.0.0.1: this test starts its own on an address of the root end
# of a veth made here (--extra-ip, --bind-extra-ip), as proxy.sh. Needs root.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/cli/lib.bash # TAP: ok, not_ok, check, until_ok
. test/integration/netns.bash # inns, must, netns_*
here=$PWD/test/e2e
netns_require proxy_route ip iptables-save nft curl python3

p=pr$$
NODE=$p-n CL=$p-cl
HA=10.81.0.1 # the API server's address, in the root namespace
NA=10.99.0.1 # the node's address, towards the client
tmp=$(mktemp -d /tmp/svcenv-pr.XXXXXX)
KD=$tmp/kube
pids=()
cleanup() {
        for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
        for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
        test/k8s/controlplane stop "$KD" >/dev/null 2>&1
        for ns in "$NODE" "$CL" "$p-b1" "$p-b2" "$p-s"; do ip netns del "$ns" 2>/dev/null; done
        ip link del "$p-v" 2>/dev/null
        [ -n "${PR_KEEP:-}" ] && echo "# kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

setup() {
        local k ns
        for ns in "$NODE" "$CL" "$p-b1" "$p-b2"; do
                must ip netns add "$ns"
                must inns "$ns" ip link set lo up
        done
        must ip link add "$p-v" type veth peer name eth0 netns "$NODE"
        must ip addr add $HA/24 dev "$p-v"
        must ip link set "$p-v" up
        must inns "$NODE" ip addr add 10.81.0.2/24 dev eth0
        must inns "$NODE" ip link set eth0 up
        must inns "$NODE" sysctl -qw net.ipv4.ip_forward=1
        must ip link add vc netns "$CL" type veth peer name vn netns "$NODE"
        must inns "$CL" ip addr add 10.99.0.2/24 dev vc
        must inns "$CL" ip link set vc up
        must inns "$CL" ip route add default via $NA
        must inns "$NODE" ip addr add $NA/24 dev vn
        must inns "$NODE" ip link set vn up
        # the service range routed somewhere, as a default route would
        must inns "$NODE" ip link add up0 type veth peer name up1
        must inns "$NODE" ip link set up1 up
        must inns "$NODE" ip link set up0 up
        must inns "$NODE" ip route add 10.96.0.0/16 dev up0
        for k in 1 2; do
                ns=$p-b$k
                must ip link add eth0 netns "$ns" type veth peer name vb$k netns "$NODE"
                must inns "$NODE" ip addr add 10.244.$k.1/24 dev vb$k
                must inns "$NODE" ip link set vb$k up
                must inns "$ns" ip addr add 10.244.$k.2/24 dev eth0
                must inns "$ns" ip link set eth0 up
                must inns "$ns" ip route add default via 10.244.$k.1
        done
}
netns_setup setup
netns_backends "$p-b1" "$p-b2"

kc=$tmp/ns.kubeconfig
netns_controlplane $HA "$kc"

# ---- cluster objects ----
post() { kapi post "$1" - >/dev/null; }
svc() { # svc NAME IP [SCHEDULER]: a TCP Service, port 80 -> 8080, and its slice of b1, b2
        local ann=
        [ -n "${3:-}" ] && ann=", annotations: {svcenv.io/scheduler: \"$3\"}"
        # the slice first: a routed port never meets the proxy without its endpoints
        post /apis/discovery.k8s.io/v1/namespaces/rt/endpointslices <<EOF &&
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: $1-1, namespace: rt, labels: {kubernetes.io/service-name: $1}}
addressType: IPv4
ports: [{name: p, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.244.1.2], nodeName: node-a, conditions: {ready: true}}
- {addresses: [10.244.2.2], nodeName: node-a, conditions: {ready: true}}
EOF
                post /api/v1/namespaces/rt/services <<EOF
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: rt$ann}
spec: {clusterIP: $2, ports: [{name: p, protocol: TCP, port: 80, targetPort: 8080}]}
EOF
}
objects() {
        post /api/v1/nodes <<EOF &&
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
status: {addresses: [{type: InternalIP, address: $NA}]}
EOF
                post /api/v1/namespaces <<<'{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"rt"}}' &&
                svc plain 10.96.101.21
}
check "Node, namespace, a plain Service and its slice created through the API" objects
# annotate NAME VALUE|null: a JSON merge patch of svcenv.io/scheduler
annotate() {
        local v=null
        [ "$2" = null ] || v="\"$2\""
        kapi patch "/api/v1/namespaces/rt/services/$1" \
                "{\"metadata\":{\"annotations\":{\"svcenv.io/scheduler\":$v}}}" >/dev/null
}

# ---- what the node has ----
metrics() { inns "$NODE" curl -s http://127.0.0.1:10249/metrics; }
conns() { # conns SERVICE-PORT: svcenv_proxy_connections_total of it (0 when absent)
        metrics | awk -v n="svcenv_proxy_connections_total{service=\"$1\"" 'index($0, n) == 1 { v += $2 } END { print v + 0 }'
}
synced() {
        local v
        v=$(metrics | awk '$1 == "svcenv_proxy_syncs_total{kind=\"full\"}" { print $2 }')
        [ "${v:-0}" -ge 1 ]
}
# the redirect rules of NODE, in either form (grep -q would stop reading
# early: the writer's SIGPIPE fails the pipeline under pipefail)
redirects() {
        { inns "$NODE" iptables-save -t nat; inns "$NODE" nft list ruleset; } 2>/dev/null |
                grep -E 'REDIRECT|redirect to|TPROXY|tproxy'
}
# kube-proxy's rules of NODE that name VIP (service chains and map elements)
kernel_rules_for() {
        { inns "$NODE" iptables-save -t nat; inns "$NODE" nft list table ip svcenv; } 2>/dev/null |
                grep -F -- "$1" | grep -v -E 'REDIRECT|redirect to'
}
# the service chains of rt/NAME: KUBE-SVC-* (iptables), service-* (nft)
svc_chains() {
        { inns "$NODE" iptables-save -t nat; inns "$NODE" nft list table ip svcenv; } 2>/dev/null |
                grep -E "^:KUBE-SVC-|chain service-" | grep -c -F "$1"
}
routed() { [ -n "$(redirects | grep -F "$1")" ] && [ -z "$(kernel_rules_for "$1")" ]; }
in_kernel() { [ -z "$(redirects | grep -F "$1")" ] && [ -n "$(kernel_rules_for "$1")" ]; }
# answered VIP COUNT: every connection from the client answered by b1 or b2
answered() {
        inns "$CL" python3 "$here/netpeer.py" tcp "$1" 80 "$2" 2 >"$tmp/traffic" 2>&1
        [ "$(grep -c -E '^b[12]$' "$tmp/traffic")" -eq "$2" ] ||
                {
                        echo "# $1: $(sort "$tmp/traffic" | uniq -c | tr -s ' \n' ' ')"
                        metrics | grep -E '^svcenv_proxy_[a-z_]*(fail|retr|error|connections_total|picks)' |
                                grep -v ' 0$' | sed 's/^/#   /' | head -20
                        return 1
                }
}
now_ms() { date +%s%3N; }
# svcenv rules / trace online, as the daemon is configured
rules() {
        "$SVCENV/svcenv" rules --kubeconfig "$kc" --node node-a --cluster-cidr 10.244.0.0/16 \
                --backend "$mode" --ip-family ipv4 2>"$tmp/rules.err"
}
trace() { # trace VIP: the verdict of svcenv trace -o json
        "$SVCENV/svcenv" trace --kubeconfig "$kc" --node node-a --cluster-cidr 10.244.0.0/16 \
                --mode "$mode" --from 10.99.0.2 --to "$1:80" -o json 2>"$tmp/trace.err" |
                python3 -c 'import json,sys; print(json.load(sys.stdin)["verdict"])'
}
# rules_agree VIP: svcenv rules has a redirect for VIP exactly when the
# node has one, and kube-proxy's rules for it exactly when the node has them
rules_agree() {
        local ours kern
        rules >"$tmp/rules.out" || { sed 's/^/# rules: /' "$tmp/rules.err"; return 1; }
        ours=$(sed -n '/^# svcenv userspace proxy/,$p' "$tmp/rules.out" | grep -c -F "$1")
        kern=$(sed '/^# svcenv userspace proxy/,$d' "$tmp/rules.out" | grep -c -F "$1")
        if [ -n "$(redirects | grep -F "$1")" ]; then
                [ "$ours" -gt 0 ] && [ "$kern" -eq 0 ]
        else
                [ "$ours" -eq 0 ] && [ "$kern" -gt 0 ]
        fi || { echo "# rules for $1: $ours redirect, $kern kernel line(s)"; return 1; }
}
# same_nat: with iptables, the nat rules svcenv rules prints (kube-proxy's
# and the redirects), restored into a scratch namespace, are the node's
# (iptables-save, sorted; the jumps from the built-in chains, which the
# daemon inserts, aside)
own_nat() { inns "$1" iptables-save -t nat | grep '^-A' | grep -vE '^-A (PREROUTING|INPUT|OUTPUT|POSTROUTING) ' | sort; }
same_nat() {
        rules >"$tmp/rules.out" || return 1
        ip netns del "$p-s" 2>/dev/null
        ip netns add "$p-s" &&
                sed '/^# ip6tables-restore/,$d' "$tmp/rules.out" | inns "$p-s" iptables-restore --noflush ||
                { echo "# svcenv rules output not restorable"; return 1; }
        own_nat "$p-s" >"$tmp/nat.rules"
        own_nat "$NODE" >"$tmp/nat.node"
        ip netns del "$p-s"
        diff -u "$tmp/nat.rules" "$tmp/nat.node" >"$tmp/nat.diff" ||
                { sed 's/^/# /' "$tmp/nat.diff" | head -20; return 1; }
}
# trace_agrees VIP: the verdict is the redirect when the node redirects VIP
trace_agrees() {
        local v
        v=$(trace "$1")
        if [ -n "$(redirects | grep -F "$1")" ]; then
                [ "$v" = REDIRECT ]
        else
                [ "$v" = DNAT ]
        fi || { echo "# trace $1: verdict ${v:-none} ($(head -c 200 "$tmp/trace.err"))"; return 1; }
}

for mode in iptables nftables; do
        log=$tmp/proxy-$mode.log
        ip netns exec "$NODE" "$SVCENV/svcenv-proxy" --kubeconfig "$kc" --mode $mode \
                --hostname-override node-a --cluster-cidr 10.244.0.0/16 -v 2 >"$log" 2>&1 &
        px=$!
        pids+=($px)
        # generous: on a loaded machine the informers' first lists take a while
        check "$mode: first full sync applied" until_ok 90 synced
        check "$mode: the plain Service is on kube-proxy's rules, answered" \
                until_ok 10 eval 'in_kernel 10.96.101.21 && answered 10.96.101.21 10'

        # (1) created with svcenv.io/scheduler: lc
        vip=10.96.101.3$([ $mode = iptables ] && echo 0 || echo 1)
        svc lc-$mode $vip lc
        # the Service and its slice come by two watches, in either order: a
        # first connection answered says the proxy has the endpoints too
        check "$mode: Service created with scheduler lc: redirects, no kernel rules" \
                until_ok 10 eval 'routed $vip && answered $vip 1 >/dev/null'
        check "$mode: ... and no service chain" [ "$(svc_chains rt/lc-$mode)" -eq 0 ]
        before=$(conns rt/lc-$mode:p)
        check "$mode: ... the client's 20 connections answered" answered $vip 20
        after=$(conns rt/lc-$mode:p)
        check "$mode: ... through the proxy (connections_total $before -> $after)" \
                [ "$after" -ge $((before + 20)) ]
        check "$mode: svcenv rules --kubeconfig agrees (lc Service)" rules_agree $vip
        check "$mode: svcenv trace --kubeconfig agrees (lc Service)" trace_agrees $vip

        # (2) a PATCH moves the plain Service to the proxy, and back
        t0=$(now_ms)
        annotate plain lc
        check "$mode: PATCH scheduler lc: the plain Service moves to the proxy" \
                until_ok 10 routed 10.96.101.21
        t1=$(now_ms)
        echo "# $mode: PATCH to redirect in place (and kernel rules gone): $((t1 - t0)) ms"
        before=$(conns rt/plain:p)
        check "$mode: ... answered through the proxy" answered 10.96.101.21 20
        check "$mode: ... counted by it ($before -> $(conns rt/plain:p))" \
                [ "$(conns rt/plain:p)" -ge $((before + 20)) ]
        check "$mode: svcenv rules --kubeconfig agrees (annotated)" rules_agree 10.96.101.21
        check "$mode: svcenv trace --kubeconfig agrees (annotated)" trace_agrees 10.96.101.21
        [ $mode = iptables ] &&
                check "iptables: svcenv rules --kubeconfig == iptables-save -t nat (-A lines)" same_nat
        t0=$(now_ms)
        annotate plain null
        check "$mode: annotation removed by PATCH: back on kernel rules" \
                until_ok 10 in_kernel 10.96.101.21
        t1=$(now_ms)
        echo "# $mode: PATCH to redirect removed: $((t1 - t0)) ms"
        # a refused flow's conntrack entry is not in play here: both answer
        before=$(conns rt/plain:p)
        check "$mode: ... answered by the kernel's DNAT" answered 10.96.101.21 20
        check "$mode: ... not through the proxy" [ "$(conns rt/plain:p)" -eq "$before" ]
        check "$mode: svcenv rules --kubeconfig agrees (annotation removed)" rules_agree 10.96.101.21
        check "$mode: svcenv trace --kubeconfig agrees (annotation removed)" trace_agrees 10.96.101.21
        [ $mode = iptables ] &&
                check "iptables: ... and == iptables-save -t nat again" same_nat
        # more PATCHes, for the figures
        ms_on=() ms_off=()
        for _ in 1 2 3 4 5; do
                t0=$(now_ms)
                annotate plain lc
                until_ok 10 routed 10.96.101.21 || break
                t1=$(now_ms)
                annotate plain null
                until_ok 10 in_kernel 10.96.101.21 || break
                ms_on+=($((t1 - t0))) ms_off+=($(($(now_ms) - t1)))
        done
        check "$mode: 5 more PATCH round trips, each within 10 s" [ ${#ms_off[@]} -eq 5 ]
        echo "# $mode: PATCH to redirect in place, ms: $(printf '%s\n' "${ms_on[@]}" | sort -n | tr '\n' ' ')"
        echo "# $mode: PATCH to redirect removed, ms: $(printf '%s\n' "${ms_off[@]}" | sort -n | tr '\n' ' ')"
        # svcenv.io/retry: "true" routes too (rr in the proxy)
        kapi patch /api/v1/namespaces/rt/services/plain \
                '{"metadata":{"annotations":{"svcenv.io/retry":"true"}}}' >/dev/null
        before=$(conns rt/plain:p)
        check "$mode: PATCH svcenv.io/retry=true: routed, answered through the proxy" \
                until_ok 10 eval 'routed 10.96.101.21 && answered 10.96.101.21 10 && [ "$(conns rt/plain:p)" -ge $((before + 10)) ]'
        check "$mode: svcenv trace --kubeconfig agrees (retry)" trace_agrees 10.96.101.21
        kapi patch /api/v1/namespaces/rt/services/plain \
                '{"metadata":{"annotations":{"svcenv.io/retry":"maybe"}}}' >/dev/null
        check "$mode: svcenv.io/retry=maybe: back on kernel rules, the value logged by name" \
                until_ok 10 eval 'in_kernel 10.96.101.21 && grep "rt/plain: invalid svcenv.io/retry value \"maybe\"" "$log" >/dev/null'
        kapi patch /api/v1/namespaces/rt/services/plain \
                '{"metadata":{"annotations":{"svcenv.io/retry":null}}}' >/dev/null

        # (3) an invalid value: kube-proxy's rules stay, logged once
        annotate plain no-such-scheduler
        logged() { grep -c 'invalid svcenv.io/scheduler' "$log"; }
        check "$mode: invalid annotation logged" until_ok 10 eval '[ "$(logged)" -ge 1 ]'
        check "$mode: ... the Service stays on kernel rules" in_kernel 10.96.101.21
        check "$mode: ... answered by the kernel's DNAT" answered 10.96.101.21 10
        # more syncs: an endpoint change elsewhere
        kapi patch /apis/discovery.k8s.io/v1/namespaces/rt/endpointslices/lc-$mode-1 \
                '{"endpoints":[{"addresses":["10.244.2.2"],"nodeName":"node-a","conditions":{"ready":true}}]}' >/dev/null
        until_ok 10 eval 'answered $vip 5 && ! grep -q b1 "$tmp/traffic"'
        check "$mode: ... logged once, after further syncs ($(logged))" [ "$(logged)" -eq 1 ]
        names() { grep 'invalid svcenv.io/scheduler' "$log" | grep -F 'rt/plain' | grep -c -F "\"$1\""; }
        check "$mode: ... the line names the Service and the value" [ "$(names no-such-scheduler)" -eq 1 ]
        annotate plain lc,bogus-flag
        check "$mode: another invalid value: logged again, naming it" until_ok 10 eval '[ "$(names lc,bogus-flag)" -eq 1 ]'
        check "$mode: ... still on kernel rules" in_kernel 10.96.101.21
        check "$mode: svcenv trace --kubeconfig agrees (invalid annotation)" trace_agrees 10.96.101.21
        annotate plain null

        kill $px && wait $px 2>/dev/null
        inns "$NODE" "$SVCENV/svcenv-proxy" --cleanup >/dev/null 2>&1
        check "$mode: --cleanup leaves no redirects" [ -z "$(redirects)" ]
        kapi delete /api/v1/namespaces/rt/services/lc-$mode >/dev/null
        kapi delete /apis/discovery.k8s.io/v1/namespaces/rt/endpointslices/lc-$mode-1 >/dev/null
        grep -E 'rror|panic|invalid' "$log" | head -5 | sed "s/^/# $mode proxy: /"
done
echo "1..$n"
