#!/usr/bin/env bash
# svcenv-webhook on real pods: on a real node (test/k8s/node), svcenv-webhook
# runs on the host (TLS on 127.0.0.1, certificates from
# manifests/gen-webhook-certs) and is registered by a
# MutatingWebhookConfiguration (failurePolicy Fail, reinvocation IfNeeded).
# A Deployment's pods, made by kube-controller-manager's replicaset
# controller, come back from the API server with the service variables in
# their spec; each running process has exactly the environment `svcenv env`
# predicts for the pod as the Deployment wrote it, and for the pod as
# admitted (the kubelet gives both the same). Sending an admitted pod to the
# webhook again changes nothing. A pod created before a Service does not see
# it, one created after does. A real reinvocation (a second webhook changes
# the pod after ours) adds nothing. A pod annotated svcenv.io/inject "false", and a
# container with envFrom of a ConfigMap (which the webhook, watching only
# Services, cannot see), are left to the kubelet.
#
# Needs root (else one SKIP line). KUBE_DIR: a control plane started by
# test/run-all (else one is started); the node is started and stopped here.
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=test/integration/node.bash
. test/integration/node.bash
# shellcheck source=test/integration/webhook.bash
. test/integration/webhook.bash
node_require_root node_webhook

suite_t0=$(date +%s.%N)
# Unique per run: the same control plane may run this twice.
NS=node-wh-$$
MWC=svcenv-node-wh-$$
MWC_PATH=/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations
tmp=$(mktemp -d /tmp/svcenv-node-wh.XXXXXX)
wh_pid='' extra_pid=''
cleanup() {
	[ -n "$wh_pid" ] && kill "$wh_pid" 2>/dev/null && wait "$wh_pid" 2>/dev/null
	[ -n "$extra_pid" ] && kill "$extra_pid" 2>/dev/null && wait "$extra_pid" 2>/dev/null
	[ -f "$KUBE_DIR/env" ] && kapi delete "$MWC_PATH/$MWC" >/dev/null 2>&1 &&
		kapi delete "$MWC_PATH/$MWC-zz" >/dev/null 2>&1
	node_cleanup "$NS"
	[ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
node_control_plane

# --- cluster state, the webhook, its registration --------------------------------
: >"$tmp/setup.err"
post() { # path, JSON on stdin
	kapi post "$1" - >/dev/null 2>>"$tmp/setup.err" || echo "post $1 failed" >>"$tmp/setup.err"
}
echo "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$NS\"}}" | post /api/v1/namespaces
svc() { # name, spec JSON
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"$1\"},\"spec\":$2}" |
		post "/api/v1/namespaces/$NS/services"
}
svc db '{"ports":[{"name":"pg","port":5432}]}'
svc web-api '{"ports":[{"name":"http","port":80},{"name":"metrics","port":9090,"protocol":"UDP"}]}'
# Its DB_SERVICE_HOST beats the service variable under the kubelet: had the
# webhook injected one into the envFrom container, it would win instead.
post "/api/v1/namespaces/$NS/configmaps" <<'EOF'
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"DB_SERVICE_HOST":"from-cm","color":"blue"}}
EOF
mkdir -p "$tmp/pki"
manifests/gen-webhook-certs "$tmp/pki" --ip 127.0.0.1 --days 2 >/dev/null 2>>"$tmp/setup.err" ||
	echo "gen-webhook-certs failed" >>"$tmp/setup.err"
if [ -s "$tmp/setup.err" ]; then
	not_ok "namespace, 2 Services, a ConfigMap and certificates: $(head -n 1 "$tmp/setup.err")"
	echo "1..$n"
	exit 1
fi
if ! webhook_start "$tmp/pki" "$tmp/webhook.log" --kubeconfig "$KUBE_DIR/kubeconfig"; then
	not_ok "svcenv-webhook --kubeconfig serves on 127.0.0.1"
	sed 's/^/# /' "$tmp/webhook.log" | tail -n 20
	echo "1..$n"
	exit 1
fi
wh_pid=$started_pid port=$started_port
webhook_config "$MWC" "$port" "$NS" Fail "$tmp/pki/cabundle" | kapi post "$MWC_PATH" - >/dev/null
check "svcenv-webhook on 127.0.0.1:$port registered; dry-run pods in $NS are mutated" \
	webhook_dry_run_has "$NS" '"svcenv.io/injected":"true"'

node_start

# --- pods ------------------------------------------------------------------------
# main: service references, one override of a service variable, and a
# reference to a Service that does not exist yet. cm: envFrom of the ConfigMap.
post "/apis/apps/v1/namespaces/$NS/deployments" <<EOF
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"app"},
 "spec":{"replicas":1,"selector":{"matchLabels":{"app":"app"}},
  "template":{"metadata":{"labels":{"app":"app"}},
   "spec":{"terminationGracePeriodSeconds":1,"containers":[
    {"name":"main","image":"$SHELL_IMAGE","imagePullPolicy":"Never",
     "command":["/bin/sh","-c","$NODE_REPORT; exec sleep 3600"],
     "env":[{"name":"DSN","value":"pg://\$(DB_SERVICE_HOST):\$(DB_SERVICE_PORT_PG)/x"},
      {"name":"WEB_API_SERVICE_PORT","value":"8080"},
      {"name":"LATE","value":"\$(LATE_SERVICE_HOST)"}]},
    {"name":"cm","image":"$SHELL_IMAGE","imagePullPolicy":"Never",
     "command":["/bin/sh","-c","$NODE_REPORT; exec sleep 3600"],
     "envFrom":[{"configMapRef":{"name":"cm"}}],
     "env":[{"name":"SEEN","value":"\$(DB_SERVICE_HOST)"}]}]}}}}
EOF
post "/api/v1/namespaces/$NS/pods" <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"optout","annotations":{"svcenv.io/inject":"false"}},
 "spec":{"terminationGracePeriodSeconds":1,"containers":[
  {"name":"main","image":"$SHELL_IMAGE","imagePullPolicy":"Never",
   "command":["/bin/sh","-c","$NODE_REPORT; exec sleep 3600"],
   "env":[{"name":"A","value":"\$(DB_SERVICE_HOST)"}]}]}}
EOF
if [ -s "$tmp/setup.err" ]; then
	not_ok "Deployment and opt-out pod created: $(head -n 1 "$tmp/setup.err")"
fi

# Reinvocation: an admitted pod, sent to the webhook again (as the API server
# does after a later webhook's change) while the Services are the same, gets
# no patch. Later, with a new Service, it would: that is the point of IfNeeded.
reinvoke_ok() { # pod
	jq -c --arg ns "$NS" '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
		request: {uid: "again", kind: {group: "", version: "v1", kind: "Pod"},
		resource: {group: "", version: "v1", resource: "pods"}, namespace: $ns,
		operation: "CREATE", object: .}}' "$tmp/$1.json" >"$tmp/$1.review"
	curl -sf --cacert "$tmp/pki/ca.crt" -H 'Content-Type: application/json' \
		--data-binary @"$tmp/$1.review" "https://127.0.0.1:$port/mutate?timeout=5s" >"$tmp/$1.again" &&
		jq -e '.response.uid == "again" and .response.allowed == true and .response.patch == null' \
			"$tmp/$1.again" >/dev/null && return 0
	jq -c '.response | .patch |= (if . then @base64d else . end)' "$tmp/$1.again" | cut -c1-600 | sed 's/^/# /'
	return 1
}

app_pods() { # names of the Deployment's pods, oldest first
	kapi get "/api/v1/namespaces/$NS/pods?labelSelector=app%3Dapp" 2>/dev/null |
		jq -r '.items | sort_by(.metadata.creationTimestamp, .metadata.name) | .[].metadata.name'
}
all_running() { # wanted number of Deployment pods: that many, and they and optout run
	local pods p
	pods=$(app_pods)
	[ "$(printf '%s' "$pods" | grep -c .)" = "$1" ] || return 1
	for p in $pods optout; do pod_running "$NS" "$p" || return 1; done
}
waited=$(date +%s.%N)
if until_ok 90 all_running 1; then
	ok "the Deployment's pod and the opt-out pod Running ($(elapsed "$waited") s after the POSTs)"
else
	not_ok "the Deployment's pod and the opt-out pod Running"
	kapi get "/api/v1/namespaces/$NS/pods" | jq -c '.items[] | {name: .metadata.name, status: .status.containerStatuses}' |
		sed 's/^/# /'
	kapi get "/api/v1/namespaces/$NS/events" | jq -r '.items[] | "\(.involvedObject.name): \(.message)"' | tail -n 5 |
		sed 's/^/# /'
fi
early=$(app_pods | head -n 1)
# What the kubelet had when the early pod started.
kapi get /api/v1/services >"$tmp/services.early.json"
kapi get "/api/v1/namespaces/$NS/pods/$early" >"$tmp/$early.json"
check "reinvocation: the early pod as admitted, reviewed again, gets no patch" reinvoke_ok "$early"

# A Service created now: the webhook sees it, then the Deployment scales up.
svc late '{"ports":[{"port":7000}]}'
check "the webhook sees the Service created after the first pod" webhook_dry_run_has "$NS" LATE_SERVICE_HOST
kapi patch "/apis/apps/v1/namespaces/$NS/deployments/app" '{"spec":{"replicas":2}}' >/dev/null
waited=$(date +%s.%N)
if until_ok 60 all_running 2; then
	ok "scaled to 2: the later pod Running ($(elapsed "$waited") s)"
else
	not_ok "scaled to 2: the later pod Running"
fi
later=$(app_pods | grep -vx "$early" | head -n 1)
kapi get /api/v1/services >"$tmp/services.later.json"
kapi get "/api/v1/namespaces/$NS/configmaps" >"$tmp/configmaps.json"
kapi get "/apis/apps/v1/namespaces/$NS/deployments/app" >"$tmp/deploy.json"
for p in "$early" "$later" optout; do kapi get "/api/v1/namespaces/$NS/pods/$p" >"$tmp/$p.json"; done
check "reinvocation: the later pod as admitted, reviewed again, gets no patch" reinvoke_ok "$later"

# --- the admitted pod specs ------------------------------------------------------
# The pod as the Deployment wrote it: the admitted one with each container's
# env from the template again.
original() { # pod -> JSON
	jq --slurpfile d "$tmp/deploy.json" '
		del(.metadata.annotations["svcenv.io/injected"]) |
		.spec.containers |= map(.name as $n |
			($d[0].spec.template.spec.containers[] | select(.name == $n) | .env) as $e |
			if $e == null then del(.env) else .env = $e end)' "$tmp/$1.json"
}
stored_env() { # pod-json container: NAME=VALUE lines in spec order
	jq -r --arg c "$2" '.spec.containers[] | select(.name == $c) | (.env // [])[] | "\(.name)=\(.value // "<valueFrom>")"' "$1"
}
# An injecting webhook puts the namespace's service variables svcenv env
# predicts, minus the names the container sets, in front of its own env.
injected_ok() { # pod when(early|later)
	local pod=$1 when=$2
	original "$pod" >"$tmp/$pod.orig.json"
	"$SVCENV/svcenv" env -f "$tmp/services.$when.json" -n "$NS" >"$tmp/svcvars.$when" || return 1
	stored_env "$tmp/$pod.orig.json" main >"$tmp/$pod.own"
	{ awk -F= -v names="$(cut -d= -f1 "$tmp/$pod.own" | tr '\n' ' ')" \
		'BEGIN { n = split(names, a, " "); for (i = 1; i <= n; i++) own[a[i]] = 1 } !($1 in own)' \
		"$tmp/svcvars.$when"
	  cat "$tmp/$pod.own"; } >"$tmp/$pod.want-spec"
	stored_env "$tmp/$pod.json" main >"$tmp/$pod.got-spec"
	diff "$tmp/$pod.want-spec" "$tmp/$pod.got-spec" >"$tmp/$pod.spec-diff" || {
		sed 's/^/# /' "$tmp/$pod.spec-diff" | head -n 10
		return 1
	}
	jq -e '.metadata.annotations["svcenv.io/injected"] == "true"' "$tmp/$pod.json" >/dev/null
}
check "early pod ($early) spec: main got the service variables in front of its own, pod marked injected" \
	injected_ok "$early" early
check "later pod ($later) spec: the same, LATE_* included" injected_ok "$later" later
check "early pod spec: no LATE_* (the Service came after it)" \
	eval '! stored_env "$tmp/$early.json" main | grep -q "^LATE_"'
check "later pod spec: LATE_SERVICE_HOST injected" \
	eval 'stored_env "$tmp/$later.json" main | grep -q "^LATE_SERVICE_HOST="'
untouched() { # pod container: the stored env is the template's
	[ "$(stored_env "$tmp/$1.json" "$2")" = "$(stored_env "$tmp/$1.orig.json" "$2")" ]
}
check "envFrom of a ConfigMap the webhook cannot see: that container left alone (both pods)" \
	eval 'untouched "$early" cm && untouched "$later" cm'
check "svcenv.io/inject \"false\": pod untouched (its own env only, not marked)" \
	test "$(jq -c '[.spec.containers[0].env, .metadata.annotations["svcenv.io/injected"]]' "$tmp/optout.json")" = \
	'[[{"name":"A","value":"$(DB_SERVICE_HOST)"}],null]'


# --- the running processes -------------------------------------------------------
# Each container's process against svcenv env, on the Services the kubelet had
# when the pod started, for the original pod and for the admitted one.
compare() { # pod container when label
	local pod=$1 c=$2 when=$3 label=$4 got=$tmp/$1.$2.process f
	if ! until_env "$NS" "$pod" "$c" >"$got"; then
		not_ok "$label/$c: no environment in the container's log"
		return
	fi
	cp "$got" "$got.saved"
	for f in orig admitted; do
		local pod_file=$tmp/$pod.json
		[ $f = orig ] && pod_file=$tmp/$pod.orig.json
		if ! "$SVCENV/svcenv" env -f "$tmp/services.$when.json" -f "$tmp/configmaps.json" \
			--pod-file "$pod_file" --container "$c" >"$tmp/raw" 2>"$tmp/err"; then
			not_ok "$label/$c: svcenv env of the $f pod failed: $(head -n 1 "$tmp/err")"
			continue
		fi
		sort "$tmp/raw" >"$tmp/$pod.$c.$f"
		cp "$got.saved" "$got"
		env_compare "$label/$c, $([ $f = orig ] && echo "the pod as created" ||
			echo "the pod as admitted"): the process has" "$tmp/$pod.$c.$f" "$got"
	done
}
cp "$tmp/optout.json" "$tmp/optout.orig.json"
compare "$early" main early "early pod"
compare "$early" cm early "early pod"
compare "$later" main later "later pod"
compare "$later" cm later "later pod"
compare optout main early "opt-out pod"

# Spot checks that the comparison is not vacuous.
late_ip=$(jq -r --arg ns "$NS" '.items[] | select(.metadata.namespace == $ns and .metadata.name == "late") |
	.spec.clusterIP' "$tmp/services.later.json")
check "early pod's process: no LATE_* variables, \$(LATE_SERVICE_HOST) left as written" \
	eval 'grep -qx "LATE=\$(LATE_SERVICE_HOST)" "$tmp/$early.main.process.saved" &&
		! grep -q "^LATE_SERVICE_HOST=" "$tmp/$early.main.process.saved"'
check "later pod's process: LATE=$late_ip, the new Service's address" \
	grep -qx "LATE=$late_ip" "$tmp/$later.main.process.saved"
check "later pod's process: WEB_API_SERVICE_PORT is the container's own 8080" \
	grep -qx "WEB_API_SERVICE_PORT=8080" "$tmp/$later.main.process.saved"
check "envFrom container's process: the ConfigMap's DB_SERVICE_HOST wins, as under the kubelet" \
	eval 'grep -qx "DB_SERVICE_HOST=from-cm" "$tmp/$later.cm.process.saved" &&
		grep -qx "SEEN=from-cm" "$tmp/$later.cm.process.saved"'

# --- a real reinvocation --------------------------------------------------------------
# A second webhook, called after ours (configurations run in name order),
# changes the pod: a second svcenv-webhook whose only Service, "extra", the
# cluster does not have, for pods labelled reinvoke=yes. The API server then
# calls ours again (IfNeeded), which must find nothing to add.
cat >"$tmp/extra.json" <<EOF
{"apiVersion":"v1","kind":"Service","metadata":{"name":"extra","namespace":"$NS"},
 "spec":{"clusterIP":"10.96.254.254","ports":[{"port":1234}]}}
EOF
metric() { # result: our webhook's count of reviews answered so
	curl -sf --cacert "$tmp/pki/ca.crt" "https://127.0.0.1:$port/metrics" |
		awk -v r="svcenv_webhook_admissions_total{result=\"$1\"}" '$1 == r { print $2 }'
}
reinvoked_pod='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"again","labels":{"reinvoke":"yes"}},
 "spec":{"containers":[{"name":"c","image":"none","env":[{"name":"DSN","value":"$(DB_SERVICE_HOST)"}]}]}}'
if webhook_start "$tmp/pki" "$tmp/extra.log" -f "$tmp/extra.json"; then
	extra_pid=$started_pid
	webhook_config "$MWC-zz" "$started_port" "$NS" Fail "$tmp/pki/cabundle" |
		jq '.webhooks[0] |= (.name = "extra.svcenv.io" | .reinvocationPolicy = "Never" |
			.objectSelector = {matchLabels: {reinvoke: "yes"}})' | kapi post "$MWC_PATH" - >/dev/null
	dry_again() { printf '%s' "$reinvoked_pod" | kapi post "/api/v1/namespaces/$NS/pods?dryRun=All" - 2>/dev/null; }
	extra_active() { dry_again | grep -q EXTRA_SERVICE_HOST; }
	until_ok 10 extra_active
	patched=$(metric patched) unchanged=$(metric unchanged)
	dry_again >"$tmp/again.json"
	jq -r '.spec.containers[0].env[].name' "$tmp/again.json" >"$tmp/again.names"
	check "reinvoked after another webhook's change: ours answered twice, the second time with no patch" \
		test "$(metric patched)/$(metric unchanged)" = "$((patched + 1))/$((unchanged + 1))"
	check "... and the pod has both webhooks' variables, each name once, the container's DSN last" \
		eval 'grep -qx DB_SERVICE_HOST "$tmp/again.names" && grep -qx EXTRA_SERVICE_HOST "$tmp/again.names" &&
			[ -z "$(sort "$tmp/again.names" | uniq -d)" ] && [ "$(tail -n 1 "$tmp/again.names")" = DSN ]'
	kapi delete "$MWC_PATH/$MWC-zz" >/dev/null
	kill "$extra_pid" && wait "$extra_pid"
	extra_pid=''
else
	not_ok "a second svcenv-webhook (-f) serves"
	sed 's/^/# /' "$tmp/extra.log" | tail -n 5
fi

# --- the end -------------------------------------------------------------------------
kapi delete "$MWC_PATH/$MWC" >/dev/null
kill "$wh_pid" && wait "$wh_pid"
rc=$? wh_pid=''
check "svcenv-webhook exits 0 on SIGTERM" test $rc = 0
gone() { ! kapi get "/api/v1/namespaces/$NS" >/dev/null 2>&1; }
kapi delete "/api/v1/namespaces/$NS" >/dev/null
check "namespace deleted (its pods stopped by the kubelet)" until_ok 60 gone
if node_stop; then ok "node stops"; else not_ok "node stops: $node_stop_err"; fi
echo "# suite time: $(elapsed "$suite_t0") s"
echo "1..$n"
