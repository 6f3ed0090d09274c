"""The console's side of the ops API: one gRPC channel per shard, the API
learnt from the server's reflection service, calls by method name with
protobuf JSON in and out.

No protos of the project are compiled in: like tests/reflection_ops_client.py,
it asks each recovery_service for the file descriptors of ops.v1.OutboxOps
(and of the payload types it is asked to decode) and builds the messages
from them, so the console speaks whatever version of the API a shard serves.
"""
import base64
import collections
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

SERVICE = "ops.v1.OutboxOps"
REFLECTION = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
# Where the payload types live: OutboxMessage.message_type is the short name.
PAYLOAD_PACKAGES = ("", "events.v1.")
# A type name worth a schema lookup; anything else is decoded without one.
MESSAGE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
MAX_TYPE_NAME = 200
# Type names the server's reflection did not know, kept so each is asked
# once; the oldest are forgotten beyond this many.
MAX_UNKNOWN_TYPES = 256
# A token a shard accepted is taken for this long by the calls that are the
# gateway's own (the shard list, DecodePayload), without asking again.
TOKEN_SECONDS = 60.0
MAX_TOKENS = 64


class OpsError(Exception):
    """A call that did not reach an answer: gRPC status code and message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code  # a grpc.StatusCode
        self.message = message


# --- The reflection protocol's few fields, by hand (no generated code).

def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(data, i):
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def read_fields(data):
    """(number, wire type, value) of each field of an encoded message, in
    order; raises ValueError on anything that is not well formed."""
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            length, i = _read_varint(data, i)
            value, i = data[i:i + length], i + length
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError("unexpected wire type %d" % wire)
        if i > len(data):
            raise ValueError("truncated")
        yield number, wire, value


def _message_class(pool, full_name):
    descriptor = pool.FindMessageTypeByName(full_name)
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def to_json_dict(message, proto_names=False):
    """The protobuf JSON mapping of a message, zero values included so a
    page sees `"failed": "0"` rather than nothing."""
    try:
        return json_format.MessageToDict(message, including_default_value_fields=True,
                                         preserving_proto_field_name=proto_names)
    except TypeError:  # protobuf >= 5.26 renamed the option
        return json_format.MessageToDict(message, always_print_fields_with_no_presence=True,
                                         preserving_proto_field_name=proto_names)


def as_text(data):
    """DATA as text when it is UTF-8 of printable characters, tabs and line
    breaks; else None."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if all(c.isprintable() or c in "\t\n\r" for c in text):
        return text
    return None


def is_message_name(type_name):
    return len(type_name) <= MAX_TYPE_NAME and MESSAGE_NAME.fullmatch(type_name) is not None


def raw_fields(data, depth=0):
    """A payload decoded without its schema (as `protoc --decode_raw`):
    [{"field": n, "value": ...}]; length-delimited values are shown as text
    when they are UTF-8, as nested fields when they parse as a message, else
    as base64."""
    out = []
    for number, wire, value in read_fields(data):
        if wire == 0:
            shown = str(value)
        elif wire == 2:
            shown = None
            try:
                text = value.decode("utf-8")
                if text.isprintable() or not text:
                    shown = text
            except UnicodeDecodeError:
                pass
            if shown is None and depth < 4:
                try:
                    shown = raw_fields(value, depth + 1)
                except (ValueError, IndexError):
                    shown = None
            if shown is None:
                shown = base64.b64encode(value).decode()
        else:
            shown = base64.b64encode(value).decode()
        out.append({"field": number, "value": shown})
    return out


class LocalTypes:
    """Payload types from .proto files of this checkout, compiled by protoc
    at start (Debian's protobuf-compiler): the names of a payload's fields
    when the ops endpoint's reflection does not know its type (recovery
    relays payloads as bytes and links no payload schema)."""

    def __init__(self, include_dir, files):
        self.pool = None
        protoc = shutil.which("protoc")
        files = [f for f in files if os.path.isfile(os.path.join(include_dir, f))]
        if not protoc or not files:
            return
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "set.pb")
            result = subprocess.run([protoc, "-I", include_dir, "--include_imports",
                                     "--descriptor_set_out=" + out, *files],
                                    capture_output=True, timeout=60)
            if result.returncode != 0:
                return
            with open(out, "rb") as f:
                descriptor_set = descriptor_pb2.FileDescriptorSet.FromString(f.read())
        pool = descriptor_pool.DescriptorPool()
        for proto in descriptor_set.file:  # protoc lists dependencies first
            pool.Add(proto)
        self.pool = pool

    def find(self, full_name):
        if self.pool is None:
            return None
        try:
            self.pool.FindMessageTypeByName(full_name)
        except KeyError:
            return None
        return _message_class(self.pool, full_name)


class Shard:
    """One recovery_service's ops endpoint."""

    def __init__(self, name, addr, credentials=None, timeout=30.0, local_types=None):
        self.name = name
        self.local_types = local_types
        self.addr = addr
        self.timeout = timeout
        if credentials is None:
            self._channel = grpc.insecure_channel(addr)
        else:
            self._channel = grpc.secure_channel(addr, credentials)
        self._lock = threading.Lock()  # held for the pool, never across a call
        self._service_lock = threading.Lock()  # one learns the service at a time
        self._pool = None
        self._files = set()
        # Type names the server's reflection does not know (bounded, oldest first).
        self._unknown = collections.OrderedDict()
        self._methods = {}  # name -> (request class, response class, callable)
        # sha256 of an Authorization header this shard accepted -> until when.
        self._tokens = collections.OrderedDict()

    def _file_descriptors(self, symbol):
        """ServerReflectionRequest.file_containing_symbol (field 4) -> the
        FileDescriptorProtos of its answer (field 4, its field 1), or [] when
        the server does not know the symbol."""
        call = self._channel.stream_stream(REFLECTION, request_serializer=lambda b: b,
                                           response_deserializer=lambda b: b)
        name = symbol.encode()
        request = _varint(4 << 3 | 2) + _varint(len(name)) + name
        try:
            for response in call(iter([request]), timeout=self.timeout):
                for number, _, value in read_fields(response):
                    if number == 7:  # error_response: not found
                        return []
                    if number == 4:
                        return [v for n, _, v in read_fields(value) if n == 1]
        except grpc.RpcError as e:
            raise OpsError(e.code(), "reflection: %s" % e.details()) from None
        except (ValueError, IndexError):
            raise OpsError(grpc.StatusCode.INTERNAL,
                           "reflection: an answer that is not well formed") from None
        return []

    def _add_files(self, raws):
        """Adds file descriptors to the pool, dependencies first."""
        pending = [descriptor_pb2.FileDescriptorProto.FromString(r) for r in raws]
        while pending:
            progress = False
            for proto in list(pending):
                if proto.name in self._files:
                    pending.remove(proto)
                    continue
                try:
                    self._pool.Add(proto)
                except TypeError:
                    continue  # a dependency is not in yet
                self._files.add(proto.name)
                pending.remove(proto)
                progress = True
            if not progress:
                raise OpsError(grpc.StatusCode.INTERNAL,
                               "reflection: cannot resolve %s" %
                               ", ".join(p.name for p in pending))

    def _ensure_service(self):
        """Learns the service once; a failure is tried again next call.
        Every call waits for it, since each needs the service's messages;
        the pool's lock is not held meanwhile (DecodePayload's lookups of a
        learnt service do not wait)."""
        with self._lock:
            if self._pool is not None:
                return
        with self._service_lock:
            with self._lock:
                if self._pool is not None:  # learnt while this one waited
                    return
            raws = self._file_descriptors(SERVICE)
            if not raws:
                raise OpsError(grpc.StatusCode.UNIMPLEMENTED,
                               "%s at %s does not serve %s" % (self.name, self.addr, SERVICE))
            with self._lock:
                self._learn_service(raws)

    def _learn_service(self, raws):
        """Builds the pool and the method table (under the pool's lock)."""
        pool = descriptor_pool.DescriptorPool()
        self._pool, self._files = pool, set()
        self._unknown.clear()
        try:
            self._add_files(raws)
            service = pool.FindServiceByName(SERVICE)
            methods = {}
            for m in service.methods:
                request_class = _message_class(pool, m.input_type.full_name)
                response_class = _message_class(pool, m.output_type.full_name)
                stub = self._channel.unary_unary(
                    "/%s/%s" % (SERVICE, m.name),
                    request_serializer=lambda r: r.SerializeToString(),
                    response_deserializer=response_class.FromString)
                methods[m.name] = (request_class, response_class, stub)
            self._methods = methods
        except OpsError:
            self._pool = None
            raise
        except Exception as e:  # noqa: BLE001 - descriptors the pool refuses
            self._pool = None
            raise OpsError(grpc.StatusCode.INTERNAL, "reflection: %s at %s serves descriptors "
                           "that cannot be used (%s)" % (self.name, self.addr,
                                                         type(e).__name__)) from None

    def call(self, method, body, authorization):
        """Calls METHOD with BODY (JSON text); returns the response as a
        JSON-ready dict. Raises OpsError, whose message never holds the
        authorization."""
        self._ensure_service()
        if method not in self._methods:
            raise OpsError(grpc.StatusCode.UNIMPLEMENTED, "no method %s.%s" % (SERVICE, method))
        request_class, _, stub = self._methods[method]
        try:
            request = json_format.Parse(body or "{}", request_class())
        except json_format.ParseError as e:
            raise OpsError(grpc.StatusCode.INVALID_ARGUMENT, "request: %s" % e) from None
        metadata = [("authorization", authorization)] if authorization else []
        try:
            response = stub(request, metadata=metadata, timeout=self.timeout)
        except grpc.RpcError as e:
            raise OpsError(e.code(), e.details() or e.code().name) from None
        except Exception as e:  # noqa: BLE001 - e.g. grpcio refusing the metadata: its text quotes it
            raise OpsError(grpc.StatusCode.INTERNAL, "the call to %s could not be made (%s)"
                           % (self.name, type(e).__name__)) from None
        self._remember_token(authorization)
        return to_json_dict(response)

    def check_token(self, authorization):
        """Returns when this shard accepts AUTHORIZATION (the header, "" for
        none): a call it answered within TOKEN_SECONDS, else a
        GetRetryPolicy, the cheapest call of the API. Raises OpsError
        (UNAUTHENTICATED, PERMISSION_DENIED, UNAVAILABLE, ...)."""
        key = hashlib.sha256(authorization.encode()).digest()
        with self._lock:
            until = self._tokens.get(key)
            if until is not None and until > time.monotonic():
                return
        self.call("GetRetryPolicy", "{}", authorization)

    def _remember_token(self, authorization):
        key = hashlib.sha256(authorization.encode()).digest()
        with self._lock:
            self._tokens.pop(key, None)
            self._tokens[key] = time.monotonic() + TOKEN_SECONDS
            while len(self._tokens) > MAX_TOKENS:
                self._tokens.popitem(last=False)

    def decode(self, type_name, payload):
        """A payload's fields: by its type's schema when the server's
        reflection (or else this checkout's protos) knows it, with field
        names; else by field number. A type that is no message name (a
        content type, a foreign producer's label) is not looked up, and its
        payload is shown as text when it is text."""
        if type_name and not is_message_name(type_name):
            text = as_text(payload)
            if text is not None:
                return {"type": "", "raw": [], "text": text}
            type_name = ""
        self._ensure_service()
        names = [type_name] if "." in type_name else [p + type_name for p in PAYLOAD_PACKAGES]
        for full_name in names if type_name else []:
            cls = self._remote_class(full_name)
            if cls is None and self.local_types is not None:
                cls = self.local_types.find(full_name)
            if cls is None:
                continue
            message = cls()
            try:
                message.ParseFromString(payload)
            except Exception:  # noqa: BLE001 - a payload that is not of its type
                break
            return {"type": full_name, "fields": to_json_dict(message, proto_names=True)}
        try:
            return {"type": "", "raw": raw_fields(payload)}
        except (ValueError, IndexError):
            pass
        try:  # not protobuf: text as it is, else its bytes in base64
            return {"type": "", "raw": [], "text": payload.decode("utf-8")}
        except UnicodeDecodeError:
            return {"type": "", "raw": [], "base64": base64.b64encode(payload).decode()}

    def _remote_class(self, full_name):
        """The message class of FULL_NAME from the server's reflection, or
        None when it does not know it (asked once per name, the last
        MAX_UNKNOWN_TYPES names remembered). The lock is not held across
        the reflection call, so a slow one holds up no other call."""
        with self._lock:
            pool = self._pool
            try:
                pool.FindMessageTypeByName(full_name)
                return _message_class(pool, full_name)
            except KeyError:
                if full_name in self._unknown:
                    return None
        raws = self._file_descriptors(full_name)
        with self._lock:
            if self._pool is not pool:  # the service was learnt anew meanwhile
                return None
            if not raws:
                self._unknown[full_name] = True
                while len(self._unknown) > MAX_UNKNOWN_TYPES:
                    self._unknown.popitem(last=False)
                return None
            try:
                pool.FindMessageTypeByName(full_name)  # added by another call meanwhile
            except KeyError:
                self._add_files(raws)
            return _message_class(pool, full_name)
