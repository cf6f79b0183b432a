# Shared by the suites that run real pods on test/k8s/node: TAP helpers, the
# root check, the control plane (test/run-all's KUBE_DIR, else one of their
# own), the node's start and stop, and reading a running process's
# environment back through its pod's log.
# The sourcing script runs from the repository root and sets tmp (a private
# temp dir); node_cleanup belongs in its EXIT trap.
: "${SVCENV:=$PWD/build/bin}"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; }
until_ok() { # SECONDS CMD...: retries CMD every 0.3 s until it succeeds or time is up
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -ge $deadline ] && return 1
		sleep 0.3
	done
}
check() { # check NAME CMD...: ok when CMD succeeds
	local name=$1
	shift
	if "$@"; then ok "$name"; else not_ok "$name"; fi
}
kapi() { test/k8s/kapi "$KUBE_DIR" "$@"; }
elapsed() { printf '%.1f' "$(echo "$(date +%s.%N) - $1" | bc)"; } # since a date +%s.%N

# node_require_root SUITE: a node needs root; otherwise one SKIP line and exit.
node_require_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "ok 1 # SKIP integration $1: a node needs root (containerd, cgroups, a bridge)"
		echo "1..1"
		exit 0
	fi
}

own_cp=0 node_up=0 node_started=0
# node_control_plane: KUBE_DIR from test/run-all, else a control plane of our
# own in $tmp/kube (stopped by node_cleanup). Exits on failure.
node_control_plane() {
	[ -n "${KUBE_DIR:-}" ] && return 0
	KUBE_DIR=$tmp/kube
	test/k8s/controlplane start "$KUBE_DIR" >"$tmp/cp.log" 2>&1 || {
		not_ok "control plane starts"
		tail -20 "$tmp/cp.log" | sed 's/^/# /'
		echo "1..$n"
		exit 1
	}
	own_cp=1
}

# node_start: starts the node (one TAP line with the time it took) and
# sources DIR/node.env. Exits on failure.
node_start() {
	local t0
	t0=$(date +%s.%N)
	if ! test/k8s/node start "$KUBE_DIR" >"$tmp/node.log" 2>&1; then
		not_ok "node starts: $(tail -n 1 "$tmp/node.log")"
		echo "1..$n"
		exit 1
	fi
	node_up=1 node_started=1
	ok "node starts ($(elapsed "$t0") s)"
	# shellcheck disable=SC1091
	. "$KUBE_DIR/node.env"
}

# node_stop: stops the node; status 1 (and the last line in node_stop_err)
# when stop failed. Its files stay for a look at what is left; node_cleanup
# removes them.
node_stop() {
	node_up=0
	test/k8s/node stop "$KUBE_DIR" >"$tmp/stop.log" 2>&1
	local rc=$?
	node_stop_err=$(tail -n 1 "$tmp/stop.log")
	return $rc
}

# node_cleanup [NS...]: for the EXIT trap. With a shared control plane the
# namespaces go (their pods first, without grace: the kubelet is gone).
node_cleanup() {
	local ns p
	[ "$node_up" = 1 ] && node_stop
	[ "$node_started" = 1 ] && rm -rf "$KUBE_DIR/node" "$KUBE_DIR/node.env"
	if [ "$own_cp" = 1 ]; then
		test/k8s/controlplane stop "$KUBE_DIR" >/dev/null 2>&1
	else
		for ns in "$@"; do
			for p in $(kapi get "/api/v1/namespaces/$ns/pods" 2>/dev/null | jq -r '.items[]?.metadata.name'); do
				kapi delete "/api/v1/namespaces/$ns/pods/$p?gracePeriodSeconds=0" >/dev/null 2>&1
			done
			kapi delete "/api/v1/namespaces/$ns" >/dev/null 2>&1
		done
	fi
}

# A container command that prints the process's own initial environment
# (NUL-separated, base64 so any byte survives the log), then ENV-END; `; true`
# keeps sh from exec'ing base64 in place, which would then read its own,
# empty-looking environ.
NODE_REPORT='base64 /proc/1/environ; echo ENV-END; true'

pod_running() { # NS POD: the pod Running with every container running
	kapi get "/api/v1/namespaces/$1/pods/$2" 2>/dev/null | jq -e \
		'.status.phase == "Running" and ([.status.containerStatuses[]? | .state.running != null] | all)' >/dev/null
}

# process_env NS POD CONTAINER: NAME=VALUE lines NODE_REPORT logged, sorted;
# status 1 when the log does not hold them (yet).
process_env() {
	local log
	log=$(kapi get "/api/v1/namespaces/$1/pods/$2/log?container=$3" 2>/dev/null) || return 1
	case $log in *ENV-END*) ;; *) return 1 ;; esac
	printf '%s\n' "$log" | sed '/^ENV-END$/,$d' | base64 -d | tr '\0' '\n' | sort
}
until_env() { # NS POD CONTAINER: process_env, waiting (20 s) for the log to catch up
	local deadline=$((SECONDS + 20))
	until process_env "$@"; do
		[ $SECONDS -ge $deadline ] && return 1
		sleep 0.3
	done
}

# env_compare NAME WANT GOT: one TAP line, ok when the sorted NAME=VALUE files
# are the same set once the runtime's own PATH, HOSTNAME and HOME (from the
# image config and containerd, not the kubelet) are set aside from GOT where
# WANT (svcenv's prediction) does not have them. Rewrites GOT.
env_compare() {
	local name=$1 want=$2 got=$3 v set_aside=''
	for v in PATH HOSTNAME HOME; do
		grep -q "^$v=" "$want" && continue
		grep -q "^$v=" "$got" && set_aside+=" $(grep "^$v=" "$got")"
		grep -v "^$v=" "$got" >"$got.tmp"
		mv "$got.tmp" "$got"
	done
	if diff "$want" "$got" >"$got.diff"; then
		ok "$name: exactly the $(wc -l <"$want") variables svcenv env predicts (set aside:${set_aside:- none})"
	else
		not_ok "$name: process environment differs from svcenv env"
		grep '^[<>]' "$got.diff" | sed 's/^</# only svcenv env:/; s/^>/# only the process:/' | head -20
	fi
}

# --- pods with a shell server, for traffic from inside pods ---------------------
# A container command: the pod answers shell commands on port 7000 (busybox
# nc, one sh per connection) and is ready while /tmp/ready exists, so a
# test on the host can make it send traffic, or turn its readiness off.
NODE_SHELL_SERVER='touch /tmp/ready; exec nc -ll -p 7000 -e /bin/sh'

# pod_sh IP CMD: runs CMD by the shell server of the pod at IP; prints its
# output (10 s at most).
pod_sh() {
	timeout 10 bash -c 'exec 3<>"/dev/tcp/$0/7000" && printf "%s\nexit\n" "$1" >&3 && cat <&3' "$1" "$2" 2>/dev/null
}

# pod_http FROM_IP IP PORT: the echo server's "hello from NAME" line for one
# HTTP request sent from the pod at FROM_IP to IP:PORT.
pod_http() {
	pod_sh "$1" "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 $2 $3" | sed -n 's/^hello from //p'
}

pod_ip() { # NS POD
	kapi get "/api/v1/namespaces/$1/pods/$2" 2>/dev/null | jq -r '.status.podIP // empty'
}
pod_ready() { # NS POD
	kapi get "/api/v1/namespaces/$1/pods/$2" 2>/dev/null |
		jq -e '.status.conditions[]? | select(.type == "Ready" and .status == "True")' >/dev/null
}

# The machine's packet filter as text with counters left out: every table of
# every family (iptables-nft's included), for before/after checks. Without
# "raw", built-in chains with no rule and policy accept, and tables left
# empty, are set aside: iptables-nft makes them on first use (in any table
# anyone names) and they match nothing.
host_ruleset() {
	nft list ruleset 2>/dev/null | sed -E 's/counter packets [0-9]+ bytes [0-9]+/counter/' |
		if [ "${1:-}" = raw ]; then cat; else awk '
			/^table / { table = $0; body = ""; next }
			/^\tchain / { chain = $0 "\n"; rules = 0; in_chain = 1; next }
			in_chain && /^\t}/ {
				in_chain = 0
				if (rules) body = body chain $0 "\n"
				next
			}
			in_chain {
				chain = chain $0 "\n"
				if ($0 !~ /^[[:space:]]*$/ && $0 !~ /type .* hook .* policy accept;$/) rules = 1
				next
			}
			/^}/ { if (body != "") printf "%s\n%s}\n", table, body; next }
			/^[[:space:]]*$/ { next }
			{ body = body $0 "\n" }'; fi
	iptables-legacy-save 2>/dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//'
}
