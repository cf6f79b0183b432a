#!/usr/bin/env bash
# manifests/ deployed as a user would, on a real node (test/k8s/node), and
# the cluster it makes used from real pods: issue 15 items 5 and 7.
#
# What `kubectl apply -k manifests/` sends (test/integration/kustomize.py)
# goes through the API, without cert-manager.yaml (the README's way without
# cert-manager: manifests/gen-webhook-certs makes the Secret and the
# caBundle), with the image `make image` built (svcenv:0.1.0, imported by the
# node). The steps a user is told to do are done: the proxy's kubeconfig
# names the API server's address. This test's own overlay keeps the
# hostNetwork proxy to the node's bridge: NodePorts and /healthz on
# 10.244.0.0/24 only.
# Then: svcenv-controller 2/2 (one leader), svcenv-webhook 2/2 behind its
# Service and PDB, the svcenv-proxy DaemonSet 1/1 and svcenv-dns 2/2 are
# Ready with no restart (their readiness and liveness probes answer, their
# RBAC lets them do their work): pods are admitted by the webhook through
# the proxied Service, the controller writes EndpointSlices, a client pod
# reaches a Service through the DaemonSet's rules, and resolves names with
# its real resolv.conf (search path, ndots:5) at the kube-dns Service served
# by svcenv-dns: a ClusterIP Service by short name, a headless one (every pod
# IP), SRV, a name in another namespace, NXDOMAIN. Killing the leader's pod
# hands over. A rolling restart of each workload loses no admission, no
# endpoint, no request and no lookup.
#
# Its own control plane (ServiceAccount admission on: in-cluster config
# needs tokens). The `kubernetes` Service's endpoint is the node's bridge
# address, relayed to the loopback API server. At the end the DaemonSet's
# rules are removed with svcenv-proxy --cleanup and the machine's ruleset
# must be what it was. Needs root (else one SKIP line).
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=test/integration/node.bash
. test/integration/node.bash
node_require_root node_deploy

suite_t0=$(date +%s.%N)
NS=app
SYS=svcenv-system
tmp=$(mktemp -d /tmp/svcenv-node-deploy.XXXXXX)
relay_pid='' proxy_rules=''
cleanup() {
	[ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null
	node_cleanup
	# the DaemonSet's rules outlive it, as kube-proxy's do (when the test
	# did not get to remove them itself)
	[ -n "$proxy_rules" ] && "$SVCENV/svcenv-proxy" --cleanup >/dev/null 2>&1
	[ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT

host_ruleset raw >"$tmp/rules.before"
KUBE_DIR=$tmp/kube
if ! test/k8s/controlplane start "$KUBE_DIR" --service-accounts >"$tmp/cp.log" 2>&1; then
	not_ok "control plane (ServiceAccount admission on) starts: $(tail -n 1 "$tmp/cp.log")"
	echo "1..$n"
	exit 1
fi
own_cp=1
# shellcheck disable=SC1091
. "$KUBE_DIR/env"
node_start
[ -n "$SVCENV_IMAGE" ] || {
	not_ok "the node imported the svcenv image (run make image)"
	echo "1..$n"
	exit 1
}

# --- the kubernetes Service, reachable from pods ---------------------------------
python3 test/integration/tcpfwd.py "$NODE_IP:0" "$APISERVER_PORT" >"$tmp/relay.port" 2>"$tmp/relay.log" &
relay_pid=$!
until_ok 5 test -s "$tmp/relay.port"
relay_port=$(head -n 1 "$tmp/relay.port")
kapi post /apis/discovery.k8s.io/v1/namespaces/default/endpointslices - >/dev/null <<EOF
{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
 "metadata":{"name":"kubernetes","labels":{"kubernetes.io/service-name":"kubernetes",
  "endpointslice.kubernetes.io/managed-by":"svcenv-test"}},
 "addressType":"IPv4","endpoints":[{"addresses":["$NODE_IP"],"conditions":{"ready":true}}],
 "ports":[{"name":"https","port":$relay_port,"protocol":"TCP"}]}
EOF
check "default/kubernetes: endpoint $NODE_IP:$relay_port (relayed to the API server)" test -n "$relay_port"

# --- apply -k --------------------------------------------------------------------
manifests/gen-webhook-certs "$tmp/pki" --days 2 >/dev/null 2>"$tmp/certs.err" ||
	not_ok "gen-webhook-certs: $(head -n 1 "$tmp/certs.err")"
# The collection a manifest object is posted to.
api_path() {
	jq -r '(.apiVersion | if test("/") then "/apis/" + . else "/api/" + . end) as $gv |
		({Namespace: "namespaces", ServiceAccount: "serviceaccounts", ClusterRole: "clusterroles",
		  ClusterRoleBinding: "clusterrolebindings", Role: "roles", RoleBinding: "rolebindings",
		  Deployment: "deployments", DaemonSet: "daemonsets", Service: "services",
		  PodDisruptionBudget: "poddisruptionbudgets", ConfigMap: "configmaps", Secret: "secrets",
		  MutatingWebhookConfiguration: "mutatingwebhookconfigurations"}[.kind] //
		  error("no API path for kind \(.kind)")) as $r |
		$gv + (if .metadata.namespace then "/namespaces/\(.metadata.namespace)" else "" end) + "/" + $r'
}
# The user's steps and this test's overlay, on the objects as kustomize gives them.
overlay() {
	jq -c --arg server "https://127.0.0.1:$APISERVER_PORT" --arg ca "$(cat "$tmp/pki/cabundle")" \
		--arg cidr "$POD_CIDR" --arg healthz "$NODE_IP:10256" '
		if .kind == "ConfigMap" and .metadata.name == "svcenv-proxy-kubeconfig" then
			.data["kubeconfig.conf"] |= sub("https://control-plane.example:6443"; $server)
		elif .kind == "MutatingWebhookConfiguration" then
			.webhooks[].clientConfig.caBundle = $ca
		elif .kind == "DaemonSet" and .metadata.name == "svcenv-proxy" then
			.spec.template.spec.containers[0].args += ["--nodeport-addresses=\($cidr)",
				"--cluster-cidr=\($cidr)", "--healthz-bind-address=\($healthz)"]
		else . end'
}
: >"$tmp/apply.err"
apply_one() { # one JSON object on stdin
	local obj path
	obj=$(cat)
	path=$(api_path <<<"$obj" 2>>"$tmp/apply.err") || return
	kapi post "$path" - <<<"$obj" >/dev/null 2>>"$tmp/apply.err"
}
applied=0
python3 test/integration/kustomize.py manifests --skip cert-manager.yaml >"$tmp/objects" 2>>"$tmp/apply.err"
# The manifests' namespace, then the Secret the webhook's pods mount, then
# the rest.
is_sys_ns() { [ "$(jq -r '"\(.kind)/\(.metadata.name)"' <<<"$1")" = "Namespace/$SYS" ]; }
while read -r obj; do
	is_sys_ns "$obj" && apply_one <<<"$obj" && applied=$((applied + 1))
done <"$tmp/objects"
kapi post "/api/v1/namespaces/$SYS/secrets" "$tmp/pki/secret.yaml" >/dev/null 2>>"$tmp/apply.err"
deployed=$(date +%s.%N)
proxy_rules=1
while read -r obj; do
	is_sys_ns "$obj" && continue
	overlay <<<"$obj" | apply_one && applied=$((applied + 1))
done <"$tmp/objects"
if [ -s "$tmp/apply.err" ]; then
	not_ok "apply -k manifests/: $applied objects; $(head -n 1 "$tmp/apply.err")"
else
	ok "apply -k manifests/ (without cert-manager.yaml): $applied objects and the TLS Secret"
fi

# --- Ready -----------------------------------------------------------------------
deploy_ready() { # ns name: every replica updated, ready and available
	kapi get "/apis/apps/v1/namespaces/$1/deployments/$2" 2>/dev/null | jq -e '
		.status.observedGeneration >= .metadata.generation and
		.status.replicas == .spec.replicas and .status.updatedReplicas == .spec.replicas and
		.status.readyReplicas == .spec.replicas and .status.availableReplicas == .spec.replicas' >/dev/null
}
ds_ready() { # ns name
	kapi get "/apis/apps/v1/namespaces/$1/daemonsets/$2" 2>/dev/null | jq -e '
		.status.observedGeneration >= .metadata.generation and .status.desiredNumberScheduled >= 1 and
		.status.updatedNumberScheduled == .status.desiredNumberScheduled and
		.status.numberReady == .status.desiredNumberScheduled and
		.status.numberAvailable == .status.desiredNumberScheduled' >/dev/null
}
all_deployed() {
	deploy_ready "$SYS" svcenv-controller && deploy_ready "$SYS" svcenv-webhook &&
		ds_ready "$SYS" svcenv-proxy && deploy_ready kube-system svcenv-dns
}
pods_report() { # why something is not Ready
	local ns
	for ns in "$SYS" kube-system "$NS"; do
		kapi get "/api/v1/namespaces/$ns/pods" 2>/dev/null | jq -r '.items[] | "# \(.metadata.name): \(.status.phase) " +
			([.status.containerStatuses[]? | "\(.name) ready=\(.ready) restarts=\(.restartCount) \(.state | keys[0]) \(.state[].reason // "") \(.lastState.terminated.message // "" | .[0:200])"] | join("; "))'
	done
	kapi get "/api/v1/namespaces/$SYS/events" 2>/dev/null |
		jq -r '.items[] | select(.type == "Warning") | "# \(.involvedObject.name): \(.message | .[0:200])"' | tail -n 8
}
if until_ok 180 all_deployed; then
	ok "controller 2/2, webhook 2/2, proxy DaemonSet 1/1, dns 2/2 Ready $(elapsed "$deployed") s after apply"
else
	not_ok "controller 2/2, webhook 2/2, proxy DaemonSet 1/1, dns 2/2 Ready"
	pods_report
	echo "1..$n"
	exit 1
fi
restarts() { # total container restarts in the svcenv namespaces
	{ kapi get "/api/v1/namespaces/$SYS/pods"; kapi get "/api/v1/namespaces/kube-system/pods"; } |
		jq -s '[.[].items[].status.containerStatuses[]?.restartCount] | add // 0'
}
check "no container restarted (liveness probes pass)" test "$(restarts)" = 0

lease_holder() {
	kapi get "/apis/coordination.k8s.io/v1/namespaces/$SYS/leases/svcenv-controller" 2>/dev/null |
		jq -r '.spec.holderIdentity // empty'
}
controller_pods() {
	kapi get "/api/v1/namespaces/$SYS/pods?labelSelector=app.kubernetes.io%2Fname%3Dsvcenv-controller" |
		jq -r '.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name'
}
holder_is_pod() { # the Lease's holder is one of the controller's pods (prints it)
	local h p
	h=$(lease_holder)
	for p in $(controller_pods); do
		case $h in "$p" | "$p"_*) echo "$p"; return 0 ;; esac
	done
	return 1
}
leader=$(until_ok 30 holder_is_pod >/dev/null && holder_is_pod)
check "one svcenv-controller pod leads (Lease $SYS/svcenv-controller: ${leader:-none})" test -n "$leader"

# --- the cluster used from pods --------------------------------------------------
: >"$tmp/setup.err"
post() { # path, JSON on stdin
	kapi post "$1" - >/dev/null 2>>"$tmp/setup.err" || echo "post $1 failed" >>"$tmp/setup.err"
}
echo "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$NS\"}}" | post /api/v1/namespaces
post "/api/v1/namespaces/$NS/services" <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},
 "spec":{"selector":{"app":"web"},"ports":[{"name":"http","port":80,"targetPort":8080}]}}
EOF
post "/api/v1/namespaces/$NS/services" <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"hl"},
 "spec":{"clusterIP":"None","selector":{"app":"web"},"ports":[{"name":"http","port":8080}]}}
EOF
pod() { # name labels-json
	post "/api/v1/namespaces/$NS/pods" <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"$1","labels":$2},
 "spec":{"terminationGracePeriodSeconds":0,"containers":[
  {"name":"echo","image":"$ECHO_IMAGE","imagePullPolicy":"Never","args":["8080"]},
  {"name":"ctl","image":"$SHELL_IMAGE","imagePullPolicy":"Never","command":["/bin/sh","-c","$NODE_SHELL_SERVER"],
   "readinessProbe":{"exec":{"command":["test","-e","/tmp/ready"]},"periodSeconds":1}}]}}
EOF
}
pod web-0 '{"app":"web"}'
pod web-1 '{"app":"web"}'
pod client '{"role":"client"}'
[ -s "$tmp/setup.err" ] && not_ok "Services and pods in $NS: $(head -n 1 "$tmp/setup.err")"
app_ready() { pod_ready "$NS" web-0 && pod_ready "$NS" web-1 && pod_ready "$NS" client; }
check "2 backends and a client Ready in $NS" until_ok 90 app_ready
client=$(pod_ip "$NS" client) web0=$(pod_ip "$NS" web-0) web1=$(pod_ip "$NS" web-1)
web_ip=$(kapi get "/api/v1/namespaces/$NS/services/web" | jq -r .spec.clusterIP)

injected() { # pod JSON on stdin: the webhook's mark and a service variable
	jq -e '.metadata.annotations["svcenv.io/injected"] == "true" and
		([.spec.containers[0].env[]?.name] | index("WEB_SERVICE_HOST") != null)' >/dev/null
}
check "the webhook (called through its Service, by the DaemonSet's rules) injected the client pod" \
	eval 'kapi get "/api/v1/namespaces/$NS/pods/client" | injected'
slice() { # the web Service's one EndpointSlice
	kapi get "/apis/discovery.k8s.io/v1/namespaces/$NS/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb" |
		jq -c '.items[0] // empty'
}
slice_has() { # the ready pod names the slice lists, sorted, joined by a space
	[ "$(slice | jq -r '[.endpoints[]? | select(.conditions.ready) | .targetRef.name] | sort | join(" ")')" = "$1" ]
}
check "the leader wrote web's EndpointSlice (managed-by endpointslice-controller.k8s.io; kcm runs no endpoint controller)" \
	eval 'until_ok 20 slice_has "web-0 web-1" &&
		[ "$(slice | jq -r ".metadata.labels[\"endpointslice.kubernetes.io/managed-by\"]")" = endpointslice-controller.k8s.io ]'
both_answer() { # within 12 requests both backends answer
	[ "$(for _ in $(seq 12); do pod_http "$client" "$web_ip" 80; done | sort -u | tr '\n' ' ')" = "web-0 web-1 " ]
}
check "client -> web's ClusterIP $web_ip reaches both backends (the DaemonSet's rules)" until_ok 20 both_answer

# DNS with the pod's own resolv.conf.
resolv=$(pod_sh "$client" 'cat /etc/resolv.conf')
check "the client's resolv.conf: nameserver $CLUSTER_DNS, search $NS.svc.cluster.local svc.cluster.local cluster.local, ndots:5" \
	eval 'grep -qx "nameserver $CLUSTER_DNS" <<<"$resolv" &&
		grep -qx "search $NS.svc.cluster.local svc.cluster.local cluster.local" <<<"$resolv" &&
		grep -qx "options ndots:5" <<<"$resolv"'
# resolve (in the shell image): libc's stub resolver, as the pod's programs.
lookup() { # [-t a|srv] NAME: the answers, sorted; the output kept in lookup.last
	pod_sh "$client" "resolve $*" | tee "$tmp/lookup.last" | sort
}
lookup_is() { # WANT ARGS...: the sorted answers are WANT's lines
	local want=$1
	shift
	[ "$(lookup "$@")" = "$want" ] && return 0
	sed 's/^/# got: /' "$tmp/lookup.last"
	return 1
}
check "web (short name: the search path) -> its ClusterIP $web_ip" lookup_is "$web_ip" web
check "hl (headless, short name) -> both pod IPs" lookup_is "$(printf '%s\n' "$web0" "$web1" | sort)" hl
check "SRV _http._tcp.web (short name) -> 0 100 80 web.$NS.svc.cluster.local" \
	lookup_is "0 100 80 web.$NS.svc.cluster.local" -t srv _http._tcp.web
check "kube-dns.kube-system (another namespace; fewer dots than ndots:5) -> $CLUSTER_DNS" \
	lookup_is "$CLUSTER_DNS" kube-dns.kube-system
check "nope.$NS.svc.cluster.local. (no such Service) -> NXDOMAIN" \
	lookup_is NXDOMAIN -t a "nope.$NS.svc.cluster.local."

# --- the leader's pod killed: the other takes over -------------------------------
t0=$(date +%s.%N)
kapi delete "/api/v1/namespaces/$SYS/pods/$leader" >/dev/null
new_leader() { local p; p=$(holder_is_pod) && [ "$p" != "$leader" ] && echo "$p"; }
if until_ok 60 new_leader >/dev/null; then
	ok "the leader's pod deleted: $(new_leader) leads $(elapsed "$t0") s later"
else
	not_ok "the leader's pod deleted: another pod leads within 60 s (holder: $(lease_holder))"
fi
pod web-2 '{"app":"web"}'
check "the new leader writes: a new backend web-2 enters the slice" until_ok 60 slice_has "web-0 web-1 web-2"
kapi delete "/api/v1/namespaces/$NS/pods/web-2?gracePeriodSeconds=0" >/dev/null
check "... and leaves it when deleted" until_ok 30 slice_has "web-0 web-1"
check "the controller Deployment back at 2/2" until_ok 90 deploy_ready "$SYS" svcenv-controller

# --- rolling restarts ------------------------------------------------------------
# While a workload rolls, each round: a dry-run pod must come back injected,
# web's slice must keep both backends, the ClusterIP must answer and the name
# must resolve. Every failure counts.
DRY_POD='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"probe"},
 "spec":{"containers":[{"name":"c","image":"none"}]}}'
# Dry-run pod creates every 0.1 s until killed: "ok" or "lost" a line.
admission_probe() {
	while :; do
		if printf '%s' "$DRY_POD" | kapi post "/api/v1/namespaces/$NS/pods?dryRun=All" - 2>/dev/null | injected; then
			echo ok
		else
			echo lost
		fi
		sleep 0.1
	done
}
roll() { # kind(deployments|daemonsets) ns name [NEW-OBJECT-FILE: PUT it instead of a restart]
	local kind=$1 ns=$2 name=$3 put=${4:-} t0 rounds=0 lost_adm=0 lost_ep=0 lost_req=0 lost_dns=0 done_fn uid
	local now
	# rolled out, and the old pods gone (not only terminating)
	settled() {
		"$done_fn" "$ns" "$name" && kapi get "/api/v1/namespaces/$ns/pods?labelSelector=app.kubernetes.io%2Fname%3D$name" |
			jq -e '[.items[] | select(.metadata.deletionTimestamp)] == []' >/dev/null
	}
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	uid=$(slice | jq -r .metadata.uid)
	done_fn=deploy_ready
	[ "$kind" = daemonsets ] && done_fn=ds_ready
	t0=$(date +%s.%N)
	admission_probe >"$tmp/admissions.$name" &
	local probe_pid=$!
	if [ -n "$put" ]; then
		kapi put "/apis/apps/v1/namespaces/$ns/$kind/$name" "$put" >/dev/null
	else
		kapi patch "/apis/apps/v1/namespaces/$ns/$kind/$name" \
			"{\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"kubectl.kubernetes.io/restartedAt\":\"$now\"}}}}}" >/dev/null
	fi
	sleep 1
	while [ $((rounds)) -lt 400 ]; do
		rounds=$((rounds + 1))
		slice_has "web-0 web-1" || lost_ep=$((lost_ep + 1))
		[ -n "$(pod_http "$client" "$web_ip" 80)" ] || lost_req=$((lost_req + 1))
		[ "$(lookup web)" = "$web_ip" ] || lost_dns=$((lost_dns + 1))
		settled && break
	done
	kill "$probe_pid" 2>/dev/null
	wait "$probe_pid" 2>/dev/null
	lost_adm=$(grep -c lost "$tmp/admissions.$name")
	local what="rolling restart of $name"
	[ -n "$put" ] && what="$name changed ($(basename "$put"))"
	if settled; then
		ok "$what: done in $(elapsed "$t0") s ($rounds rounds)"
	else
		not_ok "$what: not done in $rounds rounds"
		pods_report
	fi
	check "... no admission lost ($lost_adm of $(wc -l <"$tmp/admissions.$name") dry-run pods not injected)" \
		test "$lost_adm" = 0
	check "... no endpoint lost ($lost_ep of $rounds looks without both; the slice kept its uid)" \
		eval '[ "$lost_ep" = 0 ] && [ "$(slice | jq -r .metadata.uid)" = "$uid" ]'
	check "... no request lost ($lost_req of $rounds unanswered)" test "$lost_req" = 0
	check "... no lookup lost ($lost_dns of $rounds wrong)" test "$lost_dns" = 0
}
roll deployments "$SYS" svcenv-controller
roll deployments "$SYS" svcenv-webhook
roll daemonsets "$SYS" svcenv-proxy
roll deployments kube-system svcenv-dns
# The proxy switched to nftables, as a user would edit the DaemonSet: the
# new pod takes the iptables backend's rules away (kube-proxy's
# platformCleanup does the same), with no request lost on the way.
kapi get "/apis/apps/v1/namespaces/$SYS/daemonsets/svcenv-proxy" |
	jq '.spec.template.spec.containers[0].args |= map(if . == "--backend=iptables" then "--backend=nftables" else . end)' \
		>"$tmp/backend=nftables.json"
roll daemonsets "$SYS" svcenv-proxy "$tmp/backend=nftables.json"
check "... the proxy's nftables table is there, the iptables backend's chains are gone" \
	eval 'nft list table ip svcenv >/dev/null 2>&1 && ! grep -q "^:KUBE-SERVICES " <<<"$(iptables-save 2>/dev/null)"'
check "... and the client still reaches both backends" until_ok 20 both_answer
check "no container restarted during all this" test "$(restarts)" = 0

# --- the end ---------------------------------------------------------------------
# The DaemonSet's rules outlive its pod, as kube-proxy's do: --cleanup
# (before the node stops, which then takes away the empty tables iptables-nft
# made).
proxy_gone() {
	[ "$(kapi get "/api/v1/namespaces/$SYS/pods?labelSelector=app.kubernetes.io%2Fname%3Dsvcenv-proxy" | jq '.items | length')" = 0 ]
}
kapi delete "/apis/apps/v1/namespaces/$SYS/daemonsets/svcenv-proxy" >/dev/null
check "the proxy DaemonSet deleted, its pod gone" until_ok 60 proxy_gone
check "svcenv-proxy --cleanup removes the DaemonSet's rules" "$SVCENV/svcenv-proxy" --cleanup
proxy_rules=''
if node_stop; then ok "node stops"; else not_ok "node stops: $node_stop_err"; fi
kill "$relay_pid" && wait "$relay_pid" 2>/dev/null
relay_pid=''
host_ruleset raw >"$tmp/rules.after"
check "the machine's ruleset is as before" diff -q "$tmp/rules.before" "$tmp/rules.after"
echo "# suite time: $(elapsed "$suite_t0") s"
echo "1..$n"
