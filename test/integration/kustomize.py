#!/usr/bin/env python3
"""kustomize.py DIR [--skip FILE]...: the objects `kubectl apply -k DIR`
would send, one JSON document a line, in the kustomization's resource order,
with its `images:` rewrites applied to every container and init container.
Only the fields manifests/kustomization.yaml uses are supported (resources,
images); anything else is an error, so the tests never apply less than a
user would. --skip leaves a resource file out (cert-manager.yaml without
cert-manager, as the README says). Errors: one line on stderr, exit 1."""
import json
import os
import sys

import yaml


def fail(msg):
    print(f"kustomize.py: {msg}", file=sys.stderr)
    sys.exit(1)


def rewrite_image(image, rules):
    name, sep, tag = image.rpartition(":")
    if not sep or "/" in tag:
        name, tag = image, None
    for r in rules:
        if r.get("name") == name:
            return r.get("newName", name) + ":" + str(r.get("newTag", tag or "latest"))
    return image


def main():
    args = sys.argv[1:]
    if not args:
        fail("usage: kustomize.py DIR [--skip FILE]...")
    top, skip = args[0], set()
    rest = args[1:]
    while rest:
        if rest[0] != "--skip" or len(rest) < 2:
            fail(f"unknown argument {rest[0]}")
        skip.add(rest[1])
        rest = rest[2:]
    path = os.path.join(top, "kustomization.yaml")
    try:
        with open(path) as f:
            k = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        fail(f"{path}: {e}")
    unknown = set(k) - {"apiVersion", "kind", "resources", "images"}
    if unknown:
        fail(f"{path}: unsupported field(s) {', '.join(sorted(unknown))}")
    rules = k.get("images") or []
    for res in k.get("resources") or []:
        if res in skip:
            continue
        file = os.path.join(top, res)
        try:
            with open(file) as f:
                docs = [d for d in yaml.safe_load_all(f) if d]
        except (OSError, yaml.YAMLError) as e:
            fail(f"{file}: {e}")
        for d in docs:
            spec = d.get("spec", {}).get("template", {}).get("spec", {})
            for c in spec.get("containers", []) + spec.get("initContainers", []):
                c["image"] = rewrite_image(c["image"], rules)
            print(json.dumps(d, separators=(",", ":")))


if __name__ == "__main__":
    main()
