# svcenv rules: the demo cluster's rules per node and backend, upstream's
# TestOverallIPTablesRules cluster, option errors.
. "$(dirname "$0")/lib.bash"
demo=manifests/examples/demo-cluster.yaml
g=test/golden/proxy
golden "rules for node-a (iptables, IPv4 and IPv6)" $g/demo-node-a.iptables \
        "$SVCENV/svcenv" rules -f $demo --node node-a --cluster-cidr 10.244.0.0/16,fd00:244::/48
golden "rules for node-b, IPv4 only, no detector, masquerade-all, localhost NodePorts off" \
        $g/demo-node-b.iptables "$SVCENV/svcenv" rules -f $demo --node node-b --ip-family ipv4 \
        --masquerade-all --localhost-nodeports false --random-fully off --masquerade-bit 13
golden "rules with --nodeport-addresses" $g/demo-nodeport-addresses.iptables \
        "$SVCENV/svcenv" rules -f $demo --node node-a --ip-family ipv4 \
        --cluster-cidr 10.244.0.0/16 --nodeport-addresses "10.0.0.0/24, 127.0.0.0/8"
golden "nftables rules for node-a: NodePorts on its primary IPs (v1.36's default)" \
        $g/demo-node-a.nft "$SVCENV/svcenv" rules -f $demo --node node-a --backend nftables \
        --cluster-cidr 10.244.0.0/16,fd00:244::/48
all_local=$("$SVCENV/svcenv" rules -f $demo --node node-a --backend nftables \
        --nodeport-addresses 0.0.0.0/0,::/0)
if grep -qx $'\t\tfib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports' <<<"$all_local" &&
        grep -qx $'\t\tfib daddr type local ip6 daddr != ::1 meta l4proto . th dport vmap @service-nodeports' <<<"$all_local" &&
        ! grep -q nodeport-ips <<<"$all_local"; then
        ok "nftables --nodeport-addresses 0.0.0.0/0,::/0: every local address"
else
        not_ok "nftables --nodeport-addresses 0.0.0.0/0,::/0: every local address"
fi
golden "upstream's overall cluster, unsorted emission order" $g/overall-raw.iptables \
        "$SVCENV/svcenv" rules -f $g/overall.yaml --node test-node --cluster-cidr 10.0.0.0/8 \
        --nfacct on --random-fully off
if "$SVCENV/svcenv" rules --help | grep -q -- '--backend'; then ok "rules --help"; else not_ok "rules --help"; fi
fails_with "--node is required" 2 "svcenv rules: --node NAME is required (see 'svcenv rules --help')" \
        "$SVCENV/svcenv" rules -f $demo
fails_with "bad backend" 2 "svcenv rules: --backend wants iptables or nftables, not \"ipvs\" (see 'svcenv rules --help')" \
        "$SVCENV/svcenv" rules -f $demo --node node-a --backend ipvs
fails_with "bad CIDR" 2 "svcenv rules: --nodeport-addresses: invalid CIDR \"10.0.0.1\" (see 'svcenv rules --help')" \
        "$SVCENV/svcenv" rules -f $demo --node node-a --nodeport-addresses 10.0.0.0/8,10.0.0.1
fails_with "unknown node without --node-ip" 3 "svcenv: node \"nope\" is not in the cluster (give --node-ip)" \
        "$SVCENV/svcenv" rules -f $demo --node nope
fails_with "bad --random-fully" 2 "svcenv rules: --random-fully wants auto, on or off, not \"maybe\" (see 'svcenv rules --help')" \
        "$SVCENV/svcenv" rules -f $demo --node node-a --random-fully maybe
echo "1..$n"
