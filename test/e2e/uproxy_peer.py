#!/usr/bin/env python3
"""Peers for the userspace-proxy namespace test (no third-party modules).

  uproxy_peer.py echo NAME PORT        TCP: read to EOF, answer NAME:<bytes read>;
                                       UDP: answer each datagram with NAME:<size>
  uproxy_peer.py watch NAME PORT       TCP: send "hi", then print NAME:eof or
                                       NAME:reset for how the client's end came
  uproxy_peer.py reset IP PORT         connect, read "hi", close with a reset
  uproxy_peer.py halfclose IP PORT [N] send "hello" (or N bytes), shut write, print
                                       the answer
  uproxy_peer.py hold IP PORT FLAG     connect, send "x", wait for file FLAG,
                                       then shut write and print the answer
  uproxy_peer.py udpsess IP PORT SPEC  one UDP socket (one source port); SPEC is
                                       "send" or "sleep:MS" items, comma-separated;
                                       prints each answer (or ERR:timeout)
  uproxy_peer.py udpbig IP PORT N      one datagram of N bytes; prints the answer
"""
import os
import socket
import struct
import sys
import threading
import time


def listener(port):
    """A TCP socket listening on PORT of every address."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(128)
    return s


def serve_each(s, one):
    """Hands every connection S accepts to ONE, each in its own thread."""
    while True:
        c, _ = s.accept()
        threading.Thread(target=one, args=(c,), daemon=True).start()


def echo(name, port):
    s = listener(port)

    def udp():
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("0.0.0.0", port))
        while True:
            data, addr = u.recvfrom(65535)
            u.sendto(("%s:%d" % (name, len(data))).encode(), addr)

    threading.Thread(target=udp, daemon=True).start()
    print("ready", flush=True)

    def one(c):
        n = 0
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                n += len(b)
            c.sendall(("%s:%d\n" % (name, n)).encode())
        except OSError:
            pass
        c.close()

    serve_each(s, one)


def watch(name, port):
    s = listener(port)
    print("ready", flush=True)

    def one(c):
        c.settimeout(5)
        try:
            c.sendall(b"hi\n")
            while c.recv(65536):
                pass
            print("%s:eof" % name, flush=True)
        except ConnectionResetError:
            print("%s:reset" % name, flush=True)
        except OSError as e:
            print("%s:ERR:%s" % (name, e), flush=True)
        c.close()

    serve_each(s, one)


def reset(ip, port):
    try:
        c = connect(ip, port)
        got = b""
        while not got.endswith(b"\n"):
            b = c.recv(16)
            if not b:
                break
            got += b
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
        print(got.decode().strip())
    except OSError as e:
        print("ERR:%s" % e)


def connect(ip, port):
    c = socket.create_connection((ip, port), timeout=5)
    return c


def read_all(c):
    out = b""
    while True:
        b = c.recv(65536)
        if not b:
            return out.decode().strip()
        out += b


def halfclose(ip, port, n=None):
    try:
        c = connect(ip, port)
        c.sendall(b"z" * n if n is not None else b"hello")
        c.shutdown(socket.SHUT_WR)
        print(read_all(c))
    except OSError as e:
        print("ERR:%s" % e)


def hold(ip, port, flag):
    try:
        c = connect(ip, port)
        c.sendall(b"x")
        print("connected", flush=True)
        for _ in range(300):
            if os.path.exists(flag):
                break
            time.sleep(0.05)
        c.settimeout(5)
        c.shutdown(socket.SHUT_WR)
        print(read_all(c), flush=True)
    except OSError as e:
        print("ERR:%s" % e, flush=True)


def udpsess(ip, port, spec):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    for item in spec.split(","):
        if item.startswith("sleep:"):
            time.sleep(int(item[6:]) / 1000)
            continue
        s.sendto(b"q", (ip, port))
        try:
            data, _ = s.recvfrom(70000)
            print(data.decode(errors="replace").strip(), flush=True)
        except socket.timeout:
            print("ERR:timeout", flush=True)


def udpbig(ip, port, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(b"z" * n, (ip, port))
    try:
        data, _ = s.recvfrom(70000)
        print(data.decode(errors="replace").strip())
    except socket.timeout:
        print("ERR:timeout")


def main():
    a = sys.argv[1:]
    if a[0] == "echo":
        echo(a[1], int(a[2]))
    elif a[0] == "watch":
        watch(a[1], int(a[2]))
    elif a[0] == "reset":
        reset(a[1], int(a[2]))
    elif a[0] == "halfclose":
        halfclose(a[1], int(a[2]), int(a[3]) if len(a) > 3 else None)
    elif a[0] == "hold":
        hold(a[1], int(a[2]), a[3])
    elif a[0] == "udpsess":
        udpsess(a[1], int(a[2]), a[3])
    elif a[0] == "udpbig":
        udpbig(a[1], int(a[2]), int(a[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
