"""The gRPC port against hostile and careless clients (issue 44): idle
ModelStreamInfer streams (D6), the HTTP/2 "rapid reset" (D7), a client that
does not read, the framing rules a gRPC server owes its clients, the standard
health service (grpc.health.v1) and a stop with streams open. The attack
clients are tests/server/http2_attacks.py's; no test asserts a latency: counts,
memory and statuses only."""
import gzip
import queue
import signal
import threading
import time
import zlib

import socket

import grpc
import h2.config
import h2.connection
import h2.events
import numpy as np
import pytest
import tritonclient.grpc as tg
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pb_grpc

from http2_attacks import (IdleStreams, RapidReset, RssSampler, grpc_frame, infer_request, probe,
                           raw_call, rss_bytes)
from server_util import MODELS, Server, servers  # noqa: F401

MODEL = str(MODELS / "seq_cls")
KEY = "s3cret-key"
MB = 1 << 20
INFER = "/inference.GRPCInferenceService/ModelInfer"
LIVE = "/inference.GRPCInferenceService/ServerLive"
CHECK = "/grpc.health.v1.Health/Check"


def wait_for(predicate, seconds=30, step=0.1):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# ---- D6: idle streams ----

def test_idle_streams_leave_new_calls_served(bertrt_bin):
    """300 ModelStreamInfer calls that never send a message held every one of
    grpc++'s call threads: each new call got RESOURCE_EXHAUSTED. An open stream
    now holds no thread."""
    s = Server(bertrt_bin, [MODEL])
    idle = IdleStreams(s.grpc_url, 300, connections=3)
    try:
        time.sleep(2)  # for all 300 to reach the server
        for _ in range(5):
            assert probe(s.grpc_url, "seq_cls", timeout=30) is None
        assert idle.ended() == {}  # idle, not refused
    finally:
        idle.close()
        s.stop()


def test_idle_streams_end_after_the_idle_timeout_and_busy_ones_do_not(bertrt_bin):
    s = Server(bertrt_bin, [MODEL, "--grpc-stream-idle-timeout", "3"])
    idle = IdleStreams(s.grpc_url, 300, connections=3)
    try:
        # A stream whose client sends more often than the timeout stays open.
        answers, errors = [], []
        c = tg.InferenceServerClient(s.grpc_url)
        c.start_stream(callback=lambda result, error: (errors if error else answers).append(1))
        text = tg.InferInput("text", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"hello"], dtype=object))
        for i in range(20):  # 4 s, a message every 0.2 s
            c.async_stream_infer("seq_cls", [text], request_id=str(i))
            time.sleep(0.2)
        assert wait_for(lambda: sum(idle.ended().values()) == 300)
        assert idle.ended() == {"DEADLINE_EXCEEDED": 300}
        assert all("--grpc-stream-idle-timeout" in d for d in idle.details()), idle.details()
        assert wait_for(lambda: len(answers) == 20) and not errors
        c.stop_stream()
    finally:
        idle.close()
        s.stop()


def test_open_calls_are_capped_server_wide(bertrt_bin):
    s = Server(bertrt_bin, [MODEL, "--grpc-max-streams", "20"])
    idle = IdleStreams(s.grpc_url, 25, connections=2)
    try:
        assert wait_for(lambda: sum(idle.ended().values()) == 5)
        assert idle.ended() == {"RESOURCE_EXHAUSTED": 5}
        assert all("--grpc-max-streams" in d for d in idle.details())
        assert probe(s.grpc_url, "seq_cls", timeout=30) == "RESOURCE_EXHAUSTED"
    finally:
        idle.close()
    assert wait_for(lambda: probe(s.grpc_url, "seq_cls", timeout=30) is None)
    s.stop()


# ---- D7: rapid reset ----

@pytest.mark.parametrize("with_key,provoked", [(False, False), (True, False), (True, True)],
                         ids=["without_key", "with_valid_key", "made_you_reset"])
def test_rapid_reset_is_contained(bertrt_bin, with_key, provoked):
    """HEADERS + RST_STREAM pairs as fast as a socket takes them, never reading:
    grpc++ 1.51 grew 1.5-2.5 GB in 3 s and kept it, and stopped answering. Now the
    server's memory stays put, other clients are answered during and after, and a
    connection that keeps resetting gets GOAWAY ENHANCE_YOUR_CALM. The same when
    the client makes the server reset each stream after its handler started
    (whole requests, then a WINDOW_UPDATE that overflows the stream's window)."""
    s = Server(bertrt_bin, [MODEL, "--api-key", KEY])
    try:
        key = KEY if with_key else None
        provoke = "seq_cls" if provoked else None
        before = rss_bytes(s.proc.pid)
        answered = 0
        with RssSampler(s.proc.pid) as rss:
            attack = RapidReset(s.grpc_url, 3.0, api_key=key, made_you_reset=provoke).start()
            for _ in range(3):
                if rss_bytes(s.proc.pid) - before > 1024 * MB:
                    attack.stop()  # a server without the fix: spare the machine
                    break
                answered += probe(s.grpc_url, "seq_cls", KEY, timeout=10) is None
            attack.join()
            after = probe(s.grpc_url, "seq_cls", KEY, timeout=5)
        assert rss.peak - before < 200 * MB, (before, rss.peak)
        assert answered >= 1 and after is None, (answered, after)
        assert attack.pairs > 10000  # the attack did run
        reading = RapidReset(s.grpc_url, 1.0, api_key=key, read=True,
                             made_you_reset=provoke).start()
        reading.join()
        assert "ENHANCE_YOUR_CALM" in reading.goaways, reading.goaways
        assert s.alive()
    finally:
        s.stop()


# ---- a client that does not read ----

def test_a_stream_whose_client_does_not_read_stops_being_computed(bertrt_bin):
    """5,000 ModelStreamInfer requests from a client that reads nothing: the
    server computes what the client's receive window holds, then waits (flow
    control) instead of piling answers up; when the client reads, every answer
    comes, in order."""
    s = Server(bertrt_bin, [MODEL])
    try:
        sock = socket.create_connection(("127.0.0.1", s.grpc_port), timeout=30)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        while not any(isinstance(e, h2.events.RemoteSettingsChanged)
                      for e in conn.receive_data(sock.recv(65536))):
            pass
        conn.send_headers(1, [(":method", "POST"), (":scheme", "http"), (":authority", "x"),
                              (":path", "/inference.GRPCInferenceService/ModelStreamInfer"),
                              ("content-type", "application/grpc"), ("te", "trailers")])
        n = 5000
        for i in range(n):
            req = infer_request("seq_cls")
            req.id = str(i)
            conn.send_data(1, grpc_frame(req.SerializeToString()))
        conn.end_stream(1)
        sock.sendall(conn.data_to_send())
        metric = 'bertrt_request_success_total{model="seq_cls",endpoint="grpc_stream_infer"}'
        assert wait_for(lambda: s.metric(metric) > 0)
        time.sleep(2)  # for it to go on, were it not held back
        computed = s.metric(metric)
        assert 0 < computed < n / 2, computed
        assert probe(s.grpc_url, "seq_cls", timeout=30) is None  # others are served meanwhile
        ids, ended = [], False
        data = b""
        while not ended:
            for event in conn.receive_data(sock.recv(65536)):
                if isinstance(event, h2.events.DataReceived):
                    data += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, 1)
                elif isinstance(event, h2.events.StreamEnded):
                    ended = True
            sock.sendall(conn.data_to_send())
        while data:
            size = int.from_bytes(data[1:5], "big")
            ids.append(pb.ModelStreamInferResponse.FromString(data[5:5 + size]).infer_response.id)
            data = data[5 + size:]
        sock.close()
        assert ids == [str(i) for i in range(n)]
    finally:
        s.stop()


# ---- framing ----

LIMIT = ("--max-payload-bytes", "1000000")


def test_grpc_framing_errors(servers):
    s = servers("seq_cls", *LIMIT)
    live = grpc_frame(b"")
    cases = [
        # (what, path, body, extra headers, content type, end stream) -> grpc-status, text
        ("unknown method", "/inference.GRPCInferenceService/Nope", live, [], "application/grpc",
         True, 12, "unknown method"),
        ("declared length past the limit, nothing more sent", INFER,
         grpc_frame(b"", declared=50 * MB)[:5], [], "application/grpc", False, 8,
         "--max-payload-bytes"),
        ("unsupported grpc-encoding", LIVE, live, [("grpc-encoding", "snappy")],
         "application/grpc", True, 12, "grpc-encoding"),
        ("compressed flag without an encoding", LIVE, grpc_frame(b"", compressed=True), [],
         "application/grpc", True, 13, "compressed flag"),
        ("headers past 16 KiB", LIVE, live, [("x-padding", "a" * 20000)], "application/grpc",
         True, 8, "headers are larger"),
        ("grpc-timeout passes before the message", LIVE, None, [("grpc-timeout", "200m")],
         "application/grpc", False, 4, "grpc-timeout"),
        ("two messages on a unary call", LIVE, live + live, [], "application/grpc", True, 13,
         "more than one"),
        ("stream ends inside a message", INFER, grpc_frame(b"abcdef")[:8], [],
         "application/grpc", True, 13, "inside a message"),
        ("gzip that inflates past the limit", INFER,
         grpc_frame(gzip.compress(b"\0" * 3 * MB), compressed=True), [("grpc-encoding", "gzip")],
         "application/grpc", True, 8, "inflates"),
    ]
    for what, path, body, headers, ctype, end, code, text in cases:
        r = raw_call(s.grpc_url, path, body, headers, ctype, end_stream=end)
        assert r.status == code and text in r.message, (what, r.status, r.message)
        assert r.headers.get(":status") == "200", what
        assert "gzip" in r.headers.get("grpc-accept-encoding", ""), what
    # Not gRPC at all: HTTP 415.
    assert raw_call(s.grpc_url, LIVE, live, content_type="application/json").headers[
        ":status"] == "415"
    # An error message beyond ASCII arrives intact (percent-encoded on the wire).
    r = raw_call(s.grpc_url, INFER, grpc_frame(pb.ModelInferRequest(
        model_name="modèle").SerializeToString()))
    assert r.status == 5 and "modèle" in r.message
    assert s.alive()


def test_compressed_requests_are_answered(servers):
    s = servers("seq_cls", *LIMIT)
    plain = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(s.grpc_url)).ModelInfer(
        infer_request("seq_cls"), timeout=30)
    with grpc.insecure_channel(s.grpc_url, compression=grpc.Compression.Gzip) as ch:
        zipped = pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(infer_request("seq_cls"),
                                                                 timeout=30)
    assert zipped.raw_output_contents == plain.raw_output_contents
    body = zlib.compress(infer_request("seq_cls").SerializeToString())
    r = raw_call(s.grpc_url, INFER, grpc_frame(body, compressed=True),
                 [("grpc-encoding", "deflate")])
    assert r.status == 0, r.message
    assert pb.ModelInferResponse.FromString(r.messages()[0]).raw_output_contents == \
        plain.raw_output_contents


# ---- grpc.health.v1 ----

def health(s, metadata=()):
    stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(s.grpc_url))

    def check(service):
        try:
            return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=30,
                              metadata=metadata).status
        except grpc.RpcError as e:
            return e.code().name
    return check


SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, \
    health_pb2.HealthCheckResponse.NOT_SERVING


def test_health_check_without_api_key(servers):
    s = servers("seq_cls")
    check = health(s)
    assert check("") == SERVING and check("inference.GRPCInferenceService") == SERVING
    assert check("seq_cls") == SERVING
    assert check("nope") == "NOT_FOUND"
    # As a Kubernetes gRPC probe asks: no metadata at all, the bare minimum of headers.
    r = raw_call(s.grpc_url, CHECK, grpc_frame(b""))
    assert r.status == 0 and health_pb2.HealthCheckResponse.FromString(
        r.messages()[0]).status == SERVING


def test_health_check_with_api_key(bertrt_bin):
    """Service "" (the server) is open, like /v2/health/ready; a model's status
    tells which models exist, so it needs the key."""
    s = Server(bertrt_bin, [MODEL, "--api-key", KEY])
    try:
        anonymous, keyed = health(s), health(s, (("authorization", "Bearer " + KEY),))
        assert anonymous("") == SERVING
        assert anonymous("seq_cls") == "UNAUTHENTICATED" and anonymous("nope") == "UNAUTHENTICATED"
        assert keyed("seq_cls") == SERVING and keyed("nope") == "NOT_FOUND"
    finally:
        s.stop()


@pytest.fixture
def explicit_repository(bertrt_bin, tmp_path):
    (tmp_path / "seq_cls" / "1").mkdir(parents=True)
    for f in (MODELS / "seq_cls").iterdir():
        (tmp_path / "seq_cls" / "1" / f.name).symlink_to(f)
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode",
                            "explicit", "--load-model", "seq_cls", "--api-key", KEY])
    yield s
    s.stop()


def test_health_watch_follows_the_model(explicit_repository):
    s = explicit_repository
    metadata = (("authorization", "Bearer " + KEY),)
    stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(s.grpc_url))
    seen = {"seq_cls": queue.Queue(), "": queue.Queue(), "later": queue.Queue()}

    def watch(service):
        try:
            for r in stub.Watch(health_pb2.HealthCheckRequest(service=service), metadata=metadata):
                seen[service].put(r.status)
        except grpc.RpcError as e:
            seen[service].put(e.code().name)

    for service in seen:
        threading.Thread(target=watch, args=(service,), daemon=True).start()
    assert seen["seq_cls"].get(timeout=30) == SERVING and seen[""].get(timeout=30) == SERVING
    assert seen["later"].get(timeout=30) == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
    c = tg.InferenceServerClient(s.grpc_url)
    c.unload_model("seq_cls", headers=dict(metadata))
    # Strict readiness: no model served, the server is not ready either.
    assert seen["seq_cls"].get(timeout=30) == NOT_SERVING and seen[""].get(timeout=30) == NOT_SERVING
    c.load_model("seq_cls", headers=dict(metadata))
    assert seen["seq_cls"].get(timeout=30) == SERVING and seen[""].get(timeout=30) == SERVING
    assert seen["later"].empty()  # no change, nothing sent
    # A watch of a model needs the key, as Check does.
    with pytest.raises(grpc.RpcError) as e:
        next(iter(stub.Watch(health_pb2.HealthCheckRequest(service="seq_cls"), timeout=30)))
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


# ---- stopping ----

def test_stop_ends_idle_streams_and_finishes_calls_in_flight(bertrt_bin):
    """SIGTERM: a call waiting in the batcher is answered, a stream waiting on its
    client ends with UNAVAILABLE at once instead of holding the stop for the whole
    --drain-timeout."""
    s = Server(bertrt_bin, [MODEL, "--max-queue-delay-us", "1500000", "--drain-timeout", "120"])
    idle = IdleStreams(s.grpc_url, 3)
    try:
        time.sleep(1)
        stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(s.grpc_url))
        in_flight = stub.ModelInfer.future(infer_request("seq_cls"), timeout=60)
        time.sleep(0.5)
        s.proc.send_signal(signal.SIGTERM)
        assert in_flight.result().outputs[0].name == "logits"
        assert wait_for(lambda: idle.ended() == {"UNAVAILABLE": 3})
        assert s.proc.wait(timeout=60) == 0  # well inside the 120 s drain
    finally:
        idle.close()
        if s.proc.poll() is None:
            s.stop()
