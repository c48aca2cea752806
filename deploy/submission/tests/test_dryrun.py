#!/usr/bin/env python3
"""The submission runner end to end in --dry-run, on loopback with two sim sut-nodes: resnet50
Offline and Server with TEST01 and TEST04; then with a real model on an onnx node (the
Fashion-MNIST CNN, Offline with TEST01; skipped without the onnx backend or the data set). Checks the tree against the checker's layout rules
(the v6.x paths of tools/submission/submission_checker/constants.py, written out below; when
MLPERF_INFERENCE_DIR names a checkout, its constants are read instead), that an interrupted run
resumes (SIGKILL in the middle of a step: the finished steps are kept, the killed one is redone),
and that --submission refuses the built-in scheduler's logs with a clear message.

    test_dryrun.py LOADGEN_NODE SUT_NODE
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixture  # noqa: E402
from nodes import Node  # noqa: E402

SUBMIT = os.path.join(HERE, "..", "submit.py")
NETWORK_FIELDS = ["is_network", "network_type", "network_media", "network_rate", "nic_loadgen",
                  "number_nic_loadgen", "net_software_stack_loadgen", "network_protocol",
                  "number_connections", "nic_sut", "number_nic_sut", "net_software_stack_sut",
                  "network_topology"]
# The checker's v6.x paths (PERFORMANCE_LOG_PATH, ACCURACY_*, TEST0x_*, MEASUREMENTS_PATH,
# SYSTEM_PATH, SRC_PATH) and required files (REQUIRED_ACC_FILES, REQUIRED_MEASURE_FILES, ...).
LAYOUT = [
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/performance/run_1/mlperf_log_detail.txt",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/performance/run_1/mlperf_log_summary.txt",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/accuracy/mlperf_log_detail.txt",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/accuracy/mlperf_log_summary.txt",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/accuracy/accuracy.txt",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/accuracy/mlperf_log_accuracy.json",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/measurements.json",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/user.conf",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/README.md",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/TEST01/performance/run_1/mlperf_log_detail.txt",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/TEST01/verify_accuracy.txt",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/TEST01/verify_performance.txt",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/TEST01/accuracy/mlperf_log_accuracy.json",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/TEST04/performance/run_1/mlperf_log_detail.txt",
    "{division}/{submitter}/results/{system}/{benchmark}/{scenario}/TEST04/verify_performance.txt",
    "{division}/{submitter}/systems/{system}.json",
    "{division}/{submitter}/src",
]

failures = []


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)


def layout():
    inf = os.environ.get("MLPERF_INFERENCE_DIR")
    if not inf:
        return LAYOUT, "the layout written in this test"
    sys.path.insert(0, os.path.join(inf, "tools", "submission"))
    from submission_checker import constants as c  # the checker's own rules
    v = "v6.1"
    paths = [c.PERFORMANCE_LOG_PATH[v], c.PERFORMANCE_SUMMARY_PATH[v], c.ACCURACY_LOG_PATH[v],
             c.ACCURACY_RESULT_PATH[v], c.ACCURACY_JSON_PATH[v], c.MEASUREMENTS_PATH[v],
             c.TEST01_PERF_PATH[v], c.TEST01_ACC_PATH[v], c.TEST04_PERF_PATH[v],
             c.TEST04_ACC_PATH[v].replace("verify_accuracy", "verify_performance"),
             c.SYSTEM_PATH[v], c.SRC_PATH[v]]
    mdir = os.path.dirname(c.MEASUREMENTS_PATH[v])
    paths += [mdir + "/" + f for f in c.REQUIRED_MEASURE_FILES]
    return paths, f"the checker's constants in {inf}"


def run(cfg, *args, timeout=300):
    return subprocess.run([sys.executable, SUBMIT, cfg, *args], capture_output=True, text=True,
                          timeout=timeout)


def onnx_part(lg, sut, tmp):
    """A real model: one onnx node (the Fashion-MNIST CNN), 512 test images, Offline with TEST01.
    Skipped (printed) when sut-node has no onnx backend or the data set package is missing."""
    repo = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
    model = os.path.join(repo, "sut-node/backends/onnx/models/fashion_mnist_cnn.onnx")
    helptext = subprocess.run([sut, "--help"], capture_output=True, text=True).stdout
    if "onnx" not in helptext.split("Backends built in:")[-1].split("\n")[0]:
        print("skip: onnx part (this sut-node has no onnx backend)")
        return
    data = os.path.join(tmp, "fmnist")
    r = subprocess.run([sys.executable, os.path.join(repo, "loadgen-node/tools/fmnist_to_npy.py"),
                        "--split", "test", "--count", "512", "--model", model, "--out-dir", data],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        print("skip: onnx part (no Fashion-MNIST data: " + (r.stderr.strip()[-200:]) + ")")
        return
    work = os.path.join(tmp, "onnx")
    os.makedirs(work)
    node = Node(sut, "onnx0", backend="onnx", logdir=work,
                extra=["--backend-opt", f"model={model}", "--backend-opt", "output=argmax",
                       "--threads", "1", "--max-batch", "64"])
    try:
        images = [f for f in os.listdir(data) if "images" in f][0]
        labels = [f for f in os.listdir(data) if "labels" in f][0]
        cfg = fixture.write(work, [node.address], lg, scenarios="Offline")
        text = open(cfg).read().split("[benchmark.resnet50]")[0]
        with open(os.path.join(work, "user.conf"), "a") as f:
            f.write("fashion-mnist.Offline.target_qps = 2000\n"
                    "fashion-mnist.Offline.min_duration = 300\n"
                    "fashion-mnist.*.min_query_count = 1\n")
        text += ("[benchmark.fashion-mnist]\nscenarios = Offline\ncompliance = TEST01\n"
                 f"user_conf = {os.path.join(work, 'user.conf')}\n"
                 f"qsl = --qsl-npy {os.path.join(data, images)}\n"
                 f"accuracy = {sys.executable} {repo}/loadgen-node/tools/accuracy_classification.py"
                 f" --log {{accuracy_log}} --labels {os.path.join(data, labels)}\n"
                 + "".join(f"measurements.{k} = x\n" for k in
                           ["input_data_types", "retraining", "starting_weights_filename",
                            "weight_data_types", "weight_transformations"]))
        with open(cfg, "w") as f:
            f.write(text)
        r = run(cfg, "--dry-run")
        print(r.stderr[-1500:])
        check(r.returncode == 0, f"onnx: submit.py --dry-run exits 0 (got {r.returncode})")
        sdir = os.path.join(work, "out/network/TestOrg/results/loopback_2x_sim/fashion-mnist/Offline")
        acc = open(os.path.join(sdir, "accuracy", "accuracy.txt")).read()
        m = __import__("re").search(r"accuracy=([0-9.]+)%", acc)
        check(m is not None and float(m.group(1)) > 80,
              f"onnx: the CNN's top-1 in accuracy.txt ({acc.strip()[:60]})")
        check(os.path.exists(os.path.join(sdir, "TEST01", "performance", "run_1",
                                          "mlperf_log_detail.txt")), "onnx: TEST01 folder")
    finally:
        node.stop()


def main():
    lg, sut = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="submit_dry_") as tmp:
        nodes = [Node(sut, f"sim{i}", backend="sim", logdir=tmp) for i in range(2)]
        try:
            cfg = fixture.write(tmp, [n.address for n in nodes], lg)
            r = run(cfg, "--dry-run")
            print(r.stderr[-3000:])
            check(r.returncode == 0, f"submit.py --dry-run exits 0 (got {r.returncode})")
            out = os.path.join(tmp, "out")
            paths, source = layout()
            for sc in ("Offline", "Server"):
                for p in paths:
                    full = os.path.join(out, p.format(division="network", submitter="TestOrg",
                                                      system="loopback_2x_sim",
                                                      benchmark="resnet", scenario=sc,
                                                      file="measurements.json"))
                    check(os.path.exists(full), f"{sc}: {p.split('{scenario}/')[-1]} present "
                                                f"({source})")
            sysj = json.load(open(os.path.join(out, "network/TestOrg/systems/loopback_2x_sim.json")))
            check(all(k in sysj for k in NETWORK_FIELDS), "system JSON has the 13 network fields")
            check(sysj.get("is_network") == "true" and sysj.get("division") == "network"
                  and sysj.get("submitter") == "TestOrg", "system JSON: network division, org")
            check(os.path.exists(os.path.join(out, "network/TestOrg/systems/"
                                                   "loopback_2x_sim_network.dot")),
                  "system diagram written")
            check(os.path.exists(os.path.join(out, "NOT_FOR_SUBMISSION.txt")),
                  "dry-run tree is marked not for submission")
            acc = open(os.path.join(out, "network/TestOrg/results/loopback_2x_sim/resnet/"
                                         "Offline/accuracy/accuracy.txt")).read()
            check("accuracy=100.000%" in acc, "accuracy.txt holds the accuracy script's line")
            meas = json.load(open(os.path.join(out, "network/TestOrg/results/loopback_2x_sim/"
                                                    "resnet/Server/measurements.json")))
            check(len(meas) == 5 and all(meas.values()), "measurements.json: 5 fields filled")
            for d in ("Offline", "Server"):
                check(not os.path.exists(os.path.join(tmp, "work", "runs", "resnet50", d,
                                                      "TEST01", "audit.config")),
                      f"{d}: audit.config removed after TEST01")

            # Nothing is redone on a second run.
            r = run(cfg, "--dry-run")
            redone = [ln for ln in r.stderr.splitlines() if ln.endswith(" ...")]
            check(r.returncode == 0 and "kept" in r.stderr and
                  all(ln.split()[1] in ("readme", "system", "check") for ln in redone),
                  "a second run keeps every finished step (readme, system, check run again)")

            # Resume after a kill: redo Server, kill it in the middle of its performance run.
            state_path = os.path.join(tmp, "work", "state.json")
            kept = json.load(open(state_path))["done"]["resnet50/Offline/performance"]["finished"]
            marker = os.path.join(tmp, "work", "logs", "resnet50_Server_performance.log")
            os.remove(marker)  # the step's log appears again when the step starts
            p = subprocess.Popen([sys.executable, SUBMIT, cfg, "--dry-run", "--redo",
                                  "resnet50/Server"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not os.path.exists(marker):
                time.sleep(0.02)
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            done = json.load(open(state_path))["done"]
            check("resnet50/Server/accuracy" in done and "resnet50/Server/performance" not in done,
                  "killed during Server performance: accuracy kept, performance not marked done")
            r = run(cfg, "--dry-run")
            done = json.load(open(state_path))["done"]
            check(r.returncode == 0, f"the resumed run exits 0 (got {r.returncode})")
            check("resnet50/Server/performance" in done and "check" in done,
                  "the resumed run finished every step")
            check(done["resnet50/Offline/performance"]["finished"] == kept,
                  "the resumed run did not redo the Offline performance run")

            # A rename (tree_name, system) moves the tree: the old folders are removed, the
            # runs are kept and placed again under the new names.
            with open(cfg) as f:
                text = f.read()
            with open(cfg, "w") as f:
                f.write(text.replace("system = loopback_2x_sim", "system = renamed_sys").replace(
                    "[benchmark.resnet50]\n", "[benchmark.resnet50]\ntree_name = resnet-demo\n"))
            r = run(cfg, "--dry-run")
            res = os.path.join(out, "network/TestOrg/results")
            check(r.returncode == 0 and os.listdir(res) == ["renamed_sys"]
                  and os.listdir(os.path.join(res, "renamed_sys")) == ["resnet-demo"]
                  and sorted(os.listdir(os.path.join(res, "renamed_sys", "resnet-demo")))
                  == ["Offline", "Server"] and "removed " in r.stdout,
                  "after a rename only the new tree folders remain (got "
                  f"{sorted(os.listdir(res))}, exit {r.returncode})")
            check(not os.path.exists(os.path.join(out, "network/TestOrg/systems/"
                                                       "loopback_2x_sim.json")),
                  "after a rename the old system description is removed")
            check(" performance ..." not in r.stderr, "a rename runs no LoadGen run again")

            # --submission refuses loadgen-node's own logs.
            r = run(cfg, "--submission")
            print(r.stderr[-1500:])
            check(r.returncode == 3 and "refusing" in r.stderr and "loadgen-node" in r.stderr,
                  "--submission refuses the built-in scheduler's logs and says why")
        finally:
            for n in nodes:
                n.stop()
        onnx_part(lg, sut, tmp)
    print(f"{len(failures)} failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
