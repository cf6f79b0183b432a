#!/usr/bin/env bash
# Real pod traffic through svcenv-proxy on a real node (test/k8s/node): for
# the iptables backend, the nftables backend and the userspace mode, a client pod reaches a
# ClusterIP Service (both backends answer), the same Service's NodePort on
# the node's bridge address, and a backend pod reaches itself through its own
# Service (hairpin). A backend whose readiness probe starts failing leaves the
# traffic once svcenv-controller has written it not ready and the proxy has
# synced (the time is printed), and comes back when the probe passes again.
#
# svcenv-controller and svcenv-proxy run on the host (the node shares the
# host's network namespace), so the proxy programs the host's packet filter.
# That is kept contained: the test runs on a control plane of its own, so the
# proxy sees only the test's Services (not the external IPs other suites'
# Services may name); ClusterIPs are in the control plane's 10.96.0.0/16,
# which the node routes to its bridge and nothing else on the machine uses;
# NodePorts only on the bridge's 10.244.0.0/24; backends are pod IPs on the
# bridge. `svcenv-proxy --cleanup` takes the rules away after each backend,
# and the whole ruleset (every nft table, iptables-nft's included) must then
# be what it was before, and again after the node stops.
#
# Needs root (else one SKIP line). The control plane and the node are
# started and stopped here.
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=test/integration/node.bash
. test/integration/node.bash
node_require_root node_traffic

suite_t0=$(date +%s.%N)
NS=node-traffic-$$
tmp=$(mktemp -d /tmp/svcenv-node-traffic.XXXXXX)
ctl_pid='' proxy_pid=''
stop_pid() { # pid: TERM and reap
	[ -n "$1" ] && kill "$1" 2>/dev/null && wait "$1" 2>/dev/null
	return 0
}
cleanup() {
	stop_pid "$proxy_pid"
	[ -n "$proxy_pid" ] && "$SVCENV/svcenv-proxy" --cleanup >/dev/null 2>&1
	stop_pid "$ctl_pid"
	node_cleanup "$NS"
	[ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
unset KUBE_DIR
node_control_plane

host_ruleset raw >"$tmp/rules.before-node"
node_start
host_ruleset >"$tmp/rules.before"

# svcenv-controller writes the EndpointSlices (the node runs no endpoint
# controllers).
"$SVCENV/svcenv-controller" --kubeconfig "$KUBE_DIR/kubeconfig" --leader-elect=false \
	-v 2 >"$tmp/controller.log" 2>&1 &
ctl_pid=$!

# --- the Services and pods -------------------------------------------------------
: >"$tmp/setup.err"
post() { # path, JSON on stdin
	kapi post "$1" - >/dev/null 2>>"$tmp/setup.err" || echo "post $1 failed" >>"$tmp/setup.err"
}
echo "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$NS\"}}" | post /api/v1/namespaces
post "/api/v1/namespaces/$NS/services" <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},
 "spec":{"type":"NodePort","selector":{"app":"web"},"ports":[{"port":80,"targetPort":8080}]}}
EOF
# Only web-0 behind it: web-0 calling it must be answered by itself.
post "/api/v1/namespaces/$NS/services" <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"self"},
 "spec":{"selector":{"pod":"web-0"},"ports":[{"port":81,"targetPort":8080}]}}
EOF
# Backends: the echo server and a shell that owns the pod's readiness.
backend() { # name
	post "/api/v1/namespaces/$NS/pods" <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"$1","labels":{"app":"web","pod":"$1"}},
 "spec":{"terminationGracePeriodSeconds":0,"enableServiceLinks":false,"containers":[
  {"name":"echo","image":"$ECHO_IMAGE","imagePullPolicy":"Never","args":["8080"],
   "ports":[{"containerPort":8080}]},
  {"name":"ctl","image":"$SHELL_IMAGE","imagePullPolicy":"Never",
   "command":["/bin/sh","-c","$NODE_SHELL_SERVER"],
   "readinessProbe":{"exec":{"command":["test","-e","/tmp/ready"]},
    "periodSeconds":1,"failureThreshold":1,"successThreshold":1}}]}}
EOF
}
backend web-0
backend web-1
post "/api/v1/namespaces/$NS/pods" <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"client"},
 "spec":{"terminationGracePeriodSeconds":0,"enableServiceLinks":false,"containers":[
  {"name":"ctl","image":"$SHELL_IMAGE","imagePullPolicy":"Never",
   "command":["/bin/sh","-c","$NODE_SHELL_SERVER"]}]}}
EOF
if [ -s "$tmp/setup.err" ]; then
	not_ok "namespace, 2 Services, 3 pods created: $(head -n 1 "$tmp/setup.err")"
	echo "1..$n"
	exit 1
fi
all_ready() { pod_ready "$NS" web-0 && pod_ready "$NS" web-1 && pod_ready "$NS" client; }
waited=$(date +%s.%N)
if until_ok 90 all_ready; then
	ok "2 backends and a client Ready ($(elapsed "$waited") s after the POSTs)"
else
	not_ok "2 backends and a client Ready"
	kapi get "/api/v1/namespaces/$NS/events" | jq -r '.items[] | "# \(.involvedObject.name): \(.message)"' | tail -n 8
	echo "1..$n"
	exit 1
fi
client=$(pod_ip "$NS" client) web0=$(pod_ip "$NS" web-0) web1=$(pod_ip "$NS" web-1)
svc_json=$(kapi get "/api/v1/namespaces/$NS/services/web")
web_ip=$(jq -r .spec.clusterIP <<<"$svc_json") node_port=$(jq -r '.spec.ports[0].nodePort' <<<"$svc_json")
self_ip=$(kapi get "/api/v1/namespaces/$NS/services/self" | jq -r .spec.clusterIP)
node_ip=$NODE_IP

# --- traffic ---------------------------------------------------------------------
# answers FROM IP PORT N: the backends that answered N requests, sorted, unique.
answers() {
	local i
	for i in $(seq "$4"); do pod_http "$1" "$2" "$3"; done | sort -u | tr '\n' ' ' | sed 's/ $//'
}
both_answer() { # FROM IP PORT: within 12 requests both backends answer
	[ "$(answers "$1" "$2" "$3" 12)" = "web-0 web-1" ]
}
only() { # NAME FROM IP PORT: 12 requests in a row answered by NAME alone
	# (two backends at random pass this by chance once in 4,096 tries)
	[ "$(answers "$2" "$3" "$4" 12)" = "$1" ]
}
slice_ready() { # POD true|false: the web EndpointSlice says so for the pod
	kapi get "/apis/discovery.k8s.io/v1/namespaces/$NS/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb" |
		jq -e --arg p "$1" --argjson r "$2" \
			'[.items[].endpoints[]? | select(.targetRef.name == $p) | .conditions.ready] == [$r]' >/dev/null
}

check "without a service proxy the ClusterIP answers nothing (the client reaches it only through rules)" \
	eval '[ -z "$(pod_http "$client" "$web_ip" 80)" ]'

proxy_mode() { # iptables|nftables|userspace
	local mode=$1 t0 dt sel=(--backend "$1")
	[ "$mode" = userspace ] && sel=(--mode userspace)
	"$SVCENV/svcenv-proxy" --kubeconfig "$KUBE_DIR/kubeconfig" --hostname-override "$NODE_NAME" \
		"${sel[@]}" --node-ip "$node_ip" --cluster-cidr "$POD_CIDR" \
		--nodeport-addresses "$POD_CIDR" --healthz-bind-address "" --metrics-bind-address "" \
		--min-sync-period 0s -v 2 >"$tmp/proxy.$mode.log" 2>&1 &
	proxy_pid=$!
	if until_ok 30 both_answer "$client" "$web_ip" 80; then
		ok "$mode: client pod -> ClusterIP $web_ip:80 reaches both backends"
	else
		not_ok "$mode: client pod -> ClusterIP $web_ip:80 reaches both backends (got: $(answers "$client" "$web_ip" 80 4))"
		tail -n 5 "$tmp/proxy.$mode.log" | sed 's/^/# /'
	fi
	check "$mode: client pod -> NodePort $node_ip:$node_port reaches both backends" \
		until_ok 10 both_answer "$client" "$node_ip" "$node_port"
	check "$mode: hairpin: web-0 -> its own Service $self_ip:81 is answered by web-0" \
		until_ok 10 only web-0 "$web0" "$self_ip" 81
	check "$mode: hairpin: web-0 -> web's ClusterIP reaches itself and web-1" \
		until_ok 10 both_answer "$web0" "$web_ip" 80

	# Readiness: web-1's probe starts failing.
	t0=$(date +%s.%N)
	pod_sh "$web1" 'rm /tmp/ready' >/dev/null
	# The slice first: polling the traffic alone could pass by chance
	# before the change reached the proxy, and the NodePort check after it
	# would then race the sync.
	if until_ok 30 slice_ready web-1 false && until_ok 30 only web-0 "$client" "$web_ip" 80; then
		ok "$mode: web-1's readiness probe fails: out of the traffic after $(elapsed "$t0") s (EndpointSlice: not ready)"
	else
		not_ok "$mode: web-1's readiness probe fails: out of the traffic in 30 s (slice ready: $(slice_ready web-1 false && echo false || echo true))"
	fi
	check "$mode: ... and out of the NodePort's traffic" only web-0 "$client" "$node_ip" "$node_port"
	t0=$(date +%s.%N)
	pod_sh "$web1" 'touch /tmp/ready' >/dev/null
	if until_ok 30 both_answer "$client" "$web_ip" 80; then
		ok "$mode: web-1's probe passes again: back in the traffic after $(elapsed "$t0") s"
	else
		not_ok "$mode: web-1's probe passes again: back in the traffic in 30 s"
	fi

	kill "$proxy_pid" && wait "$proxy_pid"
	proxy_pid=''
	if "$SVCENV/svcenv-proxy" --cleanup >"$tmp/cleanup.$mode.log" 2>&1; then
		host_ruleset >"$tmp/rules.after-$mode"
		if diff "$tmp/rules.before" "$tmp/rules.after-$mode" >"$tmp/rules.diff"; then
			ok "$mode: after --cleanup the machine's ruleset is as before"
		else
			not_ok "$mode: after --cleanup the machine's ruleset is as before"
			head -n 10 "$tmp/rules.diff" | sed 's/^/# /'
		fi
	else
		not_ok "$mode: svcenv-proxy --cleanup: $(tail -n 1 "$tmp/cleanup.$mode.log")"
	fi
	check "$mode: after --cleanup the ClusterIP answers nothing" \
		eval '[ -z "$(pod_http "$client" "$web_ip" 80)" ]'
}
proxy_mode iptables
proxy_mode nftables
proxy_mode userspace # svcenv's own proxy (issue 14): every Service through it

# --- the end ---------------------------------------------------------------------
stop_pid "$ctl_pid"
ctl_pid=''
gone() { ! kapi get "/api/v1/namespaces/$NS" >/dev/null 2>&1; }
kapi delete "/api/v1/namespaces/$NS" >/dev/null
check "namespace deleted (its pods stopped by the kubelet)" until_ok 60 gone
if node_stop; then ok "node stops"; else not_ok "node stops: $node_stop_err"; fi
host_ruleset raw >"$tmp/rules.after-node"
check "after the node stops the machine's ruleset is as before it started" \
	diff -q "$tmp/rules.before-node" "$tmp/rules.after-node"
echo "# suite time: $(elapsed "$suite_t0") s"
echo "1..$n"
