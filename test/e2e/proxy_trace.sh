#!/usr/bin/env bash
# svcenv trace against real traffic: the rules are applied with
# `svcenv rules --apply` in a node namespace made here (iptables, then
# nftables), and what `svcenv trace` says of a packet is checked against
# where real connections from a client namespace go: the verdict
# (DNAT / REJECT / DROP), the endpoint it names when there is one (a single
# endpoint, ClientIP affinity), and its probabilities against the spread of
# 300 connections (a chi-square bound that fails when they are wrong, e.g.
# 1/3 each where topology hints leave two endpoints). Only addresses inside
# these namespaces are used. Needs root; prints a visible SKIP without.
. "$(dirname "$0")/lib.bash"
e2e_init st trace ip python3 iptables-restore nft

# a client, a node and three backends (10.244.k.2), each on its own veth;
# service and LB addresses are routed on (as a default route would), so
# what no rule takes reaches FORWARD instead of "no route"
NET_DUAL=1 NET_ROUTES="10.96.0.0/16 198.51.100.0/24 fd00:96::/112"

svc() { # svc NAME CLUSTER-IP SPEC-EXTRA [STATUS]
        printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: e2e}\n' "$1"
        printf 'spec: {clusterIP: %s, ports: [{name: http, port: 80, targetPort: 8080%s}]%s}\n' \
                "$2" "${5:-}" "$3"
        [ -n "${4:-}" ] && printf 'status: %s\n' "$4"
        return 0
}

slice() { # slice SVC ENDPOINT... (ENDPOINT = ip@node[@zone hint])
        local s=$1 ep
        shift
        printf -- '---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n'
        printf 'metadata: {name: %s-1, namespace: e2e, labels: {kubernetes.io/service-name: %s}}\n' "$s" "$s"
        printf 'addressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n'
        for ep in "$@"; do
                IFS=@ read -r ip node zone <<<"$ep"
                printf -- '- {addresses: [%s], nodeName: %s, conditions: {ready: true}' "$ip" "$node"
                [ -n "$zone" ] && printf ', hints: {forZones: [{name: %s}]}' "$zone"
                printf '}\n'
        done
}

write_cluster() {
        {
                cat <<EOF
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {topology.kubernetes.io/zone: z1}}
status: {addresses: [{type: InternalIP, address: 10.99.0.1}, {type: InternalIP, address: "fd00:99::1"}]}
EOF
                svc web 10.96.0.10 ""
                slice web 10.244.1.2@node-a 10.244.2.2@node-b 10.244.3.2@node-b
                svc zoned 10.96.0.20 ""
                slice zoned 10.244.1.2@node-a@z1 10.244.2.2@node-b@z1 10.244.3.2@node-b@z2
                svc web6 '"fd00:96::10"' ", clusterIPs: [\"fd00:96::10\"], ipFamilies: [IPv6]"
                slice web6 fd00:244:1::2@node-a fd00:244:2::2@node-b fd00:244:3::2@node-b |
                        sed 's/addressType: IPv4/addressType: IPv6/'
                svc sticky 10.96.0.11 ", sessionAffinity: ClientIP"
                slice sticky 10.244.1.2@node-a 10.244.2.2@node-b 10.244.3.2@node-b
                svc empty 10.96.0.12 ""
                svc local 10.96.0.14 ", type: NodePort, externalTrafficPolicy: Local" "" ", nodePort: 30081"
                slice local 10.244.1.2@node-a 10.244.2.2@node-b
                svc remote 10.96.0.15 ", type: NodePort, externalTrafficPolicy: Local" "" ", nodePort: 30082"
                slice remote 10.244.3.2@node-b
                svc open 10.96.0.16 ", type: LoadBalancer, loadBalancerSourceRanges: [10.99.0.0/24]" \
                        "{loadBalancer: {ingress: [{ip: 198.51.100.7}]}}" ", nodePort: 30083"
                slice open 10.244.1.2@node-a 10.244.2.2@node-b 10.244.3.2@node-b
                svc closed 10.96.0.17 ", type: LoadBalancer, loadBalancerSourceRanges: [203.0.113.0/24]" \
                        "{loadBalancer: {ingress: [{ip: 198.51.100.8}]}}" ", nodePort: 30084"
                slice closed 10.244.1.2@node-a
        } >"$tmp/cluster.yaml"
}

opts=(-f "$tmp/cluster.yaml" --node node-a --cluster-cidr 10.244.0.0/16,fd00:244::/32)

# trace MODE TO [FROM]: svcenv's verdict and endpoints as "verdict" then
# "backend probability" lines (endpoint 10.244.k.2 / fd00:244:k::2 is
# backend bk)
trace() {
        "$SVCENV/svcenv" trace "${opts[@]}" --mode "$1" --from "${3:-10.99.0.2}" --to "$2" -o json |
                python3 -c 'import json, re, sys
d = json.load(sys.stdin)
print(d["verdict"], "affinity" if d["affinity"] else "-")
for e in d["endpoints"]:
    print("b" + re.search(r"244[.:](\d+)", e["endpoint"]).group(1), "%.10f" % e["probability"])'
}

# fits TRACE ANSWERS: every answer is an endpoint the trace names, and
# the counts fit its probabilities (chi-square below the 1e-4 point of its
# degrees of freedom; an endpoint with probability 0 must get nothing)
fits() {
        python3 - "$1" "$2" <<'EOF'
import sys
lines = open(sys.argv[1]).read().split("\n")[1:]
p = {l.split()[0]: float(l.split()[1]) for l in lines if l.strip()}
got = [l.strip() for l in open(sys.argv[2]) if l.strip()]
bad = [g for g in got if g not in p]
if bad:
    print("# answers the trace does not name:", sorted(set(bad)))
    sys.exit(1)
n = len(got)
chi = sum((got.count(b) - n * q) ** 2 / (n * q) for b, q in p.items() if q > 0)
limit = {0: 0.0, 1: 15.14, 2: 18.42, 3: 21.11}[len(p) - 1]
print("# %d answers %s, trace %s: chi-square %.2f (limit %.2f)" %
      (n, {b: got.count(b) for b in sorted(p)}, p, chi, limit))
sys.exit(0 if chi <= limit else 1)
EOF
}

traffic() { inns "$CL" python3 "$here/netpeer.py" "$@"; }

net_up
serve_backends
write_cluster

for mode in iptables nftables; do
        # each mode starts from a node without the other's rules
        inns "$NODE" nft flush ruleset 2>/dev/null
        if inns "$NODE" "$SVCENV/svcenv" rules "${opts[@]}" --backend $mode --apply \
                2>"$tmp/apply.err"; then
                ok "$mode: rules applied in the node namespace"
        else
                not_ok "$mode: rules applied in the node namespace ($(head -c 200 "$tmp/apply.err"))"
                continue
        fi

        # spreads: three endpoints at 1/3; topology hints leave two at 1/2
        for case in web:10.96.0.10 zoned:10.96.0.20 open:198.51.100.7 web6:fd00:96::10; do
                name=${case%%:*} ip=${case#*:} from=10.99.0.2 to=$ip:80
                [ "$name" = web6 ] && from=fd00:99::2 to="[$ip]:80"
                trace $mode "$to" $from >"$tmp/t-$name"
                traffic tcp $ip 80 300 >"$tmp/a-$name"
                fits "$tmp/t-$name" "$tmp/a-$name" >"$tmp/f-$name"
                rc=$?
                if [ "$(head -1 "$tmp/t-$name")" = "DNAT -" ] && [ $rc -eq 0 ]; then
                        ok "$mode: $name's probabilities match 300 connections"
                else
                        not_ok "$mode: $name's probabilities match 300 connections"
                fi
                sed 's/^/  /' "$tmp/f-$name"
        done
        # the bound has teeth: 1/3 each, where hints leave two endpoints, is refused
        printf 'DNAT -\nb1 0.3333333333\nb2 0.3333333333\nb3 0.3333333334\n' >"$tmp/t-wrong"
        if ! fits "$tmp/t-wrong" "$tmp/a-zoned" >"$tmp/f-wrong"; then
                ok "$mode: a wrong spread (1/3 each for zoned) does not fit the same connections"
        else
                not_ok "$mode: a wrong spread (1/3 each for zoned) does not fit the same connections"
        fi
        sed 's/^/  /' "$tmp/f-wrong"

        # a single endpoint: externalTrafficPolicy Local from outside
        trace $mode 10.99.0.1:30081 >"$tmp/t-local"
        traffic tcp 10.99.0.1 30081 20 >"$tmp/a-local"
        if [ "$(cat "$tmp/t-local")" = $'DNAT -\nb1 1.0000000000' ] &&
                [ "$(sort -u "$tmp/a-local")" = b1 ]; then
                ok "$mode: the single endpoint traced (eTP Local NodePort) is the one reached"
        else
                not_ok "$mode: the single endpoint traced (eTP Local NodePort) is the one reached ($(tr '\n' ' ' <"$tmp/t-local") / $(sort "$tmp/a-local" | uniq -c | tr -s '\n ' ' '))"
        fi

        # affinity: traced as such, and every connection goes to one of its endpoints, the same
        trace $mode 10.96.0.11:80 >"$tmp/t-sticky"
        traffic tcp 10.96.0.11 80 30 >"$tmp/a-sticky"
        pinned=$(sort -u "$tmp/a-sticky")
        if [ "$(head -1 "$tmp/t-sticky")" = "DNAT affinity" ] && [ "$(wc -l <<<"$pinned")" -eq 1 ] &&
                grep -q "^$pinned " "$tmp/t-sticky"; then
                ok "$mode: ClientIP affinity traced; the client is pinned to a traced endpoint ($pinned)"
        else
                not_ok "$mode: ClientIP affinity traced; the client is pinned to a traced endpoint ($(tr '\n' ' ' <"$tmp/t-sticky") / $pinned)"
        fi
        # on the node, the kernel's affinity state names the endpoint the client is pinned to
        held=$(inns "$NODE" "$SVCENV/svcenv" trace "${opts[@]}" --mode $mode --from 10.99.0.2 \
                --to 10.96.0.11:80 --affinity-state -o json 2>"$tmp/held.err" |
                python3 -c 'import json, sys
d = json.load(sys.stdin)
print(" ".join("b" + e["endpoint"].split(":")[0].split(".")[2] for e in d["endpoints"] if e["pinned"]))')
        if [ -n "$pinned" ] && [ "$held" = "$pinned" ]; then
                ok "$mode: --affinity-state names the endpoint the client reaches ($held)"
        else
                not_ok "$mode: --affinity-state names the endpoint the client reaches (trace: '$held', traffic: '$pinned' $(head -c 200 "$tmp/held.err"))"
        fi
        held=$(inns "$NODE" "$SVCENV/svcenv" trace "${opts[@]}" --mode $mode --from 10.99.0.3 \
                --to 10.96.0.11:80 --affinity-state 2>&1)
        if grep -q "state has no entry for 10.99.0.3" <<<"$held" && ! grep -q "pinned by" <<<"$held"; then
                ok "$mode: --affinity-state pins no endpoint for a client never seen"
        else
                not_ok "$mode: --affinity-state pins no endpoint for a client never seen"
                sed 's/^/# /' <<<"$held"
        fi

        # verdicts without DNAT: REJECT refuses at once, DROP times out
        for case in empty:10.96.0.12:80:REJECT remote:10.99.0.1:30082:DROP closed:198.51.100.8:80:DROP; do
                IFS=: read -r name ip port want <<<"$case"
                trace $mode $ip:$port >"$tmp/t-$name"
                traffic tcp $ip $port 1 1 >"$tmp/a-$name"
                got=$(cat "$tmp/a-$name")
                expect=$([ "$want" = REJECT ] && echo ERR:ECONNREFUSED || echo ERR:timeout)
                if [ "$(cat "$tmp/t-$name")" = "$want -" ] && [ "$got" = "$expect" ]; then
                        ok "$mode: $name traced $want and the connection gets $got"
                else
                        not_ok "$mode: $name traced $want and the connection gets $expect ($(tr '\n' ' ' <"$tmp/t-$name") / $got)"
                fi
        done
done
plan
