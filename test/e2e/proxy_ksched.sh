#!/usr/bin/env bash
# The schedulers nftables runs in the kernel (svcenv.io/scheduler rr, sh,
# dh, mh) against real traffic: the rules are applied with `svcenv rules
# --backend nftables --apply` in a node namespace made here, a client
# namespace with several addresses connects through them to three backends,
# and what `svcenv trace` says is checked against where the connections go:
# rr takes the endpoints in the map's order, A, B, C, A, B, C; sh pins each
# client address (and with the port flag each address and port) to the one
# endpoint the trace computes from the kernel's jhash; dh sends everything
# to the one endpoint the trace names; mh pins as the trace says; both
# families. Only addresses inside these namespaces are used. Needs root;
# prints a visible SKIP without.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${SVCENV:=$PWD/build/bin}"
here=$PWD/test/e2e
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; }
check() { if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (want '$2', got '$3')"; fi; }

if [ "$(id -u)" -ne 0 ]; then
        echo "ok 1 # SKIP e2e ksched: needs root for network namespaces"
        exit 0
fi
for tool in ip python3 nft; do
        if ! command -v "$tool" >/dev/null; then
                echo "not ok 1 - e2e ksched: $tool is missing (test/ensure-deps)"
                exit 1
        fi
done

p=ks$$
NODE=$p-node CL=$p-cl
tmp=$(mktemp -d)
pids=()
cleanup() {
        for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
        for ns in "$CL" "$p-b1" "$p-b2" "$p-b3" "$NODE"; do ip netns del "$ns" 2>/dev/null; done
        rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
must() { "$@" || { echo "failed: $*"; exit 1; }; }

CLIENTS4="10.99.0.2 10.99.0.3 10.99.0.4 10.99.0.5 10.99.0.6 10.99.0.7 10.99.0.8 10.99.0.9"
CLIENTS6="fd00:99::2 fd00:99::3 fd00:99::4 fd00:99::5"

# a client with several addresses, a node and three backends (10.244.k.2)
setup() {
        local k ns a
        for ns in "$NODE" "$CL" "$p-b1" "$p-b2" "$p-b3"; do
                must ip netns add "$ns"
                must inns "$ns" ip link set lo up
        done
        must inns "$NODE" sysctl -qw net.ipv4.ip_forward=1
        must inns "$NODE" sysctl -qw net.ipv6.conf.all.forwarding=1
        must ip link add vc netns "$CL" type veth peer name vn netns "$NODE"
        for a in $CLIENTS4; do must inns "$CL" ip addr add $a/24 dev vc; done
        for a in $CLIENTS6; do must inns "$CL" ip addr add $a/64 dev vc nodad; done
        must inns "$CL" ip link set vc up
        must inns "$CL" ip route add default via 10.99.0.1
        must inns "$CL" ip -6 route add default via fd00:99::1
        must inns "$NODE" ip addr add 10.99.0.1/24 dev vn
        must inns "$NODE" ip addr add fd00:99::1/64 dev vn nodad
        must inns "$NODE" ip link set vn up
        must inns "$NODE" ip link add up0 type veth peer name up1
        must inns "$NODE" ip link set up1 up
        must inns "$NODE" ip link set up0 up
        must inns "$NODE" ip route add 10.96.0.0/16 dev up0
        must inns "$NODE" ip -6 route add fd00:96::/112 dev up0
        for k in 1 2 3; do
                ns=$p-b$k
                must ip link add eth0 netns "$ns" type veth peer name vb$k netns "$NODE"
                must inns "$NODE" ip addr add 10.244.$k.1/24 dev vb$k
                must inns "$NODE" ip addr add fd00:244:$k::1/64 dev vb$k nodad
                must inns "$NODE" ip link set vb$k up
                must inns "$ns" ip addr add 10.244.$k.2/24 dev eth0
                must inns "$ns" ip addr add fd00:244:$k::2/64 dev eth0 nodad
                must inns "$ns" ip link set eth0 up
                must inns "$ns" ip route add default via 10.244.$k.1
                must inns "$ns" ip -6 route add default via fd00:244:$k::1
        done
}

start_backends() {
        local k
        for k in 1 2 3; do
                ip netns exec "$p-b$k" python3 "$here/netpeer.py" serve b$k 8080 >"$tmp/b$k.log" 2>&1 &
                pids+=($!)
        done
        for k in 1 2 3; do
                for _ in $(seq 50); do
                        grep -q ready "$tmp/b$k.log" 2>/dev/null && break
                        sleep 0.1
                done
        done
}

svc() { # svc NAME SCHEDULER CLUSTER-IP [FAMILY]
        printf -- '---\napiVersion: v1\nkind: Service\n'
        printf 'metadata: {name: %s, namespace: e2e, annotations: {svcenv.io/scheduler: "%s"}}\n' "$1" "$2"
        printf 'spec: {clusterIP: "%s", ipFamilies: [%s], ports: [{name: http, port: 80, targetPort: 8080}]}\n' \
                "$3" "${4:-IPv4}"
        printf -- '---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n'
        printf 'metadata: {name: %s-1, namespace: e2e, labels: {kubernetes.io/service-name: %s}}\n' "$1" "$1"
        printf 'addressType: %s\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n' "${4:-IPv4}"
        if [ "${4:-IPv4}" = IPv6 ]; then
                printf -- '- {addresses: ["fd00:244:%s::2"], nodeName: node-b}\n' 1 2 3
        else
                printf -- '- {addresses: [10.244.%s.2], nodeName: node-b}\n' 1 2 3
        fi
}

write_cluster() {
        {
                cat <<EOF
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {addresses: [{type: InternalIP, address: 10.99.0.1}, {type: InternalIP, address: "fd00:99::1"}]}
EOF
                svc rr rr 10.96.0.30
                svc sh sh 10.96.0.31
                svc shp sh,port 10.96.0.32
                svc dh dh 10.96.0.33
                svc mh mh 10.96.0.34
                svc sh6 sh fd00:96::31 IPv6
                svc mh6 mh fd00:96::34 IPv6
        } >"$tmp/cluster.yaml"
}

opts=(-f "$tmp/cluster.yaml" --node node-a --cluster-cidr 10.244.0.0/16,fd00:244::/32)

# traced FROM TO: the backend (b1..b3) the trace gives probability 1, else
# the trace's endpoints as "bK=P" in map order
traced() {
        "$SVCENV/svcenv" trace "${opts[@]}" --mode nftables --from "$1" --to "$2" -o json |
                python3 -c 'import json, re, sys
d = json.load(sys.stdin)
name = lambda e: "b" + re.search(r"244[.:](\d+)", e["endpoint"]).group(1)
one = [name(e) for e in d["endpoints"] if e["probability"] == 1.0]
print(one[0] if len(one) == 1 and d["verdict"] == "DNAT" else
      " ".join("%s=%.4f" % (name(e), e["probability"]) for e in d["endpoints"]))'
}

# connect SRC[:PORT] DST COUNT: COUNT connections from that address (and
# port) to DST port 80, the answers on one line
connect() {
        inns "$CL" python3 - "$@" <<'EOF'
import socket, sys
src, dst, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
port = 0
if src.count(":") == 1 or src.startswith("["):
    src, port = src.strip("[").replace("]", "").rsplit(":", 1)
    port = int(port)
fam = socket.AF_INET6 if ":" in dst else socket.AF_INET
out = []
for _ in range(count):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.settimeout(3)
    try:
        s.bind((src, port))
        s.connect((dst, 80))
        out.append(s.makefile().readline().strip() or "ERR:empty")
    except OSError as e:
        out.append("ERR:" + (e.strerror or str(e)).replace(" ", "_"))
    s.close()
print(" ".join(out))
EOF
}

if ! (setup) >"$tmp/setup.log" 2>&1; then
        not_ok "network namespaces set up"
        sed 's/^/# /' "$tmp/setup.log"
        exit 1
fi
start_backends
write_cluster

"$SVCENV/svcenv" rules "${opts[@]}" --backend nftables >"$tmp/rules.nft" 2>"$tmp/rules.err"
missing=""
for form in "numgen inc mod 3 map @dnat-rr-service-" \
        "jhash ip saddr mod 256 seed 0x5c4ed001 map @dnat-jh-service-" \
        "jhash ip saddr . tcp sport mod 256 seed 0x5c4ed001 map @dnat-jh-service-" \
        "jhash ip daddr mod 256 seed 0x5c4ed001 map @dnat-jh-service-" \
        "jhash ip saddr mod 4093 seed 0x5c4ed001 map @dnat-jh-service-" \
        "jhash ip6 saddr mod 256 seed 0x5c4ed001 map @dnat-jh-service-" \
        "jhash ip6 saddr mod 4093 seed 0x5c4ed001 map @dnat-jh-service-"; do
        grep -qF -- "$form" "$tmp/rules.nft" || missing="$missing [$form]"
done
check "svcenv rules --backend nftables shows numgen inc and the seeded jhash forms" "" "$missing"

if inns "$NODE" "$SVCENV/svcenv" rules "${opts[@]}" --backend nftables --apply 2>"$tmp/apply.err"; then
        ok "rules applied in the node namespace"
else
        not_ok "rules applied in the node namespace ($(head -c 300 "$tmp/apply.err"))"
        echo "1..$n"
        exit 1
fi

# rr: the trace says round robin, each 1/3; nine connections go around the
# map three times in its order (the kernel's counter starts at 0)
order=$(traced 10.99.0.2 10.96.0.30:80)
got=$(connect 10.99.0.2 10.96.0.30 9)
want=$(python3 -c 'import sys; o = [x.split("=")[0] for x in sys.argv[1].split()]; print(" ".join(o * 3))' "$order")
check "rr: traced each 1/3 ($order); 9 connections visit the map in order" \
        "b1=0.3333 b2=0.3333 b3=0.3333|$want" "$order|$got"

# sh: each client address is pinned to the endpoint the trace computes
pinned=() seen=""
for a in $CLIENTS4; do
        t=$(traced $a 10.96.0.31:80)
        got=$(connect $a 10.96.0.31 4)
        pinned+=("$a:$t:$got")
        [ "$got" = "$t $t $t $t" ] || seen="$seen [$a traced $t, got $got]"
done
distinct=$(printf '%s\n' "${pinned[@]}" | cut -d: -f2 | sort -u | wc -l)
check "sh: ${#pinned[@]} client addresses each pinned to the traced endpoint ($distinct distinct)" \
        "" "$seen$([ "$distinct" -ge 2 ] || echo ' all on one endpoint')"

# sh,port: the source port joins the key; each (address, port) as traced
seen="" count=0
for a in 10.99.0.2 10.99.0.3 10.99.0.4; do
        for port in 40001 40002 40003 40004; do
                t=$(traced $a:$port 10.96.0.32:80)
                got=$(connect $a:$port 10.96.0.32 1)
                count=$((count + 1))
                [ "$got" = "$t" ] || seen="$seen [$a:$port traced $t, got $got]"
        done
done
check "sh,port: $count client address:port pairs each reach the traced endpoint" "" "$seen"

# dh: the destination decides; every client goes to the one traced endpoint
first=$(traced 10.99.0.2 10.96.0.33:80)
seen=""
for a in $CLIENTS4; do
        t=$(traced $a 10.96.0.33:80)
        got=$(connect $a 10.96.0.33 2)
        [ "$t" = "$first" ] && [ "$got" = "$t $t" ] || seen="$seen [$a traced $t, got $got]"
done
check "dh: every client address reaches the one traced endpoint ($first)" "" "$seen"

# mh: Maglev slots, pinned as traced, both families
seen=""
for a in $CLIENTS4; do
        t=$(traced $a 10.96.0.34:80)
        got=$(connect $a 10.96.0.34 3)
        [ "$got" = "$t $t $t" ] || seen="$seen [$a traced $t, got $got]"
done
check "mh: each client address reaches the traced endpoint" "" "$seen"

seen="" ends=""
for a in $CLIENTS6; do
        for case in sh6:fd00:96::31 mh6:fd00:96::34; do
                vip=${case#*:}
                t=$(traced $a "[$vip]:80")
                got=$(connect $a $vip 3)
                ends="$ends $t"
                [ "$got" = "$t $t $t" ] || seen="$seen [${case%%:*} $a traced $t, got $got]"
        done
done
check "IPv6 sh and mh: each client address reaches the traced endpoint ($ends )" "" "$seen"
echo "1..$n"
