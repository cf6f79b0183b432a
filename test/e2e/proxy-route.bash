#!/usr/bin/env bash
# Per-Service routing in the rule modes, with real traffic in network
# namespaces made here (a client, a node, three backends, the third
# refusing): `svcenv-proxy -f CLUSTER --mode iptables|nftables` serves a
# Service annotated svcenv.io/scheduler: lc through its userspace proxy (0
# failed connections: retried) while an unannotated one keeps kube-proxy's
# DNAT (about 1 in 3 fail). Then the annotation goes (-f + SIGHUP): the
# Service is back on kernel rules, the proxy stops counting it, the
# redirects are gone; and it comes back. Needs root; prints a visible SKIP
# without.
. "$(dirname "$0")/lib.bash"
backend=${PROXY_BACKEND:-iptables}
e2e_init rt "per-Service routing ($backend)" ip python3 iptables-restore iptables-save nft

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
failed() { grep -c '^ERR' "$1"; }
no_redirects() { [ -z "$(redirects)" ]; }
routed_now() { [ -n "$(redirects | grep 10.96.0.20)" ] && [ -z "$(kernel_rules_for 10.96.0.20)" ]; }
kernel_now() { [ -z "$(redirects | grep 10.96.0.20)" ] && [ -n "$(kernel_rules_for 10.96.0.20)" ]; }

net_up
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
before=$(metric svcenv_proxy_connections_total e2e/least:p)
check "the proxy counted the lc Service's connections ($before)" test "$before" -ge 90
check "and retried past the refusing endpoint" \
        test "$(metric svcenv_proxy_connect_retries_total e2e/least:p)" -ge 1
check "the unannotated Service is not in the proxy" \
        test "$(metric svcenv_proxy_connections_total e2e/plain:p)" -eq 0

# the annotation goes: back on kube-proxy's rules
write_cluster ""
kill -HUP "$proxy_pid"
wait_for kernel_now
check "annotation removed (SIGHUP): kernel rules back, its redirects gone" kernel_now
before=$(metric svcenv_proxy_connections_total e2e/least:p)
tcp 10.96.0.20 80 60 >"$tmp/least2"
f=$(failed "$tmp/least2")
check "now on kernel DNAT: its connections fail about 1 in 3 ($f of 60)" \
        test "$f" -ge 5 -a "$f" -le 40
check "the proxy no longer counts it" \
        test "$(metric svcenv_proxy_connections_total e2e/least:p)" -le "$before"

# nothing routed any more: every redirect goes
write_cluster ""
sed -i '/svcenv.io\/retry/s/"true"/"false"/' "$tmp/cluster.yaml"
kill -HUP "$proxy_pid"
wait_for no_redirects
check "nothing routed: no redirect rules, no TPROXY mark rule" \
        test -z "$(redirects; inns "$NODE" ip rule | grep 0x800000)"
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

proxy_stop
inns "$NODE" "$SVCENV/svcenv-proxy" --cleanup >/dev/null 2>&1
check "--cleanup removes the redirects and the mark rule" \
        test -z "$(redirects; inns "$NODE" ip rule | grep 0x800000)"
proxy_errors
plan
