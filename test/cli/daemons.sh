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

# The webhook's TLS 1.2 offers AEAD suites only (no CBC, no SHA-1 MAC), as a
# loopback client asking for one suite at a time finds (the test key is ECDSA P-256).
tmp=$(mktemp -d)
manifests/gen-webhook-certs "$tmp/pki" --ip 127.0.0.1 --days 1 >/dev/null 2>&1
"$SVCENV/svcenv-webhook" -f manifests/examples/demo-cluster.yaml --address 127.0.0.1 --port 0 \
        --tls-cert-file "$tmp/pki/tls.crt" --tls-private-key-file "$tmp/pki/tls.key" >"$tmp/log" 2>&1 &
pid=$!
port=""
for _ in $(seq 50); do # at most 5 s
        port=$(sed -n 's/.*serving admission reviews on 127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/log")
        [ -n "$port" ] && break
        sleep 0.1
done
handshake() { # handshake CIPHER: 0 when a TLS 1.2 session with it is set up
        openssl s_client -connect "127.0.0.1:$port" -tls1_2 -cipher "$1" </dev/null 2>/dev/null |
                grep -q "^ *Cipher *: $1\$"
}
bad="" good=""
for c in ECDHE-ECDSA-AES128-SHA ECDHE-ECDSA-AES256-SHA ECDHE-ECDSA-AES128-SHA256 ECDHE-ECDSA-AES256-SHA384 \
        ECDHE-ECDSA-CAMELLIA128-SHA256; do
        [ -n "$port" ] && handshake "$c" && bad="$bad $c"
done
for c in ECDHE-ECDSA-AES128-GCM-SHA256 ECDHE-ECDSA-AES256-GCM-SHA384 ECDHE-ECDSA-CHACHA20-POLY1305; do
        [ -n "$port" ] && handshake "$c" && good="$good $c"
done
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [ -n "$port" ] && [ -z "$bad" ] &&
        [ "$good" = " ECDHE-ECDSA-AES128-GCM-SHA256 ECDHE-ECDSA-AES256-GCM-SHA384 ECDHE-ECDSA-CHACHA20-POLY1305" ]; then
        ok "the webhook's TLS 1.2 offers ECDHE with AEAD suites only"
else
        not_ok "the webhook's TLS 1.2 offers ECDHE with AEAD suites only"
        echo "#   port ${port:-none}; accepted non-AEAD:${bad:- none}; AEAD:${good:- none}"
        sed 's/^/#   /' "$tmp/log" | head -5
fi
rm -rf "$tmp"
echo "1..$n"
