#!/usr/bin/env bash
# Real traffic through `svcenv rules --apply` (PROXY_BACKEND iptables or nftables) in network
# namespaces made here: a client, a node and three backends. Only addresses
# inside these namespaces are used. Needs root; prints a visible SKIP without.
. "$(dirname "$0")/lib.bash"
backend=${PROXY_BACKEND:-iptables}
e2e_init se "proxy ($backend)" ip python3 iptables-restore nft
extra_ns=("$p-demo")

# dual-stack; the service IPs are routed (like a default route would) so
# that unmatched packets reach FORWARD; 10.97/16 lies outside the ServiceCIDR
NET_DUAL=1 NET_UP0_NO_V6=1 NET_ROUTES="10.96.0.0/16 10.97.0.0/16"

slice() { # slice NAME SVC PORTNAME PROTO PORT ENDPOINT...  (ENDPOINT = ip@node)
        local name=$1 svc=$2 pname=$3 proto=$4 port=$5
        shift 5
        cat <<EOF
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: $name, namespace: e2e, labels: {kubernetes.io/service-name: $svc}}
addressType: IPv4
ports: [{name: $pname, port: $port, protocol: $proto}]
endpoints:
EOF
        for ep in "$@"; do
                echo "- {addresses: [${ep%@*}], nodeName: ${ep#*@}, conditions: {ready: true}}"
        done
}

write_cluster() { # write_cluster WEB_ENDPOINTS...
        cat >"$tmp/cluster.yaml" <<EOF
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: kubernetes}
spec: {cidrs: [10.96.0.0/16, "fd00:96::/112"]}
---
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {addresses: [{type: InternalIP, address: 10.99.0.1}, {type: InternalIP, address: "fd00:99::1"}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: e2e}
spec: {type: NodePort, clusterIP: 10.96.0.10, ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]}
---
apiVersion: v1
kind: Service
metadata: {name: web6, namespace: e2e}
spec: {clusterIP: "fd00:96::10", clusterIPs: ["fd00:96::10"], ipFamilies: [IPv6], ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: sticky, namespace: e2e}
spec: {clusterIP: 10.96.0.11, sessionAffinity: ClientIP, ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: empty, namespace: e2e}
spec: {clusterIP: 10.96.0.12, ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: dns, namespace: e2e}
spec: {clusterIP: 10.96.0.13, ports: [{name: dns, port: 53, protocol: UDP, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: local, namespace: e2e}
spec: {type: NodePort, clusterIP: 10.96.0.14, externalTrafficPolicy: Local, ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30081}]}
---
apiVersion: v1
kind: Service
metadata: {name: remote, namespace: e2e}
spec: {type: NodePort, clusterIP: 10.96.0.15, externalTrafficPolicy: Local, ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30082}]}
EOF
        {
                slice web-1 web http TCP 8080 "$@"
                slice sticky-1 sticky http TCP 8080 10.244.1.2@node-a 10.244.2.2@node-b 10.244.3.2@node-b
                slice dns-1 dns dns UDP 8080 10.244.1.2@node-a 10.244.2.2@node-b
                slice local-1 local http TCP 8080 10.244.1.2@node-a 10.244.2.2@node-b
                slice remote-1 remote http TCP 8080 10.244.3.2@node-b
                slice web6-1 web6 http TCP 8080 fd00:244:1::2@node-a fd00:244:2::2@node-b |
                        sed 's/addressType: IPv4/addressType: IPv6/'
        } >>"$tmp/cluster.yaml"
}

apply() { # apply [EXTRA OPTIONS]: svcenv applies the rules in the node namespace
        inns "$NODE" "$SVCENV/svcenv" rules -f "$tmp/cluster.yaml" --node node-a \
                --cluster-cidr 10.244.0.0/16,fd00:244::/48 --backend "$backend" --apply "$@" \
                2>"$tmp/apply.err"
}

# traffic FROM_NS PROTO IP PORT COUNT [TIMEOUT] > file
traffic() { local ns=$1; shift; inns "$ns" python3 "$here/netpeer.py" "$@"; }

# the peers each backend saw (netpeer prints "from IP"): masquerading shows
# as the node's address on the backend's link (10.244.K.1)
declare -A marks
log_mark() { local k; for k in 1 2 3; do marks[$k]=$(wc -l <"$tmp/b$k.log"); done; }
peers_since() { # peers_since K: the peers backend K saw since log_mark, sorted, one line
        tail -n +$((marks[$1] + 1)) "$tmp/b$1.log" | sed -n 's/^from //p' | sort -u | tr '\n' ' ' |
                sed 's/ $//'
}

spread_ok() { # each of b1 b2 b3 answered at least MIN times, and nothing failed
        local f=$1 min=$2
        ! grep -q ERR "$f" || return 1
        for b in b1 b2 b3; do
                [ "$(grep -cx "$b" "$f")" -ge "$min" ] || return 1
        done
}

net_up
serve_backends
write_cluster 10.244.1.2@node-a 10.244.2.2@node-b 10.244.3.2@node-b

check "svcenv rules --apply ($backend) in the node namespace" apply
[ -s "$tmp/apply.err" ] && sed 's/^/# /' "$tmp/apply.err"
if [ -n "${E2E_HOLD:-}" ]; then # debugging: keep the namespaces for a while
        echo "# holding namespaces $p-* and $tmp for $E2E_HOLD s"
        sleep "$E2E_HOLD" &
        wait $!
fi

# 300 connections over 3 endpoints: expect 100 each, sd ~8.2; 50 is 6 sd off
log_mark
traffic "$CL" tcp 10.96.0.10 80 300 >"$tmp/web"
check "ClusterIP reaches every backend with a plausible spread ($(sort "$tmp/web" | uniq -c | tr -s ' \n' ' '))" \
        spread_ok "$tmp/web" 50
check "ClusterIP traffic from outside the pod CIDR is masqueraded (b1 saw $(peers_since 1), b3 $(peers_since 3))" \
        bash -c '[ "$1" = 10.244.1.1 ] && [ "$2" = 10.244.3.1 ]' _ "$(peers_since 1)" "$(peers_since 3)"

traffic "$CL" tcp 10.96.0.11 80 30 >"$tmp/sticky"
check "ClientIP affinity pins the client to one backend" \
        bash -c '[ "$(sort -u "$1" | wc -l)" -eq 1 ] && ! grep -q ERR "$1"' _ "$tmp/sticky"
if [ "$backend" = nftables ]; then
        # a full sync (--apply) keeps the table: the client's affinity entry stays
        aff_entries() { inns "$NODE" nft list table ip svcenv | grep -c 'elements = {.*expires'; }
        before=$(aff_entries)
        apply
        after=$(aff_entries)
        traffic "$CL" tcp 10.96.0.11 80 10 >"$tmp/sticky2"
        check "nft: affinity entries survive a full re-apply ($before before, $after after) and the client stays pinned" \
                bash -c '[ "$1" -ge 1 ] && [ "$1" = "$2" ] && [ "$(sort -u "$3" "$4" | wc -l)" -eq 1 ]' \
                _ "$before" "$after" "$tmp/sticky" "$tmp/sticky2"
fi

NETPEER_TIME=1 traffic "$CL" tcp 10.96.0.12 80 1 3 >"$tmp/empty"
check "a service without endpoints is refused at once ($(cat "$tmp/empty") ms)" \
        bash -c 'read -r res ms <"$1" && [ "$res" = ERR:ECONNREFUSED ] && [ "$ms" -lt 500 ]' _ "$tmp/empty"

if [ "$backend" = nftables ]; then
        # cluster-ips-check: a port the ClusterIP does not have is rejected, an
        # unallocated address of the ServiceCIDR dropped before it leaves the node
        NETPEER_TIME=1 traffic "$CL" tcp 10.96.0.10 81 1 3 >"$tmp/badport"
        check "nft: a ClusterIP's unused port is refused at once ($(cat "$tmp/badport") ms)" \
                bash -c 'read -r res ms <"$1" && [ "$res" = ERR:ECONNREFUSED ] && [ "$ms" -lt 500 ]' \
                _ "$tmp/badport"
        up0_tx() { inns "$NODE" cat /sys/class/net/up0/statistics/tx_packets; }
        before=$(up0_tx)
        traffic "$CL" tcp 10.96.0.99 80 1 2 >"$tmp/unalloc"
        after=$(up0_tx)
        check "nft: an unallocated ClusterIP is dropped on the node ($(cat "$tmp/unalloc"), $before -> $after packets routed on)" \
                bash -c '[ "$(cat "$1")" = ERR:timeout ] && [ "$2" = "$3" ]' _ "$tmp/unalloc" "$before" "$after"
        traffic "$CL" tcp 10.97.0.99 80 1 1 >/dev/null
        check "nft: an address outside the ServiceCIDR is routed on ($(up0_tx) packets)" \
                bash -c '[ "$(ip netns exec "$1" cat /sys/class/net/up0/statistics/tx_packets)" -gt "$2" ]' \
                _ "$NODE" "$after"
fi

log_mark
traffic "$CL" tcp 10.99.0.1 30080 60 >"$tmp/np"
check "NodePort from another namespace reaches the backends" \
        bash -c '! grep -q ERR "$1" && [ "$(sort -u "$1" | wc -l)" -ge 2 ]' _ "$tmp/np"
check "NodePort traffic (externalTrafficPolicy Cluster) is masqueraded (b1 saw $(peers_since 1), b2 $(peers_since 2))" \
        bash -c '[ "$1" = 10.244.1.1 ] && [ "$2" = 10.244.2.1 ]' _ "$(peers_since 1)" "$(peers_since 2)"

log_mark
traffic "$CL" tcp 10.99.0.1 30081 20 >"$tmp/local"
check "externalTrafficPolicy Local sends NodePort traffic to the local endpoint only" \
        bash -c '[ "$(sort -u "$1")" = b1 ]' _ "$tmp/local"
check "externalTrafficPolicy Local keeps the client's source address (b1 saw $(peers_since 1))" \
        test "$(peers_since 1)" = 10.99.0.2

traffic "$CL" tcp 10.99.0.1 30082 1 1 >"$tmp/remote"
check "externalTrafficPolicy Local without a local endpoint drops ($(cat "$tmp/remote"))" \
        bash -c '[ "$(cat "$1")" = ERR:timeout ]' _ "$tmp/remote"

traffic "$CL" udp 10.96.0.13 53 20 >"$tmp/udp"
check "UDP reaches the backends ($(sort "$tmp/udp" | uniq -c | tr -s ' \n' ' '))" \
        bash -c '! grep -q ERR "$1" && [ "$(grep -cxE "b1|b2" "$1")" -eq 20 ]' _ "$tmp/udp"

traffic "$CL" tcp fd00:96::10 80 40 >"$tmp/web6"
check "IPv6 ClusterIP ($backend, dual-stack node) reaches both backends ($(sort "$tmp/web6" | uniq -c | tr -s ' \n' ' '))" \
        bash -c '! grep -q ERR "$1" && grep -qx b1 "$1" && grep -qx b2 "$1"' _ "$tmp/web6"

log_mark
traffic "$B1" tcp 10.96.0.10 80 30 >"$tmp/hairpin"
check "hairpin: a backend reaches its own service (itself included)" \
        bash -c '! grep -q ERR "$1" && grep -qx b1 "$1"' _ "$tmp/hairpin"
check "hairpin: masqueraded only back to itself (b1 saw $(peers_since 1), b2 $(peers_since 2))" \
        bash -c '[ "$1" = 10.244.1.1 ] && [ "$2" = 10.244.1.2 ]' _ "$(peers_since 1)" "$(peers_since 2)"

# the chain of the endpoint about to go (iptables: KUBE-SEP-... DNATing to it)
stale=""
[ "$backend" = iptables ] &&
        stale=$(inns "$NODE" iptables-save -t nat | grep -- '--comment "\?e2e/web:http"\? .*--to-destination 10.244.3.2:8080' |
                awk '{print $2}')
write_cluster 10.244.1.2@node-a 10.244.2.2@node-b
apply
if [ "$backend" = iptables ]; then
        check "the removed endpoint's chain ($stale) is deleted on apply, as on kube-proxy's full sync" \
                bash -c '[ -n "$2" ] && ! ip netns exec "$1" iptables-save -t nat | grep -q "^:$2 "' _ "$NODE" "$stale"
else
        # the table is updated in place (v1.36: endpoint chains for affinity
        # only): the endpoint leaves web's DNAT map; sticky keeps its endpoint
        # chain; hairpin-connections holds the local endpoint only
        check "nft: the removed endpoint leaves the service's DNAT map, the same endpoint of another service kept" \
                bash -c 't=$(ip netns exec "$1" nft list table ip svcenv) &&
                        m=$(sed -n "/map dnat-service-.*e2e\/web\/tcp\/http {/,/}/p" <<<"$t") &&
                        grep -q "10.244.2.2 . 8080" <<<"$m" && ! grep -q "10.244.3.2" <<<"$m" &&
                        ! grep -q "chain endpoint-.*e2e/web/" <<<"$t" &&
                        grep -q "chain endpoint-.*e2e/sticky/tcp/http__10.244.3.2/8080" <<<"$t" &&
                        grep -q "10.244.1.2 . 10.244.1.2 . tcp . 8080" <<<"$t" &&
                        ! grep -q "10.244.3.2 . 10.244.3.2" <<<"$t"' _ "$NODE"
fi
traffic "$CL" tcp 10.96.0.10 80 100 >"$tmp/web2"
check "removing an endpoint stops traffic to it" \
        bash -c '! grep -q ERR "$1" && ! grep -qx b3 "$1" && grep -qx b1 "$1" && grep -qx b2 "$1"' _ "$tmp/web2"

# flush_then_repair CMD...: CMD on the node (a flush) breaks the service;
# re-applying the rules repairs it
flush_then_repair() {
        inns "$NODE" "$@"
        traffic "$CL" tcp 10.96.0.10 80 1 1 >"$tmp/flushed"
        check "$* breaks the service ($(cat "$tmp/flushed"))" bash -c 'grep -q ERR "$1"' _ "$tmp/flushed"
        apply
        traffic "$CL" tcp 10.96.0.10 80 20 >"$tmp/repaired"
        check "re-applying repairs it" bash -c '! grep -q ERR "$1"' _ "$tmp/repaired"
}
if [ "$backend" = iptables ]; then
        # nfacct counters do not exist here, so this restore fails as a whole
        apply --nfacct on
        rc=$?
        check "a failed apply exits 4 with one line ($(head -c 160 "$tmp/apply.err"))" \
                bash -c '[ "$1" -eq 4 ] && [ "$(wc -l <"$2")" -eq 1 ]' _ "$rc" "$tmp/apply.err"
        traffic "$CL" tcp 10.96.0.10 80 40 >"$tmp/web3"
        check "after a failed apply the previous rules stay in force" \
                bash -c '! grep -q ERR "$1" && ! grep -qx b3 "$1"' _ "$tmp/web3"

        flush_then_repair iptables -t nat -F
else
        flush_then_repair nft flush ruleset
fi
if [ "$backend" = iptables ]; then
        # as kube-proxy, the kubelet's KUBE-FIREWALL jumps are ensured in both families
        fw_jumps() { [ "$(ip netns exec "$1" "$2" -S "$3" | grep -c -- '^-A [A-Z]* -j KUBE-FIREWALL$')" -eq 1 ]; }
        check "INPUT and OUTPUT jump to KUBE-FIREWALL in iptables and ip6tables" \
                bash -c "$(declare -f fw_jumps); for t in iptables ip6tables; do for c in INPUT OUTPUT; do
                        fw_jumps \"\$1\" \$t \$c || exit 1; done; done" _ "$NODE"
fi
# the dual-stack demo cluster: both families accepted by the real tools
# (ip6tables-restore / nft ip6), applied twice (the second run replaces)
demo=manifests/examples/demo-cluster.yaml
ip netns add "$p-demo"
demo_apply() {
        ip netns exec "$p-demo" "$SVCENV/svcenv" rules -f $demo --node node-a --backend "$backend" \
                --cluster-cidr 10.244.0.0/16,fd00:244::/48 --apply 2>"$tmp/demo.err"
}
demo_apply && demo_apply
check "dual-stack demo cluster applied with both families, twice ($(head -c 200 "$tmp/demo.err"))" \
        test $? -eq 0
if [ "$backend" = iptables ]; then
        check "IPv6 service rules are in ip6tables" \
                bash -c 'ip netns exec "$1" ip6tables-save -t nat | grep -q "fd00:96::40/128"' _ "$p-demo"
else
        check "IPv6 service rules are in table ip6 svcenv" \
                bash -c 'ip netns exec "$1" nft list table ip6 svcenv | grep -q "fd00:96::40 . tcp . 443"' _ "$p-demo"
fi
ip netns del "$p-demo"
plan
