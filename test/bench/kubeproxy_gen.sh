#!/usr/bin/env bash
# Ruleset generation, kube-proxy v1.36 vs svcenv, on the same cluster (issue 5:
# 1,000 / 10,000 / 30,000 ClusterIP services x 10 endpoints, see
# test/bench/proxy_cluster.h). kube-proxy's side runs its own iptables and
# nftables proxier code: the upstream package sources are copied at run time
# from the module cache test/k8s/build fills into a scratch wrapper module
# together with test/bench/kubeproxy/*.go (our fakes for iptables-restore /
# nft, which only keep the text they would be fed). Timed: the informer
# handlers for every Service and EndpointSlice, the first full sync, and a
# partial sync after one service's endpoints change. svcenv's side is
# build/bench/bench_proxy (BENCH_APPLY=0). Prints figures, and whether both
# iptables-restore inputs hold the same lines; asserts nothing.
#
#   BENCH_KP_SIZES="1000 10000 30000" BENCH_KP_RUNS=3 test/bench/kubeproxy_gen.sh
#
# Skips (and says why) without a Go toolchain or the Kubernetes module source.
# Never downloads anything: GOPROXY=off, GOTOOLCHAIN=local. The build takes
# seconds with the Go cache test/k8s/build leaves (same flags), about 10
# minutes on 2 busy cores without it (785 packages).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
SIZES=${BENCH_KP_SIZES:-1000 10000 30000}
RUNS=${BENCH_KP_RUNS:-3}
EPS=10 # bench_proxy's endpoints per service
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/svcenv
name=kubeproxy_gen

skip() {
        echo "$name: skipped: $*"
        exit 0
}

[ -x "$GO" ] || skip "no Go toolchain (set GO=/path/to/go)"
k8sver=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' test/k8s/go.mod)
[ -n "$k8sver" ] || skip "cannot read the pinned Kubernetes version from test/k8s/go.mod"
upstream=$cache/gomod/k8s.io/kubernetes@$k8sver
if [ ! -f "$upstream/pkg/proxy/iptables/proxier.go" ] || [ ! -f "$upstream/pkg/proxy/nftables/proxier.go" ]; then
        skip "Kubernetes $k8sver source not in $cache/gomod (test/k8s/build fills it)"
fi
ours=$BUILD/bench/bench_proxy
[ -x "$ours" ] || skip "$ours not built (make bench builds it)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The wrapper module: our files, the upstream proxier packages (non-test
# files only: the tests need modules kube-proxy does not) and test/k8s's
# pinned module graph under another module name.
mod=$work/mod
mkdir -p "$mod"
cp -R test/bench/kubeproxy/. "$mod/"
for pkg in iptables nftables; do
        for f in "$upstream/pkg/proxy/$pkg"/*.go; do
                case $f in *_test.go) continue ;; esac
                cp "$f" "$mod/$pkg/"
        done
done
chmod -R u+w "$mod"
sed 's|^module .*|module svcenv/kpbench|' test/k8s/go.mod >"$mod/go.mod"
cp test/k8s/go.sum "$mod/go.sum"

echo "== $name: kube-proxy $k8sver vs svcenv, ruleset generation, $EPS endpoints/service, best of $RUNS runs (slowest in brackets)"
t0=$SECONDS
# The same flags as test/k8s/build, so the Go cache it left is reused.
if ! (cd "$mod" && env GOMODCACHE="$cache/gomod" GOCACHE="$cache/gocache" GOPROXY=off \
        GOFLAGS="-mod=readonly -modcacherw -buildvcs=false" GOTOOLCHAIN=local GOWORK=off \
        CGO_ENABLED=0 "$GO" build -trimpath -tags selinux,notest,grpcnotrace \
        -o "$work/kpbench" .) >"$work/build.log" 2>&1; then
        tail -n 20 "$work/build.log"
        echo "$name: go build of the kube-proxy bench failed"
        exit 1
fi
echo "kube-proxy bench built in $((SECONDS - t0)) s ($("$GO" env GOVERSION))"

# Figures as "side backend services metric value" records.
rec=$work/records
: >"$rec"
for run in $(seq 1 "$RUNS"); do
        dump=()
        [ "$run" = 1 ] && dump=(env "BENCH_DUMP=$work/se")
        "${dump[@]}" env BENCH_APPLY=0 "$ours" >"$work/ours.out" 2>&1 ||
                { cat "$work/ours.out"; echo "$name: $ours failed"; exit 1; }
        awk '
        /^proxy (iptables|nftables) +[0-9]+ svc/ && /build/ {
                gsub(",", ""); be = $2; n = $3
                for (i = 1; i <= NF; i++) {
                        if ($i == "build") b = $(i + 1)
                        if ($i == "write") w = $(i + 1)
                        if ($i == "lines") l = $(i - 1)
                        if ($i == "RSS") r = $(i + 1)
                }
                printf "se %s %s gen_ms %s\nse %s %s build_ms %s\nse %s %s write_ms %s\n", be, n, b + w, be, n, b, be, n, w
                printf "se %s %s lines %s\nse %s %s rss_mib %s\n", be, n, l, be, n, r
        }
        /^  partial sync/ && be != "" {
                gsub(",", "")
                for (i = 1; i <= NF; i++) {
                        if ($i == "build+write") p = $(i + 1)
                        if ($i == "KiB") k = $(i - 1)
                }
                printf "se %s %s partial_ms %s\nse %s %s partial_kib %s\n", be, n, p, be, n, k
        }' "$work/ours.out" >>"$rec"
        for n in $SIZES; do
                for be in iptables nftables; do
                        args=(-backend "$be" -services "$n" -eps "$EPS")
                        [ "$run" = 1 ] && args+=(-dump "$work/kp.$n.$be")
                        out=$("$work/kpbench" "${args[@]}" 2>"$work/kp.err") ||
                                { cat "$work/kp.err"; echo "$name: kube-proxy $be $n failed"; exit 1; }
                        # key=value figures -> records; gen = handlers + sync
                        awk -v be="$be" -v n="$n" '{
                                for (i = 1; i <= NF; i++) {
                                        split($i, kv, "=")
                                        v[kv[1]] = kv[2]
                                        if (kv[1] ~ /_ms$|_mib$|^bytes$|^lines$|^large$/)
                                                printf "kp %s %s %s %s\n", be, n, kv[1], kv[2]
                                }
                                printf "kp %s %s gen_ms %.1f\n", be, n, v["handlers_ms"] + v["sync_ms"]
                                printf "kp %s %s partial_kib %.1f\n", be, n, v["partial_bytes"] / 1024
                        }' <<<"$out" >>"$rec"
                done
        done
done

best() { # side backend n metric: "min (max)" over the runs
        awk -v s="$1" -v be="$2" -v n="$3" -v m="$4" '
        $1 == s && $2 == be && $3 == n && $4 == m {
                if (c == 0 || $5 < lo) lo = $5
                if (c == 0 || $5 > hi) hi = $5
                c++
        }
        END { if (c) printf "%.1f (%.1f)", lo, hi; else printf "?" }' "$rec"
}
first() { # side backend n metric: the value of the first run
        awk -v s="$1" -v be="$2" -v n="$3" -v m="$4" '
        $1 == s && $2 == be && $3 == n && $4 == m { print $5; exit }' "$rec"
}
mib() { [ -f "$1" ] && awk -v b="$(wc -c <"$1")" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }

for n in $SIZES; do
        for be in iptables nftables; do
                kp_gen=$(best kp "$be" "$n" gen_ms)
                se_gen=$(best se "$be" "$n" gen_ms)
                ext=$be
                [ "$be" = nftables ] && ext=nft
                mode=
                [ "$be" = iptables ] && [ "$(first kp "$be" "$n" large)" = 1 ] && mode=", large-cluster mode"
                printf '%-8s %6s svc: kube-proxy handlers %s + sync %s = %s ms (CPU %s ms), %s, %s lines%s, heap %s MiB, peak RSS %s MiB\n' \
                        "$be" "$n" "$(best kp "$be" "$n" handlers_ms)" "$(best kp "$be" "$n" sync_ms)" "$kp_gen" \
                        "$(best kp "$be" "$n" gen_cpu_ms)" \
                        "$(mib "$work/kp.$n.$be")" "$(first kp "$be" "$n" lines)" "$mode" \
                        "$(first kp "$be" "$n" heap_mib)" "$(first kp "$be" "$n" rss_mib)"
                printf '%20s svcenv     build %s + write %s = %s ms, %s, %s lines, peak RSS %s MiB\n' \
                        "" "$(best se "$be" "$n" build_ms)" "$(best se "$be" "$n" write_ms)" "$se_gen" \
                        "$(mib "$work/se.$n.$ext")" "$(first se "$be" "$n" lines)" "$(first se "$be" "$n" rss_mib)"
                printf '%20s partial sync (1 service'"'"'s endpoints changed): kube-proxy %s ms, %s KiB; svcenv %s ms, %s KiB\n' \
                        "" "$(best kp "$be" "$n" partial_ms)" "$(first kp "$be" "$n" partial_kib)" \
                        "$(best se "$be" "$n" partial_ms)" "$(first se "$be" "$n" partial_kib)"
                if [ "$be" = iptables ] && [ -f "$work/kp.$n.$be" ] && [ -f "$work/se.$n.$ext" ]; then
                        # kube-proxy walks a Go map: same lines, other order
                        d=$(LC_ALL=C comm -3 <(LC_ALL=C sort "$work/kp.$n.$be") <(LC_ALL=C sort "$work/se.$n.$ext") | wc -l)
                        if [ "$d" = 0 ]; then
                                echo "                     same iptables-restore input (identical lines once sorted)"
                        else
                                echo "                     iptables-restore inputs DIFFER in $d lines (sorted comparison)"
                        fi
                fi
                # nftables: kube-proxy's knftables "add ..." commands and our
                # table script are different texts; only sizes compare.
                awk -v k="${kp_gen%% *}" -v s="${se_gen%% *}" -v be="$be" -v n="$n" 'BEGIN {
                        if (k > 0 && s > 0)
                                printf "%s %s svc: kube-proxy %.1f ms vs svcenv %.1f ms (%.1fx)\n", be, n, k, s, k / s
                }'
        done
done
rm -f "$work"/kp.* "$work"/se.*
