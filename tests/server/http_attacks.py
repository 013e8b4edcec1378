"""Raw HTTP/1.1 for the hostile-client tests (test_hostile.py, test_hardening.py) and
the benchmark that measures the same attacks beside a normal client
(bench/hostile_clients.py): requests no HTTP library sends, read back by hand, and
the server's resident memory. The gRPC port's attackers are in http2_attacks.py."""
import json
import socket


def rss_mb(pid):
    """The process's resident memory (VmRSS), in MB."""
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS")).split()[1]) / 1024


def post_bytes(path, body, *headers):
    """A raw HTTP/1.1 POST of a JSON body, with extra header lines (bytes, no CRLF)."""
    data = json.dumps(body).encode()
    head = [b"POST " + path.encode() + b" HTTP/1.1", b"Host: x", b"Content-Type: application/json",
            b"Content-Length: %d" % len(data), *headers]
    return b"\r\n".join(head) + b"\r\n\r\n" + data


def read_response(c, timeout=30):
    """One whole response (header and Content-Length bytes of body) from socket c;
    ConnectionError if the server closes before it is whole."""
    c.settimeout(timeout)
    out = b""
    while b"\r\n\r\n" not in out:
        d = c.recv(65536)
        if not d:
            raise ConnectionError(f"closed before a whole header: {out[:200]!r}")
        out += d
    head, _, body = out.partition(b"\r\n\r\n")
    length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), b"0"))
    while len(body) < length:
        d = c.recv(65536)
        if not d:
            raise ConnectionError(f"closed before the whole body: {out[:200]!r}")
        body += d
    return head + b"\r\n\r\n" + body


def status_of(response):
    """The status code of a raw response, or "closed" for none."""
    parts = response.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else "closed"


def chunked_flood(port, where, megabytes, path="/embed", key=None):
    """POST `path` chunked, then `megabytes` MB of trailer lines after its last chunk
    (where="trailer") or of one chunk's extension (where="extension"), as fast as the
    server reads them; the status it answered ("closed" for none)."""
    c = socket.create_connection(("127.0.0.1", port))
    auth = b"Authorization: Bearer %s\r\n" % key.encode() if key else b""
    c.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n%s\r\n" % (path.encode(), auth))
    body = b'{"inputs": "abc"}'
    if where == "trailer":
        c.sendall(b"%x\r\n%s\r\n0\r\n" % (len(body), body))
        piece = b"X-Trailer: " + b"b" * 10000 + b"\r\n"
    else:
        c.sendall(b"%x;ext=" % len(body))
        piece = b"b" * 10000
    try:
        for _ in range(megabytes * 100):
            c.sendall(piece)
    except OSError:
        pass  # the server answered and closed meanwhile
    c.settimeout(10)
    try:
        answer = c.recv(4096)
    except OSError:
        answer = b""
    c.close()
    return status_of(answer)


def kserve_ids(shape, data, mask=None, outputs=(), truncate=None):
    """A KServe infer body of INT64 input_ids (and attention_mask), asking `outputs`."""
    body = {"inputs": [{"name": "input_ids", "datatype": "INT64", "shape": shape, "data": data}]}
    if mask is not None:
        body["inputs"].append({"name": "attention_mask", "datatype": "INT64", "shape": shape,
                               "data": mask})
    if outputs:
        body["outputs"] = [{"name": o} for o in outputs]
    if truncate is not None:
        body["parameters"] = {"truncate": truncate}
    return body
