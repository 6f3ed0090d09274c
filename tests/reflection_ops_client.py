#!/usr/bin/python3
"""A stranger's operator client: none of the project's protos or code.

It learns ops.v1.OutboxOps from the server's reflection service (v1) alone,
builds its messages from the file descriptors it is sent, and calls the
methods by name with Debian's python3-grpcio and python3-protobuf. The only
schema written here is the reflection protocol's own few fields.

  reflection_ops_client.py ADDR TOKEN METHOD [JSON_REQUEST]

prints the response as JSON (proto field names) and exits 0, or prints the
gRPC status and exits 1.
"""
import json
import sys

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

SERVICE = "ops.v1.OutboxOps"
REFLECTION = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field_bytes(number, payload):  # a length-delimited field
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def read_fields(data):
    """(number, wire type, value) of each field of a message, in order."""
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
        elif wire == 2:
            length, i = read_varint(data, i)
            value, i = data[i:i + length], i + length
        else:
            raise ValueError("unexpected wire type %d" % wire)
        yield number, wire, value


def read_varint(data, i):
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def file_descriptors(channel, metadata, symbol):
    """ServerReflectionRequest.file_containing_symbol (field 4): the
    FileDescriptorProtos (response field 4 -> its field 1, repeated bytes)."""
    call = channel.stream_stream(REFLECTION, request_serializer=lambda b: b,
                                 response_deserializer=lambda b: b)
    request = field_bytes(4, symbol.encode())
    for response in call(iter([request]), metadata=metadata, timeout=10):
        for number, _, value in read_fields(response):
            if number == 7:  # error_response
                raise SystemExit("reflection error for %s: %r" % (symbol, value))
            if number == 4:  # file_descriptor_response
                return [v for n, _, v in read_fields(value) if n == 1]
    raise SystemExit("no reflection answer for " + symbol)


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    addr, token, method = sys.argv[1:4]
    request_json = sys.argv[4] if len(sys.argv) == 5 else "{}"
    metadata = [("authorization", "Bearer " + token)] if token else []
    channel = grpc.insecure_channel(addr)
    pool = descriptor_pool.DescriptorPool()
    pending = file_descriptors(channel, metadata, SERVICE)
    added = set()
    # Dependencies first: add what the pool can take until all are in.
    while pending:
        progress = False
        for raw in list(pending):
            proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
            if proto.name in added:
                pending.remove(raw)
                continue
            try:
                pool.Add(proto)
            except TypeError:
                continue  # a dependency is not in yet
            added.add(proto.name)
            pending.remove(raw)
            progress = True
        if not progress:
            raise SystemExit("cannot resolve the descriptors' dependencies")
    service = pool.FindServiceByName(SERVICE)
    m = service.FindMethodByName(method)
    factory = message_factory.MessageFactory(pool)
    request_class = factory.GetPrototype(m.input_type)
    response_class = factory.GetPrototype(m.output_type)
    request = json_format.Parse(request_json, request_class())
    call = channel.unary_unary("/%s/%s" % (SERVICE, method),
                               request_serializer=lambda r: r.SerializeToString(),
                               response_deserializer=response_class.FromString)
    try:
        response = call(request, metadata=metadata, timeout=30)
    except grpc.RpcError as e:
        print("%s: %s" % (e.code().name, e.details()))
        sys.exit(1)
    print(json.dumps(json_format.MessageToDict(response, preserving_proto_field_name=True)))


if __name__ == "__main__":
    main()
