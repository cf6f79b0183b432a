# svcenv-webhook as a host process for integration tests: started on a free
# loopback port with certificates from manifests/gen-webhook-certs, and
# registered with the API server by a MutatingWebhookConfiguration.
# Needs SVCENV (the bin dir) and kapi() from the sourcing script.

# webhook_start PKI LOG ARGS...: starts svcenv-webhook with PKI/tls.{crt,key}
# on a free port of 127.0.0.1 (ARGS: its Service source, e.g. --kubeconfig);
# sets started_pid and started_port once /readyz answers (both empty and
# status 1 when it did not come up).
webhook_start() {
	local pki=$1 log=$2 p
	shift 2
	started_port="" started_pid=""
	for _ in 1 2 3 4 5; do
		p=$((20000 + RANDOM % 20000))
		"$SVCENV/svcenv-webhook" "$@" --address 127.0.0.1 --port "$p" \
			--tls-cert-file "$pki/tls.crt" --tls-private-key-file "$pki/tls.key" \
			-v 2 >"$log" 2>&1 &
		started_pid=$!
		for _ in $(seq 100); do
			if curl -sf --cacert "$pki/ca.crt" "https://127.0.0.1:$p/readyz" >/dev/null 2>&1; then
				started_port=$p
				return 0
			fi
			kill -0 "$started_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill "$started_pid" 2>/dev/null
		wait "$started_pid" 2>/dev/null
		started_pid=""
	done
	return 1
}

# webhook_config NAME PORT NS FAILURE_POLICY CABUNDLE_FILE: the JSON of a
# MutatingWebhookConfiguration sending pod CREATEs in namespace NS to
# https://127.0.0.1:PORT/mutate, with the manifests' reinvocation policy.
webhook_config() {
	cat <<EOT
{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfiguration",
 "metadata":{"name":"$1"},
 "webhooks":[{"name":"env.svcenv.io","admissionReviewVersions":["v1"],"sideEffects":"None",
   "timeoutSeconds":5,"failurePolicy":"$4","reinvocationPolicy":"IfNeeded",
   "clientConfig":{"url":"https://127.0.0.1:$2/mutate","caBundle":"$(cat "$5")"},
   "rules":[{"operations":["CREATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"]}],
   "namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"In","values":["$3"]}]}}]}
EOT
}

# webhook_dry_run_has NS PATTERN: polls (10 s) dry-run creates of a small pod
# in NS until the admitted pod contains PATTERN. The API server picks up a
# new configuration, and the webhook a new Service, asynchronously.
webhook_dry_run_has() {
	local pod="{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"probe\"},
 \"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"none\"}]}}"
	for _ in $(seq 100); do
		printf '%s' "$pod" | kapi post "/api/v1/namespaces/$1/pods?dryRun=All" - 2>/dev/null |
			grep -q "$2" && return 0
		sleep 0.1
	done
	return 1
}
