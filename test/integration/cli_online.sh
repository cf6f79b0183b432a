# svcenv get against the live API server (--kubeconfig, --context, KUBECONFIG).
. "$(dirname "$0")/../cli/lib.bash"
kc=$KUBE_DIR/kubeconfig
sv=$SVCENV/svcenv
if "$sv" get --kubeconfig "$kc" -A services | grep -qE '^Service +default +kubernetes$'; then
        ok "get --kubeconfig -A services lists default/kubernetes"
else
        not_ok "get --kubeconfig -A services lists default/kubernetes"
fi
golden "get -n default services -o name" test/golden/kube/default-services-name.txt \
        "$sv" get --kubeconfig "$kc" -n default services -o name
golden "get --context names the context of the file" test/golden/kube/default-services-name.txt \
        "$sv" get --kubeconfig "$kc" --context admin@svcenv-test -n default svc -o name
if KUBECONFIG=/nonexistent/config:$kc "$sv" get namespaces -o name | grep -qx namespace/kube-system; then
        ok "KUBECONFIG list: missing files are skipped"
else
        not_ok "KUBECONFIG list: missing files are skipped"
fi
fails_with "unknown context" 4 "svcenv: kubeconfig $kc: context \"nope\" does not exist" \
        "$sv" get --kubeconfig "$kc" --context nope
fails_with "RBAC denial is one line with the server's message" 4 \
        "svcenv: GET /api/v1/services: Forbidden (403): services is forbidden: User \"limited\" cannot list resource \"services\" in API group \"\" at the cluster scope" \
        "$sv" get --kubeconfig "$KUBE_DIR/kubeconfig-limited" -A services
fails_with "missing kubeconfig file" 4 "svcenv: kubeconfig /nonexistent.yaml: cannot read: No such file or directory" \
        "$sv" get --kubeconfig /nonexistent.yaml
echo "1..$n"
