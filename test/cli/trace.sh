# svcenv trace: the demo cluster's packets through both modes, JSON, and
# the one-line errors of bad input.
. "$(dirname "$0")/lib.bash"
demo=manifests/examples/demo-cluster.yaml
g=test/golden/trace
t() { "$SVCENV/svcenv" trace -f $demo --node node-a --cluster-cidr 10.244.0.0/16,fd00:244::/48 "$@"; }
golden "ClusterIP with ClientIP affinity, from a pod (iptables)" $g/cart-iptables.txt \
        t --from 10.244.1.5 --to 10.96.20.20:8080
golden "the same in nftables" $g/cart-nftables.txt t --from 10.244.1.5 --to 10.96.20.20:8080 \
        --mode nftables
golden "LoadBalancer with externalTrafficPolicy Local from outside (iptables)" \
        $g/frontend-lb.txt t --from 203.0.113.9 --to 203.0.113.10:80
golden "internalTrafficPolicy Local (nftables)" $g/cache-nftables.txt \
        t --from 10.244.1.5 --to 10.96.20.60:6379 --mode nftables
golden "NodePort from outside the cluster (iptables, JSON)" $g/catalog-nodeport.json \
        t --from 192.0.2.9 --to 10.0.0.11:31090 -o json
golden "IPv6 ClusterIP (nftables)" $g/payments-ipv6.txt \
        t --from fd00:244:2::9 --to "[fd00:96::40]:443" --mode nftables
golden "not a service address" $g/none.txt t --from 10.244.1.5 --to 10.1.2.3:80/udp
json=$(t --from 10.244.1.5 --to 10.96.20.20:8080 --mode nftables -o json)
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["verdict"]=="DNAT";
assert abs(sum(e["probability"] for e in d["endpoints"])-1)<1e-9; assert d["affinity"]["timeoutSeconds"]==600' "$json"; then
        ok "-o json is JSON: a DNAT whose probabilities sum to 1, affinity 600 s"
else
        not_ok "-o json is JSON: a DNAT whose probabilities sum to 1, affinity 600 s"
fi
if "$SVCENV/svcenv" trace --help | grep -q -- '--from IP'; then ok "trace --help"; else not_ok "trace --help"; fi
fails_with "unknown node" 3 "svcenv: node \"nope\" is not in the cluster (give --node-ip)" \
        "$SVCENV/svcenv" trace -f $demo --node nope --from 10.0.0.1 --to 10.96.20.20:8080
fails_with "--to without a port" 2 "svcenv trace: --to: \"10.96.20.20\" is not IP:PORT[/PROTO] ([IP]:PORT for IPv6) (see 'svcenv trace --help')" \
        t --from 10.0.0.1 --to 10.96.20.20
fails_with "--to with a bad port" 2 "svcenv trace: --to: port \"70000\" is not 1..65535 (see 'svcenv trace --help')" \
        t --from 10.0.0.1 --to 10.96.20.20:70000
fails_with "--to with a bad protocol" 2 "svcenv trace: --to: protocol \"icmp\" is not tcp, udp or sctp (see 'svcenv trace --help')" \
        t --from 10.0.0.1 --to 10.96.20.20:80/icmp
fails_with "unparsable --from" 2 "svcenv trace: --from: \"10.0.0\" is not IP or IP:PORT ([IP]:PORT for IPv6) (see 'svcenv trace --help')" \
        t --from 10.0.0 --to 10.96.20.20:8080
fails_with "families differ" 2 "svcenv trace: --from fd00::1 and --to 10.96.20.20:8080 are of different families (see 'svcenv trace --help')" \
        t --from fd00::1 --to 10.96.20.20:8080
fails_with "--to missing" 2 "svcenv trace: --from IP[:PORT] and --to IP:PORT[/PROTO] are required (see 'svcenv trace --help')" \
        t --from 10.0.0.1
fails_with "--node missing" 2 "svcenv trace: --node NAME is required (see 'svcenv trace --help')" \
        "$SVCENV/svcenv" trace -f $demo --from 10.0.0.1 --to 10.96.20.20:8080
fails_with "bad mode" 2 "svcenv trace: --mode wants iptables or nftables, not \"ipvs\" (see 'svcenv trace --help')" \
        t --from 10.0.0.1 --to 10.96.20.20:8080 --mode ipvs
fails_with "bad output" 2 "svcenv trace: -o wants text or json, not \"yaml\" (see 'svcenv trace --help')" \
        t --from 10.0.0.1 --to 10.96.20.20:8080 -o yaml
fails_with "bad --cluster-cidr names trace" 2 "svcenv trace: --cluster-cidr: invalid CIDR \"10.0.0.0/33\" (see 'svcenv trace --help')" \
        "$SVCENV/svcenv" trace -f $demo --node node-a --cluster-cidr 10.0.0.0/33 --from 10.0.0.1 --to 10.96.20.20:8080
echo "1..$n"
