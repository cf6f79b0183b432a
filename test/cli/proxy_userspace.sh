#!/usr/bin/env bash
# svcenv-proxy --mode userspace: flag and input errors are one line naming
# the flag or the file, before anything listens.
. "$(dirname "$0")/lib.bash"
P=$SVCENV/svcenv-proxy
fails_with "--udp-timeout 0 is refused (upstream: must be greater than 0)" 2 \
        'svcenv-proxy: --udp-timeout wants a duration over 0, not "0"' \
        "$P" --mode userspace --udp-timeout 0
fails_with "--udp-timeout wants a duration" 2 \
        'svcenv-proxy: --udp-timeout wants a duration over 0, not "soon"' \
        "$P" --mode userspace --udp-timeout soon
fails_with "--mode names the three modes" 2 \
        'svcenv-proxy: --mode wants iptables, nftables or userspace, not "ipvs"' "$P" --mode ipvs
fails_with "--userspace-port is a port" 2 \
        'svcenv-proxy: --userspace-port wants 1..65535, not "0"' "$P" --userspace-port 0
fails_with "--scheduler names a known scheduler" 2 \
        'svcenv-proxy: --scheduler: item 1 "fastest" is not a known scheduler' \
        "$P" --mode userspace --scheduler fastest
fails_with "--scheduler flags are sh's and mh's" 2 \
        'svcenv-proxy: --scheduler: item 2 "port" is not a flag (port, fallback; sh and mh only)' \
        "$P" --mode userspace --scheduler rr,port
tmp=$(mktemp -d)
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 99999}]}\n' \
        >"$tmp/bad.yaml"
# every mode reads -f (the rule modes route annotated Services to the proxy)
for mode in userspace iptables nftables; do
        err=$("$P" --mode $mode -f "$tmp/bad.yaml" --healthz-bind-address "" \
                --metrics-bind-address "" 2>&1 >/dev/null)
        rc=$?
        if [ "$rc" -eq 3 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] &&
                grep -q "bad.yaml:4" <<<"$err"; then
                ok "--mode $mode -f with an invalid manifest: exit 3, one line naming file and line"
        else
                not_ok "--mode $mode -f with an invalid manifest: exit 3, one line naming file and line"
                echo "#   exit $rc: $err"
        fi
done
rm -rf "$tmp"
