#!/usr/bin/env python3
"""netmeta: the Network-division fields of the MLPerf system description JSON, and a system diagram.

    netmeta.py --config deployment.ini [--system-json IN.json] [--out OUT.json]
               [--dot diagram.dot] [--svg diagram.svg] [--facts FACTS.json | --no-probe]
               [--dump-facts FACTS.json] [--strict] [--query-nodes]
    netmeta.py --hello HOST:PORT      (one node's HelloAck as JSON: name, backend, device, ...)

Reads the deployment config (what only a person knows: switch model, media, connections per node)
and what it can read from the hosts themselves: `ip -j link/addr/route`, `ethtool` and
`ethtool -i` where installed, `tc` (the rate limit of an emulated link), `lspci` for the NIC model,
the kernel version, `sut-node --version`. Each host is reached as the config says: `netns = NAME`
(ip netns exec, the emulated fabric), `ssh = user@host` (ssh -o BatchMode=yes, optional), or
`local = yes` (this machine; the default for the LoadGen host). A host with none of these is not
probed and its facts must come from the config.

--query-nodes also asks each running SUT node itself, over the harness protocol (a plaintext Hello;
the node answers with the HelloAck that the QDL gets, whose capabilities carry the backend's own
device description, e.g. the GPU's name, memory, compute capability and driver): from this machine,
or from inside the LoadGen host's namespace when it has `netns =`. The answer goes into the facts
(sut.NAME.node) and the diagram; a node's `device =` in the config still wins. TLS-only nodes
cannot be asked this way (the reason is recorded instead).

Writes the 13 fields the submission checker requires for the Network division (is_network,
network_type, network_media, network_rate, nic_loadgen, number_nic_loadgen,
net_software_stack_loadgen, network_protocol, number_connections, nic_sut, number_nic_sut,
net_software_stack_sut, network_topology) into OUT (merged into --system-json when given, every
other key kept), and a Graphviz diagram of the LoadGen host, links, switch and SUT nodes (SVG
too when `dot` is installed). Nothing is invented: a value that neither the config nor the hosts
give is written as "TODO: ..." saying what to fill in, and every such field is listed in a
warning on stderr. Exit status: 0 (1 with --strict when a TODO remains), 2 for a bad config.

Deployment config (INI; every key optional unless marked):

    [deployment]
    network_type = Ethernet          ; else from the link type (ether, infiniband)
    network_media = Fiber            ; else from ethtool's Port; veth is "virtual"
    network_rate = 100Gb/s           ; else from ethtool's Speed or the tc rate of an emulated link
    protocol = TCP/IPv4              ; else TCP over the address family of the node addresses
    tls = no                         ; yes: TLS 1.3 is part of the protocol stack
    ucx_tls = rc,sm                  ; ucx:// nodes: the UCX_TLS the runs use (else "UCX's choice")
    topology = switch                ; switch or point-to-point
    switch = Arista 7060CX-32S       ; the switch model (with topology = switch)
    connections_per_node = 1         ; loadgen-node --connections (default 1)
    emulated = no                    ; yes for deploy/netns/fabric.sh

    [loadgen]
    ssh = root@lg01 | netns = NAME | local = yes
    interface = ens1f0               ; else the route to the first SUT node; several: a,b
    nic = NVIDIA ConnectX-6 Dx       ; overrides the probed model
    number_nic = 1                   ; else the number of interfaces
    loadgen_node = /usr/local/bin/loadgen-node

    [sut.NAME]                       ; one per SUT node (NAME as given to sut-node --name)
    address = 10.0.0.2:7000          ; required; ucx://10.0.0.2:7000 for the UCX transport
    ssh = root@gpu01 | netns = NAME | local = yes
    interface, nic, number_nic       ; as for [loadgen]
    sut_node = /usr/local/bin/sut-node
    device = 8x H100-SXM             ; shown in the diagram (else what --query-nodes learns)
"""
import argparse
import configparser
import ipaddress
import json
import os
import re
import shlex
import shutil
import socket
import struct
import subprocess
import sys

FIELDS = [
    "is_network", "network_type", "network_media", "network_rate", "nic_loadgen",
    "number_nic_loadgen", "net_software_stack_loadgen", "network_protocol", "number_connections",
    "nic_sut", "number_nic_sut", "net_software_stack_sut", "network_topology",
]

PROG = "netmeta"


class ConfigError(Exception):
    pass


def todo(what):
    return "TODO: " + what


def is_todo(v):
    return isinstance(v, str) and "TODO" in v


# ---- probing ------------------------------------------------------------------------------------

class Host:
    """How to run a command on one host: in a namespace, over ssh, locally, or not at all."""

    def __init__(self, label, sec):
        self.label = label
        self.netns = sec.get("netns", "").strip()
        self.ssh = sec.get("ssh", "").strip()
        self.local = sec.get("local", "").strip().lower() in ("1", "yes", "true")

    def reachable(self):
        return bool(self.netns or self.ssh or self.local)

    def how(self):
        if self.netns:
            return f"netns {self.netns}"
        if self.ssh:
            return f"ssh {self.ssh}"
        return "local" if self.local else "not probed"

    def run(self, argv, timeout=10):
        if self.netns:
            full = ["ip", "netns", "exec", self.netns] + argv
        elif self.ssh:
            full = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", self.ssh, shlex.join(argv)]
        elif self.local:
            full = argv
        else:
            return None
        if shutil.which(full[0]) is None:
            return None
        try:
            r = subprocess.run(full, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout if r.returncode == 0 else None

    def json(self, argv):
        out = self.run(argv)
        if not out:
            return None
        try:
            return json.loads(out)
        except ValueError:
            return None


def parse_ethtool(text):
    """Speed (Mb/s), Port and Duplex from `ethtool IF`."""
    f = {}
    if not text:
        return f
    m = re.search(r"^\s*Speed:\s*(\d+)\s*Mb/s", text, re.M)
    if m:
        f["speed_mbps"] = int(m.group(1))
    m = re.search(r"^\s*Port:\s*(.+?)\s*$", text, re.M)
    if m:
        f["port"] = m.group(1)
    m = re.search(r"^\s*Duplex:\s*(\S+)", text, re.M)
    if m:
        f["duplex"] = m.group(1)
    return f


def parse_ethtool_i(text):
    f = {}
    if not text:
        return f
    for key, name in (("driver", "driver"), ("version", "driver_version"),
                      ("firmware-version", "firmware"), ("bus-info", "bus")):
        m = re.search(r"^%s:[ \t]*(.*?)[ \t]*$" % re.escape(key), text, re.M)
        if m and m.group(1):
            f[name] = m.group(1)
    return f


def probe_interface(host, ifname):
    f = {"name": ifname}
    link = host.json(["ip", "-j", "link", "show", "dev", ifname])
    if link:
        f["link_type"] = link[0].get("link_type")
        f["mtu"] = link[0].get("mtu")
    addr = host.json(["ip", "-j", "addr", "show", "dev", ifname])
    if addr:
        f["addresses"] = [a["local"] for a in addr[0].get("addr_info", [])
                          if "local" in a and a.get("scope") == "global"]
    f.update(parse_ethtool(host.run(["ethtool", ifname])))
    f.update(parse_ethtool_i(host.run(["ethtool", "-i", ifname])))
    qd = host.json(["tc", "-j", "qdisc", "show", "dev", ifname])
    for q in qd or []:
        if q.get("kind") in ("tbf", "htb") and q.get("root"):
            rate = (q.get("options") or {}).get("rate")
            if rate:
                f["tc_rate_bps"] = int(rate) * 8
                f["tc_kind"] = q["kind"]
    if f.get("bus", "").count(":") >= 2:
        vmm = host.run(["lspci", "-vmm", "-s", f["bus"]])
        if vmm:
            vendor = re.search(r"^Vendor:\s*(.+)$", vmm, re.M)
            device = re.search(r"^Device:\s*(.+)$", vmm, re.M)
            if vendor and device:
                f["model"] = f"{vendor.group(1).strip()} {device.group(1).strip()}"
    return {k: v for k, v in f.items() if v not in (None, "", [])}


def route_dev(host, addr):
    r = host.json(["ip", "-j", "route", "get", addr])
    if r and r[0].get("dev"):
        return r[0]["dev"]
    return None


def dev_with_addr(host, addr):
    for link in host.json(["ip", "-j", "addr", "show"]) or []:
        for a in link.get("addr_info", []):
            if a.get("local") == addr:
                return link.get("ifname")
    return None


def probe_host(host, sec, peer_addr, own_addr, binary):
    facts = {"probed_via": host.how()}
    if not host.reachable():
        return facts
    kernel = host.run(["uname", "-r"])
    if kernel:
        facts["kernel"] = kernel.strip()
    osr = host.run(["cat", "/etc/os-release"])
    if osr:
        m = re.search(r'^PRETTY_NAME="?(.*?)"?$', osr, re.M)
        if m:
            facts["os"] = m.group(1)
    libuv = host.run(["dpkg-query", "-W", "-f", "${Version}", "libuv1"])
    if libuv:
        facts["libuv_version"] = libuv.strip()
    ucx = host.run(["dpkg-query", "-W", "-f", "${Version}", "libucx0"])
    if ucx:
        facts["ucx_version"] = ucx.strip()
    if binary:
        v = host.run([binary, "--version"])
        if v:
            facts["harness_version"] = v.strip().splitlines()[0]
    names = [n.strip() for n in sec.get("interface", "").split(",") if n.strip()]
    if not names:
        dev = None
        if own_addr:
            dev = dev_with_addr(host, own_addr)
        if not dev and peer_addr:
            dev = route_dev(host, peer_addr)
        if dev:
            names = [dev]
            facts["interface_from"] = "route" if not own_addr else "address"
    facts["interfaces"] = [probe_interface(host, n) for n in names]
    return facts


# ---- config -------------------------------------------------------------------------------------

def split_hostport(s):
    s = s.strip()
    for scheme in ("tcp://", "ucx://"):
        if s.startswith(scheme):
            s = s[len(scheme):]
    m = re.match(r"^\[(.+)\]:(\d+)$", s) or re.match(r"^([^:]+):(\d+)$", s)
    if not m:
        raise ConfigError(f"address '{s}' is not HOST:PORT or [V6]:PORT")
    return m.group(1), int(m.group(2))


def load_config(path):
    cp = configparser.ConfigParser(inline_comment_prefixes=(";", "#"), interpolation=None)
    try:
        with open(path, encoding="utf-8") as f:
            cp.read_file(f)
    except (OSError, configparser.Error) as e:
        raise ConfigError(f"{path}: {e}")
    dep = dict(cp["deployment"]) if cp.has_section("deployment") else {}
    lg = dict(cp["loadgen"]) if cp.has_section("loadgen") else {}
    if not any(k in lg for k in ("netns", "ssh", "local")):
        lg["local"] = "yes"
    suts = []
    for s in cp.sections():
        if not s.startswith("sut."):
            continue
        sec = dict(cp[s])
        if "address" not in sec:
            raise ConfigError(f"{path}: [{s}] has no address = HOST:PORT")
        host, port = split_hostport(sec["address"])
        transport = "ucx" if sec["address"].strip().startswith("ucx://") else "tcp"
        suts.append({"name": s[4:], "sec": sec, "host": host, "port": port, "transport": transport})
    if not suts:
        raise ConfigError(f"{path}: no [sut.NAME] section")
    cpn = dep.get("connections_per_node", "1")
    if not cpn.isdigit() or int(cpn) < 1:
        raise ConfigError(f"{path}: connections_per_node = {cpn}: expected a positive integer")
    topo = dep.get("topology", "").strip().lower()
    if topo and topo not in ("switch", "point-to-point"):
        raise ConfigError(f"{path}: topology = {topo}: expected switch or point-to-point")
    return dep, lg, suts


def resolve(host):
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    try:
        return socket.getaddrinfo(host, None)[0][4][0]
    except OSError:
        return None


def gather(dep, lg, suts):
    facts = {"loadgen": {}, "sut": {}}
    first = resolve(suts[0]["host"])
    lg_host = Host("loadgen", lg)
    facts["loadgen"] = probe_host(lg_host, lg, first, lg.get("address"), lg.get("loadgen_node"))
    lg_addr = lg.get("address")
    for s in suts:
        h = Host(s["name"], s["sec"])
        own = resolve(s["host"])
        if own in ("0.0.0.0", "::"):
            own = None
        facts["sut"][s["name"]] = probe_host(h, s["sec"], lg_addr, own,
                                             s["sec"].get("sut_node", "sut-node"))
    return facts


# ---- asking a node (the harness protocol: proto/README.md) --------------------------------------

FRAME_MAGIC = b"NSUT"
MSG_HELLO, MSG_HELLO_ACK, MSG_ERROR = 1, 2, 11


def pb_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pb_fields(buf):
    """(field number, wire type, value) of a protobuf message: ints for varints, bytes for
    length-delimited fields; other wire types are skipped."""
    i = 0
    while i < len(buf):
        key, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            key |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, shift = 0, 0
            while True:
                b = buf[i]
                i += 1
                v |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            yield num, wt, v
        elif wt == 2:
            n, shift = 0, 0
            while True:
                b = buf[i]
                i += 1
                n |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            yield num, wt, bytes(buf[i:i + n])
            i += n
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:
            raise ValueError(f"wire type {wt}")


def hello(host, port, timeout=5.0):
    """The node's HelloAck: {"node_name", "backend", "device", "max_batch", "engines"}, or
    {"error": why}."""
    meta = (pb_varint(1 << 3) + pb_varint(1) + pb_varint(2 << 3) + pb_varint(1) +
            pb_varint(5 << 3 | 2) + pb_varint(len(b"netmeta")) + b"netmeta")
    frame = FRAME_MAGIC + struct.pack(">BBHII", 1, MSG_HELLO, 0, len(meta), 0) + meta
    try:
        with socket.create_connection((host, port), timeout=timeout) as c:
            c.settimeout(timeout)
            c.sendall(frame)
            data = b""
            while True:
                while len(data) < 16:
                    chunk = c.recv(65536)
                    if not chunk:
                        return {"error": "the node closed the connection without a HelloAck "
                                         "(a TLS-only node?)"}
                    data += chunk
                if data[:4] != FRAME_MAGIC:
                    return {"error": "not the harness protocol (a TLS-only node?)"}
                _, mtype, _, mlen, plen = struct.unpack(">BBHII", data[4:16])
                if mlen + plen > 1 << 20:
                    return {"error": f"a frame of {mlen + plen} bytes before the HelloAck"}
                while len(data) < 16 + mlen + plen:
                    chunk = c.recv(65536)
                    if not chunk:
                        return {"error": "the node closed the connection mid-frame"}
                    data += chunk
                body, data = data[16:16 + mlen], data[16 + mlen + plen:]
                if mtype == MSG_ERROR:
                    text = [v for n, wt, v in pb_fields(body) if wt == 2]
                    return {"error": "the node refused: " + (text[0].decode("utf-8", "replace")
                                                           if text else "?")}
                if mtype != MSG_HELLO_ACK:
                    continue
                out = {}
                for n, wt, v in pb_fields(body):
                    if n == 4 and wt == 2:
                        out["node_name"] = v.decode("utf-8", "replace")
                    elif n == 5 and wt == 2:
                        for cn, cwt, cv in pb_fields(v):
                            if cn == 1 and cwt == 2:
                                out["backend"] = cv.decode("utf-8", "replace")
                            elif cn == 2 and cwt == 2:
                                out["device"] = cv.decode("utf-8", "replace")
                            elif cn == 3 and cwt == 0:
                                out["max_batch"] = cv
                            elif cn == 9 and cwt == 0:
                                out["engines"] = cv
                return out
    except (OSError, ValueError, IndexError, struct.error) as e:
        return {"error": f"{host}:{port}: {e}"}


def query_nodes(lg, suts, facts):
    """Each node's HelloAck into facts["sut"][NAME]["node"], asked from where LoadGen runs."""
    lg_host = Host("loadgen", lg)
    for s in suts:
        addr = f"[{s['host']}]:{s['port']}" if ":" in s["host"] else f"{s['host']}:{s['port']}"
        if lg_host.netns:
            out = lg_host.run([sys.executable, os.path.abspath(__file__), "--hello", addr],
                              timeout=15)
            try:
                ack = json.loads(out) if out else {"error": f"no answer via {lg_host.how()}"}
            except ValueError:
                ack = {"error": f"no answer via {lg_host.how()}"}
        else:
            ack = hello(s["host"], s["port"])
        facts["sut"].setdefault(s["name"], {})["node"] = ack
        if "error" in ack:
            print(f"{PROG}: node {s['name']} ({addr}): {ack['error']}", file=sys.stderr)


def node_device(sec, facts):
    """The device to show for a node: the config's, else what the node said about itself."""
    return sec.get("device") or facts.get("node", {}).get("device")


# ---- fields -------------------------------------------------------------------------------------

def fmt_rate(bps):
    """10000000000 -> '10Gb/s'; 2500000000 -> '2.5Gb/s'; 100000000 -> '100Mb/s'."""
    if bps >= 1e9:
        v, unit = bps / 1e9, "Gb/s"
    else:
        v, unit = bps / 1e6, "Mb/s"
    return (f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:g}") + unit


def ifaces(facts):
    return facts.get("interfaces") or []


def nic_of(sec, facts):
    if sec.get("nic"):
        return sec["nic"]
    ifs = ifaces(facts)
    if not ifs:
        return todo("NIC model (the host was not probed or no interface was found; set nic = ...)")
    out = []
    for f in ifs:
        if f.get("driver") == "veth":
            out.append("veth (Linux virtual Ethernet pair, emulated; no physical NIC)")
        elif f.get("model"):
            extra = [x for x in (f.get("driver") and f"driver {f['driver']}",
                                 f.get("firmware") and f"firmware {f['firmware']}") if x]
            out.append(f["model"] + (f" ({', '.join(extra)})" if extra else ""))
        else:
            hints = ", ".join(x for x in (f"interface {f['name']}",
                                          f.get("driver") and f"driver {f['driver']}",
                                          f.get("firmware") and f"firmware {f['firmware']}",
                                          f.get("bus") and f"PCI {f['bus']}") if x)
            out.append(todo(f"NIC model of {hints} (lspci was not available; set nic = ...)"))
    return "; ".join(sorted(set(out)))


def number_nic_of(sec, facts):
    if sec.get("number_nic"):
        n = sec["number_nic"]
        return int(n) if n.isdigit() else n
    ifs = ifaces(facts)
    return len(ifs) if ifs else todo("number of NICs used for the benchmark traffic (set number_nic = ...)")


def ucx_transports(dep):
    """What UCX was told to use: the UCX_TLS a deployment names (ucx_tls = ...), else UCX's choice."""
    tls = dep.get("ucx_tls", "").strip()
    return f"UCX_TLS={tls}" if tls else "transports chosen by UCX at run time (UCX_TLS unset)"


def stack_of(facts, role, transport="tcp", dep=None):
    kernel = facts.get("kernel")
    if not kernel:
        return todo(f"network software stack of the {role} (kernel version unknown: host not probed)")
    if transport == "ucx":
        parts = [f"UCX {facts.get('ucx_version', '(version unknown)')} (ucp active messages, "
                 f"rendezvous for large payloads; {ucx_transports(dep or {})}) on Linux {kernel}"]
        if facts.get("libuv_version"):
            parts[0] += f", progress through libuv {facts['libuv_version']}"
    else:
        parts = [f"Linux {kernel} kernel TCP/IP stack, BSD sockets"]
        if facts.get("libuv_version"):
            parts[0] += f" through libuv {facts['libuv_version']}"
    if facts.get("harness_version"):
        parts.append(facts["harness_version"])
    if facts.get("os"):
        parts.append(facts["os"])
    return "; ".join(parts)


def per_node(values):
    """One value when all nodes agree, else 'name: value; ...'."""
    uniq = sorted(set(str(v) for _, v in values), key=str)
    if len(uniq) == 1:
        v = values[0][1]
        return v
    return "; ".join(f"{n}: {v}" for n, v in values)


def build_fields(dep, lg, suts, facts):
    f = {"is_network": "true"}
    all_ifs = ifaces(facts["loadgen"]) + [i for s in suts for i in ifaces(facts["sut"].get(s["name"], {}))]

    # Layer 2: the fabric type.
    if dep.get("network_type"):
        f["network_type"] = dep["network_type"]
    else:
        kinds = sorted(set(i.get("link_type") for i in all_ifs if i.get("link_type")))
        names = {"ether": "Ethernet", "infiniband": "InfiniBand", "ieee802.11": "IEEE 802.11"}
        if len(kinds) == 1 and kinds[0] in names:
            f["network_type"] = names[kinds[0]]
        else:
            f["network_type"] = todo("fabric type: Ethernet, InfiniBand, IEEE 802.11 or 3GPP"
                                     + (f" (hosts report {', '.join(kinds)})" if kinds else ""))

    # Layer 1: media and rate.
    if dep.get("network_media"):
        f["network_media"] = dep["network_media"]
    else:
        media = set()
        for i in all_ifs:
            port = (i.get("port") or "").lower()
            if i.get("driver") == "veth":
                media.add("virtual (veth pair, emulated)")
            elif "fibre" in port or "fiber" in port:
                media.add("Fiber")
            elif "direct attach" in port:
                media.add("Copper (direct attach cable)")
            elif "twisted" in port:
                media.add("Copper (twisted pair)")
            else:
                media.add(None)
        if media and None not in media:
            f["network_media"] = " and ".join(sorted(media))
        else:
            f["network_media"] = todo("physical medium: Copper, Fiber or wireless (ethtool did not say)")

    if dep.get("network_rate"):
        f["network_rate"] = dep["network_rate"]
    else:
        tc = sorted(set(i["tc_rate_bps"] for i in all_ifs if i.get("tc_rate_bps")))
        speeds = sorted(set(i["speed_mbps"] for i in all_ifs if i.get("speed_mbps")))
        emulated = any(i.get("driver") == "veth" for i in all_ifs)
        if tc and len(tc) == 1:
            f["network_rate"] = f"{fmt_rate(tc[0])} per link and direction (tc tbf rate limit" + \
                (" on emulated veth links)" if emulated else ")")
        elif emulated and dep.get("rate", "") == "none":
            f["network_rate"] = "unlimited (emulated veth links without a rate limit)"
        elif speeds and not emulated:
            lg_speeds = sorted(set(i["speed_mbps"] for i in ifaces(facts["loadgen"]) if i.get("speed_mbps")))
            sut_speeds = sorted(set(i["speed_mbps"] for s in suts
                                    for i in ifaces(facts["sut"].get(s["name"], {})) if i.get("speed_mbps")))
            if len(speeds) == 1:
                f["network_rate"] = fmt_rate(speeds[0] * 1e6)
            else:
                f["network_rate"] = "LoadGen " + "/".join(fmt_rate(s * 1e6) for s in lg_speeds) + \
                    ", SUT nodes " + "/".join(fmt_rate(s * 1e6) for s in sut_speeds)
        else:
            f["network_rate"] = todo("link rate, e.g. 100Gb/s (ethtool did not report a speed)")

    f["nic_loadgen"] = nic_of(lg, facts["loadgen"])
    f["number_nic_loadgen"] = number_nic_of(lg, facts["loadgen"])
    transports = sorted(set(s.get("transport", "tcp") for s in suts))
    lg_transport = "ucx" if transports == ["ucx"] else "tcp"
    f["net_software_stack_loadgen"] = stack_of(facts["loadgen"], "LoadGen host", lg_transport, dep)

    # Layers 3 and 4.
    if dep.get("protocol"):
        proto = dep["protocol"]
    else:
        fams = set()
        for s in suts:
            a = resolve(s["host"])
            if a:
                fams.add("IPv6" if ":" in a else "IPv4")
        proto = "TCP/" + "+".join(sorted(fams)) if fams else todo("network protocol, e.g. TCP/IPv4")
    l2 = f["network_type"] if not is_todo(f["network_type"]) else "the fabric"
    tls = dep.get("tls", "no").strip().lower() in ("1", "yes", "true")
    if is_todo(proto):
        f["network_protocol"] = proto
    elif transports == ["ucx"]:
        f["network_protocol"] = (f"UCX ({ucx_transports(dep)}; RDMA on InfiniBand/RoCE where UCX "
                                 f"finds it), connection set-up over {proto} over {l2}; "
                                 "session layer: the harness's framed protobuf-c protocol, version 1 "
                                 "(proto/README.md), one UCX active message per frame")
    else:
        f["network_protocol"] = (("TLS 1.3 over " if tls else "") + f"{proto} over {l2}; "
                                 "session layer: the harness's framed protobuf-c protocol, version 1 "
                                 "(proto/README.md)")

    f["number_connections"] = len(suts) * int(dep.get("connections_per_node", "1"))

    nics = [(s["name"], nic_of(s["sec"], facts["sut"].get(s["name"], {}))) for s in suts]
    f["nic_sut"] = per_node(nics)
    nums = [(s["name"], number_nic_of(s["sec"], facts["sut"].get(s["name"], {}))) for s in suts]
    f["number_nic_sut"] = per_node(nums)
    stacks = [(s["name"], stack_of(facts["sut"].get(s["name"], {}), f"SUT node {s['name']}",
                                   s.get("transport", "tcp"), dep)) for s in suts]
    f["net_software_stack_sut"] = per_node(stacks)

    topo = dep.get("topology", "").strip().lower()
    n = len(suts)
    nodes = f"{n} SUT node{'s' if n != 1 else ''}"
    if topo == "switch":
        sw = dep.get("switch") or todo("switch model (set switch = ... in [deployment])")
        f["network_topology"] = f"LoadGen host connected to {nodes} through one switch ({sw})"
    elif topo == "point-to-point":
        f["network_topology"] = f"LoadGen host connected point to point to {nodes}"
    else:
        f["network_topology"] = todo(f"topology of the LoadGen host and {nodes}: switch (and its "
                                     "model) or point-to-point (set topology = ...)")
    return {k: f[k] for k in FIELDS}


# ---- diagram ------------------------------------------------------------------------------------

def dot_escape(s):
    return str(s).replace("\\", "\\\\").replace('"', '\\"')


def label(lines):
    return "\\n".join(dot_escape(x) for x in lines if x)


def iface_line(facts, sec):
    parts = []
    for i in ifaces(facts):
        bits = [i["name"]]
        if i.get("addresses"):
            bits.append(",".join(i["addresses"]))
        if i.get("mtu"):
            bits.append(f"MTU {i['mtu']}")
        parts.append(" ".join(bits))
    return "; ".join(parts) or (sec.get("interface") and f"interface {sec['interface']}")


def build_dot(dep, lg, suts, facts, fields):
    emulated = dep.get("emulated", "").lower() in ("1", "yes", "true")
    title = dep.get("name", "deployment")
    link = [x for x in (fields["network_type"], fields["network_media"], fields["network_rate"])
            if not is_todo(x)]
    link_label = label([" / ".join(x.split(" (")[0] for x in link) or "link (TODO)",
                        fields["network_protocol"].split(";")[0] if not is_todo(fields["network_protocol"]) else None,
                        f"{dep.get('connections_per_node', '1')} TCP connection(s) per node"])
    out = ["graph network {",
           f'  label="{dot_escape("System diagram: " + title + (" (emulated fabric)" if emulated else ""))}";',
           '  labelloc=t; rankdir=LR; fontname="Helvetica"; fontsize=12;',
           '  node [shape=box, style="rounded,filled", fillcolor="#f4f6fa", fontname="Helvetica", fontsize=10];',
           '  edge [fontname="Helvetica", fontsize=9];']
    lgf = facts["loadgen"]
    out.append('  loadgen [fillcolor="#dfe9f7", label="' + label([
        "LoadGen host (loadgen-node + QDL)",
        lg.get("ssh") or lg.get("netns") or socket.gethostname(),
        f"NIC: {fields['nic_loadgen']}" if not is_todo(fields["nic_loadgen"]) else "NIC: TODO",
        iface_line(lgf, lg),
        lgf.get("kernel") and f"Linux {lgf['kernel']}"]) + '"];')
    out.append("  subgraph cluster_sut {")
    out.append('    label="SUT (everything beyond the LoadGen host, rules 6.2.3)"; style=dashed; color="#888888";')
    topo = dep.get("topology", "").strip().lower()
    if topo == "switch":
        out.append('    switch [shape=box3d, fillcolor="#eeeeee", label="' + label([
            "Switch", dep.get("switch") or "model: TODO"]) + '"];')
    for i, s in enumerate(suts):
        sf = facts["sut"].get(s["name"], {})
        nic = nic_of(s["sec"], sf)
        out.append(f'    sut{i} [fillcolor="#e3f2e1", label="' + label([
            f"SUT node {s['name']} (sut-node)",
            f"{s['host']}:{s['port']}",
            node_device(s["sec"], sf) and f"device: {node_device(s['sec'], sf)}",
            f"NIC: {nic}" if not is_todo(nic) else "NIC: TODO",
            iface_line(sf, s["sec"]),
            sf.get("kernel") and f"Linux {sf['kernel']}"]) + '"];')
    out.append("  }")
    if topo == "switch":
        out.append(f'  loadgen -- switch [label="{link_label}"];')
        for i, _ in enumerate(suts):
            out.append(f'  switch -- sut{i} [label="{link_label}"];')
    else:
        for i, _ in enumerate(suts):
            style = "" if topo == "point-to-point" else ', style=dashed, color="#cc0000"'
            out.append(f'  loadgen -- sut{i} [label="{link_label}"{style}];')
    out.append("}")
    return "\n".join(out) + "\n"


# ---- main ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(prog="netmeta.py", description=__doc__.split("\n")[0],
                                 epilog="See the module docstring (head -60 netmeta.py) or "
                                        "deploy/README.md for the config format.")
    ap.add_argument("--config", help="deployment config (INI); required unless --hello")
    ap.add_argument("--system-json", help="existing system description JSON to merge into")
    ap.add_argument("--out", help="output JSON (default: stdout)")
    ap.add_argument("--dot", help="write the system diagram as Graphviz DOT here")
    ap.add_argument("--svg", help="also render it as SVG (needs graphviz's dot)")
    ap.add_argument("--facts", help="read host facts from this JSON instead of probing")
    ap.add_argument("--dump-facts", help="write the host facts that were used to this JSON")
    ap.add_argument("--no-probe", action="store_true", help="do not probe any host")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a field is still TODO")
    ap.add_argument("--query-nodes", action="store_true",
                    help="also ask each running SUT node for its backend and device (HelloAck)")
    ap.add_argument("--hello", metavar="HOST:PORT",
                    help="print one node's HelloAck (name, backend, device) as JSON and exit")
    a = ap.parse_args()
    if a.hello:
        try:
            h, p = split_hostport(a.hello)
        except ConfigError as e:
            print(f"{PROG}: --hello: {e}", file=sys.stderr)
            return 2
        ack = hello(h, p)
        print(json.dumps(ack, sort_keys=True))
        return 1 if "error" in ack else 0
    if not a.config:
        ap.error("--config is required")

    try:
        dep, lg, suts = load_config(a.config)
    except ConfigError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    if a.facts:
        try:
            with open(a.facts, encoding="utf-8") as f:
                facts = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{PROG}: --facts {a.facts}: {e}", file=sys.stderr)
            return 2
        facts.setdefault("loadgen", {})
        facts.setdefault("sut", {})
    elif a.no_probe:
        facts = {"loadgen": {}, "sut": {}}
    else:
        facts = gather(dep, lg, suts)
    if a.query_nodes:
        query_nodes(lg, suts, facts)
    if a.dump_facts:
        with open(a.dump_facts, "w", encoding="utf-8") as f:
            json.dump(facts, f, indent=2, sort_keys=True)
            f.write("\n")

    fields = build_fields(dep, lg, suts, facts)
    doc = {}
    if a.system_json:
        try:
            with open(a.system_json, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{PROG}: --system-json {a.system_json}: {e}", file=sys.stderr)
            return 2
        if not isinstance(doc, dict):
            print(f"{PROG}: --system-json {a.system_json}: not a JSON object", file=sys.stderr)
            return 2
    doc.update(fields)
    text = json.dumps(doc, indent=4) + "\n"
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, a.out)
    else:
        sys.stdout.write(text)

    if a.dot or a.svg:
        dot = build_dot(dep, lg, suts, facts, fields)
        if a.dot:
            with open(a.dot, "w", encoding="utf-8") as f:
                f.write(dot)
        if a.svg:
            if shutil.which("dot") is None:
                print(f"{PROG}: graphviz 'dot' is not installed: no SVG (the DOT file renders "
                      "anywhere with: dot -Tsvg diagram.dot)", file=sys.stderr)
            else:
                r = subprocess.run(["dot", "-Tsvg", "-o", a.svg], input=dot, text=True,
                                   capture_output=True)
                if r.returncode != 0:
                    print(f"{PROG}: dot failed: {r.stderr.strip()}", file=sys.stderr)
                    return 1

    todos = [k for k in FIELDS if is_todo(fields[k])]
    if todos:
        print(f"{PROG}: warning: {len(todos)} field(s) need a person to fill them in: "
              + ", ".join(todos), file=sys.stderr)
        for k in todos:
            print(f"  {k}: {fields[k]}", file=sys.stderr)
    unprobed = [s["name"] for s in suts if "kernel" not in facts["sut"].get(s["name"], {})]
    if unprobed and not a.facts and not a.no_probe:
        print(f"{PROG}: note: not probed (no netns/ssh/local in the config, or unreachable): "
              + ", ".join(unprobed), file=sys.stderr)
    return 1 if (todos and a.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
