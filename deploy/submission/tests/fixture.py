"""A runner config for the tests: resnet50 Offline and Server, short runs, a synthetic QSL, nodes on
loopback, a val_map whose labels are what the nodes answer (the sim backend answers 4 zero
bytes: class 0 for every image), a full base system description and a netmeta deployment."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# Every field the checker requires of a system description, besides the 13 network ones that
# netmeta.py writes (tools/submission/submission_checker/constants.py).
BASE_SYSTEM = {
    "status": "available", "system_type": "datacenter,edge", "system_type_detail": "test rig",
    "number_of_nodes": "2", "host_processor_model_name": "test CPU",
    "host_processors_per_node": "1", "host_processor_core_count": "2",
    "host_processor_frequency": "2 GHz", "host_processor_caches": "N/A",
    "host_processor_interconnect": "N/A", "host_memory_capacity": "24 GB",
    "host_memory_configuration": "N/A", "host_storage_capacity": "100 GB",
    "host_storage_type": "SSD", "host_networking": "loopback", "host_networking_topology": "N/A",
    "host_network_card_count": "1", "accelerators_per_node": "0",
    "accelerator_model_name": "sim backend", "accelerator_memory_capacity": "N/A",
    "accelerator_frequency": "N/A", "accelerator_host_interconnect": "N/A",
    "accelerator_interconnect": "N/A", "accelerator_interconnect_topology": "N/A",
    "accelerator_memory_configuration": "N/A", "accelerator_on-chip_memories": "N/A",
    "cooling": "air", "framework": "sut-node sim", "operating_system": "Debian 12",
    "other_software_stack": "loadgen-node, sut-node", "hw_notes": "", "sw_notes": "",
}


def write(tmp, addresses, loadgen_node, inference=None, mlperf_conf=None, scenarios="Offline, Server",
          accuracy=None, samples=1024, extra_user_conf="", python="python3"):
    """Writes the config and its files under tmp; returns the config's path."""
    user_conf = os.path.join(tmp, "user.conf")
    with open(user_conf, "w") as f:
        f.write("# short runs for the test: a real submission keeps mlperf.conf's minimums\n"
                "resnet50.Offline.target_qps = 500000\n"
                "resnet50.Offline.min_duration = 300\n"
                "resnet50.Server.target_qps = 1000\n"
                "resnet50.Server.target_latency = 15\n"
                "resnet50.Server.min_duration = 1000\n"
                "resnet50.SingleStream.min_duration = 300\n"
                "resnet50.MultiStream.min_duration = 300\n"
                "resnet50.*.min_query_count = 100\n"
                "# early stopping needs 662 queries; the official LoadGen generates them up front, so enough to last min_duration\n"
                "resnet50.SingleStream.min_query_count = 700\n"
                "resnet50.MultiStream.min_query_count = 700\n" + extra_user_conf)
    val_map = os.path.join(tmp, "val_map.txt")
    with open(val_map, "w") as f:
        for i in range(samples):
            f.write(f"ILSVRC2012_val_{i + 1:08d}.JPEG 0\n")
    with open(os.path.join(tmp, "system-base.json"), "w") as f:
        json.dump(BASE_SYSTEM, f, indent=2)
    with open(os.path.join(tmp, "deployment.ini"), "w") as f:
        f.write("[deployment]\nnetwork_type = Ethernet\nnetwork_media = virtual\n"
                "network_rate = N/A (loopback)\nprotocol = TCP/IPv4\ntopology = point-to-point\n"
                "emulated = yes\n\n[loadgen]\nlocal = yes\ninterface = lo\nnic = loopback\n"
                "number_nic = 1\n\n")
        for i, a in enumerate(addresses):
            f.write(f"[sut.node{i}]\naddress = {a}\nlocal = yes\ninterface = lo\nnic = loopback\n"
                    "number_nic = 1\ndevice = sim backend\n\n")
    if accuracy is None:
        if inference:
            accuracy = (python + " {inference}/vision/classification_and_detection/tools/"
                        "accuracy-imagenet.py --mlperf-accuracy-file {accuracy_log} "
                        f"--imagenet-val-file {val_map} --dtype int32")
        else:
            accuracy = (f"{python} {os.path.join(HERE, 'label_accuracy.py')} "
                        f"--mlperf-accuracy-file {{accuracy_log}} --imagenet-val-file {val_map}")
    cfg = os.path.join(tmp, "submission.ini")
    with open(cfg, "w") as f:
        f.write("[submission]\norganization = TestOrg\nsystem = loopback_2x_sim\n"
                "division = network\nversion = v6.1\n"
                f"output = {os.path.join(tmp, 'out')}\nwork = {os.path.join(tmp, 'work')}\n"
                f"loadgen_node = {loadgen_node}\n"
                f"system_json = {os.path.join(tmp, 'system-base.json')}\n"
                f"deployment = {os.path.join(tmp, 'deployment.ini')}\n"
                "netmeta_flags = --no-probe\n"
                "demo = yes\n")  # resnet50: the CPU demo, not a Datacenter benchmark
        if inference:
            f.write(f"inference = {inference}\n")
        if mlperf_conf:
            f.write(f"mlperf_conf = {mlperf_conf}\n")
        f.write(f"\n[nodes]\naddresses = {','.join(addresses)}\n\n"
                f"[benchmark.resnet50]\nscenarios = {scenarios}\nuser_conf = {user_conf}\n"
                f"qsl = --qsl-synthetic {samples} --sample-size 3K --synthetic-kind image\n"
                f"accuracy = {accuracy}\n"
                "measurements.input_data_types = uint8\nmeasurements.retraining = no\n"
                "measurements.starting_weights_filename = none (sim backend)\n"
                "measurements.weight_data_types = N/A\n"
                "measurements.weight_transformations = none\n")
    return cfg
