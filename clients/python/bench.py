"""Measures the client's own cost per call against the bare round trip:
python3 bench.py URL [CALLS] [PASSES].

The bare round trip sends a prepared POST /v1/check on a kept-alive
socket and reads the answer; the client's call (Client.check) does the
same and builds its request and Decision. Passes alternate, and the
medians are printed. The rule "api" must allow far more than CALLS a
second, or the figures measure denials."""

import socket
import statistics
import sys
import time
import urllib.parse

sys.path.insert(0, __import__("os").path.dirname(__file__))
from sluice import Client  # noqa: E402


def bare(url, calls):
    u = urllib.parse.urlsplit(url)
    s = socket.create_connection((u.hostname, u.port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    body = b'{"rule":"api","key":"bench","cost":1}'
    req = (b"POST /v1/check HTTP/1.1\r\nHost: " + u.netloc.encode() + b"\r\nContent-Type: application/json\r\n"
           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    f = s.makefile("rb")
    start = time.perf_counter()
    for _ in range(calls):
        s.sendall(req)
        length = 0
        while True:
            line = f.readline()
            if line == b"\r\n":
                break
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        f.read(length)
    elapsed = time.perf_counter() - start
    s.close()
    return elapsed / calls


def client(url, calls):
    c = Client(url, timeout=5)
    c.check("api", "bench")
    start = time.perf_counter()
    for _ in range(calls):
        c.check("api", "bench")
    elapsed = time.perf_counter() - start
    c.close()
    return elapsed / calls


def main():
    url = sys.argv[1]
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    passes = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    b, c = [], []
    for _ in range(passes):
        b.append(bare(url, calls))
        c.append(client(url, calls))
    mb, mc = statistics.median(b), statistics.median(c)
    print(f"python: round trip {mb * 1e6:.1f} µs, client {mc * 1e6:.1f} µs, "
          f"overhead {(mc - mb) * 1e6:.1f} µs = {(mc - mb) / mb * 100:.1f}% "
          f"(median of {passes} passes of {calls} calls; per pass: bare {[round(x * 1e6, 1) for x in b]}, "
          f"client {[round(x * 1e6, 1) for x in c]})")


if __name__ == "__main__":
    main()
