"""A TCP relay the tests can cut, to take a database away from the engines
without stopping the server other tests share (as a network partition or a
PostgreSQL stop looks to a client).

    python3 tcp_cut.py --upstream HOST:PORT --control FILE

It prints `listening on 127.0.0.1:PORT` first. While FILE holds `down`, every
open connection is closed and new ones are closed at once; otherwise bytes
are relayed both ways.
"""

import argparse
import socket
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--control", required=True)
    args = ap.parse_args()
    host, port = args.upstream.rsplit(":", 1)
    open_sockets = set()
    lock = threading.Lock()

    def down():
        try:
            with open(args.control) as f:
                return f.read().strip() == "down"
        except FileNotFoundError:
            return False

    def close(*socks):
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        close(src, dst)
        with lock:
            open_sockets.discard(src)
            open_sockets.discard(dst)

    def watch():
        while True:
            time.sleep(0.05)
            if down():
                with lock:
                    cut = list(open_sockets)
                    open_sockets.clear()
                close(*cut)

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    print("listening on 127.0.0.1:%d" % listener.getsockname()[1], flush=True)
    threading.Thread(target=watch, daemon=True).start()
    while True:
        client, _ = listener.accept()
        if down():
            close(client)
            continue
        try:
            server = socket.create_connection((host, int(port)))
        except OSError:
            close(client)
            continue
        with lock:
            open_sockets.update((client, server))
        threading.Thread(target=pump, args=(client, server), daemon=True).start()
        threading.Thread(target=pump, args=(server, client), daemon=True).start()


if __name__ == "__main__":
    main()
