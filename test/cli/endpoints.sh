# svcenv endpoints: the Endpoints / EndpointSlices the controller would write.
. "$(dirname "$0")/lib.bash"
demo=manifests/examples/demo-cluster.yaml
plan=test/golden/endpoints/plan-cluster.yaml
g=test/golden/endpoints
e="$SVCENV/svcenv endpoints"
golden "endpoints of the demo cluster (JSON List)" $g/demo.json $e -f $demo
golden "endpoints -n shop -o yaml" $g/demo-shop.yaml $e -f $demo -n shop -o yaml
golden "endpoint slices of the demo cluster" $g/demo-slices.yaml $e -f $demo --slices -o yaml
golden "endpoint slices -n shop JSON" $g/demo-shop-slices.json $e -f $demo -n shop --slices
golden "endpoints --plan on the demo cluster" $g/demo-plan.txt $e -f $demo --plan
golden "slices --plan on the demo cluster" $g/demo-plan-slices.txt $e -f $demo --plan --slices
golden "slices of 1 endpoint, own managed-by" $g/demo-small-slices.yaml \
        $e -f $demo -n shop --slices -o yaml --max-endpoints-per-slice 1 --managed-by svcenv.io/endpointslice-controller
golden "plan against existing Endpoints" $g/plan.txt $e -f $plan --plan
golden "plan against existing slices" $g/plan-slices.txt $e -f $plan --plan --slices
golden "update keeps foreign annotations, unchanged shown as stored" $g/plan.yaml $e -f $plan -o yaml
golden "slices update recycles, unchanged kept" $g/plan-slices.yaml $e -f $plan --slices -o yaml
topo=$g/topology-cluster.yaml
golden "topology-mode Auto: CPU-proportional zone hints" $g/topology-slices.yaml $e -f $topo --slices -o yaml
golden "topology-mode Auto: plan with the hint events" $g/topology-plan.txt $e -f $topo --slices --plan
# the master service (no selector) is never touched
if $e -f $demo --plan | grep -q 'default/kubernetes' ||
        $e -f $demo --plan --slices | grep -q 'default/kubernetes'; then
        not_ok "selector-less default/kubernetes is left alone"
else
        ok "selector-less default/kubernetes is left alone"
fi
# the same output twice (deterministic names and order)
if diff <($e -f $demo --slices) <($e -f $demo --slices) >/dev/null; then
        ok "output is deterministic"
else
        not_ok "output is deterministic"
fi
if $e --help | grep -q '^Usage: svcenv endpoints'; then ok "--help"; else not_ok "--help"; fi
fails_with "-o must be json or yaml" 2 "svcenv endpoints: -o must be json or yaml, not \"table\" (see 'svcenv endpoints --help')" $e -f $demo -o table
fails_with "--max-endpoints-per-slice range" 2 "svcenv endpoints: --max-endpoints-per-slice must be 1..1000, not \"0\" (see 'svcenv endpoints --help')" $e -f $demo --slices --max-endpoints-per-slice 0
fails_with "no -f is a usage error" 2 "svcenv: no cluster given: use -f FILE|DIR|- or --kubeconfig FILE" $e
echo "1..$n"
