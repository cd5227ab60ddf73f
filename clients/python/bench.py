"""Measures the client's own cost per call against the bare round trip:
python3 bench.py URL [CALLS] [PASSES].

The bare round trip is the least a Python program does for a decision:
the request's bytes, prebuilt, sent on a kept-alive socket, the answer
read to the end of its Content-Length and its JSON parsed (by json's C
scanner). The client's call is Client.check("api", "bench"), which
sends the same bytes. Each pass times CALLS of each, one after the
other, in CPU time of this thread (time.thread_time: the interpreter's
work and the system calls, not the wait for the service) and in wall
time. The overhead of a pass is the client's CPU per call less the
bare's; its share is that over the bare wall round trip. The medians of
the passes are printed, with their spread (min-max). The rule "api"
must allow far more than CALLS a second (clients/testdata/bench.yaml),
or the figures measure denials; a denial stops the bench."""

import json
import socket
import statistics
import sys
import time
import urllib.parse

sys.path.insert(0, __import__("os").path.dirname(__file__))
from sluice import Client  # noqa: E402

BODY = b'{"rule":"api","key":"bench","cost":1}'


def bare(url, calls):
    u = urllib.parse.urlsplit(url)
    s = socket.create_connection((u.hostname, u.port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = (b"POST " + u.path.rstrip("/").encode() + b"/v1/check HTTP/1.1\r\nHost: " + u.netloc.encode() +
           b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
    scan = json.JSONDecoder().scan_once
    allowed = 0
    cpu, wall = time.thread_time(), time.perf_counter()
    for _ in range(calls):
        s.sendall(req)
        data = s.recv(65536)
        end = data.find(b"\r\n\r\n")
        while end < 0:
            data += s.recv(65536)
            end = data.find(b"\r\n\r\n")
        i = data.find(b"\r\nContent-Length:", 0, end) + 17
        n = end + 4 + int(data[i:data.find(b"\r\n", i)])
        while len(data) < n:
            data += s.recv(65536)
        allowed += scan(data[end + 4:n].decode(), 0)[0]["allowed"]
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    s.close()
    if allowed != calls:
        sys.exit(f"bench: the bare round trip was denied {calls - allowed} times of {calls}: raise rule api's limit")
    return cpu / calls, wall / calls


def client(url, calls):
    c = Client(url, timeout=5)
    c.check("api", "bench")
    allowed = 0
    cpu, wall = time.thread_time(), time.perf_counter()
    for _ in range(calls):
        allowed += c.check("api", "bench").allowed
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    c.close()
    if allowed != calls:
        sys.exit(f"bench: the client was denied {calls - allowed} times of {calls}: raise rule api's limit")
    return cpu / calls, wall / calls


def spread(xs, fmt):
    return f"{fmt(statistics.median(xs))} ({fmt(min(xs))}-{fmt(max(xs))})"


def main():
    url = sys.argv[1]
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    passes = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    bare(url, calls // 10 + 1)  # warm up both paths
    client(url, calls // 10 + 1)
    rt, bcpu, ccpu, over, share = [], [], [], [], []
    for _ in range(passes):
        b, c = bare(url, calls), client(url, calls)
        rt.append(b[1])
        bcpu.append(b[0])
        ccpu.append(c[0])
        over.append(c[0] - b[0])
        share.append((c[0] - b[0]) / b[1])
    us = lambda x: f"{x * 1e6:.1f}"  # noqa: E731
    pct = lambda x: f"{x * 100:.1f}"  # noqa: E731
    print(f"python: overhead {spread(over, us)} µs = {spread(share, pct)}% of the round trip {spread(rt, us)} µs; "
          f"cpu per call: bare {spread(bcpu, us)} µs, client {spread(ccpu, us)} µs "
          f"(median (min-max) of {passes} passes of {calls} calls)")


if __name__ == "__main__":
    main()
