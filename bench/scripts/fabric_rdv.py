#!/usr/bin/env python3
"""Rendezvous for tests/transport_fabric/fabric_raw_pingpong outside its gtest.

Speaks the protocol of tests/transport_fabric/test_bootstrap.cpp
(RendezvousServer): each rank connects to a unix socket and sends its rank as
an int32; then, per round, every rank sends one blob (u64 length + bytes) and
receives all blobs in rank order. Exits when a rank disconnects.

usage: fabric_rdv.py SOCKET_PATH NRANKS
"""
import os
import socket
import struct
import sys


def read_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def main():
    path, size = sys.argv[1], int(sys.argv[2])
    if os.path.exists(path):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(size)
    srv.settimeout(60)
    conns = [None] * size
    try:
        while any(c is None for c in conns):
            c, _ = srv.accept()
            (rank,) = struct.unpack("<i", read_exact(c, 4))
            if 0 <= rank < size and conns[rank] is None:
                conns[rank] = c
            else:
                c.close()
        while True:
            blobs = []
            for c in conns:
                (n,) = struct.unpack("<Q", read_exact(c, 8))
                blobs.append(read_exact(c, n) if n else b"")
            out = b"".join(struct.pack("<Q", len(b)) + b for b in blobs)
            for c in conns:
                c.sendall(out)
    except (EOFError, ConnectionError, socket.timeout):
        pass
    finally:
        for c in conns:
            if c is not None:
                c.close()
        srv.close()
        if os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    main()
