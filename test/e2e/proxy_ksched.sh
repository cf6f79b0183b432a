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
. "$(dirname "$0")/lib.bash"
e2e_init ks ksched ip python3 nft

CLIENTS4="10.99.0.2 10.99.0.3 10.99.0.4 10.99.0.5 10.99.0.6 10.99.0.7 10.99.0.8 10.99.0.9"
CLIENTS6="fd00:99::2 fd00:99::3 fd00:99::4 fd00:99::5"

# a client with several addresses, a node and three backends (10.244.k.2)
NET_DUAL=1 NET_CLIENTS4=$CLIENTS4 NET_CLIENTS6=$CLIENTS6
NET_ROUTES="10.96.0.0/16 fd00:96::/112"

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

net_up
serve_backends
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
check_eq "svcenv rules --backend nftables shows numgen inc and the seeded jhash forms" "" "$missing"

if inns "$NODE" "$SVCENV/svcenv" rules "${opts[@]}" --backend nftables --apply 2>"$tmp/apply.err"; then
        ok "rules applied in the node namespace"
else
        not_ok "rules applied in the node namespace ($(head -c 300 "$tmp/apply.err"))"
        plan
        exit 1
fi

# rr: the trace says round robin, each 1/3; nine connections go around the
# map three times in its order (the kernel's counter starts at 0)
order=$(traced 10.99.0.2 10.96.0.30:80)
got=$(connect 10.99.0.2 10.96.0.30 9)
want=$(python3 -c 'import sys; o = [x.split("=")[0] for x in sys.argv[1].split()]; print(" ".join(o * 3))' "$order")
check_eq "rr: traced each 1/3 ($order); 9 connections visit the map in order" \
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
check_eq "sh: ${#pinned[@]} client addresses each pinned to the traced endpoint ($distinct distinct)" \
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
check_eq "sh,port: $count client address:port pairs each reach the traced endpoint" "" "$seen"

# dh: the destination decides; every client goes to the one traced endpoint
first=$(traced 10.99.0.2 10.96.0.33:80)
seen=""
for a in $CLIENTS4; do
        t=$(traced $a 10.96.0.33:80)
        got=$(connect $a 10.96.0.33 2)
        [ "$t" = "$first" ] && [ "$got" = "$t $t" ] || seen="$seen [$a traced $t, got $got]"
done
check_eq "dh: every client address reaches the one traced endpoint ($first)" "" "$seen"

# mh: Maglev slots, pinned as traced, both families
seen=""
for a in $CLIENTS4; do
        t=$(traced $a 10.96.0.34:80)
        got=$(connect $a 10.96.0.34 3)
        [ "$got" = "$t $t $t" ] || seen="$seen [$a traced $t, got $got]"
done
check_eq "mh: each client address reaches the traced endpoint" "" "$seen"

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
check_eq "IPv6 sh and mh: each client address reaches the traced endpoint ($ends )" "" "$seen"
plan
