#!/usr/bin/env bash
# svcenv-dns against the real API server, asked with dig over UDP and TCP:
# Services, headless EndpointSlices, SRV, ExternalName; a Service and an
# endpoint change answered (polled); forwarding to a stand-in upstream (a
# second svcenv-dns serving a zone of its own from manifests on another
# 127.0.0.x) with retry over TCP on truncation, the cache and negative
# caching (answers still come with the upstream gone), SERVFAIL when no
# upstream answers; /health, /ready, /metrics; SIGTERM with the lameduck;
# the RBAC of manifests/rbac-dns.yaml by impersonation.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${SVCENV:=$PWD/build/bin}"
. test/integration/lib.bash
check() { # check NAME CMD...
        local name=$1
        shift
        if "$@"; then ok "$name"; else not_ok "$name"; fi
}
command -v dig >/dev/null || { echo "not ok 1 - dig is missing (bind9-dnsutils; test/ensure-deps)"; exit 1; }
# shellcheck disable=SC1091
. "$KUBE_DIR/env"

work=$(mktemp -d /tmp/svcenv-dns.XXXXXX)
ns=dns-$$-$RANDOM
pids=()
made=()
cleanup() {
        for obj in "${made[@]}"; do kapi delete "$obj" >/dev/null 2>&1; done
        for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
        for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
        kapi delete "/api/v1/namespaces/$ns" >/dev/null 2>&1
        [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

# addresses of our own on loopback, ports free now
a1=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).53
a2=${a1%.53}.54
free_port() {
        python3 -c 'import socket,sys
s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "$1"
}
p1=$(free_port "$a1") p2=$(free_port "$a2")
hp=$(free_port 127.0.0.1) rp=$(free_port 127.0.0.1) mp=$(free_port 127.0.0.1)
q() { dig @"$a1" -p "$p1" +time=3 +tries=1 "$@"; }
short() { q +short "$@" | sort | tr '\n' ' ' | sed 's/ $//'; }
status_of() { q "$@" | sed -n 's/.*status: \([A-Z]*\).*/\1/p'; }
metrics() { curl -s "http://127.0.0.1:$mp/metrics"; }
metric() { metrics | awk -v m="$1" 'index($0, m) == 1 { s += $NF } END { print s + 0 }'; }

# ---- the cluster: a namespace, a ClusterIP Service, a headless one with a
# slice, an ExternalName ----
post() { kapi post "$1" - >/dev/null; }
post /api/v1/namespaces <<<"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}"
post /api/v1/namespaces/$ns/services <<EOF2
{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},
 "spec":{"ports":[{"name":"http","port":80,"protocol":"TCP"}]}}
EOF2
post /api/v1/namespaces/$ns/services <<EOF2
{"apiVersion":"v1","kind":"Service","metadata":{"name":"hs"},
 "spec":{"clusterIP":"None","ports":[{"name":"pg","port":5432}]}}
EOF2
slice() { # slice ADDR...: the EndpointSlice of hs with these ready addresses
        local eps="" i=0 a
        for a in "$@"; do
                eps+="${eps:+,}{\"addresses\":[\"$a\"],\"hostname\":\"hs-$i\",\"conditions\":{\"ready\":true}}"
                i=$((i + 1))
        done
        echo "{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"hs-1\",\"labels\":{\"kubernetes.io/service-name\":\"hs\"}},\"addressType\":\"IPv4\",\"ports\":[{\"name\":\"pg\",\"port\":5432,\"protocol\":\"TCP\"}],\"endpoints\":[$eps]}"
}
slice 10.244.1.10 10.244.2.10 | post /apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices
post /api/v1/namespaces/$ns/services <<EOF2
{"apiVersion":"v1","kind":"Service","metadata":{"name":"ext"},
 "spec":{"type":"ExternalName","externalName":"api.ext.svc.upstream.test"}}
EOF2
web_ip=$(kapi get /api/v1/namespaces/$ns/services/web | jq -r .spec.clusterIP)
# a pod whose address is one of ours on loopback: dig -b asks as that pod
pod_ip=${a1%.53}.7
post /api/v1/namespaces/$ns/pods <<EOF2
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"client"},
 "spec":{"containers":[{"name":"c","image":"x"}]}}
EOF2
kapi patch-status "$ns" client "{\"status\":{\"phase\":\"Running\",\"podIP\":\"$pod_ip\",\"podIPs\":[{\"ip\":\"$pod_ip\"}]}}" >/dev/null

# ---- the stand-in upstream: svcenv-dns serving zone upstream.test from
# manifests, with a Service of 100 endpoints (an answer too big for UDP) ----
{
        cat <<EOF2
apiVersion: v1
kind: Namespace
metadata: {name: ext}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: ext}
spec: {clusterIP: 192.0.2.10, clusterIPs: [192.0.2.10], ports: [{port: 443}]}
---
apiVersion: v1
kind: Service
metadata: {name: big, namespace: ext}
spec: {clusterIP: None, ports: [{name: x, port: 1}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: big-1, namespace: ext, labels: {kubernetes.io/service-name: big}}
addressType: IPv4
ports: [{name: x, port: 1, protocol: TCP}]
endpoints:
EOF2
        for i in $(seq 1 100); do echo "- {addresses: [198.51.100.$i], conditions: {ready: true}}"; done
} >"$work/upstream.yaml"
"$SVCENV/svcenv-dns" -f "$work/upstream.yaml" --zone upstream.test --ttl 30 --upstream none \
        --listen "$a2:$p2" --health-addr "" --ready-addr "" --metrics-addr "" --workers 1 \
        --lameduck 0 >"$work/upstream.log" 2>&1 &
up_pid=$!
pids+=("$up_pid")

# ---- svcenv-dns on the API server ----
"$SVCENV/svcenv-dns" --kubeconfig "$KUBE_DIR/kubeconfig" --listen "$a1:$p1" --upstream "$a2:$p2" \
        --upstream-timeout 1s --health-addr "127.0.0.1:$hp" --ready-addr "127.0.0.1:$rp" \
        --metrics-addr "127.0.0.1:$mp" --workers 2 --lameduck 2s --autopath -v 2 >"$work/dns.log" 2>&1 &
dns_pid=$!
pids+=("$dns_pid")
ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$rp/ready")" = 200 ]; }
if until_ok 30 ready; then
        ok "ready once the informers synced"
else
        not_ok "ready once the informers synced"
        sed 's/^/# /' "$work/dns.log" | tail -20
        exit 1
fi
check "/health says OK" test "$(curl -s "http://127.0.0.1:$hp/health")" = OK

# ---- the zone over UDP and TCP ----
d=svc.cluster.local
check "A of a ClusterIP Service over UDP" test "$(short web.$ns.$d)" = "$web_ip"
check "... and over TCP" test "$(short +tcp web.$ns.$d)" = "$web_ip"
check "AA set, RA not (as CoreDNS)" bash -c "dig @$a1 -p $p1 +time=3 +tries=1 web.$ns.$d | grep -q 'flags: qr aa rd;'"
check "headless: the ready endpoints" test "$(short hs.$ns.$d)" = "10.244.1.10 10.244.2.10"
check "an endpoint by its hostname" test "$(short hs-1.hs.$ns.$d)" = "10.244.2.10"
check "SRV of a named port" test "$(short _http._tcp.web.$ns.$d SRV)" = "0 100 80 web.$ns.$d."
check "a missing Service is NXDOMAIN" test "$(status_of nope.$ns.$d)" = NXDOMAIN
check "the ndots:5 walk of an external name is NXDOMAIN from the zone" \
        test "$(status_of example.com.$ns.$d)" = NXDOMAIN
check "case is kept in the answer" test "$(q +noall +answer WEB.$ns.$d | awk '{print $1}')" = "WEB.$ns.$d."

check "svcenv dns --kubeconfig gives the same answer" \
        test "$("$SVCENV/svcenv" dns --kubeconfig "$KUBE_DIR/kubeconfig" hs.$ns.$d --explain |
                awk '$4 == "A" {print $5, $10}' | sort | tr '\n' ' ')" = \
        "10.244.1.10 $ns/hs-1 10.244.2.10 $ns/hs-1 "

# ---- changes, polled (the time they took is printed, not asserted) ----
post /api/v1/namespaces/$ns/services <<EOF2
{"apiVersion":"v1","kind":"Service","metadata":{"name":"late"},"spec":{"ports":[{"port":81}]}}
EOF2
t0=$(date +%s%N) # the API server has it now
has_late() { [ -n "$(short late.$ns.$d)" ]; }
poll_fast() { # poll_fast SECONDS CMD...: every 20 ms
        local deadline=$((SECONDS + $1))
        shift
        until "$@"; do
                [ $SECONDS -ge $deadline ] && return 1
                sleep 0.02
        done
}
if poll_fast 10 has_late; then
        echo "# a new Service answered $((($(date +%s%N) - t0) / 1000000)) ms after its create returned (poll every 20 ms)"
        late_ip=$(kapi get /api/v1/namespaces/$ns/services/late | jq -r .spec.clusterIP)
        check "a new Service is answered, with its clusterIP" test "$(short late.$ns.$d)" = "$late_ip"
else
        not_ok "a new Service is answered, with its clusterIP"
fi
slice 10.244.1.10 10.244.2.10 10.244.3.10 >"$work/slice.json"
rv=$(kapi get /apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices/hs-1 | jq -r .metadata.resourceVersion)
jq --arg rv "$rv" '.metadata.resourceVersion = $rv' "$work/slice.json" |
        kapi put /apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices/hs-1 - >/dev/null
t0=$(date +%s%N)
three() { [ "$(short hs.$ns.$d)" = "10.244.1.10 10.244.2.10 10.244.3.10" ]; }
if poll_fast 10 three; then
        ok "a new endpoint is answered"
        echo "# a new endpoint answered $((($(date +%s%N) - t0) / 1000000)) ms after its update returned"
else
        not_ok "a new endpoint is answered"
fi
kapi delete /api/v1/namespaces/$ns/services/late >/dev/null
gone() { [ "$(status_of late.$ns.$d)" = NXDOMAIN ]; }
check "a deleted Service is NXDOMAIN" until_ok 10 gone

# ---- forwarding, the cache, negative caching ----
check "a name outside the zone is forwarded" test "$(short api.ext.svc.upstream.test)" = 192.0.2.10
check "... its negative answer too (NXDOMAIN)" test "$(status_of nope.ext.svc.upstream.test)" = NXDOMAIN
check "ExternalName: the CNAME, then the target's A from upstream" \
        test "$(q +noall +answer ext.$ns.$d | awk '{print $4, $5}' | tr '\n' ' ')" = "CNAME api.ext.svc.upstream.test. A 192.0.2.10 "
check "ExternalName: a target without AAAA upstream, the CNAME alone" \
        test "$(q +noall +answer ext.$ns.$d AAAA | awk '{print $4, $5}' | tr '\n' ' ')" = "CNAME api.ext.svc.upstream.test. "
# CoreDNS's `cache 30` rewrites every reply passing through it: one TTL for
# all records, the smallest clamped to 5..30
check "dns-version TXT through the cache: TTL 30, not 28800 (as CoreDNS)" \
        test "$(q +noall +answer dns-version.cluster.local TXT | awk '{print $2}')" = 30
check "ExternalName: the CNAME and the target's A under one TTL (as CoreDNS)" \
        test "$(q +noall +answer ext.$ns.$d | awk '{print $2}' | sort -u | wc -l)" = 1
# --autopath: the first query of the pod's search walk gets the final answer
ap() { q -b "$pod_ip" +noall +answer "$@" | awk '{print $4, $5}' | tr '\n' ' '; }
check "autopath: <svc>.<ns> from a pod of <ns> (CNAME, then the A)" \
        test "$(ap web.$ns.$ns.$d)" = "CNAME web.$ns.$d. A $web_ip "
check "autopath: an external name, through the upstream" \
        test "$(ap api.ext.svc.upstream.test.$ns.$d)" = "CNAME api.ext.svc.upstream.test. A 192.0.2.10 "
check "autopath: not for an address no pod has" test "$(status_of web.$ns.$ns.$d)" = NXDOMAIN
n_big=$(q +ignore +noedns big.ext.svc.upstream.test | grep -c '	A	')
check "a big answer over UDP without EDNS0 is truncated (TC)" \
        bash -c "dig @$a1 -p $p1 +time=3 +tries=1 +ignore +noedns big.ext.svc.upstream.test | grep -q 'flags: qr[a-z ]* tc'"
echo "# $n_big of 100 A records fit in 512 bytes"
check "... and complete over TCP" test "$(q +tcp +short big.ext.svc.upstream.test | wc -l)" = 100
check "the forwarder asked the upstream again over TCP" test "$(metric svcenv_dns_forward_tcp_retries_total)" -ge 1
kill -TERM "$up_pid"
wait "$up_pid" 2>/dev/null
hits0=$(metric 'coredns_cache_hits_total{server="dns://'"$a1:$p1"'",type="success"')
neg0=$(metric 'coredns_cache_hits_total{server="dns://'"$a1:$p1"'",type="denial"')
check "upstream gone: a cached answer still comes" test "$(short api.ext.svc.upstream.test)" = 192.0.2.10
check "... and a cached NXDOMAIN" test "$(status_of nope.ext.svc.upstream.test)" = NXDOMAIN
check "cache hits counted (success)" test "$(metric 'coredns_cache_hits_total{server="dns://'"$a1:$p1"'",type="success"')" -gt "$hits0"
check "cache hits counted (denial)" test "$(metric 'coredns_cache_hits_total{server="dns://'"$a1:$p1"'",type="denial"')" -gt "$neg0"
check "cached TTLs count down (at most the upstream's 30)" \
        bash -c "ttl=\$(dig @$a1 -p $p1 +time=3 +tries=1 +noall +answer api.ext.svc.upstream.test | awk '{print \$2}'); [ \"\$ttl\" -le 30 ]"
check "no upstream answers: SERVFAIL" test "$(status_of other.ext.svc.upstream.test)" = SERVFAIL

# ---- metrics under CoreDNS's names ----
metrics >"$work/metrics.txt"
check "/metrics: requests by proto udp" grep -q '^coredns_dns_requests_total{server="dns://'"$a1:$p1"'",zone=".",view="",proto="udp",family="1",type="A"} ' "$work/metrics.txt"
check "/metrics: requests by proto tcp" grep -q 'proto="tcp",family="1",type="A"} ' "$work/metrics.txt"
check "/metrics: responses by rcode and plugin" grep -q '^coredns_dns_responses_total{.*rcode="NXDOMAIN",plugin="kubernetes"} ' "$work/metrics.txt"
check "/metrics: SERVFAIL from forward" grep -q 'rcode="SERVFAIL",plugin="forward"} ' "$work/metrics.txt"
check "/metrics: the duration histogram" grep -q '^coredns_dns_request_duration_seconds_bucket{.*type="A",le="+Inf"} ' "$work/metrics.txt"
check "/metrics: cache misses" grep -q '^coredns_cache_misses_total{' "$work/metrics.txt"

# ---- SIGTERM: lameduck (ready 503, still answering), then exit 0 ----
kill -TERM "$dns_pid"
notready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$rp/ready")" = 503 ]; }
check "SIGTERM: /ready says 503 in the lameduck" until_ok 2 notready
check "... /health still OK" test "$(curl -s "http://127.0.0.1:$hp/health")" = OK
check "... and queries are still answered" test "$(short web.$ns.$d)" = "$web_ip"
wait "$dns_pid"
check "... then it exits 0" test $? = 0

# ---- RBAC of manifests/rbac-dns.yaml, by impersonation ----
sa=system:serviceaccount:kube-system:svcenv-dns
awk -v dir="$work" 'BEGIN { k = 0; f = dir "/rbac-0.yaml" } /^---/ { k++; f = dir "/rbac-" k ".yaml"; next } { print > f }' manifests/rbac-dns.yaml
for f in "$work"/rbac-*.yaml; do
        kind=$(awk '/^kind:/{print $2; exit}' "$f")
        case $kind in
        ServiceAccount) path=/api/v1/namespaces/kube-system/serviceaccounts ;;
        ClusterRole) path=/apis/rbac.authorization.k8s.io/v1/clusterroles ;;
        ClusterRoleBinding) path=/apis/rbac.authorization.k8s.io/v1/clusterrolebindings ;;
        esac
        # made here: removed at the end (webhook.sh creates them too)
        name=$(awk '/^  name:/{print $2; exit}' "$f")
        kapi post "$path" "$f" >/dev/null 2>&1 && made+=("$path/$name")
done
as() { # as METHOD PATH: the HTTP code for the ServiceAccount
        curl -s -o /dev/null -w '%{http_code}' --cacert "$CA_FILE" -H "Authorization: Bearer $ADMIN_TOKEN" \
                -H "Impersonate-User: $sa" -X "$1" "$APISERVER_URL$2"
}
allowed() { local c; c=$(as GET "$1"); [ "$c" != 403 ] && [ "$c" != 401 ]; }
for p in /api/v1/services /apis/discovery.k8s.io/v1/endpointslices /api/v1/namespaces /api/v1/pods; do
        check "RBAC dns: list $p" allowed "$p"
done
check "RBAC dns: no secrets" test "$(as GET /api/v1/secrets)" = 403
check "RBAC dns: cannot delete services" test "$(as DELETE /api/v1/namespaces/$ns/services/web)" = 403
echo "1..$n"
