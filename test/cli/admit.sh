#!/usr/bin/env bash
# svcenv admit: the response the webhook sends, on the demo cluster.
# Goldens hold the decoded patch (one operation per line), checked by hand
# against `svcenv env` for the same namespace.
source "$(dirname "$0")/lib.bash"
cd "$(dirname "$0")/../.."
demo=manifests/examples/demo-cluster.yaml
g=test/golden/admit
r=$g/reviews
admit() { "$SVCENV/svcenv" admit -f "$demo" "$@"; }

for name in with-env default-no-env links-off selection; do
        golden "admit --decode $name" "$g/$name.patch" admit --decode <"$r/$name.json"
done
golden "admit response (opt-out: allowed, no patch)" "$g/opt-out.json" admit <"$r/opt-out.json"
golden "admit response (dry run, full review)" "$g/default-no-env.json" admit <"$r/default-no-env.json"
golden "admit --failure-mode allow: undecodable pod allowed with a warning" "$g/bad-pod-allow.json" \
        admit <"$r/bad-pod.json"
golden "admit --failure-mode deny: undecodable pod refused (500)" "$g/bad-pod-deny.json" \
        admit --failure-mode deny <"$r/bad-pod.json"
golden "admit --max-env-bytes: size guard warns instead of patching" "$g/size-guard.json" \
        admit --max-env-bytes 1000 <"$r/with-env.json"

# The patch of each container holds exactly the service variables of the
# namespace that the container does not set itself.
want=$("$SVCENV/svcenv" env -f "$demo" -n monitoring | cut -d= -f1 | grep -vx STATSD_SERVICE_HOST | tr '\n' ' ')
got=$(admit --decode <"$r/with-env.json" | grep -o '"/spec/containers/0/env/[0-9]*","value":{"name":"[A-Z0-9_]*"' |
        sed 's/.*"name":"//; s/"$//' | tr '\n' ' ')
if [ "$want" = "$got" ]; then ok "admit: container with env gets svcenv env's names minus its own, in order"; else
        not_ok "admit: container with env gets svcenv env's names minus its own, in order"
        echo "# want: $want"
        echo "# got:  $got"
fi

# Reinvocation: the mutated pod, admitted again, gets no patch.
mutated=$(mktemp)
trap 'rm -f "$mutated"' EXIT
{
        printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"r2","kind":{"kind":"Pod"},"namespace":"default","operation":"CREATE","object":{"metadata":{"name":"p","annotations":{"svcenv.io/injected":"true"}},"spec":{"containers":[{"name":"app","env":['
        "$SVCENV/svcenv" env -f "$demo" -n default | awk -F= '{ printf "%s{\"name\":\"%s\",\"value\":\"%s\"}", sep, $1, substr($0, length($1) + 2); sep = "," }'
        printf ']}]}}}}\n'
} >"$mutated"
if admit <"$mutated" | grep -q '"patch"'; then not_ok "admit: second pass adds nothing"; else ok "admit: second pass adds nothing"; fi

fails_with "malformed review: exit 3, one line" 3 \
        "svcenv: malformed review: request.object: missing or not an object" admit <"$r/no-object.json"
fails_with "not JSON: exit 3" 3 \
        "svcenv: malformed review: request body is not JSON: line 1: '[' or '{' expected near 'hello'" \
        admit <<<"hello"
fails_with "bad --failure-mode: usage" 2 \
        "svcenv admit: --failure-mode must be allow or deny (see 'svcenv admit --help')" \
        admit --failure-mode maybe
# every pod annotation the webhook reads or writes is in the README
missing=""
for a in $(sed -n 's/^#define SE_ADMISSION_ANN_[A-Z_]* *"\(.*\)"$/\1/p' include/svcenv/admission.h); do
        grep -qF "\`$a" README.md || missing="$missing $a"
done
if [ -z "$missing" ]; then ok "the README documents every svcenv.io annotation"; else not_ok "the README documents every svcenv.io annotation (missing:$missing)"; fi
echo "1..$n"
