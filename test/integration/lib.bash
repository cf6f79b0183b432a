# Helpers for integration tests against the real control plane that
# test/run-all started (KUBE_DIR). TAP output as in test/cli/lib.bash.
. "$(dirname "${BASH_SOURCE[0]}")/../cli/lib.bash"
: "${KUBE_DIR:?integration tests need KUBE_DIR (test/run-all starts the control plane)}"
KAPI="$(dirname "${BASH_SOURCE[0]}")/../k8s/kapi"
CONTROLPLANE="$(dirname "${BASH_SOURCE[0]}")/../k8s/controlplane"
kapi() { "$KAPI" "$KUBE_DIR" "$@"; }
