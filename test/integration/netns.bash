# What the integration tests that run daemons inside network namespaces of
# their own share (proxy.sh, proxy_route.sh): namespace plumbing, the test
# backends, and a control plane of their own that the namespaces can reach.
# The caller sets tmp, KD (the control plane's dir) and pids, and sources
# test/cli/lib.bash first.

inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# netns_require NAME TOOL...: root (else the test ends with one SKIP line)
# and every TOOL on PATH (else it fails naming the tool).
netns_require() {
	local name=$1 tool
	shift
	if [ "$(id -u)" -ne 0 ]; then
		echo "ok 1 # SKIP integration $name: needs root for network namespaces"
		exit 0
	fi
	for tool in "$@"; do
		command -v "$tool" >/dev/null || { echo "not ok 1 - $tool is missing"; exit 1; }
	done
}
must() { "$@" || { echo "failed: $*"; exit 1; }; }

# netns_setup FN: runs FN in a subshell; on failure one TAP failure with
# what FN printed, and the test ends.
netns_setup() {
	if ! ("$1") >"$tmp/setup.log" 2>&1; then
		not_ok "network namespaces set up"
		sed 's/^/# /' "$tmp/setup.log"
		exit 1
	fi
}

# netns_backends NS...: the test's HTTP backend (test/e2e/netpeer.py) on
# :8080 in each namespace, named b1, b2, ... in order.
netns_backends() {
	local k=0 ns
	for ns in "$@"; do
		k=$((k + 1))
		ip netns exec "$ns" python3 test/e2e/netpeer.py serve b$k 8080 >"$tmp/b$k.log" 2>&1 &
		pids+=($!)
	done
}

# netns_controlplane IP KUBECONFIG: a control plane of the test's own
# listening on IP only (the namespaces cannot reach 127.0.0.1), its env
# sourced, kapi defined, and KUBECONFIG written to reach it on IP.
netns_controlplane() {
	if ! test/k8s/controlplane start "$KD" --extra-ip "$1" --bind-extra-ip >"$tmp/cp.log" 2>&1; then
		not_ok "control plane starts (--extra-ip $1 --bind-extra-ip)"
		tail -20 "$tmp/cp.log" | sed 's/^/# /'
		exit 1
	fi
	# shellcheck disable=SC1091
	source "$KD/env"
	kapi() { test/k8s/kapi "$KD" "$@"; }
	sed "s#server: .*#server: https://$1:$APISERVER_PORT#" "$KD/kubeconfig" >"$2"
}
