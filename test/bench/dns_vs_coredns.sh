#!/usr/bin/env bash
# svcenv-dns vs CoreDNS 1.15 (kubeadm v1.36's Corefile, test/k8s/build-coredns)
# on a real API server, loopback only, with dnsperf (Debian package; installed
# here when missing and we are root). For each cluster size (BENCH_DNS_SIZES
# Services, BENCH_DNS_PODS endpoints each, pods represented only by the
# EndpointSlices' endpoints) and each query mix:
#   plain   A of every Service name (all NOERROR)
#   ndots   what ndots:5 clients send: A+AAAA of Service names (2 in 5), and
#           A+AAAA of the cluster search candidates of an external name (3 in
#           5, the three suffixes in turn): 40 % NOERROR, 60 % NXDOMAIN
# it prints queries per server CPU-second (utime+stime of the server's
# process group from /proc over a full-speed run: the figure that survives a
# noisy machine), p50/p99 latency at a fixed rate, RSS, the time from a
# Service create to its answer (mostly the API server's: a create allocates
# an IPAddress first), and the time from a change to an existing name to its
# answer: a headless Service's EndpointSlice gains an address (the new A
# record), a ClusterIP Service's named port is renamed (the new SRV name).
# Prints figures; asserts nothing about time.
#
#   BENCH_DNS_SIZES="100 10000" BENCH_DNS_PODS=15 test/bench/dns_vs_coredns.sh
#
# BENCH_DNS_SECONDS (20) per full-speed run, BENCH_DNS_RATE (2000 q/s) and
# BENCH_DNS_RATE_SECONDS (15) for the latency runs. Uses KUBE_DIR when set,
# else starts its own control plane. BENCH_ONLY=svcenv|coredns runs one side.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SVCENV=${SVCENV:-$PWD/$BUILD/bin}
SIZES=${BENCH_DNS_SIZES:-100 10000}
PODS=${BENCH_DNS_PODS:-15}
SECS=${BENCH_DNS_SECONDS:-20}
RATE=${BENCH_DNS_RATE:-2000}
RATE_SECS=${BENCH_DNS_RATE_SECONDS:-15}
ONLY=${BENCH_ONLY:-both}
PER_NS=100
CONTROLPLANE=test/k8s/controlplane
work=$(mktemp -d)

if ! command -v dnsperf >/dev/null || ! command -v dig >/dev/null; then
        if [ "$(id -u)" = 0 ]; then
                echo "installing dnsperf and bind9-dnsutils (Debian) for this benchmark" >&2
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends dnsperf bind9-dnsutils >/dev/null ||
                        { echo "dns_vs_coredns: cannot install dnsperf" >&2; exit 1; }
        else
                echo "dns_vs_coredns: needs dnsperf and dig: sudo apt-get install -y dnsperf bind9-dnsutils" >&2
                exit 1
        fi
fi

own_cp=
if [ -z "${KUBE_DIR:-}" ]; then
        KUBE_DIR=$work/kube
        mkdir -p "$KUBE_DIR"
        $CONTROLPLANE start "$KUBE_DIR" >"$work/cp.out" 2>&1 || { cat "$work/cp.out"; exit 1; }
        own_cp=1
fi
export KUBE_DIR
. test/integration/bulk.bash
until_ok() {
        local deadline=$((SECONDS + $1))
        shift
        until "$@"; do
                [ $SECONDS -ge $deadline ] && return 1
                sleep 0.2
        done
}
. test/integration/dns.bash
kapi() { test/k8s/kapi "$KUBE_DIR" "$@"; }
run=bd$$
nss=()
cleanup() {
        dns_stop_all
        if [ -n "$own_cp" ]; then
                $CONTROLPLANE stop "$KUBE_DIR" >/dev/null 2>&1
        else
                # no namespace controller: free the ClusterIPs by hand
                for ns in "${nss[@]}"; do
                        kapi get "/api/v1/namespaces/$ns/services" | jq -r --arg ns "$ns" \
                                '.items[] | "/api/v1/namespaces/\($ns)/services/\(.metadata.name)\t"'
                done | kbulk DELETE application/json
                for ns in "${nss[@]}"; do
                        kapi delete "/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices" >/dev/null 2>&1
                        kapi delete "/api/v1/namespaces/$ns" >/dev/null 2>&1
                done
        fi
        rm -rf "$work"
}
trap cleanup EXIT
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }

dns_coredns_bin || { echo "dns_vs_coredns: CoreDNS build failed:"; tail "$work/build-coredns.log"; exit 1; }
echo "== dns_vs_coredns: $("$CD_BIN" -version | head -1) vs svcenv-dns; sizes: $SIZES Services x $PODS endpoints"
have_svcenv=1
[ -x "$SVCENV/svcenv-dns" ] || { have_svcenv=; echo "svcenv-dns is not built: CoreDNS only"; }
[ "$ONLY" = coredns ] && have_svcenv=
dns_start_upstream || { echo "stand-in upstream did not start"; exit 1; }

# the objects the change measures edit, in the first namespace: headless
# Service hl with slice hl-x (one endpoint to start), ClusterIP Service pr
# with named port p0
change_fixtures() {
        local ns=${nss[0]}
        printf '/api/v1/namespaces/%s/services\t{"apiVersion":"v1","kind":"Service","metadata":{"name":"%s"},"spec":%s}\n' \
                "$ns" hl '{"clusterIP":"None","ports":[{"name":"http","port":80}]}' \
                "$ns" pr '{"ports":[{"name":"p0","port":80}]}' | kbulk POST application/json || return 1
        printf '/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices\t{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"hl-x","labels":{"kubernetes.io/service-name":"hl","endpointslice.kubernetes.io/managed-by":"dns-bench.svcenv.test"}},"addressType":"IPv4","ports":[{"name":"http","port":80,"protocol":"TCP"}],"endpoints":[{"addresses":["10.254.255.1"],"conditions":{"ready":true}}]}\n' \
                "$ns" | kbulk POST application/json
}

# grow_to N: the cluster holds services s0..s(N-1), PER_NS to a namespace,
# each with one EndpointSlice of PODS ready endpoints
made=0
grow_to() {
        local target=$1 s p ns ip
        local n_ns=$(((target + PER_NS - 1) / PER_NS)) i
        local first=${#nss[@]}
        for ((i = first; i < n_ns; i++)); do nss+=("$run-$i"); done
        for ((i = first; i < n_ns; i++)); do
                printf '/api/v1/namespaces\t{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"}}\n' "$run-$i"
        done | kbulk POST application/json || return 1
        [ "$made" != 0 ] || change_fixtures || return 1
        for ((s = made; s < target; s++)); do
                ns=${nss[$((s / PER_NS))]}
                printf '/api/v1/namespaces/%s/services\t{"apiVersion":"v1","kind":"Service","metadata":{"name":"s%d"},"spec":{"ports":[{"name":"http","port":80,"targetPort":8080}]}}\n' "$ns" $s
        done | kbulk POST application/json || return 1
        for ((s = made; s < target; s++)); do
                ns=${nss[$((s / PER_NS))]}
                eps=
                for ((p = 0; p < PODS; p++)); do
                        ip=$((s * PODS + p + 65536))
                        eps+="${eps:+,}{\"addresses\":[\"10.$(((ip >> 16) & 255)).$(((ip >> 8) & 255)).$((ip & 255))\"],\"conditions\":{\"ready\":true},\"targetRef\":{\"kind\":\"Pod\",\"name\":\"s$s-$p\"}}"
                done
                printf '/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices\t{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"s%d-x","labels":{"kubernetes.io/service-name":"s%d","endpointslice.kubernetes.io/managed-by":"dns-bench.svcenv.test"}},"addressType":"IPv4","ports":[{"name":"http","port":8080,"protocol":"TCP"}],"endpoints":[%s]}\n' "$ns" $s $s "$eps"
        done | kbulk POST application/json || return 1
        made=$target
}

# mixes N: the query files for services s0..s(N-1) (at most 10,000 names)
mixes() {
        local n=$1 k s ns fq
        : >"$work/plain"
        : >"$work/ndots"
        for ((k = 0; k < n && k < 10000; k++)); do
                s=$(((k * 7919) % n))
                ns=${nss[$((s / PER_NS))]}
                fq=s$s.$ns.svc.$DNS_ZONE
                echo "$fq A" >>"$work/plain"
                if ((k % 5 < 2)); then
                        printf '%s A\n%s AAAA\n' "$fq" "$fq" >>"$work/ndots"
                else # A+AAAA of one search candidate of an external name, in turn
                        case $((k % 3)) in
                        0) fq=api.example.test.$ns.svc.$DNS_ZONE ;;
                        1) fq=api.example.test.svc.$DNS_ZONE ;;
                        2) fq=api.example.test.$DNS_ZONE ;;
                        esac
                        printf '%s A\n%s AAAA\n' "$fq" "$fq" >>"$work/ndots"
                fi
        done
}

group_cpu_ticks() { # utime+stime (clock ticks) of every process in group $PG
        local sum=0 f st
        for f in /proc/[0-9]*/stat; do
                { st=$(<"$f"); } 2>/dev/null || continue # gone meanwhile
                # after "pid (comm) ": state ppid pgrp ... utime is the 12th, stime the 13th
                read -r -a st <<<"${st##*) }"
                [ "${st[2]}" = "$PG" ] && sum=$((sum + st[11] + st[12]))
        done
        echo $sum
}
rss_mb() { awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null; }
hz=$(getconf CLK_TCK)

# bench WHO ADDR PORT PID
bench() {
        local who=$1 addr=$2 port=$3 pid=$4 mix c0 c1 q cpu
        PG=$pid
        echo "$who: RSS $(rss_mb "$pid") MB after sync"
        for mix in plain ndots; do
                c0=$(group_cpu_ticks)
                dnsperf -s "$addr" -p "$port" -d "$work/$mix" -l "$SECS" -c 4 -q 200 >"$work/perf" 2>&1
                c1=$(group_cpu_ticks)
                q=$(awk '/Queries completed:/ { print $3 }' "$work/perf")
                cpu=$(echo "scale=2; ($c1 - $c0) / $hz" | bc)
                printf '%s %-5s full speed: %s queries in %s s (%s/s), server CPU %s s: %s queries per CPU-second; lost %s\n' \
                        "$who" "$mix" "$q" "$SECS" "$(awk '/Queries per second:/ { print $4 }' "$work/perf")" "$cpu" \
                        "$(echo "scale=0; $q / ($cpu + 0.001)" | bc)" "$(awk '/Queries lost:/ { print $3 }' "$work/perf")"
                sed -n 's/^ *Response codes: */    rcodes: /p' "$work/perf"
                dnsperf -s "$addr" -p "$port" -d "$work/$mix" -l "$RATE_SECS" -Q "$RATE" -c 2 -q 100 -v >"$work/perf" 2>&1
                awk '$1 == ">" { print $NF * 1000 }' "$work/perf" | sort -n >"$work/lat"
                printf '%s %-5s at %s q/s: p50 %s ms, p99 %s ms over %s answers; RSS %s MB\n' "$who" "$mix" "$RATE" \
                        "$(awk '{ a[NR] = $1 } END { if (NR) printf "%.3f", a[int(NR * 0.5) + 1] }' "$work/lat")" \
                        "$(awk '{ a[NR] = $1 } END { if (NR) printf "%.3f", a[int(NR * 0.99) + 1] }' "$work/lat")" \
                        "$(wc -l <"$work/lat")" "$(rss_mb "$pid")"
        done
        # Service create -> answer, polled every 5 ms, 5 times; ms from the
        # request sent and (in brackets) from the API server's reply
        local i t0 t1 lat= svc deadline
        for i in 1 2 3 4 5; do
                svc=chg-${who,,}-$size-$i
                (
                        deadline=$((SECONDS + 10))
                        until dig @"$addr" -p "$port" +tries=1 +time=1 +short "$svc.${nss[0]}.svc.$DNS_ZONE" A | grep -q .; do
                                [ $SECONDS -ge $deadline ] && exit 1
                                sleep 0.005
                        done
                        now_ms >"$work/answered"
                ) &
                local poller=$!
                t0=$(now_ms)
                kapi post "/api/v1/namespaces/${nss[0]}/services" - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"$svc\"},\"spec\":{\"ports\":[{\"port\":80}]}}" >/dev/null
                t1=$(now_ms)
                if wait $poller; then
                        lat+=" $(($(cat "$work/answered") - t0)) ($(($(cat "$work/answered") - t1)))"
                else
                        lat+=" none"
                fi
        done
        echo "$who: Service create to answer, ms from the request (from the API server's reply), 5 tries:$lat"
        change_latency "$who" "$addr" "$port" endpoint
        change_latency "$who" "$addr" "$port" port
        echo "$who: peak RSS $(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status") MB"
}

# change_latency WHO ADDR PORT endpoint|port: an existing name changes, 5
# times; ms from the request sent and (in brackets) from the API server's
# reply, polled every 5 ms by test/bench/dns_change.py (one process sends the
# PATCH and polls, so no process start is measured). endpoint: slice hl-x
# gains an address, until the A records of hl list it; port: pr's named port
# is renamed, until the new _<name>._tcp SRV name answers.
changes=0
change_latency() {
        local who=$1 addr=$2 port=$3 what=$4 i lat= q type want path patch ns=${nss[0]} r
        for i in 1 2 3 4 5; do
                changes=$((changes + 1))
                if [ "$what" = endpoint ]; then
                        want=10.254.$((changes / 250)).$((changes % 250 + 1))
                        q=hl.$ns.svc.$DNS_ZONE type=A
                        path=/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices/hl-x
                        patch='[{"op":"add","path":"/endpoints/-","value":{"addresses":["'$want'"],"conditions":{"ready":true}}}]'
                else
                        want=p$changes
                        q=_$want._tcp.pr.$ns.svc.$DNS_ZONE type=SRV
                        path=/api/v1/namespaces/$ns/services/pr
                        patch='[{"op":"replace","path":"/spec/ports/0/name","value":"'$want'"}]'
                fi
                r=$(
                        set -a
                        . "$KUBE_DIR/env"
                        python3 test/bench/dns_change.py "$addr" "$port" "$q" "$type" "$want" PATCH "$path" \
                                application/json-patch+json "$patch"
                ) || r=failed
                [ "$r" = none ] || [ "$r" = failed ] || r="${r% *} (${r#* })"
                lat+=" $r"
        done
        if [ "$what" = endpoint ]; then
                echo "$who: headless slice gains an address to its A record, ms from the request (from the API server's reply), 5 tries:$lat"
        else
                echo "$who: named port renamed to its SRV name, ms from the request (from the API server's reply), 5 tries:$lat"
        fi
}

for size in $SIZES; do
        t0=$(now_ms)
        grow_to "$size" || { echo "loading $size Services failed"; exit 1; }
        echo "-- $size Services, $((size * PODS)) endpoints (loaded in $((($(now_ms) - t0) / 1000)) s), load average $(cut -d' ' -f1-3 /proc/loadavg)"
        mixes "$size"
        echo "query mixes: plain $(wc -l <"$work/plain"), ndots $(wc -l <"$work/ndots") queries"
        if [ "$ONLY" != svcenv ]; then
                t0=$(now_ms)
                dns_start_coredns || { echo "CoreDNS did not get ready"; tail "$work/coredns.log"; exit 1; }
                echo "CoreDNS ready in $((($(now_ms) - t0))) ms"
                bench CoreDNS "$CD_ADDR" "$CD_PORT" "$CD_PID"
                kill -TERM -- "-$CD_PID"
                wait "$CD_PID" 2>/dev/null
        fi
        if [ -n "$have_svcenv" ]; then
                t0=$(now_ms)
                dns_start_svcenv || { echo "svcenv-dns did not get ready"; tail "$work/svcenv-dns.log"; exit 1; }
                echo "svcenv-dns ready in $((($(now_ms) - t0))) ms"
                bench svcenv-dns "$SE_ADDR" "$SE_PORT" "$SE_PID"
                kill -TERM -- "-$SE_PID"
                wait "$SE_PID" 2>/dev/null
        fi
done
