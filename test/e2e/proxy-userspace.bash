#!/usr/bin/env bash
# Real traffic through `svcenv-proxy --mode userspace -f CLUSTER` in network
# namespaces made here (a client, a node and three backends; addresses only
# inside them): round robin, retry past a refusing and a black-holed endpoint,
# UDP sessions and their idle timeout, 64 KiB datagrams, half-close, a
# client's reset reaching the backend as a reset, ClientIP
# affinity, and, after a reload, removed endpoints ending their UDP sessions
# and a terminating endpoint taking no new connections while its open one
# runs to its end; least connection with a slow backend, every pick checked
# against the formula and the proxy's counts and decision metrics (and the
# same check failing for rr). Needs root; prints a visible SKIP without.
. "$(dirname "$0")/lib.bash"
backend=${PROXY_BACKEND:-iptables}
e2e_init su "userspace proxy" ip python3 iptables-restore nft

setup() {
        net_build
        # b3's port 8082 is a black hole: SYNs vanish
        must inns "$B3" nft -f - <<EOF
table inet hole {
        chain in {
                type filter hook input priority 0;
                tcp dport 8082 drop
        }
}
EOF
}

start_backends() {
        local k
        for k in 1 2 3; do
                peer_start b$k "$p-b$k" netpeer.py serve b$k 8080
                peer_start e$k "$p-b$k" uproxy_peer.py echo b$k 8090
                peer_start w$k "$p-b$k" uproxy_peer.py watch b$k 8091
        done
        for k in 1 2 3; do peers_ready b$k e$k w$k; done
}

# ep IP [ready|terminating]: one endpoint line of a slice
ep() {
        if [ "${2:-ready}" = terminating ]; then
                echo "- {addresses: [$1], conditions: {ready: false, serving: true, terminating: true}}"
        else
                echo "- {addresses: [$1], conditions: {ready: true}}"
        fi
}
slice() { # slice NAME SVC PROTO PORT: the header; endpoint lines follow
        cat <<EOF
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: $1, namespace: e2e, labels: {kubernetes.io/service-name: $2}}
addressType: IPv4
ports: [{name: p, port: $4, protocol: $3}]
endpoints:
EOF
}
svc() { # svc NAME IP PROTO PORT [EXTRA SPEC] [NODEPORT]
        cat <<EOF
---
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: e2e}
spec: {clusterIP: $2, ports: [{name: p, port: $4, protocol: $3, targetPort: 9${6:+, nodePort: $6}}]${5:+, $5}}
EOF
}

svc_sched() { # svc_sched NAME IP SCHEDULER: TCP port 80 with svcenv.io/scheduler
        cat <<EOF
---
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: e2e, annotations: {svcenv.io/scheduler: "$3"}}
spec: {clusterIP: $2, ports: [{name: p, port: 80, protocol: TCP, targetPort: 9}]}
EOF
}

# write_cluster [DNS_EPS] [ECHO_B1_STATE]
write_cluster() {
        local dns_eps=${1:-"10.244.1.2 10.244.2.2"} echo_b1=${2:-ready}
        {
                cat <<EOF
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {addresses: [{type: InternalIP, address: 10.99.0.1}]}
EOF
                svc web 10.96.0.10 TCP 80 "type: NodePort" 30080
                svc refuse 10.96.0.20 TCP 80
                svc hole 10.96.0.21 TCP 80
                svc sticky 10.96.0.11 TCP 80 "sessionAffinity: ClientIP"
                svc echo 10.96.0.30 TCP 80
                svc watch 10.96.0.31 TCP 80
                svc dns 10.96.0.13 UDP 53
                svc_sched pinned 10.96.0.40 sh
                svc_sched spread 10.96.0.41 "sh,port"
                slice web-1 web TCP 8080
                for k in 1 2 3; do ep 10.244.$k.2; done
                slice refuse-1 refuse TCP 8080
                ep 10.244.1.2
                ep 10.244.2.2
                slice refuse-2 refuse TCP 8081 # nobody listens: refused
                ep 10.244.3.2
                slice hole-1 hole TCP 8080
                ep 10.244.1.2
                ep 10.244.2.2
                slice hole-2 hole TCP 8082 # dropped in b3
                ep 10.244.3.2
                slice sticky-1 sticky TCP 8080
                for k in 1 2 3; do ep 10.244.$k.2; done
                slice echo-1 echo TCP 8090
                ep 10.244.1.2 "$echo_b1"
                ep 10.244.2.2
                ep 10.244.3.2
                slice watch-1 watch TCP 8091
                for k in 1 2 3; do ep 10.244.$k.2; done
                slice pinned-1 pinned TCP 8080
                for k in 1 2 3; do ep 10.244.$k.2; done
                slice spread-1 spread TCP 8080
                for k in 1 2 3; do ep 10.244.$k.2; done
                slice dns-1 dns UDP 8090
                for a in $dns_eps; do ep "$a"; done
        } >"$tmp/cluster.yaml"
}

serving() { metrics | grep 'svcenv_proxy_connections_total{service="e2e/web:p"' >/dev/null; }
start_proxy() { # start_proxy EXTRA...: waits until the services are served
        proxy_start -f "$tmp/cluster.yaml" --mode userspace --backend "$backend" \
                --hostname-override node-a --min-sync-period 0 "$@"
        wait_for serving
        sleep 0.3 # the rules follow the snapshot
}

tcp() { inns "$CL" python3 "$here/netpeer.py" tcp "$@"; }
peer() { inns "$CL" python3 "$here/uproxy_peer.py" "$@"; }

net_up setup
start_backends
write_cluster
start_proxy --udp-timeout 250ms

tcp 10.96.0.10 80 6 >"$tmp/rr"
check "rr through the ClusterIP visits b1,b2,b3,b1,b2,b3" \
        test "$(tr '\n' ,  <"$tmp/rr")" = "b1,b2,b3,b1,b2,b3,"
tcp 10.99.0.1 30080 3 >"$tmp/np"
check "the NodePort is proxied too (and shares the rr cursor)" \
        test "$(tr '\n' , <"$tmp/np")" = "b1,b2,b3,"

tcp 10.96.0.20 80 60 >"$tmp/refuse"
check "one endpoint refusing: 0 of 60 client connections fail" \
        test "$(grep -c '^b[12]$' "$tmp/refuse")" -eq 60
check "the refusal shows as a retry in /metrics" \
        test "$(metric svcenv_proxy_connect_retries_total e2e/refuse:p)" -ge 1

NETPEER_TIME=1 inns "$CL" python3 "$here/netpeer.py" tcp 10.96.0.21 80 6 5 >"$tmp/hole"
slow=$(awk '$2 >= 240' "$tmp/hole" | wc -l)
check "one endpoint black-holed: all 6 connect, one after the 250 ms timeout" \
        test "$(grep -c '^b[12] ' "$tmp/hole")" -eq 6 -a "$slow" -ge 1
[ "$slow" -ge 1 ] || sed 's/^/# /' "$tmp/hole"

peer udpsess 10.96.0.13 53 send,send,sleep:700,send >"$tmp/udp"
mapfile -t u <"$tmp/udp"
check "UDP: the session keeps its endpoint" \
        test "${u[0]:-x}" = "${u[1]:-y}" -a "${u[0]%%:*}" != ERR
check "UDP: idle past --udp-timeout, the next datagram is a new session (rr)" \
        test -n "${u[2]:-}" -a "${u[2]:-}" != "${u[0]}" -a "${u[2]%%:*}" != ERR
[ "${u[2]:-}" != "${u[0]}" ] || sed 's/^/# /' "$tmp/udp"
check "UDP: a 60000-byte datagram goes through whole" \
        grep -qx 'b[12]:60000' <(peer udpbig 10.96.0.13 53 60000)

check "half-close: the client shuts its write side and still gets the answer" \
        grep -qx 'b[123]:5' <(peer halfclose 10.96.0.30 80)

check "8 MiB one way through splice, then the answer" \
        grep -qx 'b[123]:8388608' <(peer halfclose 10.96.0.30 80 8388608)

# a reset goes through as a reset (as through DNAT), not as a clean FIN
got=$(peer reset 10.96.0.31 80)
for _ in $(seq 30); do
        grep -q ':' "$tmp"/w[123].log 2>/dev/null && break
        sleep 0.1
done
check "a client's reset reaches the backend as a reset" \
        test "$got" = hi -a "$(cat "$tmp"/w[123].log | grep -c ':reset$')" -eq 1
grep -q ':reset$' "$tmp"/w[123].log || cat "$tmp"/w[123].log | sed 's/^/# /'

# sh: the kernel's bucket of the client's address (hash_32 of it, 256
# buckets dealt to the endpoints in turn) decides, for every connection
want=$(python3 -c 'import ipaddress
a = int(ipaddress.ip_address("10.99.0.2"))
print("b%d" % ((((a * 0x61C88647) & 0xffffffff) >> 24) % 3 + 1))')
tcp 10.96.0.40 80 6 >"$tmp/pinned"
check "sh: 6 connections from one client, all to the kernel formula's $want" \
        test "$(sort -u "$tmp/pinned" | tr -d '\n')" = "$want" -a "$(grep -c '^b' "$tmp/pinned")" -eq 6
tcp 10.96.0.41 80 12 >"$tmp/spread"
check "sh,port: the client's ports spread it over more than one endpoint" \
        test "$(sort -u "$tmp/spread" | wc -l)" -ge 2 -a "$(grep -c '^b' "$tmp/spread")" -eq 12

tcp 10.96.0.11 80 6 >"$tmp/sticky"
check "ClientIP affinity: 6 connections, one endpoint" \
        test "$(sort -u "$tmp/sticky" | wc -l)" -eq 1 -a "$(grep -c '^b' "$tmp/sticky")" -eq 6
proxy_stop

# phase 2: long UDP sessions, changes by reload (SIGHUP re-reads -f)
write_cluster
start_proxy --udp-timeout 30s
peer udpsess 10.96.0.13 53 send,send,sleep:2500,send >"$tmp/udp2" &
udp_pid=$!
peer hold 10.96.0.30 80 "$tmp/flag" >"$tmp/hold" &
hold_pid=$!
for _ in $(seq 50); do
        [ -s "$tmp/udp2" ] && grep -q connected "$tmp/hold" && break
        sleep 0.1
done
first=$(head -1 "$tmp/udp2")
keep=10.244.1.2
[ "${first%%:*}" = b1 ] && keep=10.244.2.2
# the UDP session's endpoint leaves; the held echo connection's b1 terminates
write_cluster "$keep" terminating
kill -HUP "$proxy_pid"
sleep 1
for _ in 1 2 3 4 5 6; do peer halfclose 10.96.0.30 80; done >"$tmp/term"
touch "$tmp/flag"
wait "$udp_pid" "$hold_pid"
mapfile -t u <"$tmp/udp2"
check "UDP: removing the endpoint ends its session at once (next datagram elsewhere)" \
        test "${u[0]%%:*}" != ERR -a "${u[1]:-}" = "${u[0]}" -a -n "${u[2]:-}" \
        -a "${u[2]%%:*}" != "${u[0]%%:*}" -a "${u[2]%%:*}" != ERR
[ "${u[2]%%:*}" != "${u[0]%%:*}" ] || sed 's/^/# /' "$tmp/udp2"
check "terminating endpoint: no new connections (6 to b2/b3)" \
        test "$(grep -c '^b[23]:5$' "$tmp/term")" -eq 6
check "terminating endpoint: its open connection runs to its end" \
        grep -qx 'b1:1' "$tmp/hold"
proxy_stop

# phase 3: least connection with a slow backend, pick by pick. The client
# drives one connection a tick and holds each 6 ticks when b2 (the slow
# one) answered, 2 otherwise, so up to 4 are open at once; before each one
# the proxy's per-endpoint counts must equal what the client holds, and the
# pick must be the formula's (uproxy_lc.py). The same drive through an rr
# Service of the same endpoints must disagree: the check tells them apart.
for k in 1 2 3; do peer_start h$k "$p-b$k" uproxy_lc.py serve b$k 8092; done
peers_ready h1 h2 h3
write_cluster
{
        svc_sched least 10.96.0.50 lc
        svc_sched leastrr 10.96.0.51 rr
        for s in least leastrr; do
                slice $s-1 $s TCP 8092
                for k in 1 2 3; do ep 10.244.$k.2; done
        done
        # sh whose bucket for our client ($want, above) refuses
        svc_sched refusesh 10.96.0.52 sh
        slice refusesh-1 refusesh TCP 8080
        for k in 1 2 3; do [ "b$k" = "$want" ] || ep 10.244.$k.2; done
        slice refusesh-2 refusesh TCP 8081
        ep "10.244.${want#b}.2"
} >>"$tmp/cluster.yaml"
start_proxy --metrics-bind-address 0.0.0.0:10249
lc_eps=b1=10.244.1.2:8092,b2=10.244.2.2:8092,b3=10.244.3.2:8092
lc_drive() { # lc_drive VIP SERVICE
        inns "$CL" python3 "$here/uproxy_lc.py" drive "$1" 80 http://10.99.0.1:10249/metrics \
                "$2" "$lc_eps" b2 18 6 2
}
lc_drive 10.96.0.50 e2e/least:p >"$tmp/lc" 2>&1
lc_drive 10.96.0.51 e2e/leastrr:p >"$tmp/lcrr" 2>&1
check "lc: 18 connections, each to the least active*256+inactive (ties to the first)" \
        test "$(awk '/^[0-9]/ && $2 == $3' "$tmp/lc" | wc -l)" -eq 18
read -r _ lc_b1 lc_b2 lc_b3 < <(grep '^total ' "$tmp/lc")
check "lc: the slow backend gets fewer connections (${lc_b1:-} ${lc_b2:-} ${lc_b3:-})" \
        test "${lc_b2#b2=}" -lt "${lc_b1#b1=}" -a "${lc_b2#b2=}" -lt "${lc_b3#b3=}"
lc_metric=$(metrics | awk -F'[{}]' '/^svcenv_proxy_scheduler_picks_total\{service="e2e\/least:p",/ {
        split($2, l, "\""); split($3, v, " ")
        sub(/^10\.244\./, "b", l[6]); sub(/\.2:8092$/, "", l[6])
        printf "%s=%d@%s ", l[6], v[1], l[8] }')
check "lc: svcenv_proxy_scheduler_picks_total counts the picks ($lc_metric)" \
        test "$lc_metric" = "$lc_b1@lc $lc_b2@lc $lc_b3@lc "
check "rr through the same drive breaks the lc formula (the test tells them apart)" \
        test "$(awk '/^[0-9]/ && $2 != $3' "$tmp/lcrr" | wc -l)" -ge 1 -a \
        "$(grep -c '^[0-9]' "$tmp/lcrr")" -eq 18
grep -q '^[0-9]' "$tmp/lc" && grep -q '^total' "$tmp/lc" || sed 's/^/# lc: /' "$tmp/lc"
tcp 10.96.0.52 80 6 >"$tmp/refusesh"
check "sh, its endpoint refusing: 6 of 6 connections placed by round robin on the others" \
        test "$(grep -c '^b[123]$' "$tmp/refusesh")" -eq 6 -a "$(grep -c "^$want\$" "$tmp/refusesh")" -eq 0
sh_sum() { # sh_sum METRIC ENDPOINT_REGEX: the sum over refusesh's matching endpoints
        metrics | awk -v m="$1{service=\"e2e/refusesh:p\"" -v e="$2" \
                'index($0, m) == 1 && $0 ~ ("endpoint=\"" e "\"") { s += $2 } END { print s + 0 }'
}
check "sh: picks_total 6 on the refusing endpoint, fallback_total 6 on the others" \
        test "$(sh_sum svcenv_proxy_scheduler_picks_total "10.244.${want#b}.2:8081")" -eq 6 -a \
        "$(sh_sum svcenv_proxy_scheduler_fallback_total "10.244.[0-9].2:8080")" -eq 6
proxy_stop
inns "$NODE" "$SVCENV/svcenv-proxy" --cleanup >/dev/null 2>&1
check "--cleanup removes the userspace chains, table and mark rule" \
        test -z "$({ inns "$NODE" iptables-save; inns "$NODE" nft list ruleset
                inns "$NODE" ip rule; } 2>/dev/null | grep -i 'svcenv-userspace\|0x800000')"
proxy_errors
