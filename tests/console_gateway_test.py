#!/usr/bin/python3
"""The console gateway on its own (no services, no browser): its flags, its
headers, its answers to what is not an ops call, the Connect error JSON of
an ops endpoint that does not answer, and a page script that never parses
HTML; against a stand-in ops endpoint (reflection and a few calls behind a
bearer token, FakeOps): Authorization headers gRPC metadata cannot carry,
the token the shard list and DecodePayload ask for, bounded type names, a
slow reflection call holding up no other call, call durations. The calls
that reach real services are in tests/e2e_console_test.sh.

  python3 tests/console_gateway_test.py
"""
import base64
import concurrent.futures
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GATEWAY = os.path.join(ROOT, "console", "gateway.py")
sys.path.insert(0, os.path.join(ROOT, "console"))
import grpc  # noqa: E402
import ops_backend  # noqa: E402

TOKEN = "secret-token-0123456789"  # never to be seen in the gateway's log


def dead_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nobody listens once it is closed


def field(number, value):
    """A length-delimited protobuf field."""
    return ops_backend._varint(number << 3 | 2) + ops_backend._varint(len(value)) + value


class FakeOps:
    """A stand-in for recovery_service's ops endpoint: the reflection service
    with ops.proto's descriptors (compiled by protoc) and GetRetryPolicy,
    GetStats and RedriveMessage, which want `Bearer TOKEN`. `asked` lists
    the symbols reflection was asked for; a symbol in `hold` is answered
    once its event is set; `received` keeps each call's request."""

    def __init__(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "ops.pb")
            subprocess.run(["protoc", "-I", os.path.join(ROOT, "proto"), "--include_imports",
                            "--descriptor_set_out=" + out, "ops/v1/ops.proto"], check=True,
                           timeout=60)
            with open(out, "rb") as f:
                self.files = [v for n, _, v in ops_backend.read_fields(f.read()) if n == 1]
        self.asked = []
        self.hold = {}
        self.received = []  # (method, request bytes)
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8))
        ops = {name: grpc.unary_unary_rpc_method_handler(self._gated(name, answer))
               for name, answer in (("GetRetryPolicy", b""), ("GetStats", b"\x18\x03"),
                                    ("RedriveMessage", b""))}
        self.server.add_generic_rpc_handlers([
            grpc.method_handlers_generic_handler(ops_backend.SERVICE, ops),
            grpc.method_handlers_generic_handler("grpc.reflection.v1.ServerReflection", {
                "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(self._reflect)}),
        ])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def _gated(self, method, answer):
        def handler(request, context):
            auth = dict(context.invocation_metadata()).get("authorization")
            if auth is None:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "a bearer token is required")
            if auth != "Bearer " + TOKEN:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, "the token is not accepted")
            self.received.append((method, request))
            return answer
        return handler

    def _reflect(self, requests, context):
        for request in requests:
            symbol = next(v for n, _, v in ops_backend.read_fields(request) if n == 4).decode()
            self.asked.append(symbol)
            if symbol in self.hold:
                self.hold[symbol].wait(60)
            if symbol == ops_backend.SERVICE:
                yield field(4, b"".join(field(1, f) for f in self.files))
            else:
                yield field(7, b"")  # error_response: not found

    def stop(self):
        for event in self.hold.values():
            event.set()
        self.server.stop(None)


class Gateway:
    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, GATEWAY, "--listen", "127.0.0.1:0", *args],
                                     stderr=subprocess.PIPE, text=True)
        line = self.start_line = self.proc.stderr.readline()
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

    def post(self, path, body, token=None, headers=None):
        """POST of JSON; TOKEN (str or raw bytes) as the bearer token."""
        all_headers = {"Content-Type": "application/json"}
        if token is not None:
            all_headers["Authorization"] = (b"Bearer " + token if isinstance(token, bytes)
                                            else "Bearer " + token)
        all_headers.update(headers or {})
        response, data = self.request("POST", path, json.dumps(body).encode(), all_headers)
        return response.status, json.loads(data)

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

    def test_shards_need_a_shard_that_answers(self):
        response, body = self.gw.request("GET", "/console/v1/shards",
                                         headers={"Authorization": "Bearer " + TOKEN})
        self.assertEqual(response.status, 503)
        self.assertEqual(json.loads(body)["code"], "unavailable")

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


class TokenTest(unittest.TestCase):
    """Against FakeOps: what the gateway does with the Authorization header."""

    @classmethod
    def setUpClass(cls):
        cls.ops = FakeOps()
        cls.gw = Gateway("--ops", "a=127.0.0.1:%d" % cls.ops.port, "--timeout", "20")

    @classmethod
    def tearDownClass(cls):
        log = cls.gw.stop()
        cls.ops.stop()
        assert "secret-token" not in log, "a token in the log:\n" + log
        assert "console_stopped" in log, log

    def test_headers_grpc_metadata_cannot_carry(self):
        """A non-ASCII letter, a tab, a space or an overlong token: 401,
        before any call, and the token nowhere in the answer or the log."""
        payload = base64.b64encode(b"\x08\x01").decode()
        for token in [(TOKEN + "\u00e9").encode("utf-8"), (TOKEN + "\u00e9").encode("latin-1"),
                      b"secret-token\t0123456789", b"secret-token 0123456789",
                      b"secret-token-" + b"x" * 5000]:
            for path, body in (("/ops.v1.OutboxOps/GetStats", {}),
                               ("/console/v1/DecodePayload", {"type": "T", "payload": payload})):
                status, answer = self.gw.post(path, body, token)
                self.assertEqual((status, answer["code"]), (401, "unauthenticated"), (token, path))
                self.assertNotIn("secret-token", answer["message"])
            response, body = self.gw.request("GET", "/console/v1/shards",
                                             headers={"Authorization": b"Bearer " + token})
            self.assertEqual(response.status, 401, token)
        for header in ("Basic " + TOKEN, "Bearer ", "bearer " + TOKEN):
            response, body = self.gw.request("POST", "/ops.v1.OutboxOps/GetStats", b"{}",
                                             {"Content-Type": "application/json",
                                              "Authorization": header})
            self.assertEqual(response.status, 401, header)
        self.assertEqual(self.gw.post("/ops.v1.OutboxOps/GetStats", {}, TOKEN),
                         (200, {"sending": "0", "sent": "0", "failed": "3",
                                "oldestSendingAgeSeconds": 0.0, "leaseHeld": False,
                                "leaseHolder": "", "republishedTotal": "0",
                                "publishFailuresTotal": "0", "failedTotal": "0",
                                "alertsSentTotal": "0", "archivedTotal": "0",
                                "deliveryHold": "", "payQueueReady": "0",
                                "payQueueConsumers": 0, "deferredTotal": "0",
                                "alertsActive": "0", "alertsResolvedTotal": "0"}))

    def test_reason_goes_to_the_ops_api(self):
        """The reason an operator gives travels with the call, as its field."""
        reason = "ticket 42: the caf\u00e9's rate is fixed"
        status, answer = self.gw.post("/ops.v1.OutboxOps/RedriveMessage",
                                      {"messageId": "m-1", "reason": reason}, TOKEN)
        self.assertEqual(status, 200, answer)
        method, request = self.ops.received[-1]
        fields = {n: v for n, _, v in ops_backend.read_fields(request)}
        self.assertEqual((method, fields), ("RedriveMessage", {1: b"m-1", 2: reason.encode()}))

    def test_a_call_grpcio_refuses_names_no_token(self):
        """Behind the gateway's own check: whatever grpcio raises becomes an
        OpsError with a fixed message."""
        shard = ops_backend.Shard("a", "127.0.0.1:%d" % self.ops.port, timeout=20)
        with self.assertRaises(ops_backend.OpsError) as caught:
            shard.call("GetStats", "{}", "Bearer secret-token\t0123456789")
        self.assertEqual(caught.exception.code, grpc.StatusCode.INTERNAL)
        self.assertEqual(caught.exception.message,
                         "the call to a could not be made (ValueError)")

    def test_shard_list_wants_a_token(self):
        def shards(token):
            headers = {"Authorization": "Bearer " + token} if token is not None else {}
            response, body = self.gw.request("GET", "/console/v1/shards", headers=headers)
            return response.status, json.loads(body)
        status, body = shards(None)
        self.assertEqual((status, body["code"]), (401, "unauthenticated"))
        status, body = shards("wrong-token-0123456789")
        self.assertEqual((status, body["code"]), (403, "permission_denied"))
        status, body = shards(TOKEN)
        self.assertEqual(status, 200)
        self.assertEqual(body["shards"], [{"name": "a", "addr": "127.0.0.1:%d" % self.ops.port}])

    def test_decode_wants_a_token(self):
        body = {"type": "ops.v1.GetStatsRequest", "payload": ""}
        status, answer = self.gw.post("/console/v1/DecodePayload", body)
        self.assertEqual((status, answer["code"]), (401, "unauthenticated"))
        status, answer = self.gw.post("/console/v1/DecodePayload", body, "wrong-token-0123456789")
        self.assertEqual((status, answer["code"]), (403, "permission_denied"))
        status, answer = self.gw.post("/console/v1/DecodePayload", body, TOKEN)
        self.assertEqual((status, answer), (200, {"type": "ops.v1.GetStatsRequest", "fields": {}}))

    def test_type_names_are_bounded(self):
        """A type that is no message name, or a longer one, is never looked
        up: its payload is shown as text when it is text."""
        text = '{"order": 7, "note": "caf\u00e9\tbar"}\n'
        payload = base64.b64encode(text.encode()).decode()
        for type_name in ("application/json", "x" * 600000, "Name-with-dashes", "a..b"):
            asked = len(self.ops.asked)
            status, answer = self.gw.post("/console/v1/DecodePayload",
                                          {"type": type_name, "payload": payload}, TOKEN)
            self.assertEqual((status, answer), (200, {"type": "", "raw": [], "text": text}),
                             type_name[:40])
            self.assertEqual(self.ops.asked[asked:], [], type_name[:40])
        binary = base64.b64encode(b"\xff\xfe\x00").decode()
        status, answer = self.gw.post("/console/v1/DecodePayload",
                                      {"type": "image/png", "payload": binary}, TOKEN)
        self.assertEqual((status, answer.get("base64")), (200, binary))

    def test_unknown_type_names_are_remembered_within_a_bound(self):
        shard = ops_backend.Shard("a", "127.0.0.1:%d" % self.ops.port, timeout=20)
        for i in range(ops_backend.MAX_UNKNOWN_TYPES + 50):
            shard.decode("pkg.Unknown%d" % i, b"\x08\x01")
        self.assertEqual(len(shard._unknown), ops_backend.MAX_UNKNOWN_TYPES)
        asked = len(self.ops.asked)
        shard.decode("pkg.Unknown%d" % (ops_backend.MAX_UNKNOWN_TYPES + 49), b"")
        self.assertEqual(self.ops.asked[asked:], [], "a name it remembers is asked again")

    def test_slow_reflection_holds_up_no_call(self):
        """DecodePayload waiting on reflection for a new type name: the
        shard's other calls go on meanwhile."""
        shard = ops_backend.Shard("a", "127.0.0.1:%d" % self.ops.port, timeout=60)
        shard.call("GetRetryPolicy", "{}", "Bearer " + TOKEN)  # the service is learnt
        self.ops.hold["pkg.Slow"] = threading.Event()
        slow = threading.Thread(target=shard.decode, args=("pkg.Slow", b""))
        slow.start()
        deadline = time.monotonic() + 20
        while "pkg.Slow" not in self.ops.asked:
            self.assertLess(time.monotonic(), deadline, "reflection was not asked")
            time.sleep(0.05)
        done = []
        other = threading.Thread(target=lambda: done.append(
            shard.call("GetStats", "{}", "Bearer " + TOKEN)))
        other.start()
        other.join(20)
        held = not done
        self.ops.hold["pkg.Slow"].set()
        slow.join(60)
        other.join(60)
        self.assertFalse(held, "GetStats waited for DecodePayload's reflection call")
        self.assertEqual(done[0]["failed"], "3")

    def test_call_duration_is_from_the_request(self):
        """A kept-alive connection's idle time before a request is not
        counted in its console_call line: the gateway's figure lies within
        what the client measured around the request."""
        gw = Gateway("--ops", "a=127.0.0.1:%d" % self.ops.port)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
            headers = {"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN}
            conn.request("POST", "/ops.v1.OutboxOps/GetRetryPolicy", b"{}", headers)
            conn.getresponse().read()
            time.sleep(1.5)  # the connection idles, as between the page's samples
            started = time.monotonic()
            conn.request("POST", "/ops.v1.OutboxOps/GetStats", b"{}", headers)
            response = conn.getresponse()
            response.read()
            client_ms = (time.monotonic() - started) * 1000
            conn.close()
            self.assertEqual(response.status, 200)
        finally:
            log = gw.stop()
        m = re.search(r"console_call path=/ops.v1.OutboxOps/GetStats .* ms=(\d+)", log)
        self.assertIsNotNone(m, log)
        self.assertLessEqual(int(m.group(1)), client_ms, log)
        print("GetStats after 1.5 s idle: the gateway logs ms=%s, the client measured %.1f ms"
              % (m.group(1), client_ms), file=sys.stderr)


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
            # The error's type only: its text may quote what the client sent.
            self.assertRegex(log, r"console_connection_failed peer=127.0.0.1 error=\w+\n")
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
            (["--ops", "a=10.1.2.3:50053"], "beyond loopback"),
            (["--ops", "recovery:50053"], "give --ops_ca"),
            (["--ops", "127.0.0.1:50053", "--ops", "[2001:db8::1]:50053"], "beyond loopback"),
        ]:
            result = self.run_gateway("--listen", "127.0.0.1:0", *args) if args[0] != "--listen" \
                else self.run_gateway(*args)
            self.assertEqual(result.returncode, 2, (args, result.stderr))
            self.assertIn("console_failed", result.stderr)
            self.assertIn(words, result.stderr, args)

    def test_ops_beyond_loopback_over_tls(self):
        with tempfile.NamedTemporaryFile("w", suffix=".pem") as ca:
            ca.write("-----BEGIN CERTIFICATE-----\n")
            ca.flush()
            for ops in ("10.1.2.3:50053", "recovery:50053", "localhost:50053", "[::1]:50053"):
                gw = Gateway("--ops", ops, "--ops_ca", ca.name)
                gw.stop()
                self.assertIn("ops_tls=on", gw.start_line)
        gw = Gateway("--ops", "localhost:50053", "--ops", "[::1]:50053")
        gw.stop()
        self.assertIn("ops_tls=off", gw.start_line)

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
