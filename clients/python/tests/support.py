"""What the tests share: a real sluice serve started on a free loopback
port, the script every client of clients/ plays (clients/testdata), and
small servers that misbehave."""

import binascii
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = os.path.dirname(os.path.dirname(HERE))
TESTDATA = os.path.join(CLIENTS, "testdata")
REPO = os.path.dirname(CLIENTS)


def sluice_binary():
    """The sluice command the tests start: $SLUICE_BIN (cmd/sluice's test
    sets it), else sluice on PATH; the test is skipped without one, or
    fails under CI=true."""
    path = os.environ.get("SLUICE_BIN") or shutil.which("sluice")
    if not path:
        if os.environ.get("CI") == "true":
            raise RuntimeError("no sluice binary: set SLUICE_BIN (go test ./cmd/sluice does)")
        raise unittest.SkipTest("no sluice binary: set SLUICE_BIN or put sluice on PATH")
    return path


class Server:
    """sluice serve of config on a free loopback port, until stop()."""

    def __init__(self, config=os.path.join(TESTDATA, "sluice.yaml")):
        self.config = config
        self.proc = None
        self.url = None
        self.start()

    def start(self, listen="127.0.0.1:0"):
        self.proc = subprocess.Popen(
            [sluice_binary(), "serve", "-config", self.config, "-listen", listen, "-watch=false"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 30
        timer = threading.Timer(30, self.proc.kill)
        timer.start()
        try:
            for line in self.proc.stdout:
                if line.startswith("sluice: listening on "):
                    self.url = line[len("sluice: listening on "):].strip()
                    break
        finally:
            timer.cancel()
        if self.url is None or time.monotonic() > deadline:
            self.proc.kill()
            raise RuntimeError("sluice serve did not announce its address")
        return self.url

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self.proc.stdout.close()

    def restart(self):
        """Starts the service again on the same port, empty."""
        hostport = self.url.split("//", 1)[1]
        self.stop()
        for _ in range(50):
            try:
                self.url = None
                return self.start(hostport)
            except RuntimeError:
                time.sleep(0.1)
        raise RuntimeError("sluice serve did not restart on " + hostport)


def load_script():
    with open(os.path.join(TESTDATA, "script.json"), encoding="utf-8") as f:
        return json.load(f)


def call_key(call):
    if "key_hex" in call:
        return binascii.unhexlify(call["key_hex"])
    return call.get("key", "")


class MisbehavingServer:
    """A TCP server on a free loopback port that answers every request
    with answer(request bytes) -> bytes or None (say nothing), for
    services that are slow or answer garbage."""

    def __init__(self, answer):
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.conns = []
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                out = self.answer(data)
                if out is not None:
                    conn.sendall(out)
        except OSError:
            pass

    def close(self):
        self.done.set()
        self.sock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass


def http_answer(status, body, content_type="application/json"):
    body = body.encode() if isinstance(body, str) else body
    return (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
