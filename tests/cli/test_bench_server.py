"""`bertrt bench` as a load generator: against the real server over HTTP and
gRPC, and through the serving stack in-process; JSON, SVG, errors and exit codes."""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests/server"))
from server_util import Server, free_port  # noqa: E402  (the one server fixture, reused)

SHORT = ["--duration-s", "1", "--warmup-s", "0.2", "--lengths", "4:12"]


@pytest.fixture(scope="module")
def server(bertrt_bin, default_model):
    s = Server(bertrt_bin, [default_model])
    yield s
    s.stop()


def bench(bertrt_bin, *args, timeout=60):
    return subprocess.run([bertrt_bin, "bench", *args], capture_output=True, text=True,
                          timeout=timeout)


def check_steps(report, labels):
    assert [s["label"] for s in report["steps"]] == labels
    for step in report["steps"]:
        lat = step["latency_ms"]
        assert step["requests"] > 0 and step["requests_per_s"] > 0 and step["sequences_per_s"] > 0
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
        assert step["server"]["requests"] > 0
        assert step["server"]["queue_ms"] >= 0 and step["server"]["compute_ms"] > 0
        assert step["error_count"] == 0, step["error_messages"]


def test_http_sweep_json_svg(bertrt_bin, server, tmp_path):
    out, svg = tmp_path / "out.json", tmp_path / "out.svg"
    proc = bench(bertrt_bin, "--url", server.url, "--concurrency", "1,4", *SHORT,
                 "--json", str(out), "--svg", str(svg))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["kind"] == "http" and report["endpoint"] == "kserve"
    assert "model all-MiniLM-L6-v2" in report["target"]  # learned from /info
    assert report["server_info"]["device"].startswith("cpu")
    check_steps(report, ["c=1", "c=4"])
    assert "c=4" in proc.stdout and "p99_ms" in proc.stdout and "queue_ms" in proc.stdout
    assert "step 2/2" in proc.stderr  # progress
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg") and len(root.findall("{http://www.w3.org/2000/svg}circle")) == 2


def test_http_embed_rate_and_texts_file(bertrt_bin, server, tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("hello world\n\nthe quick brown fox\n")
    proc = bench(bertrt_bin, "--url", server.url, "--endpoint", "embed", "--request-rate", "40",
                 "--sequences-per-request", "2", "--texts", str(texts), "--duration-s", "1",
                 "--warmup-s", "0.2", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (step,) = report["steps"]
    assert step["label"] == "r=40" and step["sequences"] == 2 * step["requests"]
    assert report["texts"] == {"source": str(texts), "count": 2}
    assert 10 < step["requests_per_s"] < 100  # Poisson at 40/s over 1 s
    assert step["request_distribution"] == "poisson"


def test_constant_arrivals_keep_the_rate(bertrt_bin, server):
    proc = bench(bertrt_bin, "--url", server.url, "--request-rate", "50", "--request-distribution",
                 "constant", "--duration-s", "1", "--warmup-s", "0.2", "--json")
    assert proc.returncode == 0, proc.stderr
    (step,) = json.loads(proc.stdout)["steps"]
    assert step["request_distribution"] == "constant"
    # One arrival every 20 ms: 50 in the second, give or take the window's edges.
    assert 45 <= step["requests"] + step["error_count"] <= 55


def test_inprocess_with_baseline(bertrt_bin, server, default_model, tmp_path):
    base = tmp_path / "inproc.json"
    proc = bench(bertrt_bin, default_model, "--serve-inprocess", "--threads", "1",
                 "--concurrency", "1,4", *SHORT, "--json", str(base))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(base.read_text())
    assert report["kind"] == "inprocess" and report["model"] == "all-MiniLM-L6-v2"
    check_steps(report, ["c=1", "c=4"])
    svg = tmp_path / "both.svg"
    proc = bench(bertrt_bin, "--url", server.url, "--concurrency", "1,4", *SHORT,
                 "--baseline", str(base), "--svg", str(svg), "--json")
    assert proc.returncode == 0, proc.stderr
    ratios = json.loads(proc.stdout)["baseline"]["throughput_ratio"]
    assert set(ratios) == {"c=1", "c=4"} and all(r > 0 for r in ratios.values())
    assert len(ET.parse(svg).getroot().findall("{http://www.w3.org/2000/svg}polyline")) == 2
    # --replot reports a run again without measuring.
    proc = bench(bertrt_bin, "--replot", str(base), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["steps"] == report["steps"]


@pytest.mark.parametrize("serve_inprocess", [False, True])
def test_queue_full_is_counted_not_fatal(bertrt_bin, default_model, serve_inprocess):
    # One engine thread, a queue of one and 32 workers: most requests find it full.
    args = ["--concurrency", "32", "--duration-s", "1", "--warmup-s", "0", "--lengths", "60:120",
            "--json"]
    if serve_inprocess:
        proc = bench(bertrt_bin, default_model, "--serve-inprocess", "--threads", "1",
                     "--max-queue-size", "1", *args)
    else:
        s = Server(bertrt_bin, [default_model, "--max-queue-size", "1"])
        try:
            proc = bench(bertrt_bin, "--url", s.url, *args)
        finally:
            s.stop()
    assert proc.returncode == 0, proc.stderr
    (step,) = json.loads(proc.stdout)["steps"]
    assert step["errors"].get("429", 0) > 0 and step["requests"] > 0
    assert "full" in step["error_messages"]["429"]


@pytest.mark.parametrize("args, message", [
    (["--url", "http://127.0.0.1:1", "--concurrency", "0"], "--concurrency"),
    (["--url", "http://127.0.0.1:1", "--concurrency", "a,b"], "--concurrency"),
    (["--url", "localhost:8000"], "--url"),
    (["--url", "http://127.0.0.1:1", "--batch-size", "4"], "--batch-size"),
    (["--url", "http://127.0.0.1:1", "--max-queue-size", "4"], "bertrt serve"),
    (["--url", "http://127.0.0.1:1", "--lengths", "9:3"], "--lengths"),
    (["--url", "http://127.0.0.1:1", "--endpoint", "nope"], "--endpoint"),
    (["--url", "http://127.0.0.1:1", "--request-distribution", "uniform"], "--request-distribution"),
    (["--url", "http://127.0.0.1:1", "--duration-s", "0"], "--duration-s"),
    (["--url", "http://127.0.0.1:1", "--texts", "/nonexistent"], "--texts"),
    (["some/model", "--concurrency", "4"], "--serve-inprocess"),
    (["--serve-inprocess"], "MODEL"),
])
def test_bad_flags_exit_2(bertrt_bin, args, message):
    proc = bench(bertrt_bin, *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


def test_unreachable_url_exit_4(bertrt_bin):
    proc = bench(bertrt_bin, "--url", f"http://127.0.0.1:{free_port()}", "--concurrency", "1")
    assert proc.returncode == 4  # kExitRuntimeError, as tools/commands.h documents
    assert "cannot reach" in proc.stderr and "bertrt serve" in proc.stderr


def test_grpc_sweep_with_metrics_split(bertrt_bin, server, tmp_path):
    out = tmp_path / "grpc.json"
    proc = bench(bertrt_bin, "--url", "grpc://" + server.grpc_url, "--metrics-url", server.url,
                 "--concurrency", "1,4", "--sequences-per-request", "3", *SHORT, "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["kind"] == "grpc" and "model all-MiniLM-L6-v2" in report["target"]
    check_steps(report, ["c=1", "c=4"])
    assert all(s["sequences"] == 3 * s["requests"] for s in report["steps"])


def test_grpc_errors(bertrt_bin, server):
    proc = bench(bertrt_bin, "--url", f"grpc://127.0.0.1:{free_port()}", "--concurrency", "1")
    assert proc.returncode == 4 and "cannot reach" in proc.stderr, proc.stderr
    proc = bench(bertrt_bin, "--url", "grpc://" + server.grpc_url, "--model", "nope",
                 "--concurrency", "1", *SHORT)
    assert proc.returncode == 4 and "status 404" in proc.stderr, proc.stderr
    proc = bench(bertrt_bin, "--url", "grpc://" + server.grpc_url, "--endpoint", "embed",
                 "--concurrency", "1")
    assert proc.returncode == 2 and "HTTP only" in proc.stderr, proc.stderr


def test_step_without_success_exits_4(bertrt_bin, default_model, tmp_path):
    # Every text is longer than the model takes: each request fails (413),
    # the reports are still written, and the exit code says the run failed.
    texts = tmp_path / "long.txt"
    texts.write_text(" ".join(["word"] * 600) + "\n")
    out = tmp_path / "out.json"
    proc = bench(bertrt_bin, default_model, "--serve-inprocess", "--threads", "1",
                 "--concurrency", "2", "--texts", str(texts), "--duration-s", "0.5",
                 "--warmup-s", "0", "--json", str(out))
    assert proc.returncode == 4 and "no request succeeded" in proc.stderr
    (step,) = json.loads(out.read_text())["steps"]
    assert step["requests"] == 0 and step["errors"]["413"] > 0
