#!/usr/bin/env bash
# Per-Service routing in the rule modes, with real traffic in network
# namespaces made here (a client, a node, three backends, the third
# refusing): `svcenv-proxy -f CLUSTER --mode iptables|nftables` serves a
# Service annotated svcenv.io/scheduler: lc through its userspace proxy (0
# failed connections: retried) while an unannotated one keeps kube-proxy's
# DNAT (about 1 in 3 fail). Then the annotation goes (-f + SIGHUP): the
# Service is back on kernel rules, the proxy stops counting it, the
# redirects are gone; and it comes back. A routed LoadBalancer keeps its
# loadBalancerSourceRanges (a second client address is outside them); a UDP
# client reusing its source port follows each flip at once (conntrack
# entries deleted); a run in the other backend removes this one's
# redirects. Needs root; prints a visible SKIP without.
. "$(dirname "$0")/lib.bash"
backend=${PROXY_BACKEND:-iptables}
e2e_init rt "per-Service routing ($backend)" ip python3 iptables-restore iptables-save nft \
        conntrack

# svc NAME IP NODEPORT [SCHEDULER], with a slice of the refusing b1, b2 and b3
# (b1 first in list order: lc's ties go to it, so the proxy must retry)
svc() {
        local ann=
        [ -n "${4:-}" ] && ann=", annotations: {svcenv.io/scheduler: \"$4\"}"
        cat <<EOF
---
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: e2e$ann}
spec: {type: NodePort, clusterIP: $2, ports: [{name: p, port: 80, protocol: TCP, targetPort: 8080, nodePort: $3}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: $1-1, namespace: e2e, labels: {kubernetes.io/service-name: $1}}
addressType: IPv4
ports: [{name: p, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.244.1.2], conditions: {ready: true}}
- {addresses: [10.244.2.2], conditions: {ready: true}}
- {addresses: [10.244.3.2], conditions: {ready: true}}
EOF
}

write_cluster() { # write_cluster SCHEDULER_OF_LEAST ("" for none)
        {
                cat <<EOF
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {addresses: [{type: InternalIP, address: 10.99.0.1}]}
---
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: kubernetes}
spec: {cidrs: [10.96.0.0/16]}
EOF
                svc least 10.96.0.20 30020 "$1"
                svc plain 10.96.0.21 30021
                cat <<EOF
---
apiVersion: v1
kind: Service
metadata: {name: dns, namespace: e2e, annotations: {svcenv.io/retry: "true"}}
spec: {clusterIP: 10.96.0.22, ports: [{name: p, port: 53, protocol: UDP, targetPort: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: dns-1, namespace: e2e, labels: {kubernetes.io/service-name: dns}}
addressType: IPv4
ports: [{name: p, port: 8080, protocol: UDP}]
endpoints:
- {addresses: [10.244.2.2], conditions: {ready: true}}
- {addresses: [10.244.3.2], conditions: {ready: true}}
---
apiVersion: v1
kind: Service
metadata: {name: fw, namespace: e2e, annotations: {svcenv.io/retry: "true"}}
spec: {type: LoadBalancer, clusterIP: 10.96.0.23, loadBalancerSourceRanges: [10.99.0.2/32], ports: [{name: p, port: 80, protocol: TCP, targetPort: 8080, nodePort: 30023}, {name: u, port: 53, protocol: UDP, targetPort: 8080, nodePort: 30024}]}
status: {loadBalancer: {ingress: [{ip: 10.96.1.50}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: fw-1, namespace: e2e, labels: {kubernetes.io/service-name: fw}}
addressType: IPv4
ports: [{name: p, port: 8080, protocol: TCP}, {name: u, port: 8080, protocol: UDP}]
endpoints:
- {addresses: [10.244.2.2], conditions: {ready: true}}
- {addresses: [10.244.3.2], conditions: {ready: true}}
EOF
        } >"$tmp/cluster.yaml"
}

# the redirect rules, in either form (empty when there are none)
redirects() {
        { inns "$NODE" iptables-save; inns "$NODE" nft list ruleset; } 2>/dev/null |
                grep -E 'REDIRECT|redirect to|TPROXY|tproxy'
}
# the kernel rules of kube-proxy's layout that name a VIP
kernel_rules_for() {
        { inns "$NODE" iptables-save -t nat; inns "$NODE" nft list table ip svcenv; } 2>/dev/null |
                grep -F "$1" | grep -v -E 'REDIRECT|redirect to'
}
tcp() { inns "$CL" python3 "$here/netpeer.py" tcp "$@"; }
# udp_from / tcp_from SRC[,PORT] IP PORT COUNT [T]: from that source
udp_from() { local s=$1; shift; NETPEER_SRC=$s inns "$CL" python3 "$here/netpeer.py" udp "$@"; }
tcp_from() { local s=$1; shift; NETPEER_SRC=$s inns "$CL" python3 "$here/netpeer.py" tcp "$@"; }
up0_tx() { inns "$NODE" cat /sys/class/net/up0/statistics/tx_packets; }
# ct_gone ARGS...: up to 3 s (well inside the entries' own timeouts) for the
# node's conntrack entries that ARGS select to go (the daemon deletes them
# right after it applied the flip's rules)
ct_gone() {
        for _ in $(seq 30); do
                [ -z "$(inns "$NODE" conntrack -L "$@" 2>/dev/null)" ] && return 0
                sleep 0.1
        done
        return 1
}
failed() { grep -c '^ERR' "$1"; }
no_redirects() { [ -z "$(redirects)" ]; }
routed_now() { [ -n "$(redirects | grep 10.96.0.20)" ] && [ -z "$(kernel_rules_for 10.96.0.20)" ]; }
kernel_now() { [ -z "$(redirects | grep 10.96.0.20)" ] && [ -n "$(kernel_rules_for 10.96.0.20)" ]; }

# no IPv6 on up0: its packet count is what was forwarded there
NET_CLIENTS4="10.99.0.2 10.99.0.3" NET_UP0_NO_V6=1 net_up
serve_backends 2 3 # nobody listens in b1: refused
write_cluster lc
proxy_start -f "$tmp/cluster.yaml" --mode "$backend" --hostname-override node-a \
        --min-sync-period 0 --cluster-cidr 10.244.0.0/16
wait_for routed_now
check "$backend: the lc Service has redirects and no kernel rules" routed_now
check "$backend: the unannotated Service keeps kube-proxy's rules" \
        test -n "$(kernel_rules_for 10.96.0.21)"
# nftables drops what goes to an unallocated ClusterIP of the service CIDR
# after DNAT (cluster-ips-check): the redirected VIP must not meet it
[ "$backend" = nftables ] &&
        check "nftables: the service CIDR's drop is in force" \
                test -n "$(kernel_rules_for '10.96.0.0/16 drop')"

tcp 10.96.0.20 80 60 >"$tmp/least"
check "through the proxy, one endpoint refusing: 0 of 60 connections fail" \
        test "$(failed "$tmp/least")" -eq 0 -a "$(grep -c '^b[23]$' "$tmp/least")" -eq 60
tcp 10.99.0.1 30020 30 >"$tmp/least-np"
check "its NodePort through the proxy too: 0 of 30 fail" \
        test "$(grep -c '^b[23]$' "$tmp/least-np")" -eq 30
tcp 10.96.0.21 80 60 >"$tmp/plain"
f=$(failed "$tmp/plain")
check "kernel DNAT (as kube-proxy): the unannotated Service fails some ($f of 60)" \
        test "$f" -ge 5 -a "$f" -le 40
tcp 10.99.0.1 30021 30 >"$tmp/plain-np"
check "its NodePort stays on kernel rules too ($(failed "$tmp/plain-np") of 30 fail)" \
        test "$(failed "$tmp/plain-np")" -ge 1
inns "$CL" python3 "$here/netpeer.py" udp 10.96.0.22 53 6 >"$tmp/udp"
check "a UDP Service with svcenv.io/retry: through the proxy (TPROXY), 6 of 6 answered" \
        test "$(grep -c '^b[23]$' "$tmp/udp")" -eq 6 -a \
        "$(metric svcenv_proxy_connections_total e2e/dns:p)" -ge 1
# loadBalancerSourceRanges of a routed LoadBalancer (10.99.0.2/32 only)
tcp_from 10.99.0.2 10.96.1.50 80 6 >"$tmp/fw-in"
check "routed LB IP, a source in loadBalancerSourceRanges: 6 of 6 through the proxy" \
        test "$(grep -c '^b[23]$' "$tmp/fw-in")" -eq 6
tx=$(up0_tx)
tcp_from 10.99.0.3 10.96.1.50 80 3 1 >"$tmp/fw-out"
udp_from 10.99.0.3 10.96.1.50 53 2 1 >"$tmp/fw-out-udp"
check "a source outside the ranges: dropped, as kube-proxy's firewall (TCP 3, UDP 2 unanswered)" \
        test "$(grep -c '^ERR:timeout$' "$tmp/fw-out")" -eq 3 -a \
        "$(grep -c '^ERR:timeout$' "$tmp/fw-out-udp")" -eq 2 -a "$(up0_tx)" -eq "$tx"
check "UDP to the LB IP from a source in the ranges: answered through the proxy" \
        test "$(udp_from 10.99.0.2 10.96.1.50 53 2 | grep -c '^b[23]$')" -eq 2
check "the ClusterIP of that Service takes any source" \
        test "$(tcp_from 10.99.0.3 10.96.0.23 80 2 | grep -c '^b[23]$')" -eq 2
rules=$("$SVCENV/svcenv" rules -f "$tmp/cluster.yaml" --node node-a --backend "$backend" \
        --cluster-cidr 10.244.0.0/16 --ip-family ipv4 2>&1)
if [ "$backend" = nftables ]; then
        want_rule='ip daddr 10.96.1.50 tcp dport 80 ip saddr != @firewall-0 drop comment "e2e/fw:p"'
else
        want_rule='-A SVCENV-USERSPACE-FIREWALL -m comment --comment "e2e/fw:p traffic not accepted by its loadBalancerSourceRanges" -d 10.96.1.50/32 -p tcp -m tcp --dport 80 -j DROP'
fi
check "svcenv rules prints the firewall of the routed LB IP" grep -qF -- "$want_rule" <<<"$rules"
trace=$("$SVCENV/svcenv" trace -f "$tmp/cluster.yaml" --node node-a --backend "$backend" \
        --cluster-cidr 10.244.0.0/16 --from 10.99.0.3 --to 10.96.1.50:80 2>&1)
check "svcenv trace agrees: DROP, not in loadBalancerSourceRanges" \
        grep -q "not in loadBalancerSourceRanges of e2e/fw:p" <<<"$trace"

before=$(metric svcenv_proxy_connections_total e2e/least:p)
check "the proxy counted the lc Service's connections ($before)" test "$before" -ge 90
check "and retried past the refusing endpoint" \
        test "$(metric svcenv_proxy_connect_retries_total e2e/least:p)" -ge 1
check "the unannotated Service is not in the proxy" \
        test "$(metric svcenv_proxy_connections_total e2e/plain:p)" -eq 0

# the annotation goes: back on kube-proxy's rules (fw's too; dns stays routed)
write_cluster ""
sed -i '/name: fw,/s/"true"/"false"/' "$tmp/cluster.yaml"
kill -HUP "$proxy_pid"
wait_for kernel_now
check "annotation removed (SIGHUP): kernel rules back, its redirects gone" kernel_now
fw_rules() {
        { inns "$NODE" iptables-save; inns "$NODE" nft list table ip svcenv-userspace; } 2>/dev/null |
                grep -E 'SVCENV-USERSPACE-FIREWALL|firewall-check|@firewall-'
}
check "the LB with source ranges on kernel rules: the redirects' firewall is gone" \
        test -z "$(fw_rules)" -a -n "$(redirects | grep 10.96.0.22)"
check "and kube-proxy's firewall drops the outside source instead" \
        test "$(tcp_from 10.99.0.3 10.96.1.50 80 2 1 | grep -c '^ERR:timeout$')" -eq 2 -a \
        "$(tcp_from 10.99.0.2 10.96.1.50 80 2 | grep -c '^b[23]$')" -eq 2
before=$(metric svcenv_proxy_connections_total e2e/least:p)
tcp 10.96.0.20 80 60 >"$tmp/least2"
f=$(failed "$tmp/least2")
check "now on kernel DNAT: its connections fail about 1 in 3 ($f of 60)" \
        test "$f" -ge 5 -a "$f" -le 40
check "the proxy no longer counts it" \
        test "$(metric svcenv_proxy_connections_total e2e/least:p)" -le "$before"

# nothing routed any more: every redirect goes. A UDP client that keeps
# its source port had its flow TPROXY'd (no NAT): that conntrack entry must
# go at the flip, or its next datagrams bypass the new DNAT until it times out
udp_from 10.99.0.2,40053 10.96.0.22 53 1 >"$tmp/udp-flip1"
ct_deleted() { metrics | awk '$1 == "svcenv_proxy_conntrack_deletions_total" { v = $2 } END { print v + 0 }'; }
ct_before=$(ct_deleted)
write_cluster ""
sed -i '/svcenv.io\/retry/s/"true"/"false"/' "$tmp/cluster.yaml"
kill -HUP "$proxy_pid"
wait_for no_redirects
check "nothing routed: no redirect rules, no TPROXY mark rule" \
        test -z "$(redirects; inns "$NODE" ip rule | grep 0x800000)"
dns_kernel() { [ -n "$(kernel_rules_for 10.96.0.22)" ]; }
wait_for dns_kernel
ct_gone -p udp --orig-port-src 40053
udp_from 10.99.0.2,40053 10.96.0.22 53 2 1 >"$tmp/udp-flip2"
check "UDP from the same source port, proxy -> kernel: answered at once by DNAT (2 of 2)" \
        test "$(grep -c '^b[23]$' "$tmp/udp-flip1")" -eq 1 -a \
        "$(grep -c '^b[23]$' "$tmp/udp-flip2")" -eq 2
check "the flip's conntrack deletions are counted ($ct_before -> $(ct_deleted))" \
        test "$(ct_deleted)" -gt "$ct_before"
# and back to the proxy. A refused connection leaves a conntrack entry in
# CLOSE for 10 s that a new SYN with the same ports takes over, NAT binding
# included (the kernel reopens only after a FIN or a client RST): wait
# those of the DNAT phase out, or a reused client port still goes to b1.
sleep 11
write_cluster lc
kill -HUP "$proxy_pid"
wait_for routed_now
tcp 10.96.0.20 80 30 >"$tmp/least3"
check "annotated again: routed, 0 of 30 fail" \
        test "$(grep -c '^b[23]$' "$tmp/least3")" -eq 30
# that UDP client's next datagram is the proxy's (TPROXY, before NAT, takes
# it even over a stale DNAT entry: this direction checks the deletion harms
# nothing)
before=$(metric svcenv_proxy_connections_total e2e/dns:p)
udp_from 10.99.0.2,40053 10.96.0.22 53 1 >"$tmp/udp-flip3"
check "UDP from the same source port, kernel -> proxy: through the proxy at once" \
        test "$(grep -c '^b[23]$' "$tmp/udp-flip3")" -eq 1 -a \
        "$(metric svcenv_proxy_connections_total e2e/dns:p)" -gt "$before"

# a run in the other backend removes this one's redirects after its first
# sync, as it removes this backend's rules (kube-proxy's platformCleanup)
proxy_stop
other=nftables
[ "$backend" = nftables ] && other=iptables
own_redirects() {
        if [ "$1" = nftables ]; then
                inns "$NODE" nft list table ip svcenv-userspace 2>/dev/null | grep -E 'redirect to|tproxy'
        else
                inns "$NODE" iptables-save 2>/dev/null | grep -E 'REDIRECT|TPROXY|SVCENV-USERSPACE-FIREWALL'
        fi
}
check "$backend's redirects stay after its daemon stops" test -n "$(own_redirects "$backend")"
proxy_start -f "$tmp/cluster.yaml" --mode "$other" --hostname-override node-a \
        --min-sync-period 0 --cluster-cidr 10.244.0.0/16
switched() { [ -n "$(own_redirects "$other")" ] && [ -z "$(own_redirects "$backend")" ]; }
wait_for switched
check "started with --mode $other: its redirects in place, $backend's gone" switched
check "and the Service works through them: 0 of 10 fail" \
        test "$(tcp 10.96.0.20 80 10 | grep -c '^b[23]$')" -eq 10

proxy_stop
inns "$NODE" "$SVCENV/svcenv-proxy" --cleanup >/dev/null 2>&1
check "--cleanup removes the redirects and the mark rule" \
        test -z "$(redirects; inns "$NODE" ip rule | grep 0x800000)"
proxy_errors
plan
