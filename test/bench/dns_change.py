#!/usr/bin/env python3
"""One change to the API server and the time until a DNS server answers it.

  dns_change.py ADDR PORT NAME TYPE WANT METHOD PATH CONTENT-TYPE BODY

Polls ADDR:PORT every 5 ms for NAME (A or SRV) while METHOD PATH (BODY of
CONTENT-TYPE) goes to the API server of APISERVER_URL, ADMIN_TOKEN and
CA_FILE (test/k8s/controlplane's env). The name is answered when an A record
equals WANT (A) or any SRV record comes back (SRV). Prints
`MS_FROM_REQUEST MS_FROM_REPLY`, or `none` after 10 s. One process does the
request and the polling, so neither waits for a process to start; the
request goes on a thread of its own, as the answer may come before the
reply."""
import http.client
import os
import random
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse

TYPES = {"A": 1, "SRV": 33}


def query(name, qtype):
    qid = random.randrange(65536)
    msg = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 1)
    for label in name.rstrip(".").split("."):
        msg += bytes([len(label)]) + label.encode()
    msg += b"\0" + struct.pack(">HH", qtype, 1)
    msg += b"\0" + struct.pack(">HHIH", 41, 4096, 0, 0)  # EDNS0: room for every address
    return qid, msg


def skip_name(msg, i):
    while i < len(msg):
        n = msg[i]
        if n & 0xC0 == 0xC0:
            return i + 2
        if n == 0:
            return i + 1
        i += 1 + n
    raise ValueError("name runs past the message")


def answered(msg, qid, qtype, want):
    qid_got, flags, qd, an = struct.unpack(">HHHH", msg[:8])
    if qid_got != qid or flags & 0xF:
        return False
    i = 12
    for _ in range(qd):
        i = skip_name(msg, i) + 4
    for _ in range(an):
        i = skip_name(msg, i)
        rtype, _, _, rdlen = struct.unpack(">HHIH", msg[i:i + 10])
        rdata = msg[i + 10:i + 10 + rdlen]
        i += 10 + rdlen
        if rtype != qtype:
            continue
        if qtype == 33 or socket.inet_ntoa(rdata) == want:
            return True
    return False


def main():
    if len(sys.argv) != 10 or sys.argv[4] not in TYPES:
        sys.exit(__doc__)
    addr, port, name, tname, want, method, path, ctype, body = sys.argv[1:]
    qtype = TYPES[tname]
    url = urllib.parse.urlsplit(os.environ["APISERVER_URL"])
    conn = http.client.HTTPSConnection(
        url.hostname, url.port,
        context=ssl.create_default_context(cafile=os.environ["CA_FILE"]))
    conn.connect()  # the handshake is not part of the change
    sock = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect((addr, int(port)))
    sock.settimeout(1)
    times = {}

    def request():
        times["sent"] = time.monotonic()
        conn.request(method, path, body.encode(), {
            "Authorization": "Bearer " + os.environ["ADMIN_TOKEN"],
            "Content-Type": ctype})
        resp = conn.getresponse()
        resp.read()
        times["reply"] = time.monotonic()
        times["status"] = resp.status

    t = threading.Thread(target=request)
    t.start()
    deadline = time.monotonic() + 10
    seen = None
    while seen is None and time.monotonic() < deadline:
        qid, msg = query(name, qtype)
        sock.send(msg)
        try:
            while True:
                got = sock.recv(65535)
                if got[:2] == msg[:2]:
                    break
            if answered(got, qid, qtype, want):
                seen = time.monotonic()
                break
        except (socket.timeout, ConnectionRefusedError, ValueError, struct.error):
            pass
        time.sleep(0.005)
    t.join()
    if times.get("status", 0) >= 300:
        sys.exit("dns_change: %s %s: HTTP %d" % (method, path, times["status"]))
    if seen is None or "reply" not in times:
        print("none")
    else:
        print("%d %d" % (round((seen - times["sent"]) * 1000), round((seen - times["reply"]) * 1000)))


if __name__ == "__main__":
    main()
