# svcenv-controller and Topology Aware Routing against the real API server:
# a Service with topology-mode Auto gets CPU-proportional zone hints and a
# TopologyAwareHintsEnabled event; a node going NotReady refreshes the
# topology cache and re-syncs the Service (hints removed, Warning event),
# as kube-controller-manager's node handlers do.
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/ctl.bash"
ctl_setup ctltopo
ctl_cleanup_more() {
        for z in a b; do kapi delete /api/v1/nodes/$ns-$z >/dev/null 2>&1; done
}

node_status() { # node_status ZONE-LETTER True|False
        kapi patch /api/v1/nodes/$ns-$1/status "{\"status\":{\"capacity\":{\"cpu\":\"4\"},\"allocatable\":{\"cpu\":\"4\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"$2\",\"reason\":\"Test\",\"message\":\"test\"}]}}" >/dev/null
}
kapi post /api/v1/namespaces - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}" >/dev/null
for z in a b; do
        kapi post /api/v1/nodes - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$ns-$z\",\"labels\":{\"topology.kubernetes.io/zone\":\"$ns-zone-$z\"}}}" >/dev/null
        node_status $z True
done
kapi post /api/v1/namespaces/$ns/services - >/dev/null <<<'{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","annotations":{"service.kubernetes.io/topology-mode":"Auto"}},"spec":{"selector":{"app":"web"},"ports":[{"port":80}]}}'
# three pods in zone a, one in zone b: zone a gives one endpoint to zone b
i=0
for z in a a a b; do
        i=$((i + 1))
        kapi post /api/v1/namespaces/$ns/pods - >/dev/null <<<"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-$i\",\"labels\":{\"app\":\"web\"}},\"spec\":{\"nodeName\":\"$ns-$z\",\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}"
        kapi patch-status $ns web-$i "{\"status\":{\"phase\":\"Running\",\"podIP\":\"10.9.0.$i\",\"podIPs\":[{\"ip\":\"10.9.0.$i\"}],\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}" >/dev/null
done

# hints: "zone-letter>hint-letter" per endpoint, sorted ("-": no hint)
hints() {
        kapi get "/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices?labelSelector=kubernetes.io/service-name=web" |
                jq -r --arg p "$ns-zone-" '[.items[].endpoints[]? | "\(.zone | ltrimstr($p))>\(.hints.forZones[0].name // "-" | ltrimstr($p))"] | sort | join(" ")'
}
# event REASON: "type|message" of the newest such event on the Service;
# event_count REASON: its count
newest() {
        kapi get "/api/v1/namespaces/$ns/events?fieldSelector=reason=$1" |
                jq -r '.items | map(select(.involvedObject.kind == "Service" and .involvedObject.name == "web")) | sort_by(.lastTimestamp) | last // empty | '"$2"
}
event() { newest "$1" '"\(.type)|\(.message)"'; }
event_count() { newest "$1" .count; }
twice() { [ "$(event_count "$1")" -ge 2 ]; }

check "controller starts" start_ctl a --leader-elect=false
check "zone a gives one of its three endpoints to zone b" until_ok 30 eq "a>a a>a a>b b>b" hints
check "TopologyAwareHintsEnabled on the Service" until_ok 30 eq \
        "Normal|Topology Aware Hints has been enabled, addressType: IPv4" event TopologyAwareHintsEnabled

# a node goes NotReady: one zone left, no shares, the Service is re-synced
node_status b False
check "a node going NotReady removes the hints" until_ok 30 eq "a>- a>- a>- b>-" hints
check "with upstream's Warning" until_ok 30 eq \
        "Warning|Insufficient Node information: allocatable CPU or zone not specified on one or more nodes, addressType: IPv4" \
        event TopologyAwareHintsDisabled

# back to Ready: upstream re-syncs only Services that have hints, so the
# hints return with the Service's next sync (here: a Service update). That
# no sync happens before it is not checked: the watch event of our own
# slice write can beat the write's bookkeeping, and then re-syncs the
# Service a second later (upstream's slice tracker has the same window).
node_status b True
kapi patch /api/v1/namespaces/$ns/services/web '{"metadata":{"labels":{"touch":"1"}}}' >/dev/null
check "the next sync gives hints again" until_ok 30 eq "a>a a>a a>b b>b" hints
check "and tells again (count 2 on the same Event)" until_ok 30 twice TopologyAwareHintsEnabled
check "controller stops cleanly" stop_ctl a
echo "1..$n"
