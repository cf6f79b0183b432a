# svcenv dns: the answers svcenv-dns gives, dig's layout, --explain, --zone,
# exit codes and one-line errors. The demo cluster plus the EndpointSlices
# the controller writes for it (test/golden/dns/demo-slices.yaml).
. "$(dirname "$0")/lib.bash"
g=test/golden/dns
c=(-f manifests/examples/demo-cluster.yaml -f $g/demo-slices.yaml)
# the SOA serial is the time of the newest change: masked
dns() { "$SVCENV/svcenv" dns "${c[@]}" "$@" | sed -E 's/(SOA\t[^\t]* )[0-9]+( [0-9]+ [0-9]+ [0-9]+ [0-9]+)/\1SERIAL\2/'; return "${PIPESTATUS[0]}"; }
golden "A of a ClusterIP Service" $g/a-clusterip.txt dns frontend.shop.svc.cluster.local
golden "AAAA of a dual-stack Service" $g/aaaa-dualstack.txt dns payments.shop.svc.cluster.local AAAA
golden "AAAA of an IPv4-only Service is NODATA" $g/aaaa-nodata.txt dns cart.shop.svc.cluster.local AAAA
golden "headless: every endpoint, explained" $g/a-headless-explain.txt dns db.shop.svc.cluster.local --explain
golden "an endpoint's hostname" $g/a-hostname.txt dns db-0.db.shop.svc.cluster.local
golden "SRV of a named port, explained" $g/srv-explain.txt dns _https._tcp.frontend.shop.svc.cluster.local SRV --explain
golden "SRV of a headless Service" $g/srv-headless.txt dns _postgres._tcp.db.shop.svc.cluster.local SRV
golden "ExternalName is a CNAME" $g/cname.txt dns stripe-api.shop.svc.cluster.local CNAME
golden "PTR of a ClusterIP, explained" $g/ptr.txt dns 10.20.96.10.in-addr.arpa PTR --explain
golden "the query's case is kept" $g/case.txt dns FrontEnd.Shop.SVC.cluster.local
golden "a missing Service is NXDOMAIN with the SOA" $g/nxdomain.txt dns nope.shop.svc.cluster.local
golden "the namespace name exists (NODATA)" $g/namespace.txt dns shop.svc.cluster.local --explain
golden "dns-version TXT" $g/txt-version.txt dns dns-version.cluster.local TXT
golden "the ndots:5 walk of an external name is answered from the zone" $g/ndots.txt dns example.com.shop.svc.cluster.local
golden "--ttl and --domain" $g/ttl-domain.txt dns --ttl 30 --domain k8s.test frontend.shop.svc.k8s.test
golden "--zone prints the zone" $g/zone.txt dns --zone
golden "--zone --explain names each record's object" $g/zone-explain.txt dns --zone --explain
golden "a name outside the zone is forwarded" $g/forward.txt dns www.example.com
fails_with "no name is a usage error" 2 "svcenv dns: a NAME to look up is required (see 'svcenv dns --help')" dns
fails_with "unknown type is a usage error" 2 "svcenv dns: unknown record type \"BOGUS\" (see 'svcenv dns --help')" dns web.shop BOGUS
fails_with "a bad name is a usage error" 2 "svcenv dns: \"a..b\" is not a domain name (empty label or too long) (see 'svcenv dns --help')" dns a..b
fails_with "--pods takes three values" 2 "svcenv dns: --pods must be disabled, insecure or verified, not \"all\" (see 'svcenv dns --help')" dns --pods all x
fails_with "too many arguments" 2 "svcenv dns: unexpected argument \"extra\" (see 'svcenv dns --help')" dns x A extra
fails_with "no cluster is a usage error" 2 "svcenv: no cluster given: use -f FILE|DIR|- or --kubeconfig FILE" "$SVCENV/svcenv" dns x
fails_with "missing file is a system error" 4 "svcenv: /nonexistent.yaml: cannot open: No such file or directory" "$SVCENV/svcenv" dns -f /nonexistent.yaml x
tmp=$(mktemp)
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports:\n  - port: "80"\n' >"$tmp"
fails_with "invalid input names file, line and field" 3 "svcenv: $tmp:6: Service default/web: spec.ports[0].port: expected an integer, got a string" "$SVCENV/svcenv" dns -f "$tmp" web.default.svc.cluster.local
rm -f "$tmp"
echo "1..$n"
