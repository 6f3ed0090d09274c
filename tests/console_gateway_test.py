#!/usr/bin/python3
"""The console gateway on its own (no services, no browser): its flags, its
headers, its answers to what is not an ops call, the Connect error JSON of
an ops endpoint that does not answer, and a page script that never parses
HTML. The calls that reach real services are in tests/e2e_console_test.sh.

  python3 tests/console_gateway_test.py
"""
import base64
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GATEWAY = os.path.join(ROOT, "console", "gateway.py")
sys.path.insert(0, os.path.join(ROOT, "console"))
import ops_backend  # noqa: E402


def dead_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nobody listens once it is closed


class Gateway:
    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, GATEWAY, "--listen", "127.0.0.1:0", *args],
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r" port=(\d+)", line)
        if not m:
            self.proc.kill()
            raise AssertionError("no start line: %r" % line)
        self.port = int(m.group(1))

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response, data

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        log = self.proc.stderr.read()
        self.proc.stderr.close()
        return log


class GatewayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway("--ops", "a=127.0.0.1:%d" % dead_port(), "--ops",
                         "b=127.0.0.1:%d" % dead_port(), "--timeout", "5")

    @classmethod
    def tearDownClass(cls):
        log = cls.gw.stop()
        assert "secret-token" not in log, "a token in the log"
        assert "console_stopped" in log, log

    def test_page_headers(self):
        response, body = self.gw.request("GET", "/")
        self.assertEqual(response.status, 200)
        self.assertIn(b"<title>outbox console</title>", body)
        csp = response.getheader("Content-Security-Policy")
        self.assertIn("script-src 'self';", csp)
        self.assertIn("default-src 'none';", csp)
        self.assertEqual(response.getheader("X-Content-Type-Options"), "nosniff")
        self.assertIsNone(response.getheader("Set-Cookie"))

    def test_static_files_only(self):
        for path in ("/static/console.js", "/static/console.css"):
            self.assertEqual(self.gw.request("GET", path)[0].status, 200, path)
        for path in ("/static/../gateway.py", "/static/%2e%2e/gateway.py", "/gateway.py",
                     "/static/nope.js", "/static/.hidden.js"):
            self.assertEqual(self.gw.request("GET", path)[0].status, 404, path)

    def test_shards(self):
        response, body = self.gw.request("GET", "/console/v1/shards")
        self.assertEqual([s["name"] for s in json.loads(body)["shards"]], ["a", "b"])

    def test_loopback_names_only(self):
        response, _ = self.gw.request("GET", "/", headers={"Host": "evil.example"})
        self.assertEqual(response.status, 421)
        response, _ = self.gw.request("GET", "/", headers={"Host": "localhost:1"})
        self.assertEqual(response.status, 200)

    def test_json_only(self):
        response, body = self.gw.request("POST", "/ops.v1.OutboxOps/GetStats", b"{}",
                                         {"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(response.status, 415)

    def test_unavailable_endpoint_is_connect_error_json(self):
        response, body = self.gw.request(
            "POST", "/ops.v1.OutboxOps/GetStats", b"{}",
            {"Content-Type": "application/json", "Authorization": "Bearer secret-token",
             "Outbox-Shard": "b"})
        self.assertEqual(response.status, 503)
        error = json.loads(body)
        self.assertEqual(error["code"], "unavailable")
        self.assertTrue(error["message"])

    def test_unknown_shard(self):
        response, body = self.gw.request("POST", "/ops.v1.OutboxOps/GetStats", b"{}",
                                         {"Content-Type": "application/json",
                                          "Outbox-Shard": "<zz>"})
        self.assertEqual(response.status, 404)
        self.assertEqual(json.loads(body)["code"], "not_found")

    def test_unknown_path(self):
        response, body = self.gw.request("POST", "/other.Service/Method", b"{}",
                                         {"Content-Type": "application/json"})
        self.assertEqual(json.loads(body)["code"], "unimplemented")


class HttpsTest(unittest.TestCase):
    def test_https(self):
        import ssl
        import tempfile
        with tempfile.TemporaryDirectory() as certs:
            subprocess.run(["bash", os.path.join(ROOT, "scripts", "dev_certs.sh"), certs],
                           check=True, capture_output=True, timeout=60)
            gw = Gateway("--ops", "127.0.0.1:%d" % dead_port(), "--tls_cert",
                         os.path.join(certs, "server.pem"), "--tls_key",
                         os.path.join(certs, "server.key"))
            try:
                context = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
                conn = http.client.HTTPSConnection("127.0.0.1", gw.port, timeout=30,
                                                   context=context)
                conn.request("GET", "/healthz")
                response = conn.getresponse()
                self.assertEqual((response.status, response.read()), (200, b"ok\n"))
                self.assertIn("max-age", response.getheader("Strict-Transport-Security"))
                conn.close()
                with self.assertRaises((http.client.HTTPException, ConnectionError)):
                    gw.request("GET", "/healthz")  # plain HTTP on the TLS port
            finally:
                log = gw.stop()
            self.assertIn("console_connection_failed", log)
            self.assertNotIn("Traceback", log)


class FlagsTest(unittest.TestCase):
    def run_gateway(self, *args):
        return subprocess.run([sys.executable, GATEWAY, *args], capture_output=True, text=True,
                              timeout=30)

    def test_refused(self):
        for args, words in [
            (["--listen", "0.0.0.0:0"], "beyond loopback"),
            (["--listen", "nohost"], "--listen"),
            (["--tls_cert", "/nonexistent"], "--tls_cert and --tls_key"),
            (["--ops", "a=127.0.0.1:1", "--ops", "a=127.0.0.1:2"], "used twice"),
            (["--ops", "no-port"], "--ops"),
            (["--ops_ca", "/nonexistent/ca.pem"], "--ops_ca"),
        ]:
            result = self.run_gateway("--listen", "127.0.0.1:0", *args) if args[0] != "--listen" \
                else self.run_gateway(*args)
            self.assertEqual(result.returncode, 2, (args, result.stderr))
            self.assertIn("console_failed", result.stderr)
            self.assertIn(words, result.stderr, args)

    def test_help(self):
        result = self.run_gateway("--help")
        self.assertEqual(result.returncode, 0)
        for flag in ("--listen", "--ops", "--ops_ca", "--tls_cert", "--tls_key"):
            self.assertIn(flag, result.stdout)


class PageTest(unittest.TestCase):
    def test_no_html_parsing_of_data(self):
        """Strings reach the page as text: no innerHTML and its kin, no eval."""
        static = os.path.join(ROOT, "console", "static")
        for name in os.listdir(static):
            with open(os.path.join(static, name), encoding="utf-8") as f:
                text = f.read()
            for word in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                         "eval(", "new Function", "setTimeout('", 'setTimeout("'):
                self.assertNotIn(word, text, name)
            if name.endswith(".html"):
                self.assertIsNone(re.search(r"<script(?![^>]*\bsrc=)", text), name)
                self.assertNotRegex(text, r"\son[a-z]+=", name)
                self.assertNotIn("style=", text, name)


class DecodeTest(unittest.TestCase):
    def test_raw_fields(self):
        # field 1 "m-1", field 5 = 150, field 7 = nested {1: "x"}
        data = b"\x0a\x03m-1" + b"\x28\x96\x01" + b"\x3a\x03\x0a\x01\x00"
        fields = ops_backend.raw_fields(data)
        self.assertEqual(fields[0], {"field": 1, "value": "m-1"})
        self.assertEqual(fields[1], {"field": 5, "value": "150"})
        self.assertEqual(fields[2]["field"], 7)

    def test_garbage(self):
        with self.assertRaises((ValueError, IndexError)):
            ops_backend.raw_fields(base64.b64decode("/////w=="))


if __name__ == "__main__":
    unittest.main(verbosity=2)
