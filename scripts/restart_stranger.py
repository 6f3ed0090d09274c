#!/usr/bin/python3
"""A client that is not ours: creates payments through a restart of payment_service.

Python grpcio (Debian's python3-grpcio) and none of our protos or code: the
request is encoded by hand from payment.proto's field numbers, and the
channel uses only what docs/api.md ("Clients that ride a restart") tells
any client to set: its service config (wait for ready, retry UNAVAILABLE
and CANCELLED) and a deadline per call. Each thread creates payments one
after another, each with a key of its own, and never retries by hand: a call
that fails is counted as failed. Prints one JSON line:

  {"ok": N, "failed": N, "errors": {"UNAVAILABLE: ...": N}, "keys": [...]}

Usage: restart_stranger.py TARGET SECONDS [THREADS] [KEY_PREFIX]
  TARGET      host:port of payment_service (plaintext)
  SECONDS     how long to keep creating
Exit status 0 when every call succeeded, 1 otherwise, 2 on a usage error.
"""
import json
import sys
import threading
import time

import grpc

# The service config of docs/api.md, as any client would copy it.
SERVICE_CONFIG = {
    "methodConfig": [{
        "name": [{"service": "payment.v1.PaymentService"}],
        "waitForReady": True,
        "retryPolicy": {
            "maxAttempts": 5,
            "initialBackoff": "0.1s",
            "maxBackoff": "1s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"],
        },
    }]
}
DEADLINE_S = 10.0
METHOD = "/payment.v1.PaymentService/CreatePayment"


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_str(number, text):
    data = text.encode()
    return varint(number << 3 | 2) + varint(len(data)) + data


def create_request(key, amount_minor):
    """payment.v1.CreatePaymentRequest: key 1, payer 2, payee 3, amount 4, currency 5."""
    return (field_str(1, key) + field_str(2, "stranger-payer") + field_str(3, "stranger-payee") +
            varint(4 << 3 | 0) + varint(amount_minor) + field_str(5, "EUR"))


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    target, seconds = argv[1], float(argv[2])
    threads = int(argv[3]) if len(argv) > 3 else 2
    prefix = argv[4] if len(argv) > 4 else "stranger"
    channel = grpc.insecure_channel(
        target, options=[("grpc.service_config", json.dumps(SERVICE_CONFIG)),
                         ("grpc.enable_retries", 1)])
    create = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
    lock = threading.Lock()
    result = {"ok": 0, "failed": 0, "errors": {}, "keys": []}
    until = time.monotonic() + seconds

    def run(t):
        i = 0
        while time.monotonic() < until:
            key = f"{prefix}-{t}-{i}"
            i += 1
            try:
                create(create_request(key, 100 + i), timeout=DEADLINE_S)
                with lock:
                    result["ok"] += 1
                    result["keys"].append(key)
            except grpc.RpcError as e:
                name = f"{e.code().name}: {e.details()}"
                with lock:
                    result["failed"] += 1
                    result["errors"][name] = result["errors"].get(name, 0) + 1
            time.sleep(0.005)

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(json.dumps(result), flush=True)
    return 0 if result["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
