# Daemon defaults that expose something: what they bind when not told.
. "$(dirname "$0")/lib.bash"
log=$(mktemp) kc=$(mktemp)
# an API server nobody answers (port 9, loopback): the HTTP server starts anyway
printf '%s\n' 'current-context: c' 'contexts: [{name: c, context: {cluster: k, user: u}}]' \
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:9'}}]" 'users: [{name: u, user: {token: t}}]' >"$kc"
"$SVCENV/svcenv-controller" --kubeconfig "$kc" --leader-elect=false -v 1 >"$log" 2>&1 &
pid=$!
for _ in $(seq 50); do # at most 5 s
        grep -q "serving /metrics" "$log" && break
        sleep 0.1
done
# 10258 = 0x2812; listening sockets in /proc/net/tcp have state 0A
listeners=$(awk '$4 == "0A" && $2 ~ /:2812$/ {print $2}' /proc/net/tcp /proc/net/tcp6 | sort -u | tr '\n' ' ')
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if grep -q "serving /metrics, /livez and /readyz on 127.0.0.1:10258" "$log" &&
        [ "$listeners" = "0100007F:2812 " ]; then
        ok "the controller serves /metrics on loopback only by default"
else
        not_ok "the controller serves /metrics on loopback only by default"
        echo "#   listeners on :10258: $listeners"
        sed 's/^/#   /' "$log" | head -5
fi
rm -f "$log" "$kc"
echo "1..$n"
