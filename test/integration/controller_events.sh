# svcenv-controller's failure paths against the real API server: writes the
# server refuses (a ValidatingAdmissionPolicy) give upstream's Warning
# events, repeats are counted on one Event, the Endpoints failure does not
# hold back the slices, a pod on a missing Node is reported as upstream
# does, and a controller whose lease is taken exits 1.
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/ctl.bash"
ctl_setup ctlev
node=$ns-n
policy=svcenv-test-deny-$ns
ctl_cleanup_more() {
        kapi delete /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/$policy >/dev/null 2>&1
        kapi delete /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/$policy >/dev/null 2>&1
        kapi delete /api/v1/nodes/$node >/dev/null 2>&1
}

kapi post /api/v1/namespaces - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}" >/dev/null
kapi post /api/v1/nodes - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$node\"}}" >/dev/null

# --- refused writes become Warning events ---
# Creates of Endpoints and EndpointSlices refused in $ns.
kapi post /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies - >/dev/null <<EOF
{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy",
 "metadata":{"name":"$policy"},
 "spec":{"failurePolicy":"Fail",
  "matchConstraints":{"resourceRules":[
   {"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],"resources":["endpoints"]},
   {"apiGroups":["discovery.k8s.io"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["endpointslices"]}]},
  "validations":[{"expression":"false","message":"refused by the svcenv test"}]}}
EOF
kapi post /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings - >/dev/null <<EOF
{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicyBinding",
 "metadata":{"name":"$policy"},
 "spec":{"policyName":"$policy","validationActions":["Deny"],
  "matchResources":{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"$ns"}}}}}
EOF
# the policy takes a moment to load: wait until it refuses
probe='{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"probe"}}'
refused() { ! kapi post "/api/v1/namespaces/$ns/endpoints?dryRun=All" - <<<"$probe" >/dev/null 2>&1; }
check "the test policy refuses Endpoints creates in the namespace" until_ok 30 refused

kapi post /api/v1/namespaces/$ns/services - >/dev/null <<<'{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},"spec":{"selector":{"app":"web"},"ports":[{"port":80}]}}'
kapi post /api/v1/namespaces/$ns/pods - >/dev/null <<<"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-1\",\"labels\":{\"app\":\"web\"}},\"spec\":{\"nodeName\":\"$node\",\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}"
kapi patch-status $ns web-1 '{"status":{"phase":"Running","podIP":"10.9.0.1","podIPs":[{"ip":"10.9.0.1"}],"conditions":[{"type":"Ready","status":"True"}]}}' >/dev/null
svc_uid=$(kapi get /api/v1/namespaces/$ns/services/web | jq -r .metadata.uid)

check "controller starts" start_ctl a --leader-elect=false
# event REASON: "kind/name uid count type component|message" of the newest such event
event() {
        kapi get "/api/v1/namespaces/$ns/events?fieldSelector=reason=$1" |
                jq -r '.items | sort_by(.lastTimestamp) | last // empty | "\(.involvedObject.kind)/\(.involvedObject.name) \(.involvedObject.uid // "-") \(.count) \(.type) \(.source.component)|\(.message)"'
}
has_event() { [ -n "$(event "$1")" ]; }
check "a refused Endpoints create gives FailedToCreateEndpoint" until_ok 30 has_event FailedToCreateEndpoint
ev=$(event FailedToCreateEndpoint)
check "on the Endpoints, as a Warning from endpoint-controller" test "${ev%% *}|${ev#*|}" = "Endpoints/web|Failed to create endpoint for service $ns/web: endpoints \"web\" is forbidden: ValidatingAdmissionPolicy '$policy' with binding '$policy' denied request: refused by the svcenv test"
matches() { [[ $1 == $2 ]]; } # matches STRING PATTERN
check "type and source" matches "${ev%%|*}" "* Warning endpoint-controller"
check "a refused slice create gives FailedToUpdateEndpointSlices" until_ok 30 has_event FailedToUpdateEndpointSlices
ev=$(event FailedToUpdateEndpointSlices)
check "on the Service (with its uid), from endpoint-slice-controller" matches "${ev%%|*}" "Service/web $svc_uid * Warning endpoint-slice-controller"
msg=${ev#*|}
want="Error updating Endpoint Slices for Service $ns/web: failed to create EndpointSlice for Service $ns/web: endpointslices.discovery.k8s.io"
check "with upstream's message" test "${msg:0:${#want}}" = "$want"
check "ending in the server's reason" matches "$msg" "*denied request: refused by the svcenv test"
count() { event "$1" | awk '{ print $3 }' | head -1; }
twice() { [ "$(count FailedToCreateEndpoint)" -ge 2 ]; }
check "the retried write counts on the same Event (count >= 2)" until_ok 30 twice
n_events=$(kapi get "/api/v1/namespaces/$ns/events?fieldSelector=reason=FailedToCreateEndpoint" | jq '.items | length')
check "one Event object for the repeats" test "$n_events" = 1

# the policy goes: the retries succeed
kapi delete /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/$policy >/dev/null
has_eps() { [ "$(kapi get /api/v1/namespaces/$ns/endpoints/web 2>/dev/null | jq -r '.subsets[0].addresses[0].ip')" = 10.9.0.1 ]; }
check "once the server accepts, the Endpoints are written" until_ok 60 has_eps
has_slice() { [ "$(kapi get "/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices?labelSelector=kubernetes.io/service-name=web" | jq -r '.items[0].endpoints[0].addresses[0]')" = 10.9.0.1 ]; }
check "and the slice" until_ok 60 has_slice
check "controller stops cleanly" stop_ctl a

# --- batch period: pod changes wait, then sync together ---
check "a controller with a 3 s batch period starts" start_ctl c --leader-elect=false \
        --endpointslice-updates-batch-period 3s -v 4
ready_ip() { kapi get /api/v1/namespaces/$ns/endpoints/web | jq -r '.subsets[0].addresses[0].ip // "none"'; }
check "the Endpoints are current" until_ok 30 eq 10.9.0.1 ready_ip
# its first sync of web is not batched: flip only after it
first_sync() { grep -q "synced $ns/web:" "$work/c.log"; }
check "the new controller has synced the Service once" until_ok 30 first_sync
t_flip=$SECONDS
kapi patch-status $ns web-1 '{"status":{"conditions":[{"type":"Ready","status":"False"}]}}' >/dev/null
sleep 1
still=$(ready_ip)
if [ $((SECONDS - t_flip)) -lt 3 ]; then
        check "a second after the flip nothing is written yet" test "$still" = 10.9.0.1
else
        ok "a second after the flip nothing is written yet # SKIP the patch itself took 3 s"
fi
check "after the period the change is written" until_ok 30 eq none ready_ip
check "controller stops cleanly" stop_ctl c

# --- a pod on a Node that does not exist ---
# upstream's endpointslice controller leaves the pod out of the slices,
# writes them, and reports the reconciler's error on the Service
lost=$ns-nowhere
kapi post /api/v1/namespaces/$ns/services - >/dev/null <<<'{"apiVersion":"v1","kind":"Service","metadata":{"name":"lost"},"spec":{"selector":{"app":"lost"},"ports":[{"port":80}]}}'
kapi post /api/v1/namespaces/$ns/pods - >/dev/null <<<"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"lost-1\",\"labels\":{\"app\":\"lost\"}},\"spec\":{\"nodeName\":\"$lost\",\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}"
kapi patch-status $ns lost-1 '{"status":{"phase":"Running","podIP":"10.9.0.2","podIPs":[{"ip":"10.9.0.2"}],"conditions":[{"type":"Ready","status":"True"}]}}' >/dev/null
lost_uid=$(kapi get /api/v1/namespaces/$ns/services/lost | jq -r .metadata.uid)
check "a controller starts" start_ctl d --leader-elect=false
# lost_event: "kind/name uid type component|message" of the Service's event
lost_event() {
        kapi get "/api/v1/namespaces/$ns/events?fieldSelector=reason=FailedToUpdateEndpointSlices,involvedObject.name=lost" |
                jq -r '.items | sort_by(.lastTimestamp) | last // empty | "\(.involvedObject.kind)/\(.involvedObject.name) \(.involvedObject.uid // "-") \(.type) \(.source.component)|\(.message)"'
}
has_lost_event() { [ -n "$(lost_event)" ]; }
check "a pod on a missing Node gives FailedToUpdateEndpointSlices" until_ok 30 has_lost_event
ev=$(lost_event)
check "on the Service, a Warning from endpoint-slice-controller" test "${ev%%|*}" = "Service/lost $lost_uid Warning endpoint-slice-controller"
check "with upstream's message" test "${ev#*|}" = "Error updating Endpoint Slices for Service $ns/lost: skipping Pod lost-1 for Service $ns/lost: Node $lost Not Found"
lost_slices() { kapi get "/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices?labelSelector=kubernetes.io/service-name=lost" | jq -r '"\(.items | length) \([.items[].endpoints // [] | length] | add)"'; }
check "the slices are written without the pod" until_ok 30 eq "1 0" lost_slices
lost_eps() { kapi get /api/v1/namespaces/$ns/endpoints/lost 2>/dev/null | jq -r '.subsets[0].addresses[0].ip // "none"'; }
check "the Endpoints, which look at no Node, list it" until_ok 30 eq 10.9.0.2 lost_eps
check "controller stops cleanly" stop_ctl d

# --- a lost lease ends the process with exit code 1 ---
check "a leader-electing controller starts" start_ctl b --leader-elect-lease-duration 4 \
        --leader-elect-renew-deadline 3 --leader-elect-namespace $ns
check "and leads" until_ok 20 is_leader b
lease_path=/apis/coordination.k8s.io/v1/namespaces/$ns/leases/$lease
# someone else takes the Lease (as a partitioned leader would see it); the
# controller renews every second, so a PUT may lose the race (409): retry
steal() {
        kapi get $lease_path | jq --arg t "$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)" \
                '.spec.holderIdentity = "thief" | .spec.leaseDurationSeconds = 3600 | .spec.renewTime = $t' |
                kapi put $lease_path - >/dev/null 2>&1
}
check "the Lease is taken by another holder" until_ok 10 steal
pid=$(cat "$work/b.pid")
gone() { ! kill -0 "$pid" 2>/dev/null; }
check "the controller exits once it cannot renew" until_ok 20 gone
wait "$pid" 2>/dev/null
code=$?
rm -f "$work/b.pid"
check "with exit code 1" test "$code" = 1
check "saying the election was lost" grep -q "leader election lost" "$work/b.log"
check "and leaves the thief's Lease alone" test "$(kapi get $lease_path | jq -r .spec.holderIdentity)" = thief
echo "1..$n"
