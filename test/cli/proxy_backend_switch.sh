#!/usr/bin/env bash
# svcenv-proxy switched between its iptables and nftables modes on one node:
# the other backend's rules go (kube-proxy's platformCleanup), but only after
# the new backend's first sync, so a Service's ClusterIP never has neither
# backend's rules. A sampler polls both rule sets every few milliseconds
# while the new mode starts. Root: real iptables/nft in a network namespace
# of its own (unshare -n).
. "$(dirname "$0")/lib.bash"
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null; then
        echo "1..1"
        ok "backend switch # SKIP needs root and unshare (real iptables/nft)"
        exit 0
fi
if [ -z "${SVCENV_SWITCH_NETNS:-}" ]; then
        SVCENV_SWITCH_NETNS=1 exec unshare -n bash "$0" "$@"
fi
ip link set lo up
tmp=$(mktemp -d)
pid=
stop_proxy() {
        if [ -n "$pid" ]; then
                kill "$pid" 2>/dev/null
                wait "$pid" 2>/dev/null
        fi
        pid=
}
trap 'stop_proxy; rm -rf "$tmp"' EXIT

cp test/golden/proxy/one-service.yaml "$tmp/cluster.yaml"

# which backends have the ClusterIP's rules now: "ipt", "nft", both, or none
# (a listing interrupted by another process's change is read again, so the
# sampler never takes a failed read for an empty rule set)
has_ipt() {
        local out i
        for i in 1 2 3 4 5; do
                out=$(iptables-save -t nat 2>&1) && break
        done
        grep -q -- '-d 10.96.0.10/32' <<<"$out"
}
has_nft() {
        local out i
        for i in 1 2 3 4 5; do
                out=$(nft list table ip svcenv 2>&1) && break
                grep -q "No such file" <<<"$out" && return 1
        done
        grep -q '10.96.0.10' <<<"$out"
}
state() {
        local s=""
        has_ipt && s+="ipt"
        has_nft && s+="nft"
        echo "${s:-none}"
}
start_proxy() {
        "$SVCENV/svcenv-proxy" -f "$tmp/cluster.yaml" --mode "$1" --hostname-override node-a \
                --min-sync-period 0 --healthz-bind-address 127.0.0.1:0 \
                --metrics-bind-address 127.0.0.1:0 >>"$tmp/proxy.log" 2>&1 &
        pid=$!
}
# sample_until WANT: the states seen (one per line, repeats folded) until
# the state is WANT, for at most 20 s
sample_until() {
        local last="" s i
        for i in $(seq 2000); do
                s=$(state)
                [ "$s" != "$last" ] && echo "$s"
                last=$s
                [ "$s" = "$1" ] && return 0
                sleep 0.01
        done
        return 1
}

echo "1..6"
start_proxy iptables
if sample_until ipt >/dev/null; then ok "iptables mode: the ClusterIP has iptables rules"; else
        not_ok "iptables mode: the ClusterIP has iptables rules"
        sed 's/^/# /' "$tmp/proxy.log" | tail -5
fi
stop_proxy

# iptables -> nftables: the old rules stay until the new ones are in
start_proxy nftables
seen=$(sample_until nft)
rc=$?
[ $rc -eq 0 ] && ok "nftables mode: the iptables rules are gone, the nft ones in" ||
        not_ok "nftables mode: the iptables rules are gone, the nft ones in (seen: $(echo $seen))"
if ! grep -qx none <<<"$seen"; then ok "iptables -> nftables: never without rules ($(echo $seen))"; else
        not_ok "iptables -> nftables: never without rules (seen: $(echo $seen))"
fi
stop_proxy

# and back
start_proxy iptables
seen=$(sample_until ipt)
rc=$?
[ $rc -eq 0 ] && ok "iptables mode again: the nft table is gone, iptables rules in" ||
        not_ok "iptables mode again: the nft table is gone, iptables rules in (seen: $(echo $seen))"
if ! grep -qx none <<<"$seen"; then ok "nftables -> iptables: never without rules ($(echo $seen))"; else
        not_ok "nftables -> iptables: never without rules (seen: $(echo $seen))"
fi
stop_proxy
"$SVCENV/svcenv-proxy" --cleanup >/dev/null 2>&1
[ "$(state)" = none ] && ok "--cleanup leaves neither" || not_ok "--cleanup leaves neither ($(state))"
