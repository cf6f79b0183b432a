# pkg/kube against the real control plane started by test/run-all (KUBE_DIR).
set -u
cd "$(dirname "$0")/../.."
exec "${SVCENV_BUILD:-build}/integration/test_kube"
