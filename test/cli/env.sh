# svcenv env: goldens on the demo cluster, formats, --explain, errors, size guard.
. "$(dirname "$0")/lib.bash"
demo=manifests/examples/demo-cluster.yaml
g=test/golden/env
e="$SVCENV/svcenv env -f $demo"
golden "frontend web container" $g/frontend-web.txt $e -n shop --pod frontend-7c8d-aaaaa --container web
golden "frontend, both containers under headers" $g/frontend-all.txt $e -n shop --pod frontend-7c8d-aaaaa
golden "batch-runner: links off keeps only the master service" $g/batch-runner.txt $e -n shop --pod batch-runner
golden "payments: secrets, optional missing key" $g/payments.txt $e -n shop --pod payments-4a5b-aaaaa
golden "hello in default: forward reference stays literal" $g/hello.txt $e -n default --pod hello-6d9f7-abcde
golden "-n monitoring alone: the namespace's service variables" $g/monitoring.txt $e -n monitoring
golden "-o json" $g/frontend-web.json $e -n shop --pod frontend-7c8d-aaaaa --container web -o json
golden "-o json with several containers" $g/frontend-all.json $e -n shop --pod frontend-7c8d-aaaaa -o json
golden "-o shell" $g/frontend-web.sh $e -n shop --pod frontend-7c8d-aaaaa --container web -o shell
golden "--explain" $g/frontend-web-explain.txt $e -n shop --pod frontend-7c8d-aaaaa --container web --explain
golden "--pod-file with an init container" $g/pod-file.txt $e --pod-file $g/input-pod.yaml
golden "collision: --explain names the loser" $g/collision-explain.txt \
        "$SVCENV/svcenv" env -f $g/input-collision.yaml -n infra --pod client --explain
golden "collision: -o json --explain lists overrides" $g/collision.json \
        "$SVCENV/svcenv" env -f $g/input-collision.yaml -n infra --pod client -o json --explain

# -o shell output is valid sh that sets exactly the values of -o env
out=$(env -i sh -c "$($e -n shop --pod frontend-7c8d-aaaaa --container web -o shell)
env" | grep -v '^PWD=\|^SHLVL=\|^_=' | sort)
want=$($e -n shop --pod frontend-7c8d-aaaaa --container web | grep -v '^SHOP_log-level=' | sort)
if [ "$out" = "$want" ]; then ok "-o shell round-trips through sh"; else not_ok "-o shell round-trips through sh"; fi

# -o json is valid JSON with the same names and values as -o env
if command -v python3 >/dev/null; then
        got=$($e -n shop --pod frontend-7c8d-aaaaa --container web -o json |
                python3 -c 'import json,sys; [print(v["name"]+"="+v["value"]) for v in json.load(sys.stdin)]')
        if [ "$got" = "$($e -n shop --pod frontend-7c8d-aaaaa --container web)" ]; then
                ok "-o json parses and matches -o env"
        else
                not_ok "-o json parses and matches -o env"
        fi
fi

# -o json escapes as Go's encoding/json (one escaper for all svcenv's JSON):
# \r as \r, DEL as it is, other controls as \u00XX
cat >"${TMPDIR:-/tmp}/svcenv-ctl-$$.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: ctl, namespace: default}
spec:
  enableServiceLinks: false
  containers:
  - name: c
    env: [{name: X, value: "a\rb\x7fc\x01\"\\\td"}]
EOF
got=$("$SVCENV/svcenv" env -f $demo --pod-file "${TMPDIR:-/tmp}/svcenv-ctl-$$.yaml" -o json | grep '"X"')
rm -f "${TMPDIR:-/tmp}/svcenv-ctl-$$.yaml"
want=$(printf '%s' '"value": "a\rb'; printf '\177'; printf '%s' 'c\u0001\"\\\td",')
if [[ "$got" == *"$want"* ]]; then ok "-o json: control characters as encoding/json writes them"; else
        not_ok "-o json: control characters as encoding/json writes them"
        printf '# got:  %s\n# want: %s\n' "$got" "$want"
fi

fails_with "missing required ConfigMap key, kubelet wording" 3 \
        "svcenv: pod shop/bad container app: couldn't find key absent in ConfigMap shop/shop-config" \
        $e --pod-file $g/input-bad-key.yaml
fails_with "missing required ConfigMap" 3 \
        "svcenv: pod shop/bad container app: configmaps \"missing-config\" not found" \
        $e --pod-file $g/input-bad-cm.yaml
fails_with "resourceFieldRef on an unset limit: node allocatable unknown" 3 \
        "svcenv: pod shop/nolimit container app: limits.cpu of container app is not set: the kubelet would use the node's allocatable, which svcenv does not know" \
        $e --pod-file $g/input-no-limit.yaml
out=$($e --pod-file $g/input-bad-key.yaml -o json 2>/dev/null)
if [ -z "$out" ]; then ok "an error prints nothing on stdout"; else not_ok "an error prints nothing on stdout"; fi
fails_with "unknown pod" 3 "svcenv: pods \"nope\" not found in namespace \"shop\"" $e -n shop --pod nope
fails_with "unknown container" 3 "svcenv: container \"nope\" not found in pod shop/batch-runner" \
        $e -n shop --pod batch-runner --container nope
fails_with "no target is a usage error" 2 "svcenv env: give -n NS, --pod NAME or --pod-file POD (see 'svcenv env --help')" $e
fails_with "bad -o" 2 "svcenv env: -o must be env, json or shell, not \"yaml\" (see 'svcenv env --help')" $e -n shop -o yaml
fails_with "--pod and --pod-file" 2 "svcenv env: --pod and --pod-file exclude each other (see 'svcenv env --help')" \
        $e --pod x --pod-file y

# size guard: many services in one namespace
tmp=$(mktemp -d)
gen() { # gen N NAMELEN FILE
        awk -v n="$1" -v len="$2" 'BEGIN {
                pad = ""; while (length(pad) < len - 7) pad = pad "x";
                for (i = 0; i < n; i++)
                        printf "apiVersion: v1\nkind: Service\nmetadata: {name: s%s%05d, namespace: big}\nspec: {clusterIP: 10.%d.%d.%d, ports: [{name: http, port: 80}]}\n---\n", pad, i, int(i / 65536) + 1, int(i / 256) % 256, i % 256
        }' >"$3"
}
gen 800 8 "$tmp/warn.yaml"
err=$("$SVCENV/svcenv" env -f "$tmp/warn.yaml" -n big 2>&1 >/dev/null)
rc=$?
if [ $rc -eq 0 ] && [[ "$err" == "svcenv: warning: namespace big: 6400 variables, "*"approaching the exec limit"* ]]; then
        ok "size guard warns past 5000 variables"
else
        not_ok "size guard warns past 5000 variables (exit $rc: $err)"
fi
gen 3000 60 "$tmp/over.yaml"
err=$("$SVCENV/svcenv" env -f "$tmp/over.yaml" -n big 2>&1 >/dev/null)
rc=$?
if [ $rc -eq 3 ] && [[ "$err" == "svcenv: namespace big: "*"argument list too long"* ]]; then
        ok "size guard: over 2 MiB exits 3 (invalid input) and names E2BIG"
else
        not_ok "size guard: over 2 MiB exits 3 (invalid input) and names E2BIG (exit $rc: $err)"
fi
err=$("$SVCENV/svcenv" env -f $demo -n shop 2>&1 >/dev/null)
if [ -z "$err" ]; then ok "no size warning for a small namespace"; else not_ok "no size warning for a small namespace"; fi
rm -rf "$tmp"
echo "1..$n"
