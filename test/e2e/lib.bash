# Shared scaffolding of the namespace e2e tests (sourced, not run): TAP
# output, the root and tool checks, namespaces named by PID with a cleanup
# that runs on exit, failure and interrupt, the client/node/backends
# network, peers waited for until ready, svcenv-proxy in the node
# namespace and its /metrics. Only addresses inside the namespaces made
# here are used.
#
# A script starts with
#     . "$(dirname "$0")/lib.bash"
#     e2e_init PREFIX "LABEL" TOOL...
# and ends with `plan` (userspace ends without one, as before).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
here=$PWD/test/e2e

# --- TAP (ok, not_ok, check from the CLI tests' lib) ---------------------
. test/cli/lib.bash
check_eq() { # check_eq NAME WANT GOT: ok when equal, else both shown
        if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (want '$2', got '$3')"; fi
}
plan() { echo "1..$n"; }

# --- start and cleanup ---------------------------------------------------
# e2e_init PREFIX LABEL TOOL...: a visible SKIP without root, one failure
# when a tool is missing; then the names (namespaces PREFIX<pid>-node, -cl,
# -b1..-b3), a scratch dir and the cleanup traps.
e2e_init() {
        local prefix=$1 label=$2 tool
        shift 2
        if [ "$(id -u)" -ne 0 ]; then
                echo "ok 1 # SKIP e2e $label: needs root for network namespaces"
                exit 0
        fi
        for tool in "$@"; do
                if ! command -v "$tool" >/dev/null; then
                        echo "not ok 1 - e2e $label: $tool is missing (test/ensure-deps)"
                        exit 1
                fi
        done
        p=$prefix$$
        NODE=$p-node CL=$p-cl B1=$p-b1 B2=$p-b2 B3=$p-b3
        extra_ns=()
        tmp=$(mktemp -d)
        pids=()
        proxy_pid=
        trap e2e_cleanup EXIT
        # an interrupt exits, and the exit runs the cleanup
        trap 'exit 1' INT TERM
}

# the proxy first (it may hold rules in the node), then the peers, then
# every namespace: deleting them removes their links, rules and sockets
e2e_cleanup() {
        local pid ns
        [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null
        for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
        for ns in "$CL" "$B1" "$B2" "$B3" "$NODE" "${extra_ns[@]}"; do ip netns del "$ns" 2>/dev/null; done
        if [ -n "${KEEP_TMP:-}" ]; then echo "# kept $tmp"; else rm -rf "$tmp"; fi
}

inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
must() { "$@" || { echo "failed: $*"; exit 1; }; }

# --- the network ---------------------------------------------------------
# net_build: a client (CL), a node (NODE) routing between them and three
# backends, each on its own veth: client 10.99.0.2/24, node 10.99.0.1 and
# 10.244.K.1, backend K 10.244.K.2/24. Set before calling:
#   NET_DUAL=1         IPv6 too (fd00:99::/64, fd00:244:K::/64, forwarding)
#   NET_CLIENTS4/6     the client's addresses (default the one .2 / ::2)
#   NET_ROUTES         prefixes the node routes out of up0, a veth leading
#                      nowhere (as a default route would, so what no rule
#                      takes reaches FORWARD); default 10.96.0.0/16
#   NET_UP0_NO_V6=1    no IPv6 on up0: its packet count is then only what
#                      reached FORWARD's end
net_build() {
        local dual=${NET_DUAL:-0} k ns a r
        local c4=${NET_CLIENTS4:-10.99.0.2} c6=${NET_CLIENTS6:-fd00:99::2}
        for ns in "$NODE" "$CL" "$B1" "$B2" "$B3"; do
                must ip netns add "$ns"
                must inns "$ns" ip link set lo up
        done
        must inns "$NODE" sysctl -qw net.ipv4.ip_forward=1
        [ "$dual" = 1 ] && must inns "$NODE" sysctl -qw net.ipv6.conf.all.forwarding=1
        must ip link add vc netns "$CL" type veth peer name vn netns "$NODE"
        for a in $c4; do must inns "$CL" ip addr add "$a/24" dev vc; done
        if [ "$dual" = 1 ]; then
                for a in $c6; do must inns "$CL" ip addr add "$a/64" dev vc nodad; done
        fi
        must inns "$CL" ip link set vc up
        must inns "$CL" ip route add default via 10.99.0.1
        [ "$dual" = 1 ] && must inns "$CL" ip -6 route add default via fd00:99::1
        must inns "$NODE" ip addr add 10.99.0.1/24 dev vn
        [ "$dual" = 1 ] && must inns "$NODE" ip addr add fd00:99::1/64 dev vn nodad
        must inns "$NODE" ip link set vn up
        must inns "$NODE" ip link add up0 type veth peer name up1
        if [ "${NET_UP0_NO_V6:-0}" = 1 ]; then
                must inns "$NODE" sysctl -qw net.ipv6.conf.up0.disable_ipv6=1
                must inns "$NODE" sysctl -qw net.ipv6.conf.up1.disable_ipv6=1
        fi
        must inns "$NODE" ip link set up1 up
        must inns "$NODE" ip link set up0 up
        for r in ${NET_ROUTES:-10.96.0.0/16}; do
                if [[ $r == *:* ]]; then
                        must inns "$NODE" ip -6 route add "$r" dev up0
                else
                        must inns "$NODE" ip route add "$r" dev up0
                fi
        done
        # one routed /24 per backend (no bridge: replies always cross the node)
        for k in 1 2 3; do
                ns=$p-b$k
                must ip link add eth0 netns "$ns" type veth peer name vb$k netns "$NODE"
                must inns "$NODE" ip addr add 10.244.$k.1/24 dev vb$k
                must inns "$NODE" ip link set vb$k up
                must inns "$ns" ip addr add 10.244.$k.2/24 dev eth0
                must inns "$ns" ip link set eth0 up
                must inns "$ns" ip route add default via 10.244.$k.1
                if [ "$dual" = 1 ]; then
                        must inns "$NODE" ip addr add fd00:244:$k::1/64 dev vb$k nodad
                        must inns "$ns" ip addr add fd00:244:$k::2/64 dev eth0 nodad
                        must inns "$ns" ip -6 route add default via fd00:244:$k::1
                fi
        done
}

# net_up [FUNC]: builds the network with FUNC (default net_build) in a
# subshell; on failure one `not ok` with its log, and the script ends
net_up() {
        if ! ("${1:-net_build}") >"$tmp/setup.log" 2>&1; then
                not_ok "network namespaces set up"
                sed 's/^/# /' "$tmp/setup.log"
                exit 1
        fi
}

# --- peers ---------------------------------------------------------------
# peer_start LOG NS SCRIPT ARGS...: test/e2e/SCRIPT (python) in NS, its
# output in $tmp/LOG.log; killed by the cleanup. ip netns exec execs the
# command: $! is the peer itself.
peer_start() {
        local log=$1 ns=$2 script=$3
        shift 3
        ip netns exec "$ns" python3 "$here/$script" "$@" >"$tmp/$log.log" 2>&1 &
        pids+=($!)
}
# peers_ready LOG...: waits up to 5 s for each to print the line "ready"
# (a whole line: "Address already in use" is not ready); one that
# does not is named in a TAP comment with its last words (the checks that
# need it then fail on their own)
peers_ready() {
        local log
        for log in "$@"; do
                for _ in $(seq 50); do
                        grep -qx ready "$tmp/$log.log" 2>/dev/null && break
                        sleep 0.1
                done
                grep -qx ready "$tmp/$log.log" 2>/dev/null ||
                        echo "# peer $log did not start: $(tail -n 1 "$tmp/$log.log" 2>/dev/null)"
        done
}
# serve_backends [K...]: netpeer answering "bK" on port 8080 in backend K
# (default 1 2 3), logged to $tmp/bK.log; returns once they are ready
serve_backends() {
        local k ks=${*:-1 2 3}
        for k in $ks; do peer_start b$k "$p-b$k" netpeer.py serve b$k 8080; done
        for k in $ks; do peers_ready b$k; done
}

wait_for() { # wait_for CMD...: up to 10 s
        for _ in $(seq 100); do
                "$@" && return 0
                sleep 0.1
        done
        return 1
}

# --- svcenv-proxy in the node ------------------------------------------------
proxy_start() { # proxy_start ARGS...: svcenv-proxy in NODE, output in $tmp/proxy.log
        ip netns exec "$NODE" "$SVCENV/svcenv-proxy" "$@" >>"$tmp/proxy.log" 2>&1 &
        proxy_pid=$!
}
proxy_stop() {
        kill "$proxy_pid" 2>/dev/null
        wait "$proxy_pid" 2>/dev/null
        proxy_pid=
}
proxy_errors() { # the proxy's first error lines as TAP comments
        sed -n '/rror\|panic/p' "$tmp/proxy.log" | head -5 | sed 's/^/# proxy: /'
}
metrics() { # the proxy's /metrics text (empty when it does not answer)
        inns "$NODE" python3 -c 'import urllib.request,sys
try: sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:10249/metrics", timeout=2).read().decode())
except Exception: pass'
}
metric() { # metric NAME SERVICE: the value (0 when absent)
        metrics | awk -v n="$1{service=\"$2\"" 'index($0, n) == 1 { v = $2 } END { print v + 0 }'
}
