#!/usr/bin/env python3
"""Ready flips at a steady rate, each timed until an Endpoints watch event
shows it: the latency from a pod's Ready change (patch sent) to its
Endpoints write (event received). Prints one line of figures.

    flips.py KUBE_DIR RATE COUNT PODS_FILE

PODS_FILE: lines "namespace pod service ip" of ready pods. The first half
of the flips make pods (i * 7919) mod n not ready, the second half make the
same pods ready again, so every pod ends as it began. Talks only to the API server
named in KUBE_DIR/env (loopback in the test harness).
"""
import http.client
import json
import queue
import ssl
import sys
import threading
import time
import urllib.parse

SENDERS = 8


def env(kube_dir):
    out = {}
    for line in open(kube_dir + "/env"):
        line = line.strip()
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.replace("export ", "").strip()] = v.strip().strip("'\"")
    return out


def connect(url, ca):
    u = urllib.parse.urlparse(url)
    ctx = ssl.create_default_context(cafile=ca)
    return http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=60)


def main():
    kube_dir, rate, count, pods_file = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    e = env(kube_dir)
    url, token, ca = e["APISERVER_URL"], e["ADMIN_TOKEN"], e["CA_FILE"]
    auth = {"Authorization": "Bearer " + token}
    pods = [l.split() for l in open(pods_file) if l.strip()]
    if not pods:
        sys.exit("flips.py: no pods in " + pods_file)

    # the watch starts at the list's resourceVersion, so it sees every write after
    c = connect(url, ca)
    c.request("GET", "/api/v1/endpoints?limit=1", headers=auth)
    rv = json.loads(c.getresponse().read())["metadata"]["resourceVersion"]
    events = []  # (time, ns, name, frozenset(notReady ips))
    watching = threading.Event()

    def watch():
        w = connect(url, ca)
        w.request("GET", "/api/v1/endpoints?watch=1&allowWatchBookmarks=false&resourceVersion=%s&timeoutSeconds=%d"
                  % (rv, int(count / rate) + 60), headers=auth)
        r = w.getresponse()
        watching.set()
        while True:
            line = r.readline()
            if not line:
                return
            t = time.monotonic()
            try:
                o = json.loads(line)["object"]
                nr = frozenset(a["ip"] for ss in o.get("subsets") or [] for a in ss.get("notReadyAddresses") or [])
                events.append((t, o["metadata"]["namespace"], o["metadata"]["name"], nr))
            except (ValueError, KeyError, TypeError):
                pass

    threading.Thread(target=watch, daemon=True).start()
    watching.wait(30)
    time.sleep(0.5)

    # first half: pods turn not ready; second half: the same pods, ready again
    half = count // 2
    plan = [(pods[((i % half) * 7919) % len(pods)], i >= half) for i in range(2 * half)]
    count = len(plan)

    work = queue.Queue()
    sent = [None] * count
    failed = [0]

    def sender():
        s = connect(url, ca)
        while True:
            item = work.get()
            if item is None:
                return
            i, (p, ready) = item
            body = json.dumps({"status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}})
            sent[i] = time.monotonic()
            try:
                s.request("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (p[0], p[1]), body=body,
                          headers=dict(auth, **{"Content-Type": "application/merge-patch+json"}))
                r = s.getresponse()
                r.read()
                if r.status >= 300:
                    failed[0] += 1
            except (OSError, http.client.HTTPException):
                failed[0] += 1
                s = connect(url, ca)

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(SENDERS)]
    for t in threads:
        t.start()
    start = time.monotonic()
    for i in range(count):
        due = start + i / rate
        d = due - time.monotonic()
        if d > 0:
            time.sleep(d)
        work.put((i, plan[i]))
    for _ in threads:
        work.put(None)
    for t in threads:
        t.join()
    achieved = count / (time.monotonic() - start)
    time.sleep(3)

    lat = []
    ev_by_svc = {}
    for ev in events:
        ev_by_svc.setdefault((ev[1], ev[2]), []).append(ev)
    for i, (p, ready) in enumerate(plan):
        if sent[i] is None:
            continue
        for t, _, _, nr in ev_by_svc.get((p[0], p[2]), []):
            if t >= sent[i] and ((p[3] in nr) != ready):
                lat.append((t - sent[i]) * 1000)
                break
    lat.sort()

    def q(x):
        return lat[min(len(lat) - 1, int(x * len(lat)))] if lat else float("nan")

    print("  %d flips at %.0f/s (achieved %.0f/s, %d failed): measured %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms"
          % (count, rate, achieved, failed[0], len(lat), q(0.5), q(0.99), lat[-1] if lat else float("nan")))


if __name__ == "__main__":
    main()
