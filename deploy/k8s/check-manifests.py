#!/usr/bin/env python3
"""Checks the Kubernetes manifests of deploy/k8s without a cluster (no kubectl or kubeconform here).

    check-manifests.py [DIR] [--sut-node PATH]

YAML syntax (python3-yaml), then the structure a cluster would reject or silently mis-wire:
apiVersion/kind pairs, metadata names and namespaces, containers with names, images and valid
ports, selectors that match the pod labels, the headless Service's selector and target port
against the DaemonSet, volumes and ConfigMap keys that exist, the DaemonSet on labelled
accelerator nodes, the Job off them (rules 6.2.2: LoadGen and SUT on separate machines) and
pointing at the Service, and kustomization.yaml listing files that exist. With --sut-node, the
sut-node.conf in the ConfigMap is also started with the real daemon on loopback. With
--image-root (the file system of the built image, deploy/container/build-image.sh; needs root),
every container's program and the commands of the Job's script must be in the image, the
ConfigMap's config starts the image's own sut-node (under chroot), and with --image the manifests
must name that image.
Exit status: 0 when everything holds, 1 with one line per problem otherwise, 2 bad arguments.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

try:
    import yaml
except ImportError:
    # A Python without python3-yaml (e.g. a pyenv build): use the system one, which has it.
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("check-manifests: python3-yaml is missing; run deploy/install-deps.sh")

API = {
    "Namespace": "v1", "ConfigMap": "v1", "Service": "v1", "PersistentVolumeClaim": "v1",
    "DaemonSet": "apps/v1", "Deployment": "apps/v1", "Job": "batch/v1",
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
}
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
PORT_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

problems = []


def bad(where, msg):
    problems.append(f"{where}: {msg}")


def get(d, *path, default=None):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return default
        d = d[p]
    return d


def check_pod(where, pod_spec, objs):
    containers = get(pod_spec, "containers") or []
    if not containers:
        bad(where, "no containers")
    vols = {v.get("name"): v for v in get(pod_spec, "volumes", default=[]) or []}
    ports = {}
    for c in containers:
        cw = f"{where} container {c.get('name')}"
        if not c.get("name") or not NAME_RE.match(str(c.get("name"))):
            bad(cw, "missing or invalid name")
        if not c.get("image"):
            bad(cw, "no image")
        for p in c.get("ports", []) or []:
            cp = p.get("containerPort")
            if not isinstance(cp, int) or not 1 <= cp <= 65535:
                bad(cw, f"containerPort {cp!r} is not an integer 1-65535")
            if p.get("protocol", "TCP") not in ("TCP", "UDP", "SCTP"):
                bad(cw, f"port protocol {p.get('protocol')!r}")
            if "name" in p:
                if not PORT_NAME_RE.match(str(p["name"])) or len(str(p["name"])) > 15:
                    bad(cw, f"port name {p['name']!r} (lower case, at most 15 characters)")
                ports[p["name"]] = cp
            ports[cp] = cp
        for probe in ("readinessProbe", "livenessProbe"):
            port = get(c, probe, "tcpSocket", "port")
            if port is not None and port not in ports:
                bad(cw, f"{probe} port {port!r} is not a container port")
        for m in c.get("volumeMounts", []) or []:
            if m.get("name") not in vols:
                bad(cw, f"volumeMount {m.get('name')!r} has no volume")
            if not str(m.get("mountPath", "")).startswith("/"):
                bad(cw, f"volumeMount {m.get('name')!r} mountPath is not absolute")
        for e in c.get("env", []) or []:
            if not e.get("name"):
                bad(cw, "env entry without a name")
            if "value" in e and not isinstance(e["value"], str):
                bad(cw, f"env {e.get('name')}: value must be a string (quote {e['value']!r})")
    for name, v in vols.items():
        cm = get(v, "configMap", "name")
        if cm:
            target = objs.get(("ConfigMap", cm))
            if not target:
                bad(where, f"volume {name}: ConfigMap {cm} is not defined")
            else:
                for it in get(v, "configMap", "items", default=[]) or []:
                    if it.get("key") not in (target.get("data") or {}):
                        bad(where, f"volume {name}: ConfigMap {cm} has no key {it.get('key')!r}")
        pvc = get(v, "persistentVolumeClaim", "claimName")
        if pvc and ("PersistentVolumeClaim", pvc) not in objs:
            bad(where, f"volume {name}: PersistentVolumeClaim {pvc} is not defined")
    return ports


IMAGE_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def in_image(root, prog):
    """Whether |prog| (a name looked up in PATH, or an absolute path) is an executable in |root|."""
    cands = [prog] if prog.startswith("/") else [d + "/" + prog for d in IMAGE_PATH]
    for c in cands:
        path = os.path.join(root, c.lstrip("/"))
        # Absolute symlinks inside the image point into the image, not the host.
        for _ in range(8):
            if not os.path.islink(path):
                break
            t = os.readlink(path)
            path = os.path.join(root, t.lstrip("/")) if t.startswith("/") else \
                os.path.join(os.path.dirname(path), t)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return True
    return False


def check_image(where, pod_spec, root, image):
    """The pod's containers against the built image's file system."""
    for c in get(pod_spec, "containers") or []:
        cw = f"{where} container {c.get('name')}"
        if image and c.get("image") != image:
            bad(cw, f"names image {c.get('image')!r}; the image built here is {image!r}")
        cmd = c.get("command") or []
        if cmd and not in_image(root, cmd[0]):
            bad(cw, f"command {cmd[0]!r} is not in the image")
        # A shell script: the programs it runs must be there too.
        if cmd and os.path.basename(cmd[0]) in ("bash", "sh") and "-c" in cmd:
            script = cmd[cmd.index("-c") + 1] if cmd.index("-c") + 1 < len(cmd) else ""
            for prog in ("getent", "awk", "sort", "loadgen-node", "sut-node"):
                if re.search(r"(^|[\s|(;])" + re.escape(prog) + r"\s", script) and not in_image(root, prog):
                    bad(cw, f"its script runs {prog!r}, which is not in the image")
            for a in cmd[cmd.index("-c") + 2:]:
                if re.match(r"^[a-z][-a-z]*$", a) and a.endswith("-node") and not in_image(root, a):
                    bad(cw, f"its script runs {a!r}, which is not in the image")


def run_conf(sut_node, conf_text, root=None):
    """Starts the real sut-node with the ConfigMap's config on loopback, then stops it; with |root|
    the image's sut-node under chroot."""
    with tempfile.TemporaryDirectory(dir=os.path.join(root, "tmp") if root else None) as d:
        conf = os.path.join(d, "sut-node.conf")
        with open(conf, "w") as f:
            f.write("".join(l + "\n" for l in conf_text.splitlines() if not l.strip().startswith("listen")))
        pf = os.path.join(d, "port")
        inner = (lambda x: "/" + os.path.relpath(x, root)) if root else (lambda x: x)
        prefix = ["chroot", root] if root else []
        p = subprocess.Popen(prefix + [sut_node, "--config", inner(conf), "--listen", "127.0.0.1:0",
                                       "--port-file", inner(pf)],
                             stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 10
        while not os.path.exists(pf) and p.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        if p.poll() is not None:
            return f"sut-node refused the ConfigMap config: {p.stderr.read().strip()}"
        listening = os.path.exists(pf)  # the port file exists only while the node serves
        p.terminate()
        try:
            rc = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            return "sut-node did not stop on SIGTERM"
        if not listening:
            return "sut-node did not start listening within 10 s"
        if os.path.exists(pf):
            return "sut-node left its port file behind after SIGTERM"
        return None if rc == 0 else f"sut-node exited {rc} after SIGTERM"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--sut-node", help="start this sut-node with the ConfigMap's config")
    ap.add_argument("--image-root", help="the built image's file system: check the containers against it")
    ap.add_argument("--image", help="the built image's name: every container must name it")
    a = ap.parse_args()

    files = sorted(f for f in os.listdir(a.dir) if f.endswith((".yaml", ".yml")))
    if not files:
        print(f"check-manifests: no YAML files in {a.dir}", file=sys.stderr)
        return 2
    objs, order = {}, []
    kustomization = None
    for fn in files:
        path = os.path.join(a.dir, fn)
        try:
            with open(path) as f:
                docs = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            bad(fn, f"YAML syntax: {e}")
            continue
        for i, d in enumerate(docs):
            where = f"{fn}#{i + 1}"
            if not isinstance(d, dict):
                bad(where, "not a mapping")
                continue
            kind, api = d.get("kind"), d.get("apiVersion")
            if kind not in API:
                bad(where, f"unexpected kind {kind!r}")
                continue
            if api != API[kind]:
                bad(where, f"{kind} needs apiVersion {API[kind]}, not {api!r}")
            if kind == "Kustomization":
                kustomization = (fn, d)
                continue
            name = get(d, "metadata", "name")
            if not name or not NAME_RE.match(str(name)):
                bad(where, f"metadata.name {name!r} is missing or not a DNS label")
            if (kind, name) in objs:
                bad(where, f"{kind} {name} defined twice")
            objs[(kind, name)] = d
            order.append((where, kind, name, d))

    namespaces = {n for (k, n) in objs if k == "Namespace"}
    for where, kind, name, d in order:
        if kind != "Namespace" and get(d, "metadata", "namespace") not in namespaces:
            bad(where, f"{kind} {name}: namespace {get(d, 'metadata', 'namespace')!r} is not defined here")
        if kind in ("DaemonSet", "Job") and not isinstance(get(d, "spec", "template", "spec"), dict):
            bad(where, f"{kind} {name}: no spec.template.spec")

    daemonsets = [(w, n, d) for w, k, n, d in order if k == "DaemonSet"]
    services = [(w, n, d) for w, k, n, d in order if k == "Service"]
    jobs = [(w, n, d) for w, k, n, d in order if k == "Job"]
    if len(daemonsets) != 1 or len(services) != 1 or len(jobs) != 1:
        bad(a.dir, f"expected one DaemonSet, one Service and one Job; found "
                   f"{len(daemonsets)}, {len(services)}, {len(jobs)}")

    ds_ports, ds_labels = {}, {}
    for where, name, d in daemonsets:
        sel = get(d, "spec", "selector", "matchLabels") or {}
        labels = get(d, "spec", "template", "metadata", "labels") or {}
        if not sel:
            bad(where, "DaemonSet without spec.selector.matchLabels")
        for k, v in sel.items():
            if labels.get(k) != v:
                bad(where, f"selector {k}={v} does not match the pod template labels")
        pod = get(d, "spec", "template", "spec") or {}
        if get(pod, "nodeSelector", "mlperf.org/accelerator") != "true":
            bad(where, "DaemonSet must run only on nodes labelled mlperf.org/accelerator=\"true\"")
        ds_ports = check_pod(where, pod, objs)
        ds_labels = labels
        if a.image_root:
            check_image(where, pod, a.image_root, a.image)

    for where, name, d in services:
        spec = d.get("spec") or {}
        if spec.get("clusterIP") != "None":
            bad(where, "the sut-node Service must be headless (clusterIP: None) so DNS lists every node")
        sel = spec.get("selector") or {}
        if not sel or any(ds_labels.get(k) != v for k, v in sel.items()):
            bad(where, f"selector {sel} does not select the DaemonSet's pods {ds_labels}")
        for p in spec.get("ports") or []:
            if not isinstance(p.get("port"), int):
                bad(where, f"port {p.get('port')!r} is not an integer")
            tp = p.get("targetPort", p.get("port"))
            if tp not in ds_ports:
                bad(where, f"targetPort {tp!r} is not a port of the DaemonSet's container")

    svc_names = [n for _, n, _ in services]
    for where, name, d in jobs:
        pod = get(d, "spec", "template", "spec") or {}
        if pod.get("restartPolicy") not in ("Never", "OnFailure"):
            bad(where, "a Job's restartPolicy must be Never or OnFailure")
        check_pod(where, pod, objs)
        if a.image_root:
            check_image(where, pod, a.image_root, a.image)
        terms = get(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                    "nodeSelectorTerms") or []
        off = any(e.get("key") == "mlperf.org/accelerator" and e.get("operator") == "DoesNotExist"
                  for t in terms for e in t.get("matchExpressions", []) or [])
        if not off:
            bad(where, "the LoadGen Job must be kept off accelerator nodes (nodeAffinity "
                       "mlperf.org/accelerator DoesNotExist): LoadGen and SUT are separate machines")
        text = yaml.safe_dump(pod)
        if not any(f"{s}." in text or f"{s}\n" in text for s in svc_names):
            bad(where, f"the Job does not refer to the Service ({', '.join(svc_names)})")

    if kustomization:
        fn, k = kustomization
        for r in k.get("resources") or []:
            if not os.path.exists(os.path.join(a.dir, r)):
                bad(fn, f"resource {r} does not exist")

    if a.sut_node or a.image_root:
        for (kind, name), d in objs.items():
            if kind == "ConfigMap" and "sut-node.conf" in (d.get("data") or {}):
                if a.sut_node:
                    err = run_conf(a.sut_node, d["data"]["sut-node.conf"])
                    if err:
                        bad(f"ConfigMap {name}", err)
                if a.image_root:
                    err = run_conf("sut-node", d["data"]["sut-node.conf"], a.image_root)
                    if err:
                        bad(f"ConfigMap {name} in the image", err)

    if problems:
        for p in problems:
            print(f"check-manifests: {p}", file=sys.stderr)
        return 1
    against = f"; against the image {a.image or a.image_root}" if a.image_root else ""
    print(f"check-manifests: {len(order)} objects in {len(files)} files: OK{against}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
