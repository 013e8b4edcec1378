"""The model repository end to end: config.pbtxt (Triton's format) with
instance groups, batching and version policies; the repository API (index,
load, unload) in explicit mode; hot reload in poll mode, with requests running
while versions are swapped. The real binary over real sockets."""
import shutil
import subprocess
import threading
import time

import pytest
import requests

from server_util import MODELS, Server

IDS = {"inputs": [{"name": "input_ids", "datatype": "INT32", "shape": [1, 4], "data": [2, 5, 6, 3]}]}


def add_version(repo, model, version, source):
    """repo/model/version/ holding the files of tests/data/models/<source>."""
    target = repo / model / str(version)
    target.mkdir(parents=True)
    for f in (MODELS / source).iterdir():
        if f.is_file():
            shutil.copy(f, target / f.name)
        else:
            shutil.copytree(f, target / f.name)


def infer(s, model, version=None):
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    return s.post(path, IDS)


def serve_exit(bertrt_bin, *args):
    """`bertrt serve ARGS` run to its exit (a start that fails)."""
    return subprocess.run([bertrt_bin, "serve", *args, "--http-port", "0"],
                          capture_output=True, text=True, timeout=60)


def served_log(bertrt_bin, args, *models):
    """Starts `bertrt serve ARGS`, infers once on each model, stops it: its log."""
    s = Server(bertrt_bin, args)
    try:
        for model in models:
            assert infer(s, model).status_code == 200
    finally:
        s.stop()
    return s.proc.stderr.read()


def assert_start_fails(bertrt_bin, args, fragment):
    proc = serve_exit(bertrt_bin, *args)
    assert proc.returncode != 0, proc.stderr
    assert fragment in proc.stderr, proc.stderr


def metric_lines(s, prefix):
    text = requests.get(s.url + "/metrics", timeout=10).text
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_config_pbtxt_instance_groups_and_batching(bertrt_bin, tmp_path):
    add_version(tmp_path, "cls", 1, "seq_cls")
    (tmp_path / "cls" / "config.pbtxt").write_text("""
        name: "cls"
        max_batch_size: 8
        dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 3000
                           default_queue_policy { max_queue_size: 64 } }
        instance_group [ { count: 2 kind: KIND_CPU } ]
    """)
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path)])
    try:
        info = requests.get(s.url + "/info", timeout=10).json()
        assert info["device"] == "cpu fp32 x2"
        assert info["max_client_batch_size"] == 8 and info["max_concurrent_requests"] == 64
        results = []
        threads = [threading.Thread(target=lambda: results.append(infer(s, "cls").status_code))
                   for _ in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [200] * 32
        batches = metric_lines(s, "bertrt_instance_batches_total")
        assert len(batches) == 1 and 'instance="cpu"' in batches[0]
        assert float(batches[0].split()[-1]) >= 1
        sizes = metric_lines(s, 'bertrt_batch_size_bucket{model="cls",le="8"}')
        total = metric_lines(s, 'bertrt_batch_size_count{model="cls"}')
        assert sizes[0].split()[-1] == total[0].split()[-1], "a batch above max_batch_size 8"
    finally:
        s.stop()


def test_bad_config_fails_start_with_line_and_hint(bertrt_bin, tmp_path):
    add_version(tmp_path, "cls", 1, "seq_cls")
    cases = {
        "max_batch_size: 8\ninput [ { name: \"input_ids\" } ]\n":
            'input "input_ids": data_type TYPE_INVALID does not match the model',
        "instance_group [ { kind: KIND_GPU gpus: [ 99 ] } ]": "instance_group 1",
        "max_batch_size: 8\nmax_batch_sise: 4\n": "line 2",
    }
    for text, fragment in cases.items():
        (tmp_path / "cls" / "config.pbtxt").write_text(text)
        proc = serve_exit(bertrt_bin, "--model-repository", str(tmp_path))
        assert proc.returncode == 3, proc.stderr
        assert "config.pbtxt" in proc.stderr or "instance_group" in proc.stderr, proc.stderr
        assert fragment in proc.stderr, proc.stderr


def test_model_warmup_runs_on_every_instance_before_ready(bertrt_bin, tmp_path):
    add_version(tmp_path, "cls", 1, "seq_cls")
    (tmp_path / "cls" / "config.pbtxt").write_text("""
        max_batch_size: 8
        instance_group [ { count: 2 kind: KIND_CPU } ]
        model_warmup [
          { name: "b4_s16" batch_size: 4
            inputs { key: "input_ids" value { data_type: TYPE_INT32 dims: [ 16 ] zero_data: true } }
            inputs { key: "attention_mask" value { data_type: TYPE_INT32 dims: [ 16 ] zero_data: true } } },
          { batch_size: 1 count: 2
            inputs { key: "input_ids" value { data_type: TYPE_INT64 dims: [ 30 ] random_data: true } } }
        ]
    """)
    log = served_log(bertrt_bin, ["--model-repository", str(tmp_path)], "cls")
    # (1 + 2 batches) x 2 instances.
    assert "warmed up: 6 batches of 2 warm-up samples" in log, log


def test_model_warmup_the_model_cannot_run_fails_the_start(bertrt_bin, tmp_path):
    add_version(tmp_path, "cls", 1, "seq_cls")
    ids = 'inputs { key: "input_ids" value { data_type: TYPE_INT32 dims: [ %d ] zero_data: true } }'
    cases = {
        f'model_warmup [ {{ name: "long" batch_size: 1 {ids % 5000} }} ]':
            'warm-up sample "long": dims [5000] is longer than the model takes',
        f'parameters {{ key: "max_batch_tokens" value {{ string_value: "32" }} }} '
        f'model_warmup [ {{ name: "big" batch_size: 4 {ids % 16} }} ]':
            'warm-up sample "big": batch_size x length = 64 tokens, more than max_batch_tokens (32)',
    }
    for text, fragment in cases.items():
        (tmp_path / "cls" / "config.pbtxt").write_text(text)
        assert_start_fails(bertrt_bin, ["--model-repository", str(tmp_path)], fragment)


def test_warmup_flag_for_a_single_model(bertrt_bin):
    log = served_log(bertrt_bin, [str(MODELS / "seq_cls"), "--warmup-shapes", "2x16,1x30"],
                     "seq_cls")
    assert "warmed up: 2 batches of 2 warm-up samples" in log, log
    for bad in ["8", "0x16", "8x", "2x16x3", "4-2x16"]:
        assert_start_fails(bertrt_bin, [str(MODELS / "seq_cls"), "--warmup-shapes", bad],
                           "BATCHxLENGTH")


def test_warmup_ranges_stay_within_the_scheduler_limits(bertrt_bin):
    # 1-4 sequences of 15-17 tokens within 3 sequences and 40 tokens per
    # batch: 1 and 2 sequences of 15, 16 and 17 tokens (3 x 15 is over 40),
    # 6 batches, each its own shape on the CPU engine.
    log = served_log(bertrt_bin, [str(MODELS / "seq_cls"), "--warmup-shapes", "1-4x15-17",
                                  "--max-batch-size", "3", "--max-batch-tokens", "40"], "seq_cls")
    assert "warmed up: 6 batches of 1 warm-up samples (6 distinct shapes over 1 instances)" \
        in log, log
    for args, fragment in [
            (["--max-batch-size", "3", "--warmup-shapes", "4-6x16"],
             'warm-up sample "4-6x16": batch_size 4 exceeds max_batch_size 3'),
            (["--max-batch-tokens", "40", "--warmup-shapes", "3-4x16-20"],
             "48 tokens, more than max_batch_tokens (40) even at the range's smallest batch")]:
        assert_start_fails(bertrt_bin, [str(MODELS / "seq_cls"), *args], fragment)


def test_warmup_shapes_parameter_replaces_the_command_line_for_its_model(bertrt_bin, tmp_path):
    add_version(tmp_path, "own", 1, "seq_cls")
    add_version(tmp_path, "plain", 1, "seq_cls")
    (tmp_path / "own" / "config.pbtxt").write_text(
        'parameters { key: "warmup_shapes" value: { string_value: "1-3x16" } }')
    log = served_log(bertrt_bin, ["--model-repository", str(tmp_path), "--warmup-shapes", "1x8"],
                     "own", "plain")
    assert "warmed up: 3 batches of 1 warm-up samples" in log, log  # own: 1-3 x 16
    assert "warmed up: 1 batches of 1 warm-up samples" in log, log  # plain: the flag's 1x8


def test_version_policy_all_serves_every_version(bertrt_bin, tmp_path):
    add_version(tmp_path, "m", 1, "seq_cls")
    add_version(tmp_path, "m", 2, "token_cls")
    (tmp_path / "m" / "config.pbtxt").write_text("version_policy: { all { } }")
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path)])
    try:
        assert infer(s, "m", 1).json()["model_version"] == "1"
        assert infer(s, "m", 2).json()["model_version"] == "2"
        assert infer(s, "m").json()["model_version"] == "2"
        index = requests.post(s.url + "/v2/repository/index", timeout=10).json()
        assert [(e["name"], e["version"], e["state"]) for e in index] == [
            ("m", "1", "READY"), ("m", "2", "READY")]
    finally:
        s.stop()


def test_explicit_load_and_unload(bertrt_bin, tmp_path):
    add_version(tmp_path, "cls", 1, "seq_cls")
    add_version(tmp_path, "qa", 1, "qa")
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode", "explicit",
                            "--load-model", "qa"])
    try:
        index = {e["name"]: e for e in requests.post(s.url + "/v2/repository/index").json()}
        assert index["qa"]["state"] == "READY"
        assert index["cls"]["state"] == "UNAVAILABLE" and index["cls"]["reason"] == "not loaded"
        r = infer(s, "cls")
        assert r.status_code == 404 and "not loaded" in r.json()["error"]
        assert requests.post(s.url + "/v2/repository/models/cls/load").status_code == 200
        assert infer(s, "cls").status_code == 200
        assert requests.post(s.url + "/v2/repository/models/cls/unload").status_code == 200
        r = infer(s, "cls")
        assert r.status_code == 404 and "unloaded" in r.json()["error"]
        r = requests.post(s.url + "/v2/repository/models/nope/load")
        assert r.status_code == 404 and "not in the model repository" in r.json()["error"]
        r = requests.post(s.url + "/v2/repository/models/..%2F..%2Fetc/load")
        assert r.status_code == 404
        # A model that fails to load says why in the index and keeps nothing half-loaded.
        (tmp_path / "cls" / "config.pbtxt").write_text("max_batch_size: -1")
        r = requests.post(s.url + "/v2/repository/models/cls/load")
        assert r.status_code == 400 and "max_batch_size" in r.json()["error"]
        index = {e["name"]: e for e in requests.post(s.url + "/v2/repository/index").json()}
        assert "max_batch_size" in index["cls"]["reason"]
        assert infer(s, "qa").status_code == 200
    finally:
        s.stop()


def test_load_api_needs_explicit_mode(bertrt_bin, tmp_path):
    add_version(tmp_path, "cls", 1, "seq_cls")
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path)])
    try:
        for action in ("load", "unload"):
            r = requests.post(s.url + f"/v2/repository/models/cls/{action}")
            assert r.status_code == 400 and "explicit" in r.json()["error"]
        assert infer(s, "cls").status_code == 200
    finally:
        s.stop()


def test_poll_mode_swaps_versions_without_dropping_requests(bertrt_bin, tmp_path):
    add_version(tmp_path, "m", 1, "seq_cls")
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode", "poll",
                            "--repository-poll-secs", "0.2"])
    statuses, stop = [], threading.Event()

    def client():
        while not stop.is_set():
            statuses.append(infer(s, "m").status_code)

    clients = [threading.Thread(target=client) for _ in range(4)]
    try:
        assert infer(s, "m").json()["model_version"] == "1"
        for c in clients:
            c.start()
        time.sleep(0.5)
        add_version(tmp_path, "m", 2, "token_cls")
        deadline = time.time() + 30
        while infer(s, "m").json()["model_version"] != "2":
            assert time.time() < deadline, "version 2 was not picked up"
            time.sleep(0.1)
        time.sleep(0.5)
        stop.set()
        for c in clients:
            c.join()
        assert len(statuses) > 10 and set(statuses) == {200}, set(statuses)
        # The latest policy serves one version: 1 is gone.
        assert infer(s, "m", 1).status_code == 404
        # A changed config reloads the model; a broken one leaves it serving.
        (tmp_path / "m" / "config.pbtxt").write_text("max_batch_size: 3")
        deadline = time.time() + 30
        while requests.get(s.url + "/info").json()["max_client_batch_size"] != 3:
            assert time.time() < deadline, "config change was not picked up"
            time.sleep(0.1)
        (tmp_path / "m" / "config.pbtxt").write_text("max_batch_size: [")
        time.sleep(1)
        assert infer(s, "m").status_code == 200
        # A removed model is unloaded.
        shutil.rmtree(tmp_path / "m")
        deadline = time.time() + 30
        while infer(s, "m").status_code != 404:
            assert time.time() < deadline, "removed model still served"
            time.sleep(0.1)
    finally:
        stop.set()
        s.stop()


def test_plan_max_batch_tokens_caps_the_batches(bertrt_bin, tmp_path):
    plan = tmp_path / "cls.plan"
    subprocess.run([bertrt_bin, "build", str(MODELS / "seq_cls"), "-o", str(plan),
                    "--max-batch-tokens", "48"], capture_output=True, check=True)
    s = Server(bertrt_bin, [str(plan)])
    try:
        assert requests.get(s.url + "/info", timeout=10).json()["max_batch_tokens"] == 48
        assert infer(s, "cls").status_code == 200
    finally:
        s.stop()


def test_several_models_from_the_command_line(bertrt_bin, tmp_path):
    """`serve DIR_A DIR_B --model NAME=PATH`: each served under its own name, a Hugging Face
    cache snapshot under the model's name (never its commit hash)."""
    snapshot = tmp_path / "hub" / "models--acme--tiny-bert" / "snapshots" / ("0123456789abcdef" * 2 + "01234567")
    snapshot.mkdir(parents=True)
    for f in (MODELS / "seq_cls").iterdir():
        (snapshot / f.name).symlink_to(f)
    s = Server(bertrt_bin, [str(snapshot), str(MODELS / "sentence_mean"), "--model", f"reader={MODELS / 'qa'}"])
    try:
        names = sorted(m["id"] for m in requests.get(s.url + "/v1/models", timeout=10).json()["data"])
        assert names == ["reader", "sentence_mean", "tiny-bert"]
        for name in names:
            assert requests.get(f"{s.url}/v2/models/{name}/ready", timeout=10).status_code == 200
        r = requests.post(s.url + "/models/tiny-bert/predict", json={"inputs": "hello"}, timeout=30)
        assert r.status_code == 200 and len(r.json()) == 3
    finally:
        s.stop()


@pytest.mark.parametrize("args,says", [
    (["{m}/seq_cls", "{m}/seq_cls"], 'two models would be served as "seq_cls"; name them with --model NAME=PATH'),
    (["{m}/seq_cls", "{m}/qa", "--model-name", "x"], "--model-name names the one MODEL"),
    (["--model", "=x"], "--model =x: expected NAME=PATH"),
    (["{m}/seq_cls", "{m}/qa", "--labels", "a,b,c"], "--tokenizer and --labels apply to a single MODEL"),
    ([], "give the models to serve"),
])
def test_command_line_models_that_cannot_be_served_say_why(bertrt_bin, args, says):
    proc = subprocess.run([bertrt_bin, "serve", *[a.format(m=MODELS) for a in args]],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
