#!/usr/bin/env python3
"""Tests of deploy/metadata/netmeta.py from recorded host facts (no probing, no root needed).

    test_netmeta.py [-v]        (CTest: deploy.netmeta)

With SUT_NODE set to a sut-node binary (CTest sets it), --hello and --query-nodes are also tested
against a live node on the loopback.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
NETMETA = os.path.join(HERE, "..", "metadata", "netmeta.py")
FIELDS = [
    "is_network", "network_type", "network_media", "network_rate", "nic_loadgen",
    "number_nic_loadgen", "net_software_stack_loadgen", "network_protocol", "number_connections",
    "nic_sut", "number_nic_sut", "net_software_stack_sut", "network_topology",
]

CX6 = {"name": "ens1f0", "link_type": "ether", "mtu": 9000, "driver": "mlx5_core",
       "driver_version": "6.1.0-18-amd64", "firmware": "22.36.1010 (MT_0000000359)",
       "bus": "0000:3b:00.0", "speed_mbps": 100000, "port": "FIBRE", "duplex": "Full",
       "model": "Mellanox Technologies MT2892 Family [ConnectX-6 Dx]", "addresses": ["10.0.0.1"]}


def read(path):
    with open(path) as f:
        return f.read()


def host(iface, kernel="6.1.0-18-amd64", harness=None):
    h = {"kernel": kernel, "os": "Debian GNU/Linux 12 (bookworm)", "libuv_version": "1.44.2-1",
         "interfaces": [iface], "probed_via": "ssh"}
    if harness:
        h["harness_version"] = harness
    return h


class NetmetaTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="netmeta-test-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, name, text):
        p = os.path.join(self.dir, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def run_tool(self, *args):
        r = subprocess.run([sys.executable, NETMETA] + list(args), capture_output=True, text=True,
                           timeout=60)
        return r.returncode, r.stdout, r.stderr

    def test_real_hardware_facts_fill_every_field(self):
        conf = self.write("d.ini", """
[deployment]
topology = switch
switch = Arista 7060CX-32S
connections_per_node = 2
[loadgen]
ssh = root@lg01
[sut.gpu-1]
address = 10.0.0.2:7000
ssh = root@gpu-1
[sut.gpu-2]
address = 10.0.0.3:7000
ssh = root@gpu-2
""")
        sut = dict(CX6, addresses=["10.0.0.2"])
        facts = self.write("f.json", json.dumps({
            "loadgen": host(CX6),
            "sut": {"gpu-1": host(sut, harness="sut-node 0.1.0 (protocol 1, backend ABI 1)"),
                    "gpu-2": host(dict(sut, addresses=["10.0.0.3"]),
                                  harness="sut-node 0.1.0 (protocol 1, backend ABI 1)")}}))
        existing = self.write("sys.json", json.dumps({"submitter": "Example", "division": "network"}))
        out = os.path.join(self.dir, "out.json")
        dot = os.path.join(self.dir, "d.dot")
        rc, _, err = self.run_tool("--config", conf, "--facts", facts, "--system-json", existing,
                                   "--out", out, "--dot", dot, "--strict")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("TODO", err)
        d = json.loads(read(out))
        self.assertEqual(d["submitter"], "Example")          # other keys are kept
        for k in FIELDS:
            self.assertIn(k, d)
            self.assertNotIn("TODO", str(d[k]), k)
        self.assertEqual(d["is_network"], "true")
        self.assertEqual(d["network_type"], "Ethernet")
        self.assertEqual(d["network_media"], "Fiber")
        self.assertEqual(d["network_rate"], "100Gb/s")
        self.assertIn("ConnectX-6 Dx", d["nic_loadgen"])
        self.assertIn("firmware 22.36.1010", d["nic_sut"])
        self.assertEqual(d["number_nic_loadgen"], 1)
        self.assertEqual(d["number_nic_sut"], 1)
        self.assertEqual(d["number_connections"], 4)          # 2 nodes x 2 connections
        self.assertTrue(d["network_protocol"].startswith("TCP/IPv4 over Ethernet"))
        self.assertIn("Linux 6.1.0-18-amd64", d["net_software_stack_loadgen"])
        self.assertIn("sut-node 0.1.0", d["net_software_stack_sut"])
        self.assertIn("Arista 7060CX-32S", d["network_topology"])
        self.assertIn("2 SUT nodes", d["network_topology"])
        text = read(dot)
        for needle in ("loadgen -- switch", "switch -- sut0", "switch -- sut1", "gpu-2", "cluster_sut"):
            self.assertIn(needle, text)

    def test_ucx_transport_fills_protocol_and_stacks(self):
        conf = self.write("d.ini", """
[deployment]
topology = switch
ucx_tls = rc,sm
[sut.a]
address = ucx://10.0.0.2:7000
""")
        ib = dict(CX6, link_type="infiniband")
        facts = self.write("f.json", json.dumps({
            "loadgen": dict(host(ib), ucx_version="1.13.1-1"),
            "sut": {"a": dict(host(dict(ib, addresses=["10.0.0.2"])), ucx_version="1.13.1-1")}}))
        out = os.path.join(self.dir, "out.json")
        rc, _, err = self.run_tool("--config", conf, "--facts", facts, "--out", out)
        self.assertEqual(rc, 0, err)
        d = json.loads(read(out))
        self.assertEqual(d["network_type"], "InfiniBand")
        self.assertTrue(d["network_protocol"].startswith("UCX (UCX_TLS=rc,sm"), d["network_protocol"])
        self.assertIn("over TCP/IPv4 over InfiniBand", d["network_protocol"])
        for k in ("net_software_stack_loadgen", "net_software_stack_sut"):
            self.assertIn("UCX 1.13.1-1", d[k])
            self.assertNotIn("kernel TCP/IP stack", d[k])

    def test_unknowns_are_marked_never_invented(self):
        conf = self.write("d.ini", """
[sut.a]
address = 192.168.5.2:7000
""")
        out = os.path.join(self.dir, "out.json")
        rc, _, err = self.run_tool("--config", conf, "--no-probe", "--out", out)
        self.assertEqual(rc, 0, err)
        d = json.loads(read(out))
        self.assertEqual(sorted(d), sorted(FIELDS))
        self.assertEqual(d["is_network"], "true")
        self.assertEqual(d["number_connections"], 1)
        for k in ("network_type", "network_media", "network_rate", "nic_loadgen", "nic_sut",
                  "number_nic_loadgen", "number_nic_sut", "net_software_stack_loadgen",
                  "net_software_stack_sut", "network_topology"):
            self.assertTrue(str(d[k]).startswith("TODO: "), f"{k} = {d[k]!r}")
            self.assertIn(k, err)                              # listed in the warning
        self.assertIn("need a person to fill them in", err)
        rc, _, _ = self.run_tool("--config", conf, "--no-probe", "--out", out, "--strict")
        self.assertEqual(rc, 1)

    def test_nic_without_model_gives_hints(self):
        conf = self.write("d.ini", "[deployment]\ntopology = point-to-point\n[sut.a]\naddress = 10.1.0.2:7000\n")
        nic = {k: v for k, v in CX6.items() if k != "model"}
        facts = self.write("f.json", json.dumps({"loadgen": host(nic), "sut": {"a": host(nic)}}))
        rc, out, err = self.run_tool("--config", conf, "--facts", facts)
        d = json.loads(out)
        self.assertTrue(d["nic_loadgen"].startswith("TODO: NIC model of interface ens1f0"))
        self.assertIn("driver mlx5_core", d["nic_loadgen"])
        self.assertIn("PCI 0000:3b:00.0", d["nic_loadgen"])
        self.assertEqual(d["network_topology"], "LoadGen host connected point to point to 1 SUT node")

    def test_different_nodes_are_listed_per_node(self):
        conf = self.write("d.ini", """
[deployment]
topology = switch
switch = Juniper QFX5120
[loadgen]
nic = Intel E810-CQDA2
[sut.a]
address = 10.0.0.2:7000
[sut.b]
address = 10.0.0.3:7000
""")
        e810 = {"name": "eth0", "link_type": "ether", "driver": "ice", "speed_mbps": 25000,
                "port": "Direct Attach Copper", "model": "Intel Corporation Ethernet Controller E810-XXV"}
        facts = self.write("f.json", json.dumps({
            "loadgen": host(dict(e810, speed_mbps=100000)),
            "sut": {"a": host(e810), "b": host(dict(CX6, speed_mbps=25000, port="Direct Attach Copper"))}}))
        rc, out, err = self.run_tool("--config", conf, "--facts", facts)
        d = json.loads(out)
        self.assertEqual(d["nic_loadgen"], "Intel E810-CQDA2")   # the config wins
        self.assertTrue(d["nic_sut"].startswith("a: Intel"), d["nic_sut"])
        self.assertIn("b: Mellanox", d["nic_sut"])
        self.assertEqual(d["network_media"], "Copper (direct attach cable)")
        self.assertEqual(d["network_rate"], "LoadGen 100Gb/s, SUT nodes 25Gb/s")

    def test_ipv6_tls_and_config_values(self):
        conf = self.write("d.ini", """
[deployment]
network_type = Ethernet
network_media = Copper
network_rate = 10Gb/s
tls = yes
topology = switch
switch = HPE Aruba 8325
connections_per_node = 8
[loadgen]
nic = Intel X550T
number_nic = 1
[sut.a]
address = [fd00::2]:7000
nic = Intel X550T
number_nic = 1
""")
        rc, out, err = self.run_tool("--config", conf, "--no-probe")
        d = json.loads(out)
        self.assertTrue(d["network_protocol"].startswith("TLS 1.3 over TCP/IPv6 over Ethernet"), d["network_protocol"])
        self.assertEqual(d["number_connections"], 8)
        self.assertEqual(d["network_rate"], "10Gb/s")

    def test_bad_config(self):
        conf = self.write("d.ini", "[deployment]\ntopology = ring\n[sut.a]\naddress = 10.0.0.2:7000\n")
        rc, _, err = self.run_tool("--config", conf, "--no-probe")
        self.assertEqual(rc, 2)
        self.assertIn("topology = ring", err)
        conf = self.write("e.ini", "[deployment]\n")
        rc, _, err = self.run_tool("--config", conf, "--no-probe")
        self.assertEqual(rc, 2)
        self.assertIn("no [sut.NAME] section", err)
        conf = self.write("f.ini", "[sut.a]\naddress = nowhere\n")
        rc, _, err = self.run_tool("--config", conf, "--no-probe")
        self.assertEqual(rc, 2)
        self.assertIn("HOST:PORT", err)

    @unittest.skipUnless(shutil.which("dot"), "graphviz dot is not installed")
    def test_diagram_renders_to_svg(self):
        conf = self.write("d.ini", "[deployment]\ntopology = switch\n[sut.a]\naddress = 10.0.0.2:7000\n"
                                   "device = 8x H100\n[sut.b]\naddress = 10.0.0.3:7000\n")
        svg = os.path.join(self.dir, "d.svg")
        rc, _, err = self.run_tool("--config", conf, "--no-probe", "--svg", svg)
        self.assertEqual(rc, 0, err)
        root = ET.parse(svg).getroot()
        self.assertTrue(root.tag.endswith("svg"))
        text = read(svg)
        self.assertIn("8x H100", text)
        self.assertIn("Switch", text)

    @unittest.skipUnless(os.environ.get("SUT_NODE"), "SUT_NODE (a sut-node binary) is not set")
    def test_live_node_says_its_device(self):
        """The device comes from the node's own HelloAck (here the sim backend's description):
        what a GPU node's describe() reports reaches the facts and the diagram."""
        port_file = os.path.join(self.dir, "port")
        node = subprocess.Popen([os.environ["SUT_NODE"], "--backend", "sim", "--backend-opt",
                                 "engines=3", "--listen", "127.0.0.1:0", "--name", "gpu-7",
                                 "--port-file", port_file, "--log-level", "warn"])
        try:
            for _ in range(100):
                if os.path.exists(port_file) and read(port_file).strip():
                    break
                time.sleep(0.05)
            port = int(read(port_file))
            rc, out, err = self.run_tool("--hello", f"127.0.0.1:{port}")
            self.assertEqual(rc, 0, err)
            ack = json.loads(out)
            self.assertEqual(ack["node_name"], "gpu-7")
            self.assertEqual(ack["backend"], "sim")
            self.assertEqual(ack["engines"], 3)
            self.assertIn("simulated accelerator: 3 engines", ack["device"])

            conf = self.write("q.ini", f"[sut.gpu-7]\naddress = 127.0.0.1:{port}\n"
                                       f"[sut.gone]\naddress = 127.0.0.1:1\n")
            dot = os.path.join(self.dir, "q.dot")
            facts = os.path.join(self.dir, "q.json")
            rc, _, err = self.run_tool("--config", conf, "--no-probe", "--query-nodes", "--dot",
                                       dot, "--dump-facts", facts)
            self.assertEqual(rc, 0, err)
            self.assertIn("device: simulated accelerator: 3 engines", read(dot))
            f = json.loads(read(facts))
            self.assertEqual(f["sut"]["gpu-7"]["node"]["backend"], "sim")
            self.assertIn("error", f["sut"]["gone"]["node"])
            self.assertIn("node gone (127.0.0.1:1)", err)
        finally:
            node.terminate()
            node.wait(timeout=30)

    def test_hello_needs_an_address(self):
        rc, _, err = self.run_tool("--hello", "nowhere")
        self.assertEqual(rc, 2)
        self.assertIn("HOST:PORT", err)


if __name__ == "__main__":
    unittest.main()
