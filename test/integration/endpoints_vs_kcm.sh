# Side by side with upstream: kube-controller-manager v1.36 (its endpoint and
# endpointslice controllers) writes Endpoints and EndpointSlices for a set of
# services and pods on the real API server; `svcenv endpoints` computes them
# from the same objects read back from that server. They must match: subsets,
# addresses, ports, labels, annotations (trigger time aside), and slice
# contents as sets (slice names aside), topology-mode Auto hints included,
# the topology events on the Services, and which addresses survive the
# truncation of a Service over 1,000 addresses in three subsets.
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/bulk.bash"
fixture=test/integration/fixtures/side-by-side.jsonl
statuses=test/integration/fixtures/status-side-by-side.txt
ns=sbs-$$-$RANDOM
node_a=$ns-a node_b=$ns-b
work=$(mktemp -d)
cleanup() {
        "$CONTROLPLANE" stop-kcm "$KUBE_DIR" >/dev/null 2>&1
        kapi patch /api/v1/namespaces/$ns/pods/web-4 '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
        # no namespace controller runs: what big leaves in the terminating
        # namespace would keep every later controller rewriting an
        # over-capacity Endpoints (and 1,200 pods in every proxy's view)
        kapi delete /api/v1/namespaces/$ns/services/big >/dev/null 2>&1
        kapi delete /api/v1/namespaces/$ns/endpoints/big >/dev/null 2>&1
        kapi delete "/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices?labelSelector=kubernetes.io/service-name=big" >/dev/null 2>&1
        kapi delete "/api/v1/namespaces/$ns/pods?labelSelector=app=big&gracePeriodSeconds=0" >/dev/null 2>&1
        kapi delete /api/v1/namespaces/$ns >/dev/null 2>&1
        kapi delete /api/v1/nodes/$node_a >/dev/null 2>&1
        kapi delete /api/v1/nodes/$node_b >/dev/null 2>&1
        [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

setup() {
        kapi post /api/v1/namespaces - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}" >/dev/null || return 1
        for z in a b; do
                kapi post /api/v1/nodes - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$ns-$z\",\"labels\":{\"topology.kubernetes.io/zone\":\"zone-$z\"}},\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"192.0.2.$([ $z = a ] && echo 1 || echo 2)\"}]}}" >/dev/null || return 1
                # ready, with allocatable CPU: the topology cache counts them
                kapi patch /api/v1/nodes/$ns-$z/status '{"status":{"capacity":{"cpu":"4"},"allocatable":{"cpu":"4"},"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"test"}]}}' >/dev/null || return 1
        done
        grep -v '^//' "$fixture" | sed "s/\"NS\"/\"$ns\"/g; s/\"NODEA\"/\"$node_a\"/g; s/\"NODEB\"/\"$node_b\"/g" |
                while IFS= read -r obj; do
                        kind=$(jq -r .kind <<<"$obj")
                        case $kind in
                        Service) path=/api/v1/namespaces/$ns/services ;;
                        Pod) path=/api/v1/namespaces/$ns/pods ;;
                        esac
                        kapi post "$path" - <<<"$obj" >/dev/null || exit 1
                done || return 1
        while read -r pod patch; do
                kapi patch-status "$ns" "$pod" "$patch" >/dev/null || return 1
        done <"$statuses"
        # a terminating pod: its finalizer holds it after the delete
        kapi delete /api/v1/namespaces/$ns/pods/web-4 >/dev/null
        setup_big
}

# big: 1,200 ready pods whose named port resolves to 8080, 8081 or 8082
# (600/400/200): three subsets over the 1,000-address cap. Which addresses
# survive the truncation depends on the subsets' order, upstream's hash of
# each (pod UIDs included, so it differs on every run).
setup_big() {
        kapi post /api/v1/namespaces/$ns/services - >/dev/null <<<'{"apiVersion":"v1","kind":"Service","metadata":{"name":"big"},"spec":{"selector":{"app":"big"},"ports":[{"name":"http","port":80,"targetPort":"web"}]}}' || return 1
        local i g
        for i in $(seq 0 1199); do
                g=$((i < 600 ? 0 : i < 1000 ? 1 : 2))
                printf '/api/v1/namespaces/%s/pods\t{"apiVersion":"v1","kind":"Pod","metadata":{"name":"big-%d","labels":{"app":"big"}},"spec":{"nodeName":"%s","containers":[{"name":"c","image":"x","ports":[{"name":"web","containerPort":%d}]}]}}\n' \
                        "$ns" $i "$node_a" $((8080 + g))
        done | kbulk POST application/json || return 1
        for i in $(seq 0 1199); do
                printf '/api/v1/namespaces/%s/pods/big-%d/status\t{"status":{"phase":"Running","podIP":"10.3.%d.%d","podIPs":[{"ip":"10.3.%d.%d"}],"conditions":[{"type":"Ready","status":"True"}]}}\n' \
                        "$ns" $i $((i / 250)) $((i % 250 + 1)) $((i / 250)) $((i % 250 + 1))
        done | kbulk PATCH application/merge-patch+json
}

# The controllers are done when every selector service has its Endpoints and
# two reads a second apart are the same.
settled() {
        local eps slices
        eps=$(kapi get /api/v1/namespaces/$ns/endpoints | jq -c '[.items[] | {n: .metadata.name, s: .subsets}] | sort_by(.n)')
        slices=$(kapi get /apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices | jq -c '[.items[] | {n: .metadata.name, e: .endpoints}] | sort_by(.n)')
        [ "$(jq length <<<"$eps")" -ge 7 ] || return 1
        # big is truncated to 1,000 addresses once all its pods are in
        [ "$(jq '[.[] | select(.n == "big") | .s[]?.addresses[]?] | length' <<<"$eps")" = 1000 ] || return 1
        [ "$eps$slices" = "${last_seen:-}" ] && return 0
        last_seen=$eps$slices
        sleep 1
        return 1
}

norm_endpoints='[.items[] | select(.metadata.name != "manual") | {
        name: .metadata.name,
        labels: (.metadata.labels // {}),
        annotations: ((.metadata.annotations // {}) | del(."endpoints.kubernetes.io/last-change-trigger-time")),
        subsets: ((.subsets // []) | map({
                addresses: ((.addresses // []) | map({ip, hostname, nodeName, pod: .targetRef.name}) | sort_by(.ip)),
                notReadyAddresses: ((.notReadyAddresses // []) | map({ip, hostname, nodeName, pod: .targetRef.name}) | sort_by(.ip)),
                ports: ((.ports // []) | sort_by(.name, .port, .protocol))}) | sort_by(.ports | tostring))
}] | sort_by(.name)'

norm_slices='[.items[] | select(.metadata.labels["endpointslice.kubernetes.io/managed-by"] == "endpointslice-controller.k8s.io") |
        .metadata.labels["kubernetes.io/service-name"] as $svc | {
        service: .metadata.labels["kubernetes.io/service-name"],
        labels: .metadata.labels,
        owner: (.metadata.ownerReferences // [] | map({kind, name, controller, blockOwnerDeletion})),
        addressType,
        ports: ((.ports // []) | sort_by(.name, .port, .protocol)),
        endpoints: ((.endpoints // []) | map({addresses, conditions, hostname, nodeName, zone,
                hints: (if $svc == "topo-spread" then null else .hints end), pod: .targetRef.name})),
        hint_zones: ((.endpoints // []) | map(.hints.forZones[0].name // "-"))
}] | group_by([.service, .addressType, (.ports | tostring)]) | map({
        service: .[0].service, addressType: .[0].addressType, ports: .[0].ports,
        labels: (map(.labels) | unique), owner: (map(.owner) | unique),
        endpoints: (map(.endpoints[]) | sort_by(.addresses[0])),
        hint_zones: (map(.hint_zones[]) | sort)
}) | sort_by(.service, .addressType, (.ports | tostring))'

# compare NAME JQ-PROGRAM UPSTREAM-FILE OURS-FILE
compare() {
        jq -S "$2" "$3" >"$work/up.json" && jq -S "$2" "$4" >"$work/ours.json" || { not_ok "$1 (jq)"; return; }
        if [ "$(jq length "$work/up.json")" -gt 0 ] && diff -u "$work/up.json" "$work/ours.json" >"$work/diff"; then
                ok "$1"
        else
                not_ok "$1"
                sed 's/^/# /' "$work/diff" | head -60
        fi
}

if setup; then ok "objects created on the real API server"; else not_ok "objects created on the real API server"; fi
if "$CONTROLPLANE" start-kcm "$KUBE_DIR" >"$work/kcm.out" 2>&1; then
        ok "kube-controller-manager started (endpoint and endpointslice controllers)"
else
        not_ok "kube-controller-manager started"
        sed 's/^/# /' "$work/kcm.out"
fi
if until_ok 60 settled; then ok "upstream controllers settled"; else not_ok "upstream controllers settled"; fi

# topology-mode Auto, on Services made once the controllers run (a Service
# synced before kube-controller-manager's topology queue read the nodes
# loses its hints until its next sync): web has a ready endpoint in each
# zone of equal CPU, db only one (fewer endpoints than zones: no hints),
# spread three in zone-a and one in zone-b (zone-a gives one to zone-b:
# which one is upstream's random pick, so only the counts are compared).
for svc in topo:web topo-few:db topo-spread:spread; do
        kapi post /api/v1/namespaces/$ns/services - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"${svc%%:*}\",\"namespace\":\"$ns\",\"annotations\":{\"service.kubernetes.io/topology-mode\":\"Auto\"}},\"spec\":{\"selector\":{\"app\":\"${svc#*:}\"},\"ports\":[{\"port\":80,\"targetPort\":8080}]}}" >/dev/null
done
topo_events() {
        kapi get /api/v1/namespaces/$ns/events |
                jq -r '.items[] | select(.reason | startswith("TopologyAware")) | "\(.involvedObject.name) \(.type) \(.reason) \(.message)"' | sort -u
}
hinted() {
        kapi get /apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices |
                jq -e '[.items[] | select(.metadata.labels["kubernetes.io/service-name"] | startswith("topo")) | .endpoints[]? | select(.hints.forZones)] | length == 6' >/dev/null &&
                [ "$(topo_events | wc -l)" -ge 3 ]
}
if until_ok 60 hinted; then
        ok "upstream gave topology hints and events"
else
        not_ok "upstream gave topology hints and events"
        topo_events | sed 's/^/# /'
fi
last_seen=
until_ok 30 settled || true
"$CONTROLPLANE" stop-kcm "$KUBE_DIR" >/dev/null 2>&1

# What both sides read: the same objects from the same server.
mkdir -p "$work/cluster"
kapi get /api/v1/namespaces/$ns/services >"$work/cluster/services.json"
kapi get /api/v1/namespaces/$ns/pods >"$work/cluster/pods.json"
kapi get /api/v1/nodes >"$work/cluster/nodes.json"
kapi get /api/v1/namespaces/$ns/endpoints >"$work/upstream-endpoints.json"
kapi get /apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices >"$work/upstream-slices.json"

if "$SVCENV/svcenv" endpoints -f "$work/cluster" -n "$ns" -o json >"$work/ours-endpoints.json" 2>"$work/err" &&
        "$SVCENV/svcenv" endpoints -f "$work/cluster" -n "$ns" --slices -o json >"$work/ours-slices.json" 2>>"$work/err"; then
        ok "svcenv endpoints read the same objects"
else
        not_ok "svcenv endpoints read the same objects"
        sed 's/^/# /' "$work/err"
fi
compare "Endpoints match kube-controller-manager's" "$norm_endpoints" "$work/upstream-endpoints.json" "$work/ours-endpoints.json"
# the truncated one: the same subsets in the same order, each with the same addresses
big_order='[.items[] | select(.metadata.name == "big") | .subsets[] | "\(.ports[0].port):\(.addresses | length):\([.addresses[].ip] | join(","))"]'
compare "over 1,000 addresses: subset order and the addresses kept are upstream's" "$big_order" "$work/upstream-endpoints.json" "$work/ours-endpoints.json"
jq -r '.items[] | select(.metadata.name == "big") | [.subsets[] | "\(.ports[0].port)=\(.addresses | length)"] | join(" ") | "# big: " + .' "$work/upstream-endpoints.json"
compare "EndpointSlices match kube-controller-manager's" "$norm_slices" "$work/upstream-slices.json" "$work/ours-slices.json"
# The topology events svcenv's controller would record on its first syncs.
topo_events >"$work/upstream-events.txt"
"$SVCENV/svcenv" endpoints -f "$work/cluster" -n "$ns" --slices --plan 2>&1 |
        sed -n "s|^$ns/\([^ ]*\) event |\1 |p" | sort -u >"$work/ours-events.txt"
if [ -s "$work/upstream-events.txt" ] && diff -u "$work/upstream-events.txt" "$work/ours-events.txt" >"$work/diff"; then
        ok "topology events match kube-controller-manager's"
else
        not_ok "topology events match kube-controller-manager's"
        sed 's/^/# /' "$work/diff"
fi
# Fed the upstream objects, svcenv's planner must see nothing to write.
cp "$work/upstream-endpoints.json" "$work/upstream-slices.json" "$work/cluster/"
# (big aside: over capacity, upstream and svcenv rewrite it on every sync)
plan=$("$SVCENV/svcenv" endpoints -f "$work/cluster" -n "$ns" --plan 2>&1 | grep -v "^$ns/big update$")
if [ -n "$plan" ] && ! grep -vq ' unchanged$' <<<"$plan"; then
        ok "planner: upstream's Endpoints need no write"
else
        not_ok "planner: upstream's Endpoints need no write"
        sed 's/^/# /' <<<"$plan"
fi
plan=$("$SVCENV/svcenv" endpoints -f "$work/cluster" -n "$ns" --slices --plan 2>&1 | grep -v "^$ns/[^ ]* event ")
if [ -n "$plan" ] && ! grep -vq ' unchanged$' <<<"$plan"; then
        ok "planner: upstream's EndpointSlices need no write"
else
        not_ok "planner: upstream's EndpointSlices need no write"
        sed 's/^/# /' <<<"$plan"
fi
echo "1..$n"
