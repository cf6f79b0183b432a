#!/usr/bin/env bash
# The kubelet as the oracle of `svcenv env`: on a real node (test/k8s/node),
# pods covering the env rules run; the environment of each running process
# (its /proc/1/environ, read through the pod's log) must equal what
# `svcenv env -f <cluster state dumped through the API>` says for that pod and
# container, variable by variable. Set aside, and only those: PATH (from the
# image config), HOSTNAME and HOME (added by containerd), when svcenv does not
# predict them - they are the runtime's, not the kubelet's.
# Covered: service links on and off, many Services (named, UDP, SCTP,
# multi-port, NodePort; headless, ExternalName and other namespaces' must
# not appear), $(VAR) chains, $$ escapes and undefined references, an
# override of a service variable, envFrom with a prefix from a ConfigMap and
# a Secret, configMapKeyRef, secretKeyRef, fieldRef, resourceFieldRef, two
# containers and an init container. Also: the svcenv image runs, the echo
# image answers HTTP and UDP from the node over the bridge, and a pull of an
# image that is not there fails at once without leaving the machine.
# Then the node is stopped and nothing of it may be left.
#
# Needs root (else one SKIP line). KUBE_DIR: a control plane started by
# test/run-all (else one is started); the node is started and stopped here.
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=test/integration/node.bash
. test/integration/node.bash
node_require_root node_env

# Unique per run: the same control plane may run this twice.
NS=node-env-$$
OTHER_NS=node-env-other-$$
tmp=$(mktemp -d /tmp/svcenv-node-env.XXXXXX)
cleanup() {
	node_cleanup "$NS" "$OTHER_NS"
	rm -rf "$tmp"
}
trap cleanup EXIT
node_control_plane

# --- what the machine looks like before the node -----------------------------
fixed_paths="/var/lib/kubelet /var/log/containers /run/containerd"
sysctls="vm.overcommit_memory kernel.panic kernel.panic_on_oops"
before_paths=$(for p in $fixed_paths; do [ -e "$p" ] && echo "$p"; done)
before_sysctls=$(sysctl $sysctls)
# only containerd's (cni-*): other tests on this machine make their own
before_netns=$(ls /run/netns 2>/dev/null | grep '^cni-' | sort)

live() { # pid: exists and is not a zombie (the servers' reaper is init)
	local st
	st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null) && [ "${st:0:1}" != Z ]
}
# Sets left=() to what of a node is still there; $@: pids that must be gone.
# A process in the node's mount namespace shows its tmpfs "svcenv-node".
leftovers() {
	left=()
	local p r
	for p in "$@"; do live "$p" && left+=("process $p ($(cat "/proc/$p/comm" 2>/dev/null))"); done
	for p in /proc/[0-9]*; do
		if grep -qa "$KUBE_DIR/node" "$p/cmdline" 2>/dev/null ||
			grep -q ' - tmpfs svcenv-node ' "$p/mountinfo" 2>/dev/null; then
			live "${p#/proc/}" && left+=("process ${p#/proc/} ($(cat "$p/comm" 2>/dev/null))")
		fi
	done
	for r in /sys/fs/cgroup/*/; do
		[ -d "${r}svcenv-node" ] || [ -d "${r}svcenv-node-daemons" ] && left+=("cgroup ${r}svcenv-node*")
	done
	grep -q "$KUBE_DIR/node" /proc/self/mountinfo && left+=("mounts under $KUBE_DIR/node")
	ip link show svcenv-br0 >/dev/null 2>&1 && left+=("bridge svcenv-br0")
	iptables -w 5 -S FORWARD | grep -q svcenv-node && left+=("FORWARD rules")
	[ "$(ls /run/netns 2>/dev/null | grep '^cni-' | sort)" = "$before_netns" ] || left+=("cni-* netns in /run/netns")
	[ "$(sysctl $sysctls)" = "$before_sysctls" ] || left+=("sysctls: $(sysctl $sysctls | tr '\n' ' ')")
	for p in $fixed_paths; do
		[ -e "$p" ] && ! printf '%s\n' "$before_paths" | grep -qx "$p" && left+=("$p")
	done
	[ -e /run/svcenv-node.dir ] && left+=("/run/svcenv-node.dir")
}

# A start that fails half-way (here: no time to wait for containerd) says so
# in one line and undoes what it did.
SVCENV_NODE_TIMEOUT=0 test/k8s/node start "$KUBE_DIR" >"$tmp/failed.out" 2>"$tmp/failed.err"
rc=$?
leftovers
if [ $rc = 1 ] && [ "$(wc -l <"$tmp/failed.err")" = 1 ] &&
	grep -qx 'node: containerd did not answer in 0s (see .*/containerd.log)' "$tmp/failed.err" &&
	[ ${#left[@]} -eq 0 ]; then
	ok "a failed start: one line, exit 1, nothing left ($(cat "$tmp/failed.err"))"
else
	not_ok "a failed start: exit $rc, $(head -n 3 "$tmp/failed.err" | tr '\n' ' ') left: ${left[*]}"
fi

node_start

# A second start, while this node runs, names the running one and disturbs nothing.
test/k8s/node start "$KUBE_DIR" >/dev/null 2>"$tmp/second.err"
rc=$?
if [ $rc = 1 ] && [ "$(cat "$tmp/second.err")" = "node: a node is already running for $KUBE_DIR (test/k8s/node stop $KUBE_DIR)" ] &&
	kill -0 "$KUBELET_PID" && kill -0 "$CONTAINERD_PID" && ip link show svcenv-br0 >/dev/null 2>&1; then
	ok "a second start refuses and names the running node; the node stays up"
else
	not_ok "a second start: exit $rc, $(head -n 2 "$tmp/second.err" | tr '\n' ' ')"
fi

# --- cluster state -------------------------------------------------------------
post() { # path, JSON/YAML on stdin
	kapi post "$1" - >/dev/null || echo "post $1 failed" >>"$tmp/setup.err"
}
: >"$tmp/setup.err"
for ns in "$NS" "$OTHER_NS"; do
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}" | post /api/v1/namespaces
done
svc() { # name, spec JSON
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"$1\"},\"spec\":$2}" |
		post "/api/v1/namespaces/${3:-$NS}/services"
}
svc db '{"selector":{"app":"db"},"ports":[{"name":"pg","port":5432,"targetPort":5432}]}'
svc cache '{"ports":[{"port":6379,"protocol":"UDP"}]}'
svc web-api '{"ports":[{"name":"http","port":8080},{"name":"admin","port":9000}]}'
svc dns '{"ports":[{"name":"dns","port":53,"protocol":"UDP"},{"name":"dns-tcp","port":53,"protocol":"TCP"}]}'
svc s3ctp '{"ports":[{"port":9999,"protocol":"SCTP"}]}'
svc my-svc-2 '{"ports":[{"port":7000}]}'
svc np '{"type":"NodePort","ports":[{"port":80}]}'
svc hl '{"clusterIP":"None","ports":[{"port":80}]}'
svc ext '{"type":"ExternalName","externalName":"example.invalid"}'
svc other '{"ports":[{"port":81}]}' "$OTHER_NS"
for i in $(seq -w 1 24); do svc "many-$i" "{\"ports\":[{\"port\":$((10000 + 10#$i))}]}"; done
post "/api/v1/namespaces/$NS/configmaps" <<'EOF'
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},
 "data":{"color":"blue","SIZE":"10","dot.key":"d","dash-key":"x","9lives":"n","DSN":"from-cm"}}
EOF
post "/api/v1/namespaces/$NS/secrets" <<'EOF'
{"apiVersion":"v1","kind":"Secret","metadata":{"name":"sec"},"stringData":{"pw":"s3cr=t","user":"u"}}
EOF

# Each process prints its own initial environment (NODE_REPORT) and sleeps.
report=$NODE_REPORT
post "/api/v1/namespaces/$NS/pods" <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"links","labels":{"app":"links"},"annotations":{"note":"a b"}},
 "spec":{"terminationGracePeriodSeconds":1,
  "initContainers":[{"name":"init","image":"$SHELL_IMAGE","imagePullPolicy":"Never",
    "command":["/bin/sh","-c","$report"],
    "env":[{"name":"FIRST","value":"\$(DB_SERVICE_HOST):\$(DB_SERVICE_PORT_PG)"}]}],
  "containers":[
   {"name":"app","image":"$SHELL_IMAGE","imagePullPolicy":"Never",
    "command":["/bin/sh","-c","$report; exec sleep 3600"],
    "resources":{"limits":{"memory":"64Mi","cpu":"250m"}},
    "envFrom":[{"prefix":"CM_","configMapRef":{"name":"cm"}},{"secretRef":{"name":"sec"}}],
    "env":[
     {"name":"DSN","value":"pg://\$(DB_SERVICE_HOST):\$(DB_SERVICE_PORT)/x"},
     {"name":"A","value":"a"},{"name":"B","value":"\$(A)-b"},{"name":"C","value":"\$(B)-c-\$(CM_color)"},
     {"name":"ESCAPED","value":"\$\$(DB_SERVICE_HOST)"},{"name":"UNDEF","value":"\$(NOPE)"},
     {"name":"LATER","value":"\$(D)"},{"name":"D","value":"d"},
     {"name":"WEB_API_SERVICE_PORT","value":"1234"},
     {"name":"REF_OVERRIDE","value":"\$(WEB_API_SERVICE_PORT)"},
     {"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}},
     {"name":"POD_NS","valueFrom":{"fieldRef":{"fieldPath":"metadata.namespace"}}},
     {"name":"POD_UID","valueFrom":{"fieldRef":{"fieldPath":"metadata.uid"}}},
     {"name":"POD_IP","valueFrom":{"fieldRef":{"fieldPath":"status.podIP"}}},
     {"name":"HOST_IP","valueFrom":{"fieldRef":{"fieldPath":"status.hostIP"}}},
     {"name":"NODE","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}},
     {"name":"APP","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['app']"}}},
     {"name":"NOTE","valueFrom":{"fieldRef":{"fieldPath":"metadata.annotations['note']"}}},
     {"name":"MEM_LIMIT","valueFrom":{"resourceFieldRef":{"resource":"limits.memory"}}},
     {"name":"CPU_MILLI","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"1m"}}},
     {"name":"COLOR","valueFrom":{"configMapKeyRef":{"name":"cm","key":"color"}}},
     {"name":"PW","valueFrom":{"secretKeyRef":{"name":"sec","key":"pw"}}},
     {"name":"IP_AGAIN","value":"\$(POD_IP)"}]},
   {"name":"printer","image":"$SHELL_IMAGE","imagePullPolicy":"Never",
    "command":["/bin/sh","-c","$report; cat /etc/resolv.conf; exec sleep 3600"]}]}}
EOF
post "/api/v1/namespaces/$NS/pods" <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nolinks"},
 "spec":{"terminationGracePeriodSeconds":1,"enableServiceLinks":false,
  "containers":[
   {"name":"app","image":"$SHELL_IMAGE","imagePullPolicy":"Never",
    "command":["/bin/sh","-c","$report; exec sleep 3600"],
    "envFrom":[{"prefix":"S_","secretRef":{"name":"sec"}},{"configMapRef":{"name":"cm"}}],
    "env":[{"name":"API","value":"\$(KUBERNETES_SERVICE_HOST):\$(KUBERNETES_SERVICE_PORT)"},
     {"name":"NO_DB","value":"\$(DB_SERVICE_HOST)"},{"name":"SIZE","value":"\$(SIZE)0"}]}]}}
EOF
if [ -s "$tmp/setup.err" ]; then
	not_ok "cluster objects created: $(head -n 1 "$tmp/setup.err")"
else
	ok "cluster objects created (34 Services, a ConfigMap, a Secret, 2 pods)"
fi

# --- running processes -----------------------------------------------------------
running() { pod_running "$NS" "$1"; }
waited=$(date +%s.%N)
for p in links nolinks; do
	deadline=$((SECONDS + 90))
	until running "$p" || [ $SECONDS -ge $deadline ]; do sleep 0.2; done
done
if running links && running nolinks; then
	ok "pods Running ($(printf '%.1f' "$(echo "$(date +%s.%N) - $waited" | bc)") s after the POSTs)"
else
	not_ok "pods Running"
	for p in links nolinks; do
		kapi get "/api/v1/namespaces/$NS/pods/$p" | jq -c '.status | {phase, containerStatuses}' | sed 's/^/# /'
	done
fi

kapi get /api/v1/services >"$tmp/services.json"
kapi get "/api/v1/namespaces/$NS/pods" >"$tmp/pods.json"
kapi get "/api/v1/namespaces/$NS/configmaps" >"$tmp/configmaps.json"
kapi get "/api/v1/namespaces/$NS/secrets" >"$tmp/secrets.json"

# One check per container: the process's variables (the runtime's three set
# aside) and svcenv's prediction are the same set of NAME=VALUE. The order is
# not compared: the kubelet appends in Go map order.
compare() { # pod container
	local pod=$1 c=$2 name=$1/$2 got=$tmp/$1.$2.process want=$tmp/$1.$2.svcenv
	if ! until_env "$NS" "$pod" "$c" >"$got"; then
		not_ok "$name: no environment in the container's log"
		return
	fi
	if ! "$SVCENV/svcenv" env -f "$tmp/services.json" -f "$tmp/pods.json" -f "$tmp/configmaps.json" \
		-f "$tmp/secrets.json" -n "$NS" --pod "$pod" --container "$c" >"$tmp/raw" 2>"$tmp/err"; then
		not_ok "$name: svcenv env failed: $(head -n 1 "$tmp/err")"
		return
	fi
	sort "$tmp/raw" >"$want"
	env_compare "$name: the process has" "$want" "$got"
}
compare links init
compare links app
compare links printer
compare nolinks app

# The kubelet's ClusterFirst resolv.conf names only the cluster DNS and the
# cluster's search path: nothing of the machine's resolver.
resolv_ok() {
	kapi get "/api/v1/namespaces/$NS/pods/links/log?container=printer" | sed '1,/^ENV-END$/d' >"$tmp/resolv"
	printf 'search %s.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n' \
		"$NS" | diff - "$tmp/resolv" >/dev/null
}
if until_ok 10 resolv_ok; then
	ok "a pod's resolv.conf names only the cluster DNS 10.96.0.10 and the cluster search path"
else
	not_ok "a pod's resolv.conf names only the cluster DNS"
	sed 's/^/# /' "$tmp/resolv"
fi

# Spot checks that the comparison is not vacuous: real values the kubelet set.
check "links/app: \$(VAR) chain and service host expanded by the kubelet" \
	grep -qxE 'DSN=pg://10\.96\.[0-9]+\.[0-9]+:5432/x' "$tmp/links.app.process"
check "links/app: fieldRef status.podIP is the pod's real address" \
	grep -qx "POD_IP=$(jq -r '.items[] | select(.metadata.name == "links") | .status.podIP' "$tmp/pods.json")" \
	"$tmp/links.app.process"
check "nolinks/app: no service variables of its namespace, KUBERNETES_* still there" \
	eval '! grep -q "^DB_SERVICE_HOST=" "$tmp/nolinks.app.process" && grep -q "^KUBERNETES_SERVICE_HOST=10.96.0.1$" "$tmp/nolinks.app.process"'

# --- the images and the no-pull rule -------------------------------------------
# The svcenv image from `make image` runs as is (its ldd closure is complete),
# and an image that is not there fails at once: containerd's only way to a
# registry is a proxy at 127.0.0.1:9 that is not there.
if [ -n "${SVCENV_IMAGE:-}" ]; then
	post "/api/v1/namespaces/$NS/pods" <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"image"},
 "spec":{"restartPolicy":"Never","containers":[{"name":"svcenv","image":"$SVCENV_IMAGE",
  "imagePullPolicy":"Never","command":["/usr/local/bin/svcenv","--version"]}]}}
EOF
	deadline=$((SECONDS + 60))
	until [ "$(kapi get "/api/v1/namespaces/$NS/pods/image" 2>/dev/null | jq -r .status.phase)" = Succeeded ] ||
		[ $SECONDS -ge $deadline ]; do sleep 0.3; done
	check "the svcenv image (make image) runs svcenv in a pod" \
		eval 'kapi get "/api/v1/namespaces/$NS/pods/image/log" | grep -q "^svcenv "'
else
	not_ok "the svcenv image was imported (run make image first)"
fi
# The echo image answers HTTP and echoes UDP; the node reaches its pod over
# the bridge (the only address range the node uses besides loopback).
post "/api/v1/namespaces/$NS/pods" <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"echo"},
 "spec":{"terminationGracePeriodSeconds":1,
  "containers":[{"name":"echo","image":"$ECHO_IMAGE","imagePullPolicy":"Never"}]}}
EOF
deadline=$((SECONDS + 60))
until running echo || [ $SECONDS -ge $deadline ]; do sleep 0.2; done
echo_ip=$(kapi get "/api/v1/namespaces/$NS/pods/echo" | jq -r '.status.podIP // empty')
http_ok() {
	curl -fsS --max-time 3 "http://$echo_ip:8080/hi" 2>/dev/null | grep -qx 'hello from echo'
}
check "echo image: HTTP from the node to the pod ($echo_ip:8080) names the pod" until_ok 10 http_ok
udp_ok() {
	python3 - "$echo_ip" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.sendto(b"ping-svcenv", (sys.argv[1], 8080))
sys.exit(0 if s.recvfrom(100)[0] == b"ping-svcenv" else 1)
PY
}
check "echo image: a UDP datagram comes back unchanged" until_ok 10 udp_ok

post "/api/v1/namespaces/$NS/pods" <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pull"},
 "spec":{"terminationGracePeriodSeconds":1,
  "containers":[{"name":"c","image":"registry.invalid/nothing:1","imagePullPolicy":"Always"}]}}
EOF
pull_msg() {
	kapi get "/api/v1/namespaces/$NS/pods/pull" 2>/dev/null | jq -r '.status.containerStatuses[0].state.waiting |
		select(.reason == "ErrImagePull" or .reason == "ImagePullBackOff") | .message'
}
deadline=$((SECONDS + 30)) msg=''
until msg=$(pull_msg) && [ -n "$msg" ] || [ $SECONDS -ge $deadline ]; do sleep 0.3; done
case $msg in
*127.0.0.1:9*) ok "a pull fails at once, at the proxy that is not there" ;;
*) not_ok "a pull fails at the local proxy: ${msg:-no pull error in 30 s}" ;;
esac

# --- memory, then stop -------------------------------------------------------------
rss() { # pid... -> MiB
	local kb=0 p r
	for p in "$@"; do
		r=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null) && kb=$((kb + ${r:-0}))
	done
	echo $((kb / 1024))
}
kcm_pid=$(. "$KUBE_DIR/env" && echo "${KCM_PID:-}")
shims=$(for p in /proc/[0-9]*; do
	[ "$(readlink "$p/exe" 2>/dev/null)" = /usr/bin/containerd-shim-runc-v2 ] && echo "${p#/proc/}"
done)
echo "# memory (RSS MiB): kubelet $(rss "$KUBELET_PID"), containerd $(rss "$CONTAINERD_PID")," \
	"shims $(rss $shims) ($(echo $shims | wc -w)), kube-scheduler $(rss "$SCHEDULER_PID")," \
	"kube-controller-manager $(rss "$kcm_pid")"

# Delete the namespaces while the node runs: the namespace controller and the
# kubelet finish them, so no Service or pod of this test stays for the next.
gone() { ! kapi get "/api/v1/namespaces/$NS" >/dev/null 2>&1 && ! kapi get "/api/v1/namespaces/$OTHER_NS" >/dev/null 2>&1; }
kapi delete "/api/v1/namespaces/$NS" >/dev/null
kapi delete "/api/v1/namespaces/$OTHER_NS" >/dev/null
deadline=$((SECONDS + 60))
until gone || [ $SECONDS -ge $deadline ]; do sleep 0.3; done
check "namespaces deleted (their pods stopped by the kubelet)" gone

pids="$KUBELET_PID $CONTAINERD_PID $SCHEDULER_PID $HOLDER_PID $kcm_pid $shims"
stop_t=$(date +%s.%N)
if node_stop; then
	ok "node stops ($(elapsed "$stop_t") s)"
else
	not_ok "node stops: $node_stop_err"
fi
leftovers $pids
if [ ${#left[@]} -eq 0 ]; then
	ok "after stop: no process, cgroup, mount, bridge, rule, netns, sysctl or path of the node is left"
else
	not_ok "after stop, left behind: ${left[*]}"
fi
echo "1..$n"
