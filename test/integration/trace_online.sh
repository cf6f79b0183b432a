# svcenv trace against the live API server (--kubeconfig): the same answer
# as from the cluster's objects saved to a file, for objects written here.
. "$(dirname "$0")/lib.bash"
kc=$KUBE_DIR/kubeconfig
sv=$SVCENV/svcenv
ns=trace-$$-$RANDOM
node=trace-node-$$
tmp=$(mktemp -d)
cleanup() {
        kapi delete "/api/v1/namespaces/$ns" >/dev/null 2>&1
        kapi delete "/api/v1/nodes/$node" >/dev/null 2>&1
        rm -rf "$tmp"
}
trap cleanup EXIT
kapi post /api/v1/namespaces - >/dev/null <<EOF2 || { not_ok "namespace $ns created"; echo "1..$n"; exit 0; }
{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"$ns"}}
EOF2
kapi post /api/v1/nodes - >/dev/null <<EOF2
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$node"}}
EOF2
# the API server allocates the ClusterIP
kapi post "/api/v1/namespaces/$ns/services" - >"$tmp/svc.json" <<EOF2
{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},
 "spec":{"type":"NodePort","sessionAffinity":"ClientIP","ports":[{"name":"http","port":80,"targetPort":8080}]}}
EOF2
cip=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spec"]["clusterIP"])' "$tmp/svc.json")
np=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spec"]["ports"][0]["nodePort"])' "$tmp/svc.json")
kapi post "/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices" - >/dev/null <<EOF2
{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
 "metadata":{"name":"web-1","labels":{"kubernetes.io/service-name":"web"}},
 "addressType":"IPv4","ports":[{"name":"http","port":8080,"protocol":"TCP"}],
 "endpoints":[{"addresses":["10.244.1.2"],"nodeName":"$node","conditions":{"ready":true}},
              {"addresses":["10.244.2.2"],"nodeName":"other","conditions":{"ready":true}}]}
EOF2
t() { "$sv" trace --node "$node" --node-ip 10.99.0.1 --cluster-cidr 10.244.0.0/16 --from 10.99.0.2 "$@"; }
t --kubeconfig "$kc" --to "$cip:80" -o json >"$tmp/online.json" 2>"$tmp/online.err"
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); e=sorted(x["endpoint"] for x in d["endpoints"])
assert d["verdict"]=="DNAT" and d["service"]==sys.argv[2]+"/web:http" and d["affinity"]["timeoutSeconds"]==10800
assert e==["10.244.1.2:8080","10.244.2.2:8080"] and all(abs(x["probability"]-0.5)<1e-9 for x in d["endpoints"])' \
        "$tmp/online.json" "$ns"; then
        ok "trace --kubeconfig: the ClusterIP the API server allocated DNATs to both endpoints, affinity 10800 s"
else
        not_ok "trace --kubeconfig: the ClusterIP the API server allocated DNATs to both endpoints ($(head -c 300 "$tmp/online.err" "$tmp/online.json"))"
fi
# the kinds trace reads (other suites of the shared control plane may leave
# objects svcenv get refuses to print, such as a ConfigMap with a NUL byte)
for kind in nodes services endpointslices; do
        "$sv" get --kubeconfig "$kc" "$kind" -A -o yaml
        echo ---
done >"$tmp/cluster.yaml" 2>"$tmp/get.err"
for to in "$cip:80" "10.99.0.1:$np" "$cip:81/udp"; do
        for mode in iptables nftables; do
                a=$(t --kubeconfig "$kc" --to "$to" --mode $mode 2>&1)
                b=$(t -f "$tmp/cluster.yaml" --to "$to" --mode $mode 2>&1)
                if [ -n "$a" ] && [ "$a" = "$b" ]; then
                        ok "trace --kubeconfig $to ($mode) equals the trace of the saved objects"
                else
                        not_ok "trace --kubeconfig $to ($mode) equals the trace of the saved objects"
                        diff <(echo "$a") <(echo "$b") | head -10 | sed 's/^/# /'
                fi
        done
done
fails_with "unknown node online" 3 "svcenv: node \"nope-$$\" is not in the cluster (give --node-ip)" \
        "$sv" trace --kubeconfig "$kc" --node "nope-$$" --from 10.99.0.2 --to "$cip:80"
echo "1..$n"
