# Side by side with upstream: CoreDNS 1.15 (built from the Go module proxy by
# test/k8s/build-coredns) with kubeadm v1.36's Corefile, and svcenv-dns with
# the same options, both on the real API server, loaded with the demo cluster
# and a random one (Services of every kind, EndpointSlices written directly:
# no controller runs). Each query of a generated set covering every form of
# the spec and of CoreDNS's kubernetes plugin (positive and negative, names
# outside the zone, the ndots:5 search names) goes to both over UDP and TCP
# with dig; the answers must match: rcode, flags, EDNS, sections as sets,
# TTLs (SOA serials aside: each server's own last-change time). Where svcenv
# differs on purpose, DIFFERENCES in dnsparity.py says so with a reason. Then
# the time from a Service or endpoint change to its answer, printed.
#
# DNS_SEED=N repeats a random cluster; KEEP_WORK=1 keeps the dig outputs.
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/bulk.bash"
. "$(dirname "$0")/dns.bash"
work=$(mktemp -d)
seed=${DNS_SEED:-$$$RANDOM}
sfx=$$
rnd=dnsr-$sfx
demo=manifests/examples/demo-cluster.yaml
nss=()
cleanup() {
        dns_stop_all
        local ns
        for ns in "${nss[@]}"; do
                # no namespace controller here: empty the namespace by hand so
                # its ClusterIPs are free for the next run (Services have no
                # delete-collection)
                [ "$ns" = default ] && continue
                for s in $(kapi get "/api/v1/namespaces/$ns/services" 2>/dev/null | jq -r '.items[].metadata.name'); do
                        kapi delete "/api/v1/namespaces/$ns/services/$s" >/dev/null 2>&1
                done
                kapi delete "/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices" >/dev/null 2>&1
                kapi delete "/api/v1/namespaces/$ns" >/dev/null 2>&1
        done
        for s in $(jq -r '.[]' "$work/default-services.json" 2>/dev/null); do
                kapi delete "/api/v1/namespaces/default/services/$s" >/dev/null 2>&1
        done
        kapi delete "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=endpointslice.kubernetes.io/managed-by%3Ddns-vs-coredns.svcenv.test" >/dev/null 2>&1
        [ -n "${KEEP_WORK:-}" ] && echo "# kept $work" || rm -rf "$work"
}
trap cleanup EXIT
py() { python3 "$DNS_PY" "$@"; }
check() { if "${@:2}"; then ok "$1"; else not_ok "$1"; fi; }

# post FILE: `PATH<TAB>OBJECT` lines, namespaces first
post() {
        grep -P '^/api/v1/namespaces\t' "$1" | kbulk POST application/json &&
                grep -vP '^/api/v1/namespaces\t' "$1" | kbulk POST application/json
}

# --- the two clusters ----------------------------------------------------------
# dual-stack Services need an IPv6 service range on the server (test/k8s)
stack=single
kapi get /apis/networking.k8s.io/v1/servicecidrs/kubernetes 2>/dev/null |
        jq -e '.spec.cidrs | length == 2' >/dev/null && stack=dual
"$SVCENV/svcenv" get -f $demo -o json >"$work/demo.json" 2>"$work/err" &&
        "$SVCENV/svcenv" endpoints -f $demo --slices -o json >"$work/demo-slices.json" 2>>"$work/err" &&
        py demo "$work/demo.json" "$work/demo-slices.json" "$sfx" $stack >"$work/demo.tsv" 2>>"$work/err"
check "demo cluster converted (its slices from svcenv endpoints)" [ -s "$work/demo.tsv" ]
py cluster "$seed" "$rnd" $stack >"$work/random.tsv"
mapfile -t nss < <(cut -f2 "$work/demo.tsv" "$work/random.tsv" | jq -r 'select(.kind == "Namespace") | .metadata.name')
nss+=(default)
jq -rs '[.[] | select(.kind == "Service" and .metadata.namespace == "default") | .metadata.name]' \
        < <(cut -f2 "$work/demo.tsv") >"$work/default-services.json"
if post "$work/demo.tsv" 2>"$work/err"; then ok "demo cluster loaded into the API server"; else
        not_ok "demo cluster loaded into the API server"
        sed 's/^/# /' "$work/err"
fi
if post "$work/random.tsv" 2>"$work/err"; then
        ok "random cluster (seed $seed: $(grep -c '"kind":"Service"' "$work/random.tsv") Services, $stack-stack) loaded"
else
        not_ok "random cluster (seed $seed) loaded"
        sed 's/^/# /' "$work/err"
fi

# --- the servers -----------------------------------------------------------------
if dns_coredns_bin; then ok "CoreDNS built ($("$CD_BIN" -version | head -1))"; else
        not_ok "CoreDNS built (test/k8s/build-coredns)"
        tail -5 "$work/build-coredns.log" | sed 's/^/# /'
        echo "1..$n"
        exit 1
fi
check "stand-in upstream on $UP_ADDR answers" dns_start_upstream
check "CoreDNS (kubeadm Corefile) ready on $CD_ADDR" dns_start_coredns
have_svcenv=
if [ -x "$SVCENV/svcenv-dns" ]; then
        check "svcenv-dns (same options) ready on $SE_ADDR" dns_start_svcenv && have_svcenv=1
        [ -n "$have_svcenv" ] || tail -5 "$work/svcenv-dns.log" | sed 's/^/# /'
fi

# --- the queries -------------------------------------------------------------------
kapi get /api/v1/services >"$work/services.json"
kapi get /apis/discovery.k8s.io/v1/endpointslices >"$work/slices.json"
kapi get /api/v1/namespaces >"$work/namespaces.json"
py queries "$DNS_ZONE" "$work/services.json" "$work/slices.json" "$work/namespaces.json" "${nss[@]}" >"$work/queries"
echo "# $(wc -l <"$work/queries") queries, over UDP and TCP"
# both servers at once, so that forwarded answers age alike in both caches
for tr in udp tcp; do
        dns_dig "$CD_ADDR" "$CD_PORT" "$work/queries" "$work/coredns.$tr" $tr &
        digpid=$!
        [ -n "$have_svcenv" ] && dns_dig "$SE_ADDR" "$SE_PORT" "$work/queries" "$work/svcenv.$tr" $tr
        wait $digpid # not a bare wait: the servers are children too
done
for tr in udp tcp; do
        if [ -n "$have_svcenv" ]; then
                while IFS= read -r line; do
                        case $line in
                        "ok - "*) ok "${line#ok - }" ;;
                        *) not_ok "${line#not ok - }" ;;
                        esac
                done < <(py compare "$DNS_ZONE" "$work/queries" "$work/coredns.$tr" "$work/svcenv.$tr" "$tr")
        else
                # the harness alone: CoreDNS's answers, and one explicit skip
                py show "$work/queries" "$work/coredns.$tr"
                if [ "$(grep -c '^; <<>> DiG' "$work/coredns.$tr")" = "$(wc -l <"$work/queries")" ]; then
                        ok "CoreDNS answered every query over $tr"
                else
                        not_ok "CoreDNS answered every query over $tr"
                fi
                ok "$tr answers compared with svcenv-dns # SKIP svcenv-dns is not built yet"
        fi
done

# --- change to answer ------------------------------------------------------------
# Latency is printed, not asserted: the check is that the change is answered
# at all (within 10 s); the issue's aim (svcenv: 100 ms) is for the bench.
# Both servers are polled at once; the time counts from the request sent
# (and, in brackets, from the API server's reply: the watch event cannot
# come much before it).
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }
# answered ADDR PORT NAME TYPE WANT OUT: polls every 20 ms until WANT (any
# record when empty) is in the answer, then writes the time (ms) to OUT;
# fails after 10 s
answered() {
        local deadline=$((SECONDS + 10))
        until dig @"$1" -p "$2" +tries=1 +time=1 +short "$3" "$4" 2>/dev/null |
                if [ -n "$5" ]; then grep -qxF "$5"; else grep -q .; fi; do
                [ $SECONDS -ge $deadline ] && return 1
                sleep 0.02
        done
        now_ms >"$6"
}
servers=("CoreDNS $CD_ADDR $CD_PORT")
[ -n "$have_svcenv" ] && servers+=("svcenv-dns $SE_ADDR $SE_PORT")
# change WHAT NAME TYPE WANT PATH BODY: sends BODY to PATH while polling
change() {
        local what=$1 name=$2 type=$3 want=$4 s who addr port t0 t1 pids=()
        t0=$(now_ms)
        for s in "${servers[@]}"; do
                read -r who addr port <<<"$s"
                rm -f "$work/answered.$who"
                answered "$addr" "$port" "$name" "$type" "$want" "$work/answered.$who" &
                pids+=($!)
        done
        kapi post "$5" - <<<"$6" >/dev/null
        t1=$(now_ms)
        wait "${pids[@]}"
        for s in "${servers[@]}"; do
                read -r who _ <<<"$s"
                if [ -s "$work/answered.$who" ]; then
                        local t=$(cat "$work/answered.$who")
                        ok "$who answers $what $((t - t0)) ms after the request was sent ($((t - t1)) ms after the API server's reply)"
                else
                        not_ok "$who answers $what (not within 10 s)"
                fi
        done
}
ns0=$rnd-a
change "a new Service" "late.$ns0.svc.$DNS_ZONE" A "" /api/v1/namespaces/$ns0/services \
        '{"apiVersion":"v1","kind":"Service","metadata":{"name":"late"},"spec":{"ports":[{"name":"http","port":80}]}}'
change "a new endpoint" 7.0.199.10.in-addr.arpa PTR "10-199-0-7.late.$ns0.svc.$DNS_ZONE." \
        /apis/discovery.k8s.io/v1/namespaces/$ns0/endpointslices \
        '{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"late-x0","labels":{"kubernetes.io/service-name":"late","endpointslice.kubernetes.io/managed-by":"dns-vs-coredns.svcenv.test"}},"addressType":"IPv4","ports":[{"name":"http","port":8080,"protocol":"TCP"}],"endpoints":[{"addresses":["10.199.0.7"],"conditions":{"ready":true}}]}'
echo "1..$n"
