#!/usr/bin/python3
"""outbox console: the operator's console in the browser.

Serves the page (console/static/) and forwards
  POST /ops.v1.OutboxOps/<Method>   (Content-Type: application/json)
with a protobuf-JSON body to a shard's recovery_service, as a client of the
public ops API (gRPC, learnt by reflection), in the Connect protocol's unary
JSON style: the response message as JSON, or HTTP 4xx/5xx with
{"code": "<gRPC status, lower case>", "message": "..."}. The header
`Outbox-Shard: NAME` picks the shard (default: the first). The caller's
`Authorization: Bearer <ops token>` goes on as gRPC metadata, unchanged and
never logged, so the audit trail names the same operator as outboxctl does;
a header gRPC metadata cannot carry is refused before any call. The shard
list and DecodePayload answer a caller whose token a shard accepts.

It polls nothing by itself: every gRPC call is one a page asked for.

  gateway.py [--listen 127.0.0.1:8090] [--ops NAME=HOST:PORT ...] [--ops_ca CA.pem]
             [--ops_cert CERT.pem --ops_key KEY.pem] [--tls_cert CERT.pem --tls_key KEY.pem]
"""
import argparse
import base64
import binascii
import datetime
import hashlib
import ipaddress
import json
import os
import re
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc  # noqa: E402
import ops_backend  # noqa: E402

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
# The payload schemas of this checkout, for field names (ops_backend.LocalTypes).
PROTO_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "proto")
PAYLOAD_PROTOS = ["events/v1/events.proto"]
# Debian's libjs-chart.js: UMD builds first (4.x names its ES module chart.js).
CHART_JS = [os.path.join("/usr/share/javascript/chart.js", n)
            for n in ("chart.umd.js", "chart.umd.min.js", "chart.min.js", "chart.js")]
MAX_BODY = 1 << 20
# What gRPC metadata carries (printable ASCII) and a token file holds (no
# space): anything else is refused before a call, so it can reach no log.
MAX_AUTHORIZATION = 4096
AUTHORIZATION = re.compile(r"Bearer [\x21-\x7e]{1,%d}" % MAX_AUTHORIZATION)
BAD_AUTHORIZATION = ("the Authorization header must be 'Bearer ' and a token of printable "
                     "ASCII without spaces, at most %d characters" % MAX_AUTHORIZATION)
OPS_PREFIX = "/" + ops_backend.SERVICE + "/"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".png": "image/png",
                 ".svg": "image/svg+xml"}
# No inline script or style, nothing from elsewhere, no framing.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
# The Connect protocol's HTTP status of each gRPC code.
HTTP_STATUS = {
    "CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400, "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404, "ALREADY_EXISTS": 409, "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429, "FAILED_PRECONDITION": 400, "ABORTED": 409,
    "OUT_OF_RANGE": 400, "UNIMPLEMENTED": 501, "INTERNAL": 500, "UNAVAILABLE": 503,
    "DATA_LOSS": 500, "UNAUTHENTICATED": 401,
}


def log(level, event, **fields):
    """One line per event, key=value, as the services log."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    parts = ["%sZ %s %s" % (now, level, event)]
    for k, v in fields.items():
        v = str(v)
        if not v or re.search(r'[\s"=]', v):
            v = '"%s"' % v.replace("\\", "\\\\").replace('"', '\\"')
        parts.append("%s=%s" % (k, v))
    print(" ".join(parts), file=sys.stderr, flush=True)


def connect_code(code):
    """grpc.StatusCode -> the Connect protocol's name of it."""
    return "canceled" if code == grpc.StatusCode.CANCELLED else code.name.lower()


class Handler(BaseHTTPRequestHandler):
    server_version = "outbox-console"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = 60  # a client that stalls mid-request frees its thread

    # --- responses

    def _headers(self, status, content_type, length, cache="no-store"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cache-Control", cache)
        if self.server.https:
            self.send_header("Strict-Transport-Security", "max-age=31536000")
        self.end_headers()

    def _send(self, status, content_type, body, cache="no-store"):
        self._headers(status, content_type, len(body), cache)
        if self.command != "HEAD":
            self.wfile.write(body)
        self._status = status

    def _json(self, status, obj):
        self._send(status, "application/json", json.dumps(obj).encode())

    def _error(self, code, message):
        self._grpc_code = code.name
        self._json(HTTP_STATUS.get(code.name, 500), {"code": connect_code(code), "message": message})

    def version_string(self):
        return self.server_version

    def log_message(self, fmt, *args):  # http.server's own lines: we log ours
        pass

    def log_request(self, code="-", size="-"):
        pass

    # --- checks

    def _host_ok(self):
        """A console on loopback answers only loopback names, so a web page
        elsewhere cannot reach it by rebinding its own name to 127.0.0.1."""
        if not self.server.loopback:
            return True
        host = self.headers.get("Host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        name = name.strip("[]").lower()
        if name == "localhost":
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def _authorization(self):
        """The caller's Authorization header ("" without one), or None when
        it is not one gRPC metadata can carry: never passed on, never
        echoed."""
        values = self.headers.get_all("Authorization") or []
        if not values:
            return ""
        if len(values) > 1 or not AUTHORIZATION.fullmatch(values[0]):
            return None
        return values[0]

    def _refuse_authorization(self):
        self._error(grpc.StatusCode.UNAUTHENTICATED, BAD_AUTHORIZATION)

    # --- verbs

    def handle_one_request(self):
        self._started = None
        self._status = 0
        self._grpc_code = ""
        self._shard = ""
        super().handle_one_request()
        if self._status and getattr(self, "command", None) == "POST":
            log("INFO", "console_call", path=self.path.split("?", 1)[0], shard=self._shard,
                status=self._status,
                grpc=self._grpc_code or ("OK" if self._status == 200 else "-"),
                ms=int((time.monotonic() - (self._started or time.monotonic())) * 1000))

    def parse_request(self):
        # The request line is in: the call starts now, not with the idle wait
        # of a kept-alive connection before it.
        self._started = time.monotonic()
        return super().parse_request()

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        if not self._host_ok():
            return self._send(421, "text/plain", b"unknown host\n")
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            return self._static("index.html")
        if path.startswith("/static/"):
            return self._static(path[len("/static/"):])
        if path == "/vendor/chart.js":
            for candidate in CHART_JS:
                if os.path.isfile(candidate):
                    with open(candidate, "rb") as f:
                        return self._send(200, CONTENT_TYPES[".js"], f.read(), "max-age=3600")
            return self._send(404, "text/plain", b"libjs-chart.js is not installed\n")
        if path == "/console/v1/shards":
            return self._shards()
        if path == "/healthz":
            return self._send(200, "text/plain", b"ok\n")
        self._send(404, "text/plain", b"not found\n")

    def _shards(self):
        """The shards, to a caller whose token one of them accepts."""
        auth = self._authorization()
        if auth is None:
            return self._refuse_authorization()
        refused = None
        for shard in self.server.shards:
            try:
                shard.check_token(auth)
            except ops_backend.OpsError as e:
                if e.code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                    refused = refused or e
                continue
            return self._json(200, {"shards": [{"name": s.name, "addr": s.addr}
                                               for s in self.server.shards]})
        if refused is not None:
            return self._error(refused.code, refused.message)
        self._error(grpc.StatusCode.UNAVAILABLE, "no shard's ops API answers")

    def _static(self, name):
        if not re.fullmatch(r"[A-Za-z0-9_-]+\.[a-z]+", name):
            return self._send(404, "text/plain", b"not found\n")
        full = os.path.join(STATIC_DIR, name)
        ext = os.path.splitext(name)[1]
        if ext not in CONTENT_TYPES or not os.path.isfile(full):
            return self._send(404, "text/plain", b"not found\n")
        with open(full, "rb") as f:
            self._send(200, CONTENT_TYPES[ext], f.read(), "no-cache")

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        if not self._host_ok():
            return self._send(421, "text/plain", b"unknown host\n")
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit() or int(length) > MAX_BODY:
            self.close_connection = True
            return self._error(grpc.StatusCode.INVALID_ARGUMENT if length is None or not
                               length.isdigit() else grpc.StatusCode.RESOURCE_EXHAUSTED,
                               "a body with a Content-Length of at most %d bytes" % MAX_BODY)
        body = self.rfile.read(int(length))
        # JSON only: a form on another site cannot post it without a CORS
        # preflight, which this server never grants.
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return self._send(415, "application/json", json.dumps(
                {"code": "invalid_argument",
                 "message": "Content-Type must be application/json"}).encode())
        shard = self.server.shard(self.headers.get("Outbox-Shard", ""))
        if shard is None:
            return self._error(grpc.StatusCode.NOT_FOUND, "no shard named '%s'" %
                               self.headers.get("Outbox-Shard", ""))
        self._shard = shard.name
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return self._error(grpc.StatusCode.INVALID_ARGUMENT, "the body is not UTF-8")
        auth = self._authorization()
        if auth is None:
            return self._refuse_authorization()
        try:
            if path.startswith(OPS_PREFIX):
                method = path[len(OPS_PREFIX):]
                if not re.fullmatch(r"[A-Za-z]+", method):
                    return self._error(grpc.StatusCode.UNIMPLEMENTED, "no such method")
                return self._json(200, shard.call(method, text, auth))
            if path == "/console/v1/DecodePayload":
                shard.check_token(auth)
                return self._decode(shard, text)
        except ops_backend.OpsError as e:
            return self._error(e.code, e.message)
        except Exception as e:  # noqa: BLE001 - answered, and logged by its type only
            log("WARNING", "console_call_failed", path=path, shard=shard.name,
                error=type(e).__name__)
            return self._error(grpc.StatusCode.INTERNAL,
                               "the gateway failed on this call (%s)" % type(e).__name__)
        self._error(grpc.StatusCode.UNIMPLEMENTED, "no such method")

    def _decode(self, shard, text):
        """{"type": "PaymentCreated", "payload": "<base64>"} -> its fields."""
        try:
            request = json.loads(text or "{}")
            payload = base64.b64decode(request.get("payload", ""), validate=True)
            type_name = str(request.get("type", ""))
        except (ValueError, AttributeError, binascii.Error) as e:
            return self._error(grpc.StatusCode.INVALID_ARGUMENT, "request: %s" % e)
        self._json(200, shard.decode(type_name, payload))


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr, shards, ssl_context):
        family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.address_family = family
        self.shards = shards
        self.https = ssl_context is not None
        self.loopback = ipaddress.ip_address(addr[0]).is_loopback
        super().__init__(addr, Handler)
        if ssl_context is not None:
            # The handshake happens in the request's thread, on its first read.
            self.socket = ssl_context.wrap_socket(self.socket, server_side=True,
                                                  do_handshake_on_connect=False)

    def handle_error(self, request, client_address):
        """One line, not a traceback: a client that is not TLS, or that
        went away mid-request. The exception's type only: its text may
        quote what the client sent (a header, a token)."""
        error = sys.exc_info()[1]
        log("WARNING", "console_connection_failed", peer=client_address[0],
            error=type(error).__name__)

    def shard(self, name):
        if not name:
            return self.shards[0]
        return next((s for s in self.shards if s.name == name), None)


def parse_args(argv):
    env = os.environ.get
    p = argparse.ArgumentParser(
        prog="gateway.py",
        description="The outbox operator's console: serves the page and forwards its ops "
                    "API calls (POST /ops.v1.OutboxOps/<Method>, JSON) to recovery_service.")
    p.add_argument("--listen", default=env("CONSOLE_LISTEN", "127.0.0.1:8090"),
                   help="HOST:PORT to serve on (port 0: any free one; the start line says "
                        "which); an address beyond loopback needs --tls_cert "
                        "[env CONSOLE_LISTEN]")
    p.add_argument("--ops", action="append", metavar="[NAME=]HOST:PORT",
                   help="a shard's ops endpoint (recovery_service's RECOVERY_LISTEN); repeat "
                        "for each shard, the first is the default; a bare address is named "
                        "after itself; an address beyond loopback needs --ops_ca "
                        "[env CONSOLE_OPS, space-separated; default 127.0.0.1:50053]")
    p.add_argument("--ops_ca", default=env("CONSOLE_OPS_CA", ""),
                   help="PEM CA bundle: reach the ops endpoints over TLS, trusting it "
                        "[env CONSOLE_OPS_CA]")
    p.add_argument("--ops_cert", default=env("CONSOLE_OPS_CERT", ""),
                   help="PEM client certificate for ops endpoints under mTLS (with "
                        "--ops_key) [env CONSOLE_OPS_CERT]")
    p.add_argument("--ops_key", default=env("CONSOLE_OPS_KEY", ""),
                   help="PEM key of --ops_cert [env CONSOLE_OPS_KEY]")
    p.add_argument("--tls_cert", default=env("CONSOLE_TLS_CERT", ""),
                   help="PEM certificate: serve HTTPS (with --tls_key) [env CONSOLE_TLS_CERT]")
    p.add_argument("--tls_key", default=env("CONSOLE_TLS_KEY", ""),
                   help="PEM key of --tls_cert [env CONSOLE_TLS_KEY]")
    p.add_argument("--timeout", type=float, default=float(env("CONSOLE_TIMEOUT", "30")),
                   help="each ops call's deadline, seconds [env CONSOLE_TIMEOUT]")
    args = p.parse_args(argv)
    if not args.ops:
        args.ops = env("CONSOLE_OPS", "127.0.0.1:50053").split()
    return p, args


def read_file(parser, flag, path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        parser.exit(2, "console_failed error=\"--%s: %s\"\n" % (flag, e.strerror))
    if not data:
        parser.exit(2, "console_failed error=\"--%s: %s is empty\"\n" % (flag, path))
    return data


def split_host_port(text):
    m = re.fullmatch(r"\[([0-9a-fA-F:.]+)\]:(\d+)|([^:\[\]]+):(\d+)", text)
    if not m:
        return None
    host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    return host, int(port)


def is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: wherever it points


def main(argv=None):
    parser, args = parse_args(argv)
    fail = lambda msg: parser.exit(2, "console_failed error=\"%s\"\n" % msg)  # noqa: E731

    listen = split_host_port(args.listen)
    if listen is None:
        fail("--listen: want HOST:PORT, got '%s'" % args.listen)
    host = "127.0.0.1" if listen[0] == "localhost" else listen[0]
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        fail("--listen: want an IP address or localhost, got '%s'" % listen[0])
    if bool(args.tls_cert) != bool(args.tls_key):
        fail("--tls_cert and --tls_key go together")
    if bool(args.ops_cert) != bool(args.ops_key):
        fail("--ops_cert and --ops_key go together")
    if not loopback and not args.tls_cert:
        fail("--listen %s is beyond loopback: tokens would cross the network in clear; "
             "give --tls_cert and --tls_key" % args.listen)

    credentials = None
    if args.ops_ca or args.ops_cert:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=read_file(parser, "ops_ca", args.ops_ca) if args.ops_ca else None,
            private_key=read_file(parser, "ops_key", args.ops_key) if args.ops_key else None,
            certificate_chain=read_file(parser, "ops_cert", args.ops_cert) if args.ops_cert
            else None)
    local_types = ops_backend.LocalTypes(PROTO_DIR, PAYLOAD_PROTOS)
    shards, names = [], set()
    for spec in args.ops:
        name, _, addr = spec.rpartition("=")
        name = name or addr
        ops_host = split_host_port(addr)
        if ops_host is None:
            fail("--ops: want [NAME=]HOST:PORT, got '%s'" % spec)
        if credentials is None and not is_loopback(ops_host[0]):
            fail("--ops %s is beyond loopback: operators' tokens would cross the network in "
                 "clear; give --ops_ca (TLS to the ops API)" % spec)
        if not re.fullmatch(r"[A-Za-z0-9_.:\[\]-]+", name) or name in names:
            fail("--ops: shard name '%s' is not a simple name or is used twice" % name)
        names.add(name)
        shards.append(ops_backend.Shard(name, addr, credentials, args.timeout, local_types))

    context = None
    if args.tls_cert:
        read_file(parser, "tls_cert", args.tls_cert)
        read_file(parser, "tls_key", args.tls_key)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(args.tls_cert, args.tls_key)
        except (ssl.SSLError, OSError) as e:
            fail("--tls_cert/--tls_key: %s" % e)

    try:
        server = Server((host, listen[1]), shards, context)
    except OSError as e:
        fail("--listen %s: %s" % (args.listen, e.strerror))
    port = server.server_address[1]
    shown = "[%s]" % host if ":" in host else host
    url = "%s://%s:%d/" % ("https" if context else "http", shown, port)
    log("INFO", "console_started", url=url, port=port,
        shards=",".join("%s=%s" % (s.name, s.addr) for s in shards),
        ops_tls="on" if credentials else "off",
        payload_types="names" if local_types.pool else "field numbers")
    stop = threading.Event()

    def on_signal(signum, _frame):
        if not stop.is_set():
            stop.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    import signal
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.serve_forever(poll_interval=0.5)
    server.server_close()
    log("INFO", "console_stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
