#!/usr/bin/env bash
# svcenv-proxy --mode userspace -f: /healthz is kube-proxy's. Healthy after
# a sync; when the redirect rules cannot be applied (an iptables-restore on
# PATH that fails), a change (SIGHUP re-reads the files) waits past the
# health timeout (2 x --sync-period) and /healthz answers 503; once the
# rules apply again, 200. Every tool the proxy runs is a fake on PATH; as
# root the test also runs in a network namespace of its own.
. "$(dirname "$0")/lib.bash"
if [ "$(id -u)" -eq 0 ] && [ -z "${SVCENV_HEALTH_NETNS:-}" ] && command -v unshare >/dev/null; then
        SVCENV_HEALTH_NETNS=1 exec unshare -n bash "$0" "$@"
fi
[ -n "${SVCENV_HEALTH_NETNS:-}" ] && ip link set lo up
P=$SVCENV/svcenv-proxy
tmp=$(mktemp -d)
pid=
cleanup() {
        [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        rm -rf "$tmp"
}
trap cleanup EXIT

mkdir "$tmp/bin"
for tool in iptables ip6tables iptables-save ip6tables-save ip nft conntrack; do
        printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/$tool"
done
for tool in iptables-restore ip6tables-restore; do
        cat >"$tmp/bin/$tool" <<EOF
#!/bin/sh
cat >/dev/null
echo x >>"$tmp/applies"
if [ -e "$tmp/fail" ]; then echo "$tool: line 2 failed" >&2; exit 1; fi
exit 0
EOF
done
chmod +x "$tmp/bin/"*
cp test/golden/proxy/one-service.yaml "$tmp/cluster.yaml"
read -r hport uport < <(python3 -c 'import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')

# health: "STATUS BODY" of /healthz ("000" when it does not answer)
health() {
        python3 - "$hport" <<'EOF'
import sys, urllib.request, urllib.error
url = "http://127.0.0.1:%s/healthz" % sys.argv[1]
try:
    r = urllib.request.urlopen(url, timeout=2)
    print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
except Exception:
    print("000")
EOF
}
# wait_health STATUS SECONDS: polls until /healthz answers STATUS
wait_health() {
        local i
        for i in $(seq $(($2 * 10))); do
                last=$(health)
                [ "${last%% *}" = "$1" ] && return 0
                sleep 0.1
        done
        return 1
}

PATH=$tmp/bin:$PATH "$P" -f "$tmp/cluster.yaml" --mode userspace --hostname-override node-a \
        --sync-period 1s --min-sync-period 0 --userspace-port "$uport" \
        --healthz-bind-address "127.0.0.1:$hport" --metrics-bind-address "" \
        >"$tmp/proxy.log" 2>&1 &
pid=$!
if wait_health 200 10 && grep -q '"healthy":true' <<<"$last" && [ -s "$tmp/applies" ]; then
        ok "rules applied: /healthz answers 200, healthy"
else
        not_ok "rules applied: /healthz answers 200, healthy"
        echo "#   last: $last"
        sed 's/^/#   proxy: /' "$tmp/proxy.log" | head -5
fi
touch "$tmp/fail"
kill -HUP "$pid"
if wait_health 503 15 && grep -q '"healthy":false' <<<"$last" &&
        grep -q '"nodeEligible":true' <<<"$last"; then
        ok "rules failing: a change waits past the timeout and /healthz answers 503"
else
        not_ok "rules failing: a change waits past the timeout and /healthz answers 503"
        echo "#   last: $last"
fi
if grep -q 'userspace rules (IPv4): iptables-restore failed (exit 1): iptables-restore: line 2' "$tmp/proxy.log"; then
        ok "the failed apply is logged with the tool's error"
else
        not_ok "the failed apply is logged with the tool's error"
        sed 's/^/#   proxy: /' "$tmp/proxy.log" | tail -5
fi
rm -f "$tmp/fail"
if wait_health 200 15 && grep -q '"healthy":true' <<<"$last"; then
        ok "rules apply again: the retry syncs and /healthz answers 200"
else
        not_ok "rules apply again: the retry syncs and /healthz answers 200"
        echo "#   last: $last"
fi
