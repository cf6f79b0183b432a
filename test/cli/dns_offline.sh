# svcenv-dns -f: the manifests' objects in the forms its informers keep, only
# the kinds it watches (a malformed Pod does not stop a server that never
# reads Pods, as online it never sees one), answering as `svcenv dns -f`.
. "$(dirname "$0")/lib.bash"
command -v dig >/dev/null || { echo "not ok 1 - dig is missing (bind9-dnsutils; test/ensure-deps)"; exit 1; }
g=test/golden/dns
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: broken, namespace: shop}\nspec: {containers: 7}\n' >"$work/pod.yaml"
c=(-f manifests/examples/demo-cluster.yaml -f $g/demo-slices.yaml)
"$SVCENV/svcenv-dns" "${c[@]}" -f "$work/pod.yaml" --listen 127.0.0.1:0 --upstream none \
        --health-addr "" --ready-addr "" --metrics-addr "" --workers 1 --lameduck 0 -v 1 \
        >"$work/log" 2>&1 &
pid=$!
port=""
listening() { port=$(sed -n 's/.*serving DNS on 127.0.0.1 port \([0-9]*\).*/\1/p' "$work/log"); [ -n "$port" ]; }
if until_ok 10 listening; then
        ok "serves manifests with a malformed Pod it does not read"
else
        not_ok "serves manifests with a malformed Pod it does not read"
        sed 's/^/# /' "$work/log" | tail -5
        echo "1..$n"
        exit 1
fi
# 13 Services, 3 Namespaces, 14 EndpointSlices; 25+1 Pods, the rest other kinds
check "only the watched kinds are loaded" \
        grep -q -- "-f: loaded 30 objects, skipped 31 of kinds svcenv-dns does not read" "$work/log"

# status and records, whitespace and the SOA serial (the newest change) masked
norm() { grep -E '^[^;]|status:' | sed -E 's/.*(status: [A-Z]+).*/\1/; s/(SOA[[:space:]]+[^[:space:]]+ [^[:space:]]+ )[0-9]+/\1SERIAL/' | tr -s ' \t' ' ' | sort; }
same() {
        local served offline
        served=$(dig @127.0.0.1 -p "$port" +time=2 +tries=2 "$@" | norm)
        offline=$("$SVCENV/svcenv" dns "${c[@]}" "$@" | norm)
        if [ -n "$served" ] && [ "$served" = "$offline" ]; then
                ok "same answer as svcenv dns: $*"
        else
                not_ok "same answer as svcenv dns: $*"
                diff <(echo "$offline") <(echo "$served") | sed 's/^/# /'
        fi
}
same frontend.shop.svc.cluster.local A
same payments.shop.svc.cluster.local AAAA
same db.shop.svc.cluster.local A
same db-0.db.shop.svc.cluster.local A
same _postgres._tcp.db.shop.svc.cluster.local SRV
same _https._tcp.frontend.shop.svc.cluster.local SRV
same stripe-api.shop.svc.cluster.local CNAME
same 10.20.96.10.in-addr.arpa PTR
same nope.shop.svc.cluster.local A
same shop.svc.cluster.local A
kill "$pid"
wait "$pid" 2>/dev/null

# SIGHUP re-reads the files: a new Service answers, a removed one is gone;
# a bad file keeps the last good zone
svc() { printf 'apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: default}\nspec: {clusterIP: %s, ports: [{port: 80}]}\n---\n' "$@"; }
svc old 10.96.7.1 >"$work/c.yaml"
"$SVCENV/svcenv-dns" -f "$work/c.yaml" --listen 127.0.0.1:0 --upstream none --health-addr "" \
        --ready-addr "" --metrics-addr "" --workers 1 --lameduck 0 >"$work/log" 2>&1 &
pid=$!
port=""
until_ok 10 listening
a() { dig @127.0.0.1 -p "$port" +time=2 +tries=2 +short "$1.default.svc.cluster.local" A; }
check "before the reload: the file's Service" test "$(a old)" = 10.96.7.1
{ svc new 10.96.7.2; printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 7}\n'; } >"$work/c.yaml"
kill -HUP "$pid"
reloaded() { [ "$(a new)" = 10.96.7.2 ]; }
check "SIGHUP: the new Service answers" until_ok 10 reloaded
check "SIGHUP: the removed Service is gone" test -z "$(a old)"
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {ports: [{port: "80"}]}\n' >"$work/c.yaml"
kill -HUP "$pid"
failed() { grep -q "reload: serving the last good files" "$work/log"; }
check "SIGHUP with a bad file: one error line" until_ok 10 failed
check "SIGHUP with a bad file: the error names file, line and field" \
        grep -q "c.yaml:4: Service default/bad: spec.ports\[0\].port: expected an integer" "$work/log"
check "SIGHUP with a bad file: the last good zone still answers" test "$(a new)" = 10.96.7.2
check "still running" kill -0 "$pid"
echo "1..$n"
