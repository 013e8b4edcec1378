"""TLS on both front ends: `bertrt serve --tls-cert --tls-key` serves HTTPS and
gRPC over TLS with a self-signed certificate made here by the openssl CLI;
plaintext clients are refused, and bad certificate/key files stop the server
at start with a usage error that names the flag."""
import json
import ssl
import subprocess
import time

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from server_util import MODELS, Server, free_port


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    for name in ("server", "other"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.crt")],
                       check=True, capture_output=True)
    return d


def test_https_and_grpc_over_tls(bertrt_bin, pki):
    cert, key = str(pki / "server.crt"), str(pki / "server.key")
    s = Server(bertrt_bin, [str(MODELS / "seq_cls"), "--tls-cert", cert, "--tls-key", key],
               tls_ca=cert)
    try:
        body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hello"]}]}
        r = s.post("/v2/models/seq_cls/infer", body)
        assert r.status_code == 200 and r.json()["outputs"][0]["name"] == "logits"
        with pytest.raises(requests.exceptions.SSLError):  # not our CA
            requests.get(s.url + "/v2/health/ready", timeout=5)
        with pytest.raises(requests.ConnectionError):  # plaintext to a TLS port
            requests.get(s.url.replace("https", "http") + "/v2/health/ready", timeout=5)

        c = grpcclient.InferenceServerClient(s.grpc_url, ssl=True, root_certificates=cert)
        assert c.is_server_live()
        text = grpcclient.InferInput("text", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"hello"], dtype=object))
        logits = c.infer("seq_cls", [text]).as_numpy("logits")
        assert np.allclose(logits, np.asarray(r.json()["outputs"][0]["data"]).reshape(logits.shape),
                           atol=1e-5)
        plain = grpcclient.InferenceServerClient(s.grpc_url)
        with pytest.raises(InferenceServerException):
            plain.is_server_live()
    finally:
        s.stop()


@pytest.mark.parametrize("case", ["missing_key", "wrong_key", "not_pem", "no_file"])
def test_bad_tls_files_fail_at_start(bertrt_bin, pki, tmp_path, case):
    cert, key = str(pki / "server.crt"), str(pki / "server.key")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    args = {"missing_key": ["--tls-cert", cert],
            "wrong_key": ["--tls-cert", cert, "--tls-key", str(pki / "other.key")],
            "not_pem": ["--tls-cert", str(junk), "--tls-key", key],
            "no_file": ["--tls-cert", cert, "--tls-key", str(tmp_path / "absent.key")]}[case]
    want = {"missing_key": "both --tls-cert and --tls-key", "wrong_key": "does not belong",
            "not_pem": "not a PEM certificate", "no_file": "cannot read"}[case]
    proc = subprocess.run([bertrt_bin, "serve", str(MODELS / "seq_cls"), *args, "--http-port",
                           str(free_port()), "--grpc-port", "0"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert want in proc.stderr, proc.stderr


def test_https_client_that_disconnects_costs_no_compute(bertrt_bin, pki):
    """As over plain HTTP: a TLS client that resets its connection while its
    request waits in the batcher costs no compute, and with --http-cancel-on-close
    one that closes it too (with or without close_notify first). close_notify
    alone, the TCP connection left open, reads as bytes on the socket, which the
    server does not decrypt until the answer is written: that request is computed."""
    import socket
    import struct
    cert, key = str(pki / "server.crt"), str(pki / "server.key")
    s = Server(bertrt_bin, [str(MODELS / "seq_cls"), "--tls-cert", cert, "--tls-key", key,
                            "--max-queue-delay-us", "1000000", "--http-cancel-on-close"],
               grpc=False, tls_ca=cert)
    infer = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hi"]}]}
    try:
        batches = s.metric('bertrt_batch_size_count{model="seq_cls"}')
        for reset in (False, True):
            c = s.raw_post("/v2/models/seq_cls/infer", infer)
            time.sleep(0.2)
            if reset:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()  # no close_notify: the TCP connection just ends
        time.sleep(1.5)
        assert s.metric('bertrt_batch_size_count{model="seq_cls"}') == batches
        assert s.metric('bertrt_request_failure_total{model="seq_cls",endpoint="kserve_infer",error="unavailable"}') == 2

        # A client that ends its TLS session properly (close_notify), then its
        # TCP connection while the request waits.
        c = s.raw_post("/v2/models/seq_cls/infer", infer)
        time.sleep(0.2)
        c.settimeout(0.2)
        try:
            c.unwrap()  # sends close_notify; the server's own never comes
        except (TimeoutError, ssl.SSLError, OSError):
            pass
        c.close()
        time.sleep(1.5)
        assert s.metric('bertrt_batch_size_count{model="seq_cls"}') == batches
        assert s.metric('bertrt_request_failure_total{model="seq_cls",endpoint="kserve_infer",error="unavailable"}') == 3
        # A client that pipelines: its second request waits on the socket
        # behind the first (it is no alert), and both are answered.
        body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hi"]}]}
        c = s.raw_post("/v2/models/seq_cls/infer", body)
        payload = json.dumps(body).encode()
        c.sendall((f"POST /v2/models/seq_cls/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
                   ).encode() + payload)
        c.settimeout(15)
        answers = b""
        while answers.count(b"HTTP/1.1 200") < 2:
            chunk = c.recv(65536)
            if not chunk:
                break
            answers += chunk
        c.close()
        assert answers.count(b"HTTP/1.1 200") == 2, answers[:300]
        # A patient client still gets its answer, over the same server.
        r = requests.post(s.url + "/v2/models/seq_cls/infer", json={"inputs": [
            {"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hi"]}]},
            verify=cert, timeout=30)
        assert r.status_code == 200, r.text
    finally:
        s.stop()
