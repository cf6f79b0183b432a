# svcenv get and the CLI contract: listing, kinds, exit codes, one-line errors.
. "$(dirname "$0")/lib.bash"
demo=manifests/examples/demo-cluster.yaml
g=test/golden/cli
golden "get lists the demo cluster" $g/get-demo.txt "$SVCENV/svcenv" get -f $demo
golden "get services in shop" $g/get-shop-services.txt "$SVCENV/svcenv" get -f $demo svc -n shop
golden "get -o yaml of the master Endpoints" $g/get-endpoints-yaml.txt "$SVCENV/svcenv" get -f $demo endpoints -o yaml
# the same cluster from stdin, as JSON round-tripped through -o json
if "$SVCENV/svcenv" get -f $demo -o json | "$SVCENV/svcenv" get -f - >/tmp/svcenv-rt.txt 2>&1 &&
        diff -q /tmp/svcenv-rt.txt $g/get-demo.txt >/dev/null; then
        ok "get -o json reads back through stdin to the same objects"
else
        not_ok "get -o json reads back through stdin to the same objects"
fi
fails_with "no -f is a usage error" 2 "svcenv: no cluster given: use -f FILE|DIR|- or --kubeconfig FILE" "$SVCENV/svcenv" get
fails_with "unknown kind is a usage error" 2 "svcenv get: unknown kind \"widgets\" (see 'svcenv get --help')" "$SVCENV/svcenv" get -f $demo widgets
fails_with "unknown command" 2 "svcenv: unknown command \"frobnicate\" (see 'svcenv --help')" "$SVCENV/svcenv" frobnicate
fails_with "missing file is a system error" 4 "svcenv: /nonexistent.yaml: cannot open: No such file or directory" "$SVCENV/svcenv" get -f /nonexistent.yaml
tmp=$(mktemp)
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports:\n  - port: "80"\n' >"$tmp"
fails_with "invalid input names file, line and field" 3 "svcenv: $tmp:6: Service default/web: spec.ports[0].port: expected an integer, got a string" "$SVCENV/svcenv" get -f $demo -f "$tmp"
rm -f "$tmp"
if "$SVCENV/svcenv" --version | grep -q '^svcenv '; then ok "--version"; else not_ok "--version"; fi
# -o name prints what kubectl -o name does: lower-case kind, singular, and
# the group when there is one
names=$("$SVCENV/svcenv" get -f $demo -o name | sed 's#/.*##' | sort -u | tr '\n' ' ')
want="configmap endpoints endpointslice.discovery.k8s.io namespace node pod secret service "
if [ "$names" = "$want" ]; then ok "-o name prints kind[.group]/name as kubectl"; else not_ok "-o name prints kind[.group]/name as kubectl (got: $names)"; fi
# -v takes any level, as klog's (an int32), in the CLI and in every daemon
if "$SVCENV/svcenv" -v 99 get -f $demo >/dev/null 2>&1 && "$SVCENV/svcenv" --v=2147483647 get -f $demo >/dev/null 2>&1; then
        ok "svcenv -v 99 is a level"
else
        not_ok "svcenv -v 99 is a level"
fi
for d in svcenv-controller svcenv-proxy svcenv-webhook svcenv-dns; do
        if "$SVCENV/$d" -v 99 --help >/dev/null 2>&1; then ok "$d -v 99 is a level"; else not_ok "$d -v 99 is a level"; fi
done
fails_with "-v wants a number" 2 "svcenv: unknown option \"-v\" (see 'svcenv --help')" "$SVCENV/svcenv" -v x get -f $demo
echo "1..$n"
