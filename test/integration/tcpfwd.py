#!/usr/bin/env python3
"""tcpfwd.py [ADDR:]LISTEN-PORT TARGET-PORT: forwards ADDR:LISTEN-PORT
(ADDR: 127.0.0.1 unless given) to 127.0.0.1:TARGET-PORT (LISTEN-PORT 0: a
free one), printing the port it
listens on. A test kills it to make the API server unreachable for one
client only, and starts it again on the same port to bring it back."""
import socket
import sys
import threading


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main():
    listen_addr, _, port = sys.argv[1].rpartition(":")
    listen_port, target_port = int(port), int(sys.argv[2])
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((listen_addr or "127.0.0.1", listen_port))
    srv.listen(64)
    print(srv.getsockname()[1], flush=True)
    while True:
        client, _ = srv.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", target_port))
        except OSError:
            client.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=pipe, args=(a, b), daemon=True).start()


if __name__ == "__main__":
    main()
