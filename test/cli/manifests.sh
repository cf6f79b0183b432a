#!/usr/bin/env bash
# The manifests as a real node meets them: images a locally loaded image
# satisfies (a version tag, never pulled when present), and a proxy that
# reaches the API server without the ClusterIP it programs itself.
. "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
out=$(python3 - <<'PY'
import glob, os, yaml
docs = []
for f in sorted(glob.glob("manifests/*.yaml")):
    for d in yaml.safe_load_all(open(f)):
        if d:
            docs.append((os.path.basename(f), d))
def say(ok, msg):
    print(("ok" if ok else "not ok") + " - " + msg)
kust = next(d for f, d in docs if f == "kustomization.yaml")
files = {f for f, _ in docs if f != "kustomization.yaml"} - {"cert-manager.yaml"}
say(files <= set(kust["resources"]), "kustomization lists every manifest (missing: %s)"
    % sorted(files - set(kust["resources"])))
say(kust["images"][0].get("newTag") not in (None, "latest"), "kustomization pins an image tag")
workloads = [(f, d) for f, d in docs if d.get("kind") in ("Deployment", "DaemonSet")]
say(len(workloads) >= 3, "controller, webhook and proxy workloads found")
for f, d in workloads:
    spec = d["spec"]["template"]["spec"]
    for c in spec.get("initContainers", []) + spec["containers"]:
        img = c["image"]
        tag = img.rsplit(":", 1)[1] if ":" in img.split("/")[-1] else "latest"
        pol = c.get("imagePullPolicy", "Always" if tag == "latest" else "IfNotPresent")
        say(tag != "latest" and pol in ("IfNotPresent", "Never"),
            "%s %s: image %s is used when present (pull policy %s)" % (f, c["name"], img, pol))
proxy = next(d for f, d in docs if d.get("kind") == "DaemonSet"
             and d["metadata"]["name"] == "svcenv-proxy")
spec = proxy["spec"]["template"]["spec"]
c = spec["containers"][0]
kc = [a.split("=", 1)[1] for a in c.get("args", []) if a.startswith("--kubeconfig=")]
say(len(kc) == 1, "svcenv-proxy is given a kubeconfig, not in-cluster config")
if kc:
    d = os.path.dirname(kc[0])
    mount = next((m for m in c.get("volumeMounts", []) if m["mountPath"] == d), None)
    vol = next((v for v in spec["volumes"] if mount and v["name"] == mount["name"]), None)
    cm_name = vol.get("configMap", {}).get("name") if vol else None
    cm = next((x for _, x in docs if x.get("kind") == "ConfigMap"
               and x["metadata"]["name"] == cm_name), None)
    key = os.path.basename(kc[0])
    say(cm is not None and key in cm.get("data", {}),
        "the kubeconfig %s comes from ConfigMap %s in the manifests" % (kc[0], cm_name))
    if cm is not None and key in cm.get("data", {}):
        conf = yaml.safe_load(cm["data"][key])
        server = conf["clusters"][0]["cluster"]["server"]
        say(server.startswith("https://") and "kubernetes.default" not in server
            and "10.96.0.1" not in server,
            "its server is the API server's own address, not the kubernetes Service (%s)" % server)
        user = conf["users"][0]["user"]
        say(user.get("tokenFile", "").startswith("/var/run/secrets/kubernetes.io/serviceaccount/"),
            "it authenticates with the pod's service account token")
PY
)
rc=$?
while IFS= read -r line; do
        case $line in
        "ok - "*) ok "${line#ok - }" ;;
        "not ok - "*) not_ok "${line#not ok - }" ;;
        *) echo "# $line" ;;
        esac
done <<<"$out"
[ $rc -eq 0 ] || not_ok "manifest checks ran to the end (python exit $rc)"
