#!/usr/bin/env python3
"""Tiny peer for the network-namespace tests (no third-party modules).

  netpeer.py serve NAME PORT          answer every TCP connection and UDP
                                      datagram on PORT with NAME; print
                                      "from IP" (the peer) for each TCP one
  netpeer.py tcp IP PORT COUNT [T]    COUNT connections; one line each: the
                                      answer, or ERR:<reason> (T: timeout s)
  netpeer.py udp IP PORT COUNT [T]    the same with one datagram each
With NETPEER_TIME=1 each line ends with the milliseconds the attempt took;
NETPEER_SRC=IP[,PORT] binds the client's sockets there first (a fixed
source: the same conntrack tuple on every attempt with a PORT).
"""
import errno
import os
import socket
import time
import sys
import threading


def serve(name, port):
    data = name.encode()

    def tcp():
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", port))
        s.listen(128)
        while True:
            c, addr = s.accept()
            peer = addr[0][7:] if addr[0].startswith("::ffff:") else addr[0]
            print("from " + peer, flush=True)  # before the answer: the client sees it written
            try:
                c.sendall(data + b"\n")
            except OSError:
                pass
            c.close()

    def udp():
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", port))
        while True:
            _, addr = s.recvfrom(2048)
            s.sendto(data, addr)

    threading.Thread(target=udp, daemon=True).start()
    print("ready", flush=True)
    tcp()


def reason(e):
    if isinstance(e, socket.timeout):
        return "ERR:timeout"
    return "ERR:" + errno.errorcode.get(e.errno, str(e.errno))


def client(proto, ip, port, count, timeout):
    fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
    timed = os.environ.get("NETPEER_TIME") == "1"
    src = os.environ.get("NETPEER_SRC", "").split(",")
    src = (src[0], int(src[1]) if len(src) > 1 else 0) if src[0] else None
    for _ in range(count):
        start = time.monotonic()
        suffix = lambda: " %d" % ((time.monotonic() - start) * 1000) if timed else ""
        try:
            if proto == "tcp":
                s = socket.socket(fam, socket.SOCK_STREAM)
                s.settimeout(timeout)
                if src:
                    s.bind(src)
                s.connect((ip, port))
                out = s.recv(256).decode().strip()
            else:
                s = socket.socket(fam, socket.SOCK_DGRAM)
                s.settimeout(timeout)
                if src:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(src)
                s.sendto(b"hi", (ip, port))
                out = s.recv(256).decode().strip()
            s.close()
            print((out or "ERR:empty") + suffix(), flush=True)
        except OSError as e:
            print(reason(e) + suffix(), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        t = float(sys.argv[5]) if len(sys.argv) > 5 else 2.0
        client(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), t)
