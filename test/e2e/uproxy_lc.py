#!/usr/bin/env python3
"""Least connection through the userspace proxy, pick by pick (no
third-party modules).

  uproxy_lc.py serve NAME PORT
      TCP: answer NAME at once, then hold the connection until the client
      closes it (the connection stays counted until then).
  uproxy_lc.py drive IP PORT METRICS SERVICE EPS SLOW TICKS SLOW_LIFE FAST_LIFE
      One connection a tick. A connection answered by SLOW (a backend name)
      stays open SLOW_LIFE ticks, any other FAST_LIFE: the slow backend
      holds its connections longer, so several are open at once. Before
      each connection the counts the proxy reports (METRICS, its /metrics
      URL: svcenv_proxy_endpoint_connections of SERVICE) must equal the open
      connections the client holds per endpoint (EPS: NAME=IP:PORT,... in
      the service's list order), and the expected pick is computed from
      them by IPVS's lc: the least overhead = active*256 + inactive, a tie
      to the first in list order. Prints "TICK GOT WANT" a line, then
      "total NAME=COUNT...". Exit 1 when the proxy's counts never match.
"""
import socket
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ left in the tree
from uproxy_peer import listener, serve_each  # noqa: E402


def serve(name, port):
    s = listener(port)
    print("ready", flush=True)

    def one(c):
        try:
            c.sendall((name + "\n").encode())
            while c.recv(4096):
                pass
        except OSError:
            pass
        c.close()

    serve_each(s, one)


def counts(url, service, eps):
    """{endpoint: (active, inactive)} of service from the proxy's /metrics."""
    text = urllib.request.urlopen(url, timeout=2).read().decode()
    out = {ep: [0, 0] for ep in eps}
    head = 'svcenv_proxy_endpoint_connections{service="%s",' % service
    for line in text.splitlines():
        if not line.startswith(head):
            continue
        labels, value = line.rsplit(" ", 1)
        ep = labels.split('endpoint="', 1)[1].split('"', 1)[0]
        state = labels.split('state="', 1)[1].split('"', 1)[0]
        if ep in out:
            out[ep][state == "inactive"] = int(float(value))
    return out


def lc(order, state):
    """ip_vs_lc.c: strictly smaller overhead wins, so ties go to the first."""
    best, least = None, None
    for name in order:
        active, inactive = state[name]
        overhead = active * 256 + inactive
        if best is None or overhead < least:
            best, least = name, overhead
    return best


def drive(ip, port, url, service, eps_arg, slow, ticks, slow_life, fast_life):
    eps = dict(item.split("=", 1) for item in eps_arg.split(","))
    order = list(eps)
    held = []  # (close tick, name, socket)
    got = {name: 0 for name in order}
    for tick in range(ticks):
        for entry in [h for h in held if h[0] <= tick]:
            entry[2].close()
            held.remove(entry)
        want_open = {name: sum(1 for h in held if h[1] == name) for name in order}
        state = None
        for _ in range(100):  # the proxy sees the closes a moment later
            seen = counts(url, service, eps.values())
            state = {name: tuple(seen[eps[name]]) for name in order}
            if all(state[n] == (want_open[n], 0) for n in order):
                break
            time.sleep(0.05)
        else:
            print("ERR:counts %r want %r" % (state, want_open), flush=True)
            sys.exit(1)
        want = lc(order, state)
        c = socket.create_connection((ip, port), timeout=5)
        name = c.makefile().readline().strip() or "ERR:empty"
        print("%d %s %s" % (tick, name, want), flush=True)
        if name not in got:
            sys.exit(1)
        got[name] += 1
        held.append((tick + (slow_life if name == slow else fast_life), name, c))
    for h in held:
        h[2].close()
    print("total " + " ".join("%s=%d" % (n, got[n]) for n in order), flush=True)


def main():
    a = sys.argv[1:]
    if len(a) == 3 and a[0] == "serve":
        serve(a[1], int(a[2]))
    elif len(a) == 10 and a[0] == "drive":
        drive(a[1], int(a[2]), a[3], a[4], a[5], a[6], int(a[7]), int(a[8]), int(a[9]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
