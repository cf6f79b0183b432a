#!/usr/bin/env python3
"""Helpers of the DNS side-by-side test (dns_vs_coredns.sh) and benchmark.

  dnsparity.py cluster SEED PREFIX single|dual
      a random cluster as JSON lines `PATH<TAB>OBJECT` to POST: namespaces,
      Services of every kind and their EndpointSlices (written directly: no
      controller runs), endpoint addresses from 10.<200+x>.0.0/16 so two runs
      do not mix
  dnsparity.py demo OBJECTS.json SLICES.json SUFFIX single|dual
      the demo cluster (`svcenv get -o json`) as `PATH<TAB>OBJECT` lines
  dnsparity.py queries ZONE SERVICES.json SLICES.json NAMESPACES.json NS...
      the queries (one `NAME TYPE [dig options]` a line, dig's batch format)
      covering every form of the DNS spec and of CoreDNS's kubernetes plugin
      for the Services of the given namespaces, plus names outside the zone
  dnsparity.py compare ZONE QUERIES UPSTREAM-OUT OURS-OUT LABEL
      one TAP line per query from two `dig -f` outputs (see compare())
  dnsparity.py show QUERIES OUT
      the answers of one server (the harness without a second server)
  dnsparity.py freeport IP
      a UDP+TCP port free on IP
"""
import ipaddress
import json
import random
import socket
import sys

UPSTREAM_ZONE = "example.test"

# Where svcenv-dns deliberately answers differently from CoreDNS 1.15 with
# kubeadm's Corefile (each also in the README, "Where it differs from CoreDNS
# on purpose"): (why, test). test(up, ours, part) is true when `part`, one
# difference found between the two answers, is that deliberate difference;
# a query whose every difference is deliberate passes, and its TAP line says
# why.

def _forwarded_ttls(up, ours, part):
    return part.split(": ", 1)[-1].startswith("forwarded TTLs")


def _reverse_aged(up, ours, part):
    # CoreDNS's cache serves the reverse zones' answers aged, by at most its
    # 30 s; svcenv-dns answers them from the snapshot, TTLs whole
    if not part.split(": ", 1)[-1].startswith("reverse TTLs"):
        return False
    a, b = part.split("reverse TTLs ", 1)[1].split(" vs ")
    a, b = json.loads(a), json.loads(b)
    return len(a) == len(b) and all(y - 30 <= x <= y for x, y in zip(a, b))


def _reverse_owner_case(up, ours, part):
    # CoreDNS's cache (on for the reverse zones) answers a PTR query with the
    # owner name spelt as the query that filled the entry (a lower-case one
    # before a mixed-case one: lower case; the other way round: mixed case
    # for everyone); svcenv-dns echoes each query's own spelling
    if not part.startswith("ANSWER: upstream only"):
        return False
    a, b = up["sections"].get("ANSWER", []), ours["sections"].get("ANSWER", [])

    def key(r):
        return (r[0].lower(),) + tuple(r[2:])

    if not a or len(a) != len(b) or sorted(map(key, a)) != sorted(map(key, b)):
        return False
    if not all(r[3] == "PTR" and r[0].lower().endswith(("in-addr.arpa.", "ip6.arpa."))
               for r in a):
        return False
    ta = sorted(int(r[1]) for r in a)
    tb = sorted(int(r[1]) for r in b)
    return all(y - 30 <= x <= y for x, y in zip(ta, tb))


def _pod_srv_nodata(up, ours, part):
    # CoreDNS answers the SRV form of a pod name with port 0 and the pod's
    # address; svcenv-dns gives NODATA
    theirs = up["sections"].get("ANSWER", [])
    return (bool(theirs) and all(r[3] == "SRV" and r[4].split()[2] == "0" for r in theirs)
            and ".pod." in theirs[0][0].lower() and ours["rcode"] == "NOERROR"
            and not ours["sections"].get("ANSWER")
            and part.split(":", 1)[0] in ("ANSWER", "AUTHORITY", "ADDITIONAL"))


DIFFERENCES = [
    ("the SRV form of a pod name is NODATA; CoreDNS answers port 0", _pod_srv_nodata),
    ("answers in the reverse zones are not cached; CoreDNS's cache (kubeadm "
     "disables it for the cluster domain only) serves them aged", _reverse_aged),
    ("a PTR answer's owner echoes the query's spelling; CoreDNS's cache answers "
     "with the spelling of the query that filled it", _reverse_owner_case),
    ("a cached answer's TTLs count from when each server's cache took it "
     "(the two fill their caches at different moments)", _forwarded_ttls),
]


# --- the random cluster --------------------------------------------------

def _ns(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _port(name, port, proto):
    p = {"port": port, "protocol": proto}
    if name:
        p["name"] = name
    return p


def cluster(seed, prefix, dual):
    rnd = random.Random(seed)
    out = []
    nss = [f"{prefix}-{x}" for x in ("a", "b", "c")]
    empty = f"{prefix}-empty"
    for ns in nss + [empty]:
        out.append(("/api/v1/namespaces", _ns(ns)))
    net = 200 + rnd.randrange(50)
    used = set()

    def ip4():
        while True:
            a = f"10.{net}.{rnd.randrange(256)}.{rnd.randrange(1, 255)}"
            if a not in used:
                used.add(a)
                return a

    def ip6():
        while True:
            a = str(ipaddress.IPv6Address(f"fd00:10:{net:x}::") + rnd.randrange(1, 1 << 16))
            if a not in used:
                used.add(a)
                return a

    def ports(named=True, count=None):
        names = ["http", "https", "grpc", "dns", "metrics", "admin", "raft"]
        n = count if count is not None else rnd.randrange(1, 4)
        if not named:
            return [("", rnd.choice([80, 8080, 9000]), rnd.choice(["TCP", "UDP"]))]
        picked = rnd.sample(names, n)
        return [(nm, 1000 + rnd.randrange(9000), rnd.choice(["TCP", "TCP", "UDP", "SCTP"]))
                for nm in picked]

    def svc(ns, name, spec):
        out.append((f"/api/v1/namespaces/{ns}/services",
                    {"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": name, "namespace": ns}, "spec": spec}))

    def slice_(ns, svcname, idx, family, pts, eps):
        out.append((f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                    {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                     "metadata": {"name": f"{svcname}-x{idx}", "namespace": ns,
                                  "labels": {"kubernetes.io/service-name": svcname,
                                             "endpointslice.kubernetes.io/managed-by":
                                                 "dns-vs-coredns.svcenv.test"}},
                     "addressType": family,
                     "ports": [_port(n, p + 1, pr) for n, p, pr in pts],
                     "endpoints": eps}))

    def ep(addr, ready=True, hostname=None, pod=None, extra=None):
        e = {"addresses": [addr] + (extra or [])}
        if ready is not None:
            e["conditions"] = {"ready": ready}
        if hostname:
            e["hostname"] = hostname
        if pod:
            e["targetRef"] = {"kind": "Pod", "name": pod}
        return e

    def spec_ports(pts):
        return [_port(n, p, pr) for n, p, pr in pts]

    shared_ip = ip4()  # an endpoint in two Services: two PTRs
    kinds = ["clusterip", "clusterip-unnamed", "clusterip-noep", "headless",
             "headless-hostnames", "headless-pnra", "headless-noready",
             "headless-v6", "headless-noports", "headless-multislice",
             "headless-big", "extname-out", "extname-in", "extname-missing",
             "extname-ip", "shared-a", "shared-b", "clusterip-subdomain"]
    if dual:  # the API server has an IPv6 service range too
        kinds += ["clusterip-dual", "clusterip-v6"]
    # every kind once, then a dozen more picked at random
    plain = [k for k in kinds if not k.startswith("shared") and k != "headless-big"]
    kinds += [rnd.choice(plain) for _ in range(12)]
    for i, kind in enumerate(kinds):
        ns = nss[i % len(nss)]
        name = f"{kind}-{i}"
        if kind.startswith("clusterip") or kind.startswith("shared"):
            pts = ports(named=(kind != "clusterip-unnamed"))
            spec = {"ports": spec_ports(pts)}
            if kind == "clusterip-dual":
                spec["ipFamilyPolicy"] = "RequireDualStack"
            elif kind == "clusterip-v6":
                spec["ipFamilies"] = ["IPv6"]
            svc(ns, name, spec)
            if kind == "clusterip-noep":
                continue
            eps = []
            for j in range(rnd.randrange(1, 5)):
                r = rnd.choice([True, True, False, None])
                host = f"pod-{j}" if kind == "clusterip-subdomain" else None
                eps.append(ep(ip4(), r, host, f"{name}-{j}"))
            if kind.startswith("shared"):
                eps.append(ep(shared_ip, True, None, f"shared-{kind}"))
            if kind != "clusterip-v6":
                slice_(ns, name, 0, "IPv4", pts, eps)
            if kind in ("clusterip-dual", "clusterip-v6"):
                slice_(ns, name, 1, "IPv6", pts, [ep(ip6(), True, None, f"{name}-v6")])
        elif kind.startswith("headless"):
            pts = [] if kind == "headless-noports" else ports()
            spec = {"clusterIP": "None", "ports": spec_ports(pts)}
            if kind == "headless-pnra":
                spec["publishNotReadyAddresses"] = True
            svc(ns, name, spec)
            n = {"headless-big": 130}.get(kind, rnd.randrange(2, 6))
            eps = []
            for j in range(n):
                if kind == "headless-noready":
                    r = False
                elif kind == "headless-pnra":
                    r = True  # what the EndpointSlice controller writes for it
                else:
                    r = rnd.choice([True, True, True, False, None])
                host = None
                if kind == "headless-hostnames":
                    host = f"web-{j}" if j != 1 else "web-0"  # two endpoints, one name
                elif kind != "headless-big" and rnd.random() < 0.3:
                    host = f"h{j}"
                extra = [ip4()] if kind == "headless-hostnames" and j == 0 else None
                fam = kind == "headless-v6"
                eps.append(ep(ip6() if fam else ip4(), r, host, f"{name}-{j}", extra))
            if kind == "headless-multislice":
                half = len(eps) // 2
                slice_(ns, name, 0, "IPv4", pts, eps[:half])
                slice_(ns, name, 1, "IPv4", pts, eps[half:])
                slice_(ns, name, 2, "IPv6", pts, [ep(ip6(), True, "v6host")])
            else:
                slice_(ns, name, 0, "IPv6" if kind == "headless-v6" else "IPv4", pts, eps)
        elif kind.startswith("extname"):
            target = {"extname-out": f"www.{UPSTREAM_ZONE}",
                      "extname-in": f"{kinds[0]}.{nss[0]}.svc.cluster.local",
                      "extname-missing": f"nothere.{UPSTREAM_ZONE}",
                      "extname-ip": "192.0.2.99"}[kind]
            spec = {"type": "ExternalName", "externalName": target}
            if rnd.random() < 0.5:
                spec["ports"] = [_port("http", 80, "TCP")]
            svc(ns, name, spec)
    for path, obj in out:
        print(path + "\t" + json.dumps(obj, separators=(",", ":")))


# --- the queries -------------------------------------------------------------

def demo(objects_path, slices_path, suffix, dual):
    """The demo cluster for a real API server: its Namespaces (renamed with
    suffix, default kept), Services (default/kubernetes exists already; on a
    single-stack server dual-stack Services keep their IPv4 half) and the
    EndpointSlices `svcenv endpoints --slices` computes for it (no
    controller runs here)."""
    rename = lambda ns: ns if ns in ("default", None) else f"{ns}-{suffix}"
    docs = json.load(open(objects_path)).get("items", [])
    out = []
    for d in docs:
        m = d.get("metadata", {})
        if d["kind"] == "Namespace" and m["name"] != "default":
            out.append(("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": rename(m["name"])}}))
    for d in docs:
        m = d.get("metadata", {})
        if d["kind"] != "Service" or (m.get("namespace"), m["name"]) == ("default", "kubernetes"):
            continue
        ns = rename(m.get("namespace", "default"))
        spec = dict(d["spec"])
        if not dual:
            ips = [ip for ip in spec.get("clusterIPs", []) if ":" not in ip]
            if ips:
                spec["clusterIPs"] = ips
            spec.pop("ipFamilies", None)
            if spec.get("ipFamilyPolicy"):
                spec["ipFamilyPolicy"] = "SingleStack"
        for p in spec.get("ports", []) or []:
            p.pop("nodePort", None)  # the server picks: another test may hold the demo's
        out.append((f"/api/v1/namespaces/{ns}/services", {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": m["name"], "namespace": ns, "labels": m.get("labels", {})},
            "spec": spec}))
    for s in json.load(open(slices_path)).get("items", []):
        m = s["metadata"]
        ns = rename(m["namespace"])
        labels = dict(m.get("labels", {}))
        labels["endpointslice.kubernetes.io/managed-by"] = "dns-vs-coredns.svcenv.test"
        obj = {k: v for k, v in s.items() if k not in ("metadata",)}
        obj["metadata"] = {"name": m["name"], "namespace": ns, "labels": labels}
        for e in obj.get("endpoints", []) or []:
            if "targetRef" in e:
                e["targetRef"]["namespace"] = ns
        out.append((f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", obj))
    for path, obj in out:
        print(path + "\t" + json.dumps(obj, separators=(",", ":")))


def rev(ip):
    return ipaddress.ip_address(ip).reverse_pointer + "."


def dashed(ip):
    a = ipaddress.ip_address(ip)
    if a.version == 4:
        return ip.replace(".", "-")
    s = a.compressed.replace(":", "-")
    return s + "0" if s.endswith("-") else s


def mixcase(name, rnd):
    return "".join(c.upper() if c.isalpha() and rnd.random() < 0.5 else c for c in name)


def queries(zone, services, slices, namespaces, wanted):
    rnd = random.Random(7)
    q = []
    add = lambda name, t, *opts: q.append(" ".join([name, t] + list(opts)))
    z = zone + "."
    by_svc = {}
    for s in slices.get("items", []):
        key = (s["metadata"]["namespace"], s["metadata"].get("labels", {}).get("kubernetes.io/service-name"))
        by_svc.setdefault(key, []).append(s)
    nsnames = {n["metadata"]["name"] for n in namespaces.get("items", [])}
    # the apex and structure
    for t in ("SOA", "NS", "A", "AAAA", "TXT", "ANY", "MX"):
        add(z, t)
    add("dns-version." + z, "TXT")
    add("dns-version." + z, "A")
    add("dns-version." + z, "ANY")
    add("dns-version." + z, "TXT", "-c", "CH")
    add("ns.dns." + z, "A")
    add(mixcase("dns-version." + z, rnd), "TXT")
    for lab in ("svc", "pod"):
        for t in ("A", "TXT", "SOA", "NS"):
            add(f"{lab}.{z}", t)
    add("nope." + z, "A")
    add("nope." + z, "SOA")
    add("*." + z, "A")
    add("*.svc." + z, "A")
    add("*.*.svc." + z, "A")
    ext = f"www.{UPSTREAM_ZONE}"
    # names outside the zone: forwarded (A, AAAA, CNAME chain, NXDOMAIN)
    for name, t in ((ext, "A"), (ext, "AAAA"), (ext, "TXT"), (ext, "MX"),
                    (f"alias.{UPSTREAM_ZONE}", "A"), (f"nothere.{UPSTREAM_ZONE}", "A"),
                    (f"short.{UPSTREAM_ZONE}", "A"), (UPSTREAM_ZONE, "SOA"),
                    ("unknown-tld-zz", "A"), ("10.in-addr.arpa", "PTR"),
                    ("99.99.99.10.in-addr.arpa", "PTR"), ("in-addr.arpa", "SOA"),
                    ("ip6.arpa", "SOA")):
        add(name + ".", t)
    for ns in wanted:
        nsz = f"{ns}.svc.{z}"
        for t in ("A", "TXT", "SRV", "ANY"):
            add(nsz, t)
        add(mixcase(nsz, rnd), "A")
        add(f"*.{nsz}", "A")
        add(f"*.{nsz}", "SRV")
        add(f"10-1-2-3.{ns}.pod.{z}", "A")
        add(f"10-1-2-3.{ns}.pod.{z}", "AAAA")
        add(f"fd00-1--2.{ns}.pod.{z}", "AAAA")
        add(f"not-an-ip.{ns}.pod.{z}", "A")
        add(f"extra.10-1-2-3.{ns}.pod.{z}", "A")
        add(f"_http._tcp.10-1-2-3.{ns}.pod.{z}", "SRV")
        add(f"{mixcase(f'10-9-8-7.{ns}.pod.{z}', rnd)}", "A")
        # ndots:5: what a pod in ns asks for an external name, in order
        for base in (ext, f"nothere.{UPSTREAM_ZONE}"):
            for sfx in (f"{ns}.svc.{z}", f"svc.{z}", z):
                add(f"{base}.{sfx}", "A")
                add(f"{base}.{sfx}", "AAAA")
    add(f"nosuchns-{rnd.randrange(1 << 30)}.svc.{z}", "A")
    add(f"10-1-2-3.nosuchns-zz.pod.{z}", "A")
    for s in services.get("items", []):
        ns, name = s["metadata"]["namespace"], s["metadata"]["name"]
        if ns not in wanted:
            continue
        spec = s.get("spec", {})
        fq = f"{name}.{ns}.svc.{z}"
        for t in ("A", "AAAA", "SRV", "TXT", "ANY", "CNAME", "PTR", "MX", "SOA", "NS"):
            add(fq, t)
        add(mixcase(fq, rnd), "A")
        add(mixcase(fq, rnd), "SRV")
        add(f"a.b.{fq}", "A")
        add(f"a.b.c.{fq}", "A")
        add(f"*.{fq}", "A")
        # ndots:5: the short name `svc.ns` asked from a pod in ns
        add(f"{name}.{ns}.{ns}.svc.{z}", "A")
        add(f"{name}.{ns}.svc.{z}", "A")
        for p in spec.get("ports", []) or []:
            pn, proto = p.get("name", ""), p.get("protocol", "TCP").lower()
            if pn:
                add(f"_{pn}._{proto}.{fq}", "SRV")
                add(f"_{pn}._{proto}.{fq}", "A")
                add(f"{pn}.{proto}.{fq}", "SRV")
                add(mixcase(f"_{pn}._{proto}.{fq}", rnd), "SRV")
                add(f"_{pn}._{'udp' if proto != 'udp' else 'tcp'}.{fq}", "SRV")
                add(f"_{pn}.{fq}", "SRV")
                add(f"*._{proto}.{fq}", "SRV")
                add(f"_{pn}.*.{fq}", "SRV")
        add(f"_nosuch._tcp.{fq}", "SRV")
        for ip in spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") not in (None, "None", "") else []):
            if ip == "None":
                continue
            add(rev(ip), "PTR")
            add(mixcase(rev(ip), rnd), "PTR")
        seen = set()
        for sl in by_svc.get((ns, name), []):
            for e in sl.get("endpoints", []) or []:
                for a in e.get("addresses", []):
                    if a in seen:
                        continue
                    seen.add(a)
                    add(rev(a), "PTR")
                    label = e.get("hostname") or dashed(a)
                    add(f"{label}.{fq}", "A")
                    add(f"{label}.{fq}", "AAAA")
                    add(f"{label}.{fq}", "SRV")
                    add(f"{dashed(a)}.{ns}.pod.{z}", "A")
                    if e.get("targetRef", {}).get("name"):
                        add(f"{e['targetRef']['name']}.{fq}", "A")
        if len(seen) > 20:  # a big answer: truncation without EDNS, at 512, and over TCP
            add(fq, "A", "+noedns")
            add(fq, "A", "+bufsize=512")
            add(fq, "SRV", "+bufsize=4096")
        if spec.get("type") == "ExternalName":
            add(f"x.{fq}", "A")
    # a PTR nobody has: forwarded under kubeadm's fallthrough
    add("1.0.0.127.in-addr.arpa.", "PTR")
    add("b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.ip6.arpa.", "PTR")
    # de-duplicate (exactly: a mixed-case spelling is a query of its own), keep order
    seen = set()
    for line in q:
        if line not in seen:
            seen.add(line)
            print(line)


# --- dig output --------------------------------------------------------------

def parse_dig(path):
    """Splits a `dig -f` output into one dict per query, in order."""
    res, cur, sec = [], None, None
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("; <<>> DiG"):
            cur = {"rcode": None, "flags": "", "edns": "", "sections": {}, "raw": [], "error": ""}
            res.append(cur)
            sec = None
            continue
        if cur is None:
            continue
        cur["raw"].append(line)
        if line.startswith(";; ->>HEADER<<-"):
            cur["rcode"] = line.split("status: ")[1].split(",")[0]
        elif line.startswith(";; flags:"):
            cur["flags"] = " ".join(sorted(line.split(";")[2].split(":", 1)[1].split()))
        elif line.startswith("; EDNS:"):
            cur["edns"] = line[2:]
        elif line.startswith(";; ") and line.endswith(" SECTION:"):
            sec = line[3:-len(" SECTION:")]
        elif line.startswith(";; connection timed out") or line.startswith(";; communications error") \
                or "no servers could be reached" in line:
            cur["error"] = line[3:]
        elif line.startswith(";") or not line.strip():
            if not line.strip():
                sec = None
        elif sec and sec != "QUESTION":
            f = line.split(None, 4)
            if len(f) >= 4:
                cur["sections"].setdefault(sec, []).append(
                    [f[0], int(f[1]), f[2], f[3], " ".join(f[4].split()) if len(f) > 4 else ""])
    return res


def in_zone(name, zone):
    n = name.lower().rstrip(".")
    return n == zone or n.endswith("." + zone)


def in_reverse(name):
    return in_zone(name, "in-addr.arpa") or in_zone(name, "ip6.arpa")


def normalize(r, zone):
    """The comparable view of one answer: sections as sorted record lists,
    SOA serials out (each server's own last-change time). TTLs are part of
    a record, except those of forwarded records ("fwd") and of records in
    the reverse zones ("rev"): kubeadm's cache is off only for the cluster
    domain, so CoreDNS serves those from its cache, aged; they are kept
    apart and compared by the rules in difference()."""
    secs, apart = {}, {}
    for sec, rrs in r["sections"].items():
        out = []
        # an ExternalName's CNAME in front of forwarded records: both servers'
        # caches give the whole answer the cached target's remaining TTL
        chased = any(not in_zone(n, zone) and not in_reverse(n) for n, *_ in rrs)
        for name, ttl, cls, typ, rdata in rrs:
            if typ == "SOA":
                f = rdata.split()
                if len(f) == 7:
                    f[2] = "SERIAL"
                rdata = " ".join(f)
            key = f"{name} {cls} {typ} {rdata}"
            kind = None
            if in_reverse(name):
                kind = "rev"
            elif not in_zone(name, zone) and not in_reverse(name):
                kind = "fwd"
            elif chased and typ == "CNAME":
                kind = "fwd"
            out.append(key + ("" if kind else f" ttl={ttl}"))
            if kind:
                apart.setdefault((sec, kind), []).append((key, ttl))
        secs[sec] = sorted(out)
    return secs, {k: sorted(v) for k, v in apart.items()}


FWD_TTL_SLACK = 5  # seconds: a cached forwarded answer ages between the two servers' passes


def difference(qline, up, ours, zone):
    """'' when the two answers match, else what differs."""
    if up["error"] or ours["error"]:
        if up["error"] and ours["error"]:
            return ""
        return f"no answer: upstream {up['error'] or 'answered'}, svcenv {ours['error'] or 'answered'}"
    why = []
    if up["rcode"] != ours["rcode"]:
        why.append(f"rcode {up['rcode']} vs {ours['rcode']}")
    if up["flags"] != ours["flags"]:
        why.append(f"flags [{up['flags']}] vs [{ours['flags']}]")
    if up["edns"] != ours["edns"]:
        why.append(f"EDNS [{up['edns']}] vs [{ours['edns']}]")
    truncated = "tc" in up["flags"].split()
    us, ua = normalize(up, zone)
    os_, oa = normalize(ours, zone)
    # CoreDNS's cache gives all records of a reply one TTL; when its answer
    # mixes cluster and forwarded records, so must ours (whatever the age)
    if ua.get(("ANSWER", "fwd")) and any(in_zone(r[0], zone) for r in up["sections"]["ANSWER"]):
        tu = {r[1] for r in up["sections"]["ANSWER"]}
        to = {r[1] for r in ours["sections"].get("ANSWER", [])}
        if len(tu) == 1 and len(to) != 1:
            why.append(f"ANSWER: one TTL {sorted(tu)} vs several {sorted(to)}")
    for sec in ("ANSWER", "AUTHORITY", "ADDITIONAL"):
        a, b = us.get(sec, []), os_.get(sec, [])
        if truncated:
            # which prefix of the records fits is order-dependent (CoreDNS's
            # order comes from Go maps): compare how many
            if len(a) != len(b):
                why.append(f"{sec}: {len(a)} vs {len(b)} records (truncated)")
            continue
        if a != b:
            only_up = sorted(set(a) - set(b))[:3]
            only_us = sorted(set(b) - set(a))[:3]
            why.append(f"{sec}: upstream only {only_up}, svcenv only {only_us}")
            continue
        fa, fb = ua.get((sec, "fwd"), []), oa.get((sec, "fwd"), [])
        if any(abs(x[1] - y[1]) > FWD_TTL_SLACK for x, y in zip(fa, fb)):
            why.append(f"{sec}: forwarded TTLs {[t for _, t in fa]} vs {[t for _, t in fb]}")
        ra, rb = ua.get((sec, "rev"), []), oa.get((sec, "rev"), [])
        if any(x[1] != y[1] for x, y in zip(ra, rb)):
            why.append(f"{sec}: reverse TTLs {[t for _, t in ra]} vs {[t for _, t in rb]}")
    return "; ".join(why)


def deliberate(up, ours, parts):
    """The reasons when every part is a deliberate difference, else None."""
    why = []
    for part in parts:
        hit = [w for w, test in DIFFERENCES if test(up, ours, part)]
        if not hit:
            return None
        why += [w for w in hit if w not in why]
    return why


def compare(zone, qfile, upfile, oursfile, label):
    qs = [l.strip() for l in open(qfile) if l.strip()]
    up, ours = parse_dig(upfile), parse_dig(oursfile)
    n = 0
    bad = 0
    for i, ql in enumerate(qs):
        n += 1
        if i >= len(up) or i >= len(ours):
            print(f"not ok - {label} {ql}: no dig output (upstream {len(up)}, svcenv {len(ours)} answers)")
            bad += 1
            continue
        d = difference(ql, up[i], ours[i], zone)
        rcode = up[i]["rcode"] or up[i]["error"]
        if not d:
            print(f"ok - {label} {ql}: {rcode}, {sum(len(v) for v in up[i]['sections'].values())} records match")
            continue
        why = deliberate(up[i], ours[i], d.split("; "))
        if why:
            print(f"ok - {label} {ql}: deliberate difference: {'; '.join(why)}")
            continue
        bad += 1
        print(f"not ok - {label} {ql}: {d}")
    return bad


def show(qfile, outfile):
    qs = [l.strip() for l in open(qfile) if l.strip()]
    rs = parse_dig(outfile)
    for ql, r in zip(qs, rs):
        recs = [" ".join(map(str, rr)) for sec in ("ANSWER", "AUTHORITY", "ADDITIONAL")
                for rr in r["sections"].get(sec, [])]
        print(f"# {ql} -> {r['rcode'] or r['error']} [{r['flags']}] " + " | ".join(recs[:4])
              + (f" | ... {len(recs)} in all" if len(recs) > 4 else ""))
    return len(rs) - len(qs)


def freeport(ip):
    for _ in range(50):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind((ip, 0))
        port = u.getsockname()[1]
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            t.bind((ip, port))
        except OSError:
            continue
        finally:
            t.close()
            u.close()
        print(port)
        return 0
    return 1


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "cluster" and len(argv) == 5:
        cluster(int(argv[2]), argv[3], argv[4] == "dual")
        return 0
    if cmd == "demo" and len(argv) == 6:
        demo(argv[2], argv[3], argv[4], argv[5] == "dual")
        return 0
    if cmd == "queries" and len(argv) >= 6:
        load = lambda p: json.load(open(p))
        queries(argv[2], load(argv[3]), load(argv[4]), load(argv[5]), set(argv[6:]))
        return 0
    if cmd == "compare" and len(argv) == 7:
        return 1 if compare(argv[2], argv[3], argv[4], argv[5], argv[6]) else 0
    if cmd == "show" and len(argv) == 4:
        return 1 if show(argv[2], argv[3]) else 0
    if cmd == "freeport" and len(argv) == 3:
        return freeport(argv[2])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
