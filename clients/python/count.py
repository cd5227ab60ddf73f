"""Counts the client's own instructions per call, free of the machine's
load: python3 count.py [CALLS] (runs itself under valgrind's cachegrind).

Both the client's check("api", "bench") and bench.py's bare round trip
run against a stub socket that takes the request and gives back, at
once, the answer sluice serve gives it (bytes captured from one). Each
is run twice, for 0 and for CALLS calls, in a child process under
``valgrind --tool=cachegrind --cache-sim=no``; the difference of the
two counts over CALLS is the instructions of one call, without the
interpreter's start. The client's less the bare's is its own work."""

import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

REQUEST = (b'POST /v1/check HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Type: application/json\r\n'
           b'Content-Length: 37\r\n\r\n{"rule":"api","key":"bench","cost":1}')
ANSWER = (b'HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Type: application/json\r\n'
          b'Ratelimit: "api";r=999999999;t=1\r\nRatelimit-Policy: "api";q=1000000000;w=1\r\n'
          b'Date: Sat, 28 Nov 2026 10:59:24 GMT\r\nContent-Length: 131\r\n\r\n'
          b'{"allowed":true,"rule":"api","limit":1000000000,"policy":"1000000000/s","remaining":999999999,'
          b'"reset_after":0.001,"retry_after":0}\n')


class Stub:
    """A connected socket whose every request is answered at once."""

    def sendall(self, data):
        if data != REQUEST:
            raise AssertionError(f"sent {data!r}")

    def recv(self, n):
        return ANSWER

    def close(self):
        pass


def client(calls):
    from sluice import client as sc
    c = sc.Client("http://127.0.0.1:1", timeout=5)
    conn = object.__new__(sc._Connection)
    conn.sock, conn.buf, conn.timeout = Stub(), b"", c.timeout
    c._put(conn)
    for _ in range(calls):
        if not c.check("api", "bench").allowed:
            raise AssertionError("denied")


def bare(calls):
    s = Stub()
    req = REQUEST
    scan = json.JSONDecoder().scan_once
    for _ in range(calls):  # bench.py's bare round trip
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
        if not scan(data[end + 4:n].decode(), 0)[0]["allowed"]:
            raise AssertionError("denied")


def instructions(what, calls):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
                        sys.executable, __file__, "--run", what, str(calls)],
                       check=True, capture_output=True)
        with open(out) as f:
            return int(re.search(r"^summary:\s+(\d+)", f.read(), re.M).group(1))


def main():
    if sys.argv[1:2] == ["--run"]:
        globals()[sys.argv[2]](int(sys.argv[3]))
        return
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    per = {}
    for what in ("bare", "client"):
        per[what] = (instructions(what, calls) - instructions(what, 0)) / calls
    print(f"python: instructions per call: client {per['client']:,.0f}, bare {per['bare']:,.0f}, "
          f"own {per['client'] - per['bare']:,.0f} (stub socket, {calls} calls, cachegrind)")


if __name__ == "__main__":
    main()
