#!/usr/bin/env python3
"""Turns the Kubernetes manifests into what Debian's podman 4.3 `kube play` runs.

deploy/kubernetes/test.sh runs the manifests on one machine. podman plays Pods,
Deployments, PersistentVolumeClaims and (through --configmap) ConfigMaps, and nothing else,
so this does by hand what the cluster's controllers would:

- the StatefulSet becomes its replicas' Pods, `airlockd-0` … , each with the claim its
  volumeClaimTemplates would make (`state-airlockd-0` …);
- the Secret's value is written into the env var that names it (podman 4.3 reads Secrets
  only from its own store);
- the image becomes the one under test;
- containers' `ports` are left out: podman 4.3 publishes each on the host, where three
  daemons' would collide (each pod is reached at its own address, as on Kubernetes);
- `procMount: Unmasked`, which podman 4.3 ignores (4.7 reads it), becomes the annotation
  io.airlock.test/proc-mount=Unmasked, on which test.sh's OCI hook (testdata/unmask-proc)
  does what a CRI runtime does for it;
- `hostUsers: false` is left out: podman gives each pod's user namespace host ids of its
  own and, unlike Kubernetes, does not idmap the volumes, so three pods could not share
  the workspaces. deploy/container/test.sh runs the daemon and the escape corpus in a user
  namespace instead.

Services, the NetworkPolicy and the PodDisruptionBudget have no podman counterpart: they
are validated (kubernetes-validate), not played. Everything else, the security context
first, is played as written. (podman makes a new volume its container user's on first
mount, where Kubernetes leaves a fresh one root's and `fsGroup` lets the daemon's group
write it: either way the daemon makes its own directories inside.)

    play.py fleet MANIFEST --image IMAGE --store URL --out DIR
        (DIR/fleet.yaml, DIR/configmap.yaml, and DIR/volumes.txt: the volumes podman makes)
    play.py postgres MANIFEST --image IMAGE --password PASSWORD  (to stdout)
"""

import argparse
import copy
import sys

import yaml

PLAYED_KINDS = {"ConfigMap", "PersistentVolumeClaim", "StatefulSet"}


def load(path):
    with open(path) as file:
        return [doc for doc in yaml.safe_load_all(file) if doc]


def strip_namespace(doc):
    doc["metadata"].pop("namespace", None)
    return doc


def inline_secrets(container, values):
    for env in container.get("env", []):
        ref = env.get("valueFrom", {}).get("secretKeyRef")
        if ref is None:
            continue
        key = (ref["name"], ref["key"])
        if key not in values:
            sys.exit(f"play.py: no value given for the Secret {key[0]}/{key[1]}")
        env.pop("valueFrom")
        env["value"] = values[key]


def fleet(args):
    docs = load(args.manifest)
    left_out = sorted({doc["kind"] for doc in docs} - PLAYED_KINDS)
    configmaps = [strip_namespace(doc) for doc in docs if doc["kind"] == "ConfigMap"]
    claims = [strip_namespace(doc) for doc in docs if doc["kind"] == "PersistentVolumeClaim"]
    (statefulset,) = [doc for doc in docs if doc["kind"] == "StatefulSet"]
    template = statefulset["spec"]["template"]

    pods = []
    name = statefulset["metadata"]["name"]
    for ordinal in range(statefulset["spec"]["replicas"]):
        pod_name = f"{name}-{ordinal}"
        spec = copy.deepcopy(template["spec"])
        spec["hostname"] = pod_name
        spec.pop("hostUsers", None)
        annotations = {}
        for container in spec["containers"]:
            container["image"] = args.image
            container.pop("ports", None)
            if container.get("securityContext", {}).get("procMount") == "Unmasked":
                annotations["io.airlock.test/proc-mount"] = "Unmasked"
            inline_secrets(container, {("airlockd-store", "url"): args.store})
        for claim_template in statefulset["spec"].get("volumeClaimTemplates", []):
            volume = claim_template["metadata"]["name"]
            claim = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": f"{volume}-{pod_name}"},
                "spec": copy.deepcopy(claim_template["spec"]),
            }
            claims.append(claim)
            spec.setdefault("volumes", []).append(
                {"name": volume, "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
            )
        labels = dict(template["metadata"].get("labels", {}))
        labels["statefulset.kubernetes.io/pod-name"] = pod_name
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod_name, "labels": labels, "annotations": annotations},
                "spec": spec,
            }
        )

    with open(f"{args.out}/fleet.yaml", "w") as file:
        yaml.safe_dump_all(claims + pods, file, sort_keys=False)
    with open(f"{args.out}/configmap.yaml", "w") as file:
        yaml.safe_dump_all(configmaps, file, sort_keys=False)
    # What podman makes of them: a volume per claim and per ConfigMap, for the clean-up.
    with open(f"{args.out}/volumes.txt", "w") as file:
        for doc in claims + configmaps:
            print(doc["metadata"]["name"], file=file)
    print(
        f"play.py: {len(pods)} pods and {len(claims)} claims from the StatefulSet; "
        f"not played (no podman counterpart): {', '.join(left_out)}",
        file=sys.stderr,
    )


def postgres(args):
    docs = load(args.manifest)
    for doc in docs:
        if doc["kind"] != "Pod":
            continue
        for container in doc["spec"]["containers"]:
            container["image"] = args.image
            for env in container.get("env", []):
                if env["name"] == "POSTGRES_PASSWORD":
                    env["value"] = args.password
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    fleet_args = commands.add_parser("fleet")
    fleet_args.add_argument("manifest")
    fleet_args.add_argument("--image", required=True)
    fleet_args.add_argument("--store", required=True)
    fleet_args.add_argument("--out", required=True)
    postgres_args = commands.add_parser("postgres")
    postgres_args.add_argument("manifest")
    postgres_args.add_argument("--image", required=True)
    postgres_args.add_argument("--password", required=True)
    args = parser.parse_args()
    {"fleet": fleet, "postgres": postgres}[args.command](args)


if __name__ == "__main__":
    main()
