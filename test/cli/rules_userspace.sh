#!/usr/bin/env bash
# svcenv rules --mode userspace: each service port with its scheduler (the
# svcenv.io/scheduler annotation, else rr) and endpoints, then the redirect
# rules to the proxy's port; flag errors are one line.
. "$(dirname "$0")/lib.bash"
S=$SVCENV/svcenv
c=(-f manifests/examples/demo-cluster.yaml -f manifests/examples/demo-scheduler.yaml)
out=$("$S" rules "${c[@]}" --node node-a --mode userspace --ip-family ipv4 2>&1)
rc=$?
check_line() { # check_line NAME LINE: LINE is one whole line of out
        if [ "$rc" -eq 0 ] && grep -qxF -- "$2" <<<"$out"; then ok "$1"; else
                not_ok "$1"
                echo "#   want: $2"
                grep -F "${3:-search}" <<<"$out" | sed 's/^/#   got: /'
        fi
}
check_line "the annotated Service shows its scheduler and endpoints" \
        "# shop/search:http TCP scheduler=lc endpoints: 10.244.1.85:8080 10.244.2.85:8080 10.244.2.86:8080"
check_line "a Service without the annotation is rr; affinity and terminating endpoints shown" \
        "# shop/cart:http TCP scheduler=rr affinity=ClientIP endpoints: 10.244.1.30:8080 10.244.2.30:8080" cart
check_line "its ClusterIP is redirected to the proxy's port" \
        '-A SVCENV-USERSPACE -m comment --comment "shop/search:http" -d 10.96.20.70/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 10262'
check_line "the jumps to the chains are listed" \
        '# jump: iptables -t nat -I OUTPUT -m comment --comment "svcenv userspace proxy" -j SVCENV-USERSPACE' jump
out=$("$S" rules "${c[@]}" --node node-a --mode userspace --backend nftables --ip-family ipv4 2>&1)
rc=$?
check_line "--backend nftables: the same Service by an nft redirect" \
        $'\t\tip daddr 10.96.20.70 tcp dport 80 redirect to :10262 comment "shop/search:http"'
fails_with "--mode names the three modes" 2 \
        "svcenv rules: --mode wants iptables, nftables or userspace, not \"ipvs\" (see 'svcenv rules --help')" \
        "$S" rules "${c[@]}" --node node-a --mode ipvs
fails_with "--apply is not for the userspace mode" 2 \
        "svcenv rules: --apply is for the iptables and nftables modes (svcenv-proxy --mode userspace applies its own) (see 'svcenv rules --help')" \
        "$S" rules "${c[@]}" --node node-a --mode userspace --apply
