#!/usr/bin/env bash
# svcenv-webhook against a real kube-apiserver: the API server calls the
# webhook over HTTPS (test CA from manifests/gen-webhook-certs) for pods
# created through it; the pods come back with the env `svcenv env` predicts.
# Also: failurePolicy with the webhook down, certificate rotation while
# serving, every manifest in manifests/ accepted by a server-side dry run,
# and the RBAC of each ServiceAccount checked by impersonation.
#
# KUBE_DIR: a control plane started by test/run-all (else one is started).
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/cli/lib.bash # TAP: ok, not_ok, check

tmp=$(mktemp -d /tmp/svcenv-wh.XXXXXX)
own_cp=0
wh_pid=""
cleanup() {
        [ -n "$wh_pid" ] && kill "$wh_pid" 2>/dev/null && wait "$wh_pid" 2>/dev/null
        [ "$own_cp" = 1 ] && test/k8s/controlplane stop "$KUBE_DIR" >/dev/null 2>&1
        rm -rf "$tmp"
}
trap cleanup EXIT
if [ -z "${KUBE_DIR:-}" ]; then
        KUBE_DIR=$tmp/kube
        test/k8s/controlplane start "$KUBE_DIR" >"$tmp/cp.log" 2>&1 || {
                not_ok "control plane starts"
                tail -20 "$tmp/cp.log" | sed 's/^/# /'
                exit 1
        }
        own_cp=1
fi
# shellcheck disable=SC1091
source "$KUBE_DIR/env"
kapi() { test/k8s/kapi "$KUBE_DIR" "$@"; }
# shellcheck source=test/integration/webhook.bash
. test/integration/webhook.bash
# curl as admin, or impersonating USER: acurl [--as USER] METHOD PATH [BODY-FILE]
acurl() {
        local as=()
        if [ "$1" = --as ]; then
                as=(-H "Impersonate-User: $2")
                shift 2
        fi
        local method=$1 path=$2 body=${3:-}
        local data=()
        [ -n "$body" ] && data=(--data-binary "@$body" -H "Content-Type: application/yaml")
        curl -sS -o "$tmp/acurl.out" -w '%{http_code}' --cacert "$CA_FILE" \
                -H "Authorization: Bearer $ADMIN_TOKEN" "${as[@]}" -X "$method" "${data[@]}" \
                "$APISERVER_URL$path"
}

# ---- webhook up, with a test CA ----
manifests/gen-webhook-certs "$tmp/pki" --ip 127.0.0.1 --days 2 >/dev/null
ns=wh-test
kapi post /api/v1/namespaces - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"$ns"}}
EOF
for svc in '"db","ports":[{"name":"pg","port":5432}]' \
        '"cache","ports":[{"port":6379,"protocol":"UDP"}]' \
        '"web-api","ports":[{"name":"http","port":80},{"name":"metrics","port":9090}]' \
        '"hl","clusterIP":"None","ports":[{"port":80}]'; do
        name=${svc%%,*}
        kapi post "/api/v1/namespaces/$ns/services" - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Service","metadata":{"name":$name,"namespace":"$ns"},
 "spec":{"selector":{"app":"x"},${svc#*,}}}
EOF
done
# The Service source until the informer is wired: the API server's own list.
kapi get /api/v1/services >"$tmp/services.json"
check "services listed from the API server" \
        test "$("$SVCENV/svcenv" get -f "$tmp/services.json" svc -n "$ns" --no-headers | wc -l)" = 4

# Offline mode (-f): the daemon answers exactly what `svcenv admit` prints.
if webhook_start "$tmp/pki" "$tmp/webhook-f.log" -f "$tmp/services.json"; then
        ok "svcenv-webhook -f serves /readyz"
        pod='{"metadata":{"name":"x"},"spec":{"containers":[{"name":"a","env":[{"name":"A","value":"1"}]}]}}'
        printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"%s","operation":"CREATE","object":%s}}' "$ns" "$pod" >"$tmp/review.json"
        curl -sf --cacert "$tmp/pki/ca.crt" -H 'Content-Type: application/json' \
                --data-binary @"$tmp/review.json" "https://127.0.0.1:$started_port/mutate?timeout=5s" >"$tmp/daemon.out"
        "$SVCENV/svcenv" admit -f "$tmp/services.json" <"$tmp/review.json" >"$tmp/cli.out"
        check "daemon response = svcenv admit output (same code path)" cmp -s "$tmp/daemon.out" "$tmp/cli.out"
        code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/pki/ca.crt" -H 'Content-Type: application/json' \
                --data 'not json' "https://127.0.0.1:$started_port/mutate")
        check "malformed review: HTTP 400" test "$code" = 400
        code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/pki/ca.crt" -H 'Content-Type: text/plain' \
                --data-binary @"$tmp/review.json" "https://127.0.0.1:$started_port/mutate")
        check "wrong content type: HTTP 415" test "$code" = 415
        head -c 5000000 /dev/zero | tr '\0' ' ' >"$tmp/big"
        code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/pki/ca.crt" -H 'Content-Type: application/json' \
                --data-binary @"$tmp/big" "https://127.0.0.1:$started_port/mutate")
        check "body over the cap: HTTP 413" test "$code" = 413
        if curl -sf --tls-max 1.1 --cacert "$tmp/pki/ca.crt" "https://127.0.0.1:$started_port/livez" >/dev/null 2>&1; then
                not_ok "TLS 1.1 refused"
        else
                ok "TLS 1.1 refused"
        fi
        kill "$started_pid" && wait "$started_pid"
        check "svcenv-webhook -f exits 0 on SIGTERM" test $? = 0
else
        not_ok "svcenv-webhook -f serves /readyz"
        sed 's/^/# /' "$tmp/webhook-f.log"
fi

# Online mode: Services from the API server (informer).
if ! webhook_start "$tmp/pki" "$tmp/webhook.log" --kubeconfig "$KUBE_DIR/kubeconfig"; then
        not_ok "svcenv-webhook --kubeconfig: ready after the Service informer synced"
        sed 's/^/# /' "$tmp/webhook.log"
        exit 1
fi
wh_pid=$started_pid port=$started_port
ok "svcenv-webhook --kubeconfig: ready after the Service informer synced"
check "metrics count the API server's Services" \
        grep -qx "svcenv_webhook_services $(jq '.items|length' "$tmp/services.json")" \
        <(curl -sf --cacert "$tmp/pki/ca.crt" "https://127.0.0.1:$port/metrics")

mwc() { webhook_config svcenv-test "$port" "$ns" "$@"; } # mwc FAILURE_POLICY CABUNDLE_FILE
mwc Fail "$tmp/pki/cabundle" | kapi post /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations - >/dev/null
check "MutatingWebhookConfiguration created" test $? -eq 0

pod_json() { # pod_json NAME
        cat <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"$1","namespace":"$ns"},
 "spec":{"initContainers":[{"name":"init","image":"busybox"}],
  "containers":[{"name":"app","image":"busybox","env":[
     {"name":"DSN","value":"pg://\$(DB_SERVICE_HOST):\$(DB_SERVICE_PORT)/x"},
     {"name":"WEB_API_SERVICE_PORT","value":"8080"},
     {"name":"ESCAPED","value":"\$\$(DB_SERVICE_HOST)"}]},
   {"name":"side","image":"busybox"}]}}
EOF
}

# The configuration reaches the API server's webhook manager asynchronously:
# dry-run creates until one comes back mutated.
mutated=0
for _ in $(seq 100); do
        if pod_json probe | kapi post "/api/v1/namespaces/$ns/pods?dryRun=All" - 2>/dev/null |
                grep -q '"svcenv.io/injected":"true"'; then
                mutated=1
                break
        fi
        sleep 0.1
done
check "dry-run pod create is mutated (configuration active)" test $mutated = 1

pod_json p1 >"$tmp/p1.json"
kapi post "/api/v1/namespaces/$ns/pods" "$tmp/p1.json" >/dev/null
kapi get "/api/v1/namespaces/$ns/pods/p1" >"$tmp/p1.got.json"
check "pod created through the API server is annotated svcenv.io/injected" \
        grep -q '"svcenv.io/injected":"true"' "$tmp/p1.got.json"

# Each container's env as stored = the service variables `svcenv env`
# predicts for the namespace, minus the names the container sets, in front
# of the container's own entries.
"$SVCENV/svcenv" env -f "$tmp/services.json" -n "$ns" >"$tmp/svcvars"
for c in init app side; do
        list=initContainers
        [ "$c" = init ] || list=containers
        jq -r --arg c "$c" ".spec.$list[] | select(.name==\$c) | .env[] | \"\(.name)=\(.value)\"" \
                "$tmp/p1.got.json" >"$tmp/env.$c"
        jq -r --arg c "$c" ".spec.$list[] | select(.name==\$c) | (.env // [])[] | \"\(.name)=\(.value)\"" \
                "$tmp/p1.json" >"$tmp/own.$c"
        cut -d= -f1 "$tmp/own.$c" >"$tmp/own-names.$c"
        { awk -F= -v names="$(tr '\n' ' ' <"$tmp/own-names.$c")" \
                'BEGIN { n = split(names, a, " "); for (i = 1; i <= n; i++) skip[a[i]] = 1 }
                 !($1 in skip)' "$tmp/svcvars"
          cat "$tmp/own.$c"; } >"$tmp/want.$c"
        if diff -u "$tmp/want.$c" "$tmp/env.$c" >"$tmp/diff.$c"; then
                ok "container $c: stored env = predicted service variables, then its own"
        else
                not_ok "container $c: stored env = predicted service variables, then its own"
                sed 's/^/# /' "$tmp/diff.$c" | head -20
        fi
        # what the kubelet computes from the mutated pod is what it computes
        # from the original one
        "$SVCENV/svcenv" env -f "$tmp/services.json" --pod-file "$tmp/p1.json" --container "$c" |
                sort >"$tmp/kubelet-orig.$c"
        "$SVCENV/svcenv" env -f "$tmp/services.json" --pod-file "$tmp/p1.got.json" --container "$c" |
                sort >"$tmp/kubelet-got.$c"
        if diff -u "$tmp/kubelet-orig.$c" "$tmp/kubelet-got.$c" >"$tmp/kdiff.$c"; then
                ok "container $c: kubelet environment unchanged by the mutation"
        else
                not_ok "container $c: kubelet environment unchanged by the mutation"
                sed 's/^/# /' "$tmp/kdiff.$c" | head -20
        fi
done
check "\$(VAR) of the app container expands to the injected service" \
        grep -qx "DSN=pg://$(jq -r '.items[]|select(.metadata.name=="db" and .metadata.namespace=="'$ns'")|.spec.clusterIP' "$tmp/services.json"):5432/x" \
        <("$SVCENV/svcenv" env -f "$tmp/services.json" --pod-file "$tmp/p1.got.json" --container app)
check "the pod's own WEB_API_SERVICE_PORT wins" \
        test "$(jq -r '[.spec.containers[0].env[]|select(.name=="WEB_API_SERVICE_PORT")]|length' "$tmp/p1.got.json")" = 1

# a Service created while the webhook runs reaches it through the watch
kapi post "/api/v1/namespaces/$ns/services" - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Service","metadata":{"name":"late","namespace":"$ns"},
 "spec":{"ports":[{"port":7000}]}}
EOF
seen=0
for _ in $(seq 100); do
        if pod_json probe | kapi post "/api/v1/namespaces/$ns/pods?dryRun=All" - 2>/dev/null |
                grep -q '"LATE_SERVICE_HOST"'; then
                seen=1
                break
        fi
        sleep 0.1
done
check "a Service created after start is injected (watch)" test $seen = 1

# enableServiceLinks: false: only the master service, as the kubelet does
pod_json p4 | jq '.spec.enableServiceLinks=false' >"$tmp/p4.json"
kapi post "/api/v1/namespaces/$ns/pods" "$tmp/p4.json" >"$tmp/p4.got.json"
check "enableServiceLinks=false: only KUBERNETES_* injected" \
        test "$(jq -r '[.spec.containers[1].env[].name | select(startswith("KUBERNETES_") | not)] | length' "$tmp/p4.got.json")/$(jq '.spec.containers[1].env | length' "$tmp/p4.got.json")" = 0/8
# svcenv.io/services: only the named ones
pod_json p5 | jq '.metadata.annotations={"svcenv.io/services":"db"}' >"$tmp/p5.json"
kapi post "/api/v1/namespaces/$ns/pods" "$tmp/p5.json" >"$tmp/p5.got.json"
check "svcenv.io/services=db: only DB_* injected" \
        test "$(jq -r '[.spec.containers[1].env[].name | select(startswith("DB_") | not)] | length' "$tmp/p5.got.json")/$(jq '.spec.containers[1].env | length' "$tmp/p5.got.json")" = 0/8

# opt-out annotation
pod_json p2 | jq '.metadata.annotations={"svcenv.io/inject":"false"}' >"$tmp/p2.json"
kapi post "/api/v1/namespaces/$ns/pods" "$tmp/p2.json" >"$tmp/p2.got.json"
check "annotation svcenv.io/inject=false: pod untouched" \
        test "$(jq -c '.spec.containers[1].env' "$tmp/p2.got.json")" = null

# ---- certificate rotation while serving ----
old_fp=$(openssl s_client -connect "127.0.0.1:$port" -servername localhost </dev/null 2>/dev/null |
        openssl x509 -noout -fingerprint -sha256)
mkdir -p "$tmp/pki2"
manifests/gen-webhook-certs "$tmp/pki2" --ip 127.0.0.1 --days 2 >/dev/null
cp "$tmp/pki2/tls.key" "$tmp/pki/tls.key.tmp" && cp "$tmp/pki2/tls.crt" "$tmp/pki/tls.crt.tmp"
mv "$tmp/pki/tls.key.tmp" "$tmp/pki/tls.key" && mv "$tmp/pki/tls.crt.tmp" "$tmp/pki/tls.crt"
new_ok=0
for _ in $(seq 40); do
        if curl -sf --cacert "$tmp/pki2/ca.crt" "https://127.0.0.1:$port/livez" >/dev/null 2>&1; then
                new_ok=1
                break
        fi
        sleep 0.1
done
check "after the files change, new connections get the new certificate" test $new_ok = 1
new_fp=$(openssl s_client -connect "127.0.0.1:$port" -servername localhost </dev/null 2>/dev/null |
        openssl x509 -noout -fingerprint -sha256)
check "certificate fingerprint changed" test -n "$new_fp" -a "$new_fp" != "$old_fp"
check "the old CA no longer verifies" \
        bash -c "! curl -sf --cacert '$tmp/pki/ca.crt' https://127.0.0.1:$port/livez >/dev/null 2>&1"
check "reload counted in /metrics" \
        grep -qx 'svcenv_webhook_cert_reloads_total{result="success"} 1' \
        <(curl -sf --cacert "$tmp/pki2/ca.crt" "https://127.0.0.1:$port/metrics")
# the API server, given the new CA, keeps getting pods mutated
mwc Fail "$tmp/pki2/cabundle" | kapi put /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/svcenv-test - >/dev/null 2>&1 ||
        { kapi get /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/svcenv-test |
                jq --arg b "$(cat "$tmp/pki2/cabundle")" '.webhooks[0].clientConfig.caBundle=$b' |
                kapi put /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/svcenv-test - >/dev/null; }
mutated=0
for _ in $(seq 100); do
        if pod_json probe | kapi post "/api/v1/namespaces/$ns/pods?dryRun=All" - 2>/dev/null |
                grep -q '"svcenv.io/injected":"true"'; then
                mutated=1
                break
        fi
        sleep 0.1
done
check "API server with the new caBundle: pods mutated over the rotated certificate" test $mutated = 1
check "metrics count patched admissions" \
        grep -qE '^svcenv_webhook_admissions_total\{result="patched"\} [1-9]' \
        <(curl -sf --cacert "$tmp/pki2/ca.crt" "https://127.0.0.1:$port/metrics")

# ---- webhook down ----
kill "$wh_pid" && wait "$wh_pid"
rc=$?
wh_pid=""
check "svcenv-webhook exits 0 on SIGTERM" test $rc = 0
if pod_json p3 | kapi post "/api/v1/namespaces/$ns/pods" - >/dev/null 2>"$tmp/p3.err"; then
        not_ok "failurePolicy Fail, webhook down: pod refused"
else
        check "failurePolicy Fail, webhook down: pod refused" grep -q 'failed calling webhook' "$tmp/p3.err"
fi
kapi get /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/svcenv-test |
        jq '.webhooks[0].failurePolicy="Ignore"' |
        kapi put /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/svcenv-test - >/dev/null
created=0
for _ in $(seq 100); do
        if pod_json p3 | kapi post "/api/v1/namespaces/$ns/pods" - >"$tmp/p3.got.json" 2>/dev/null; then
                created=1
                break
        fi
        sleep 0.1
done
check "failurePolicy Ignore, webhook down: pod created" test $created = 1
check "... and untouched (no env added, no annotation)" \
        test "$(jq -c '[.spec.containers[1].env, .metadata.annotations["svcenv.io/injected"]]' "$tmp/p3.got.json")" = '[null,null]'
kapi delete /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/svcenv-test >/dev/null

# ---- manifests: server-side dry run, RBAC by impersonation ----
# split every manifest into one file per object
mkdir -p "$tmp/objs"
i=0
for f in manifests/*.yaml; do
        [ "$(basename "$f")" = kustomization.yaml ] && continue
        awk -v dir="$tmp/objs" -v base="$(basename "$f" .yaml)" '
                BEGIN { k = 0; file = sprintf("%s/%s-%02d.yaml", dir, base, k) }
                /^---/ { k++; file = sprintf("%s/%s-%02d.yaml", dir, base, k); next }
                { print > file }' "$f"
done
resource_of() {
        case $1 in
        Namespace) echo namespaces ;; ServiceAccount) echo serviceaccounts ;;
        Service) echo services ;; Secret) echo secrets ;; ConfigMap) echo configmaps ;;
        ClusterRole) echo clusterroles ;; ClusterRoleBinding) echo clusterrolebindings ;;
        Role) echo roles ;; RoleBinding) echo rolebindings ;;
        Deployment) echo deployments ;; DaemonSet) echo daemonsets ;;
        PodDisruptionBudget) echo poddisruptionbudgets ;;
        MutatingWebhookConfiguration) echo mutatingwebhookconfigurations ;;
        *) echo "" ;;
        esac
}
# the namespace and RBAC objects are created for real (impersonation needs
# them); everything else is a dry run
for obj in "$tmp"/objs/namespace-*.yaml "$tmp"/objs/rbac-*.yaml "$tmp"/objs/*.yaml; do
        grep -q '^kind:' "$obj" || continue
        [ -e "$obj.done" ] && continue
        : >"$obj.done"
        api=$(awk '/^apiVersion:/{print $2; exit}' "$obj")
        kind=$(awk '/^kind:/{print $2; exit}' "$obj")
        name=$(awk '/^  name:/{print $2; exit}' "$obj")
        objns=$(awk '/^metadata:/{m=1; next} m && /^[^ ]/{m=0} m && /^  namespace:/{print $2; exit}' "$obj")
        case $api in
        cert-manager.io/*)
                ok "manifest $kind $name # SKIP cert-manager CRDs are not installed in the test control plane"
                continue ;;
        esac
        res=$(resource_of "$kind")
        if [ -z "$res" ]; then
                not_ok "manifest $kind $name: no API path known to the test"
                continue
        fi
        if [ "$api" = v1 ]; then base=/api/v1; else base=/apis/$api; fi
        [ -n "$objns" ] && base=$base/namespaces/$objns
        dry="?dryRun=All"
        case $kind in Namespace | ServiceAccount | ClusterRole* | Role | RoleBinding) dry="" ;; esac
        code=$(acurl POST "$base/$res$dry" "$obj")
        if [ "$code" = 201 ] || [ "$code" = 200 ]; then
                ok "manifest $kind $objns/$name accepted by the API server${dry:+ (dry run)}"
        else
                not_ok "manifest $kind $objns/$name accepted by the API server (HTTP $code)"
                head -c 600 "$tmp/acurl.out" | sed 's/^/# /'
                echo
        fi
done

cannot() { ! can "$@"; }
sa() { echo "system:serviceaccount:svcenv-system:svcenv-$1"; }
can() { # can WHO METHOD PATH [BODY]: expects allowed
        local code
        code=$(acurl --as "$(sa "$1")" "$2" "$3" "${4:-}")
        case $code in 401 | 403) return 1 ;; *) return 0 ;; esac
}
cat >"$tmp/slice.yaml" <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: rbac-probe, namespace: $ns, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
endpoints: []
EOF
cat >"$tmp/ep.yaml" <<EOF
apiVersion: v1
kind: Endpoints
metadata: {name: rbac-probe, namespace: $ns}
EOF
cat >"$tmp/lease.yaml" <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: svcenv-controller, namespace: svcenv-system}
spec: {holderIdentity: probe}
EOF
cat >"$tmp/event.yaml" <<EOF
apiVersion: v1
kind: Event
metadata: {name: rbac-probe, namespace: $ns}
involvedObject: {kind: Service, name: db, namespace: $ns}
reason: Probe
message: rbac probe
EOF
check "RBAC webhook: list services" can webhook GET /api/v1/services
check "RBAC webhook: no pods" cannot webhook GET /api/v1/pods
check "RBAC webhook: no secrets" cannot webhook GET /api/v1/secrets
check "RBAC webhook: cannot write endpointslices" cannot webhook POST "/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices?dryRun=All" $tmp/slice.yaml
for r in services pods nodes; do
        check "RBAC controller: list $r" can controller GET "/api/v1/$r"
done
check "RBAC controller: create endpointslices" can controller POST "/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices?dryRun=All" "$tmp/slice.yaml"
check "RBAC controller: create endpoints" can controller POST "/api/v1/namespaces/$ns/endpoints?dryRun=All" "$tmp/ep.yaml"
check "RBAC controller: create its lease" can controller POST "/apis/coordination.k8s.io/v1/namespaces/svcenv-system/leases?dryRun=All" "$tmp/lease.yaml"
check "RBAC controller: create events" can controller POST "/api/v1/namespaces/$ns/events?dryRun=All" "$tmp/event.yaml"
check "RBAC controller: no leases outside its namespace" cannot controller GET /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x
check "RBAC controller: no secrets" cannot controller GET /api/v1/secrets
for p in /api/v1/services /apis/discovery.k8s.io/v1/endpointslices /api/v1/nodes; do
        check "RBAC proxy: list $p" can proxy GET "$p"
done
check "RBAC proxy: create events" can proxy POST "/api/v1/namespaces/$ns/events?dryRun=All" "$tmp/event.yaml"
check "RBAC proxy: cannot write endpointslices" cannot proxy POST "/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices?dryRun=All" $tmp/slice.yaml
check "RBAC proxy: no pods" cannot proxy GET /api/v1/pods
