"""Triton's clients and configs against the real `bertrt serve`: the model
configuration and statistics extensions through tritonclient (HTTP and gRPC),
config.pbtxt files from Triton's own repositories loading with a bertrt model
swapped in, input/output blocks checked against the model, and Triton's
nv_inference_* metric names read by Prometheus' own parser."""
import shutil
import time

import numpy as np
import pytest
import requests
import tritonclient.grpc as tg
import tritonclient.http as th
from tritonclient.utils import InferenceServerException

from conftest import ROOT
from server_util import MODELS, Server, servers  # noqa: F401
from test_repository import add_version, assert_start_fails

CONFIGS = ROOT / "tests/data/triton_configs"


def http_client(s):
    return th.InferenceServerClient(s.url.removeprefix("http://"))


def grpc_client(s):
    return tg.InferenceServerClient(s.grpc_url)


def text_input(texts, mod=th):
    i = mod.InferInput("text", [len(texts)], "BYTES")
    i.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=np.object_))
    return i


def infer_texts(client, model, texts, mod=th):
    return client.infer(model, [text_input(texts, mod)])


def stats_of(s, model, version=None, grpc=False):
    """The one model_stats entry of model (version), through tritonclient."""
    if grpc:
        out = grpc_client(s).get_inference_statistics(model, version or "", as_json=True)
    else:
        out = http_client(s).get_inference_statistics(model, version or "")
    assert len(out["model_stats"]) == 1, out
    return out["model_stats"][0]


def count(stat, key):
    """gRPC's JSON writes uint64 as strings and leaves zeros out."""
    return int(stat.get(key, 0))


def duration(stat, key):
    d = stat["inference_stats"].get(key, {})
    return int(d.get("count", 0)), int(d.get("ns", 0))


@pytest.fixture(scope="module")
def repo_server(bertrt_bin, tmp_path_factory):
    """A repository: seq_cls with a Triton config (batching, two CPU instances), and base."""
    repo = tmp_path_factory.mktemp("repo")
    add_version(repo, "cls", 1, "seq_cls")
    add_version(repo, "base", 1, "base")
    (repo / "cls" / "config.pbtxt").write_text("""
        max_batch_size: 8
        dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 3000
                           default_queue_policy { max_queue_size: 64 } }
        instance_group [ { count: 2 kind: KIND_CPU } ]
        parameters { key: "max_batch_tokens" value: { string_value: "512" } }
    """)
    s = Server(bertrt_bin, ["--model-repository", str(repo)])
    yield s
    s.stop()


def test_model_config_over_http_and_grpc(repo_server):
    s = repo_server
    config = http_client(s).get_model_config("cls")
    assert config["name"] == "cls" and config["backend"] == "bertrt"
    assert config["platform"] == "bertrt_cpu"
    # As config.pbtxt set them, in effect.
    assert config["max_batch_size"] == 8
    db = config["dynamic_batching"]
    assert db["preferred_batch_size"] == [4] and db["max_queue_delay_microseconds"] == 3000
    assert db["default_queue_policy"]["max_queue_size"] == 64
    assert [(g["kind"], g["count"]) for g in config["instance_group"]] == [("KIND_CPU", 2)]
    assert config["parameters"]["max_batch_tokens"] == {"string_value": "512"}
    assert config["version_policy"] == {"latest": {"num_versions": 1}}
    # Derived from the model: Triton's dims leave the batch dimension out.
    inputs = {i["name"]: i for i in config["input"]}
    assert inputs["input_ids"]["data_type"] == "TYPE_INT64" and inputs["input_ids"]["dims"] == [-1]
    assert inputs["text"]["data_type"] == "TYPE_STRING" and inputs["text"]["dims"] == [1]
    # Every input is optional (a request holds text [+ text_pair] or input_ids [+ its mask and
    # types]), so that Triton's rule, every input not marked optional is required, holds.
    assert all(i["optional"] is True for i in config["input"])
    assert sorted(inputs) == ["attention_mask", "input_ids", "text", "text_pair", "token_type_ids"]
    outputs = {o["name"]: o for o in config["output"]}
    assert outputs["logits"] == {**outputs["logits"], "data_type": "TYPE_FP32", "dims": [3]}
    assert outputs["last_hidden_state"]["dims"] == [-1, 32]
    # The same under the version path, and over gRPC.
    assert http_client(s).get_model_config("cls", "1") == config
    g = grpc_client(s).get_model_config("cls", as_json=True)["config"]
    assert g["name"] == "cls" and int(g["max_batch_size"]) == 8
    assert [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in g["input"]] == \
        [(i["name"], i["data_type"], i["dims"]) for i in config["input"]]
    assert all(i["optional"] is True for i in g["input"])
    assert [(o["name"], [int(d) for d in o["dims"]]) for o in g["output"]] == \
        [(o["name"], o["dims"]) for o in config["output"]]
    assert int(g["dynamic_batching"]["default_queue_policy"]["max_queue_size"]) == 64
    assert g["instance_group"][0]["kind"] == "KIND_CPU" and g["instance_group"][0]["count"] == 2
    # Another model without a config: the command line's settings.
    base = http_client(s).get_model_config("base")
    assert base["max_batch_size"] == 64 and "pooler_output" in [o["name"] for o in base["output"]]
    assert base["parameters"]["max_batch_tokens"] == {"string_value": "16384"}
    # Unknown models and versions are errors, as Triton's are.
    for call in (lambda: http_client(s).get_model_config("nope"),
                 lambda: http_client(s).get_model_config("cls", "7"),
                 lambda: grpc_client(s).get_model_config("nope")):
        with pytest.raises(InferenceServerException, match="nope|no version 7"):
            call()
    meta = http_client(s).get_server_metadata()
    assert {"model_configuration", "statistics"} <= set(meta["extensions"])
    assert {"model_configuration", "statistics"} <= set(
        grpc_client(s).get_server_metadata(as_json=True)["extensions"])


def test_statistics_follow_the_inferences(repo_server):
    s = repo_server
    before = stats_of(s, "cls")
    assert before["name"] == "cls" and before["version"] == "1"
    # 3 requests of 2 texts over HTTP, 1 of 3 texts over gRPC, 1 of token ids: each counts.
    for _ in range(3):
        infer_texts(http_client(s), "cls", ["a b", "c"])
    infer_texts(grpc_client(s), "cls", ["x", "y", "z"], mod=tg)
    ids = th.InferInput("input_ids", [1, 4], "INT32")
    ids.set_data_from_numpy(np.array([[2, 5, 6, 3]], dtype=np.int32))
    http_client(s).infer("cls", [ids])
    # A failed request: an id past the vocabulary.
    bad = th.InferInput("input_ids", [1, 2], "INT32")
    bad.set_data_from_numpy(np.array([[2, 99999]], dtype=np.int32))
    with pytest.raises(InferenceServerException):
        http_client(s).infer("cls", [bad])
    after = stats_of(s, "cls")

    def moved(key):
        return [a - b for a, b in zip(duration(after, key), duration(before, key))]

    assert moved("success")[0] == 5 and moved("success")[1] > 0
    assert moved("fail")[0] == 1
    assert moved("queue")[0] == 5 and moved("compute_infer")[0] == 5
    assert moved("compute_infer")[1] > 0
    assert count(after, "inference_count") - count(before, "inference_count") == 3 * 2 + 3 + 1
    executions = count(after, "execution_count") - count(before, "execution_count")
    assert 1 <= executions <= 5
    # batch_stats: every execution under its batch size, within max_batch_size 8.
    batches = after["batch_stats"]
    assert sum(int(b["compute_infer"]["count"]) for b in batches) == count(after, "execution_count")
    assert all(1 <= int(b["batch_size"]) <= 8 for b in batches)
    assert abs(int(after["last_inference"]) / 1000 - time.time()) < 60
    # gRPC answers the same numbers, for the version too.
    g = stats_of(s, "cls", "1", grpc=True)
    for key in ("inference_count", "execution_count", "last_inference"):
        assert count(g, key) == count(after, key), key
    for key in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
        assert duration(g, key) == duration(after, key), key
    # Every model: both served models, once each.
    for everything in (http_client(s).get_inference_statistics(),
                       grpc_client(s).get_inference_statistics(as_json=True)):
        assert sorted((m["name"], m["version"]) for m in everything["model_stats"]) == \
            [("base", "1"), ("cls", "1")]
    # Statistics of unknown models are errors.
    with pytest.raises(InferenceServerException):
        http_client(s).get_inference_statistics("nope")
    with pytest.raises(InferenceServerException):
        grpc_client(s).get_inference_statistics("cls", "9")


def test_tei_requests_counted_as_kserve_ones(repo_server):
    """A TEI request is timed as a KServe one (one RequestTimer): its tokenization is
    Triton's compute_input, the answer's making compute_output, a refused input a
    failure; /tokenize runs no model and counts as no inference."""
    s = repo_server
    before = stats_of(s, "cls")
    tei = s.url + "/models/cls"
    assert requests.post(tei + "/predict", json={"inputs": "a few words here"},
                         timeout=30).status_code == 200
    assert requests.post(tei + "/tokenize", json={"inputs": "words"}, timeout=30).status_code == 200
    assert requests.post(tei + "/predict", json={"inputs": ""}, timeout=30).status_code == 422
    after = stats_of(s, "cls")
    for key in ("success", "compute_input", "compute_infer", "compute_output"):
        moved = [a - b for a, b in zip(duration(after, key), duration(before, key))]
        assert moved[0] == 1 and moved[1] > 0, (key, moved)
    assert duration(after, "fail")[0] == duration(before, "fail")[0] + 1


def test_triton_metric_names_for_dashboards(repo_server):
    """nv_inference_* families as Triton types and labels them, read by the
    Prometheus client's parser, equal to what the statistics extension says."""
    from prometheus_client.parser import text_string_to_metric_families
    s = repo_server
    infer_texts(http_client(s), "base", ["one", "two words"])
    infer_texts(http_client(s), "base", ["three"])
    # TEI's routes serve the default model (base, the first by name) and count too.
    assert requests.post(s.url + "/embed", json={"inputs": "four"}, timeout=30).status_code == 200
    stats = stats_of(s, "base")
    families = {f.name: f for f in text_string_to_metric_families(requests.get(s.url + "/metrics").text)}

    def value(name, **labels):
        f = families.get(name)
        assert f is not None, f"{name} missing: {sorted(families)}"
        assert f.type == "counter", (name, f.type)
        samples = [smp for smp in f.samples  # the parser names counter samples name_total
                   if all(smp.labels.get(k) == v for k, v in labels.items())]
        assert samples, (name, labels, f.samples)
        return sum(smp.value for smp in samples)

    labels = {"model": "base", "version": "1"}
    assert value("nv_inference_request_success", **labels) == duration(stats, "success")[0] == 3
    assert value("nv_inference_request_failure", **labels) == duration(stats, "fail")[0] == 0
    assert value("nv_inference_count", **labels) == count(stats, "inference_count") == 4
    assert value("nv_inference_exec_count", **labels) == count(stats, "execution_count") >= 1
    assert value("nv_inference_request_duration_us", **labels) == duration(stats, "success")[1] // 1000
    assert value("nv_inference_queue_duration_us", **labels) == duration(stats, "queue")[1] // 1000
    compute = value("nv_inference_compute_infer_duration_us", **labels)
    assert compute == duration(stats, "compute_infer")[1] // 1000 and compute > 0
    for name in ("nv_inference_compute_input_duration_us", "nv_inference_compute_output_duration_us"):
        value(name, **labels)
    # Failures carry Triton's reason label, every reason listed from zero.
    reasons = {smp.labels["reason"] for smp in families["nv_inference_request_failure"].samples}
    assert reasons == {"REJECTED", "CANCELED", "BACKEND", "OTHER"}
    # Triton's gauge of requests waiting for a batch: every served version, 0 at rest.
    pending = families["nv_inference_pending_request_count"]
    assert pending.type == "gauge"
    assert {(p.labels["model"], p.labels["version"], p.value) for p in pending.samples} == \
        {("base", "1", 0), ("cls", "1", 0)}
    # The same gauge under text-embeddings-inference's name (autoscaling rules for either).
    queue = families["te_queue_size"]
    assert queue.type == "gauge" and {(q.labels["model"], q.value) for q in queue.samples} == \
        {("base", 0), ("cls", 0)}
    # bertrt's own families are still there beside them.
    assert "bertrt_request_success" in families


def test_every_input_is_optional_and_one_set_is_needed(repo_server):
    """The config marks every input optional: a request holds either set, over HTTP and gRPC,
    and one that holds neither is refused with what it needs."""
    s = repo_server
    for mod, client in ((th, http_client(s)), (tg, grpc_client(s))):
        text = mod.InferInput("text", [2], "BYTES")
        text.set_data_from_numpy(np.array([b"a b", b"c"], dtype=np.object_))
        pair = mod.InferInput("text_pair", [2], "BYTES")
        pair.set_data_from_numpy(np.array([b"d", b"e f"], dtype=np.object_))
        ids = mod.InferInput("input_ids", [1, 4], "INT64")
        ids.set_data_from_numpy(np.array([[2, 5, 6, 3]], dtype=np.int64))
        mask = mod.InferInput("attention_mask", [1, 4], "INT64")
        mask.set_data_from_numpy(np.array([[1, 1, 1, 0]], dtype=np.int64))
        types = mod.InferInput("token_type_ids", [1, 4], "INT64")
        types.set_data_from_numpy(np.zeros((1, 4), dtype=np.int64))
        for inputs, rows in (([text], 2), ([text, pair], 2), ([ids], 1), ([ids, mask, types], 1)):
            out = client.infer("cls", inputs).as_numpy("logits")
            assert out.shape == (rows, 3), [i.name() for i in inputs]
        for inputs in ([mask], [types, mask], [pair]):
            with pytest.raises(InferenceServerException,
                               match="needs text .*or input_ids .*it has \"") as e:
                client.infer("cls", inputs)
            assert all(i.name() in str(e.value) for i in inputs)
        with pytest.raises(InferenceServerException, match="input_ids"):
            client.infer("cls", [text, ids])


def nv_series(s, model):
    """The nv_inference_* lines of `model` in /metrics."""
    return [line for line in requests.get(s.url + "/metrics", timeout=10).text.splitlines()
            if line.startswith("nv_inference_") and f'model="{model}"' in line]


def test_statistics_start_again_when_a_model_is_loaded_again(bertrt_bin, tmp_path):
    """As Triton's, a version's statistics and nv_inference_* series belong to the loaded model:
    unloaded, it has none (the statistics call is an error, the series are gone); loaded again
    through the repository API, it starts from zero."""
    add_version(tmp_path, "cls", 1, "seq_cls")
    add_version(tmp_path, "base", 1, "base")
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode", "explicit",
                            "--load-model", "cls", "--load-model", "base"])
    try:
        for _ in range(2):
            infer_texts(http_client(s), "cls", ["a b", "c"])
        infer_texts(http_client(s), "base", ["a"])
        before = stats_of(s, "cls")
        assert duration(before, "success")[0] == 2 and count(before, "inference_count") == 4
        assert 'nv_inference_count{model="cls",version="1"} 4' in nv_series(s, "cls")

        http_client(s).unload_model("cls")
        for call in (lambda: http_client(s).get_inference_statistics("cls"),
                     lambda: grpc_client(s).get_inference_statistics("cls"),
                     lambda: http_client(s).get_inference_statistics("cls", "1")):
            with pytest.raises(InferenceServerException, match="cls"):
                call()
        assert [m["name"] for m in http_client(s).get_inference_statistics()["model_stats"]] == \
            ["base"]
        deadline = time.time() + 10  # the version goes once its last request lets go of it
        while nv_series(s, "cls") and time.time() < deadline:
            time.sleep(0.05)
        assert nv_series(s, "cls") == []
        assert nv_series(s, "base"), "another model's series stay"

        grpc_client(s).load_model("cls")
        for grpc in (False, True):
            zero = stats_of(s, "cls", grpc=grpc)
            for key in ("inference_count", "execution_count", "last_inference"):
                assert count(zero, key) == 0, (key, zero)
            for key in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
                assert duration(zero, key) == (0, 0), (key, zero)
            assert not zero.get("batch_stats"), zero
        series = nv_series(s, "cls")
        assert series and all(line.endswith(" 0") for line in series), series
        infer_texts(http_client(s), "cls", ["again"])
        after = stats_of(s, "cls")
        assert duration(after, "success")[0] == 1 and count(after, "inference_count") == 1
        assert count(after, "execution_count") == 1
        assert 'nv_inference_count{model="cls",version="1"} 1' in nv_series(s, "cls")
        assert count(stats_of(s, "base"), "inference_count") == 1  # untouched
    finally:
        s.stop()


def test_a_version_reloaded_by_polling_starts_from_zero(bertrt_bin, tmp_path):
    """Poll mode: a poll that finds the version unchanged keeps it, with its statistics; a
    changed config reloads it as a new model, whose statistics start from zero."""
    add_version(tmp_path, "cls", 1, "seq_cls")
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode", "poll",
                            "--repository-poll-secs", "0.2"])
    try:
        infer_texts(http_client(s), "cls", ["a", "b"])
        time.sleep(1)  # five polls
        assert count(stats_of(s, "cls"), "inference_count") == 2
        (tmp_path / "cls" / "config.pbtxt").write_text("max_batch_size: 3")
        deadline = time.time() + 30
        while http_client(s).get_model_config("cls")["max_batch_size"] != 3:
            assert time.time() < deadline, "the config change was not picked up"
            time.sleep(0.1)
        for grpc in (False, True):
            zero = stats_of(s, "cls", grpc=grpc)
            assert count(zero, "inference_count") == 0 and duration(zero, "success") == (0, 0)
        deadline = time.time() + 10  # the old version's series go once it is released
        while 'nv_inference_count{model="cls",version="1"} 0' not in nv_series(s, "cls"):
            assert time.time() < deadline, nv_series(s, "cls")
            time.sleep(0.05)
        infer_texts(http_client(s), "cls", ["c"])
        assert count(stats_of(s, "cls"), "inference_count") == 1
    finally:
        s.stop()


def test_a_failed_reload_keeps_the_served_versions_statistics(bertrt_bin, tmp_path):
    """A load that fails part-way (version 1 reloads, version 2 does not) leaves the served
    versions serving, with their statistics and series."""
    add_version(tmp_path, "cls", 1, "seq_cls")
    add_version(tmp_path, "cls", 2, "seq_cls")
    (tmp_path / "cls" / "config.pbtxt").write_text("version_policy: { all {} }")
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode", "explicit",
                            "--load-model", "cls"])
    try:
        client = http_client(s)
        for _ in range(2):
            client.infer("cls", [text_input(["a"])], model_version="1")
        assert count(stats_of(s, "cls", "1"), "inference_count") == 2
        (tmp_path / "cls" / "1" / "notes.txt").write_text("changed")  # version 1 reloads
        (tmp_path / "cls" / "2" / "config.json").write_text("{")  # version 2 fails
        with pytest.raises(InferenceServerException, match="version 2"):
            client.load_model("cls")
        assert count(stats_of(s, "cls", "1"), "inference_count") == 2
        assert 'nv_inference_count{model="cls",version="1"} 2' in nv_series(s, "cls")
        assert 'nv_inference_count{model="cls",version="2"} 0' in nv_series(s, "cls")
    finally:
        s.stop()


def adjust_text_encoder(text):
    """What test_triton's README says is changed in text_encoder.pbtxt: the hidden size of
    the model swapped in (BertModel, hidden 32), and KIND_GPU where there is no GPU."""
    out = text.replace("dims: [ 768]", "dims: [ 32]").replace("dims: [ -1, 768]", "dims: [ -1, 32]")
    assert out.count("32]") == 2, "the config no longer has the two 768-wide outputs"
    if shutil.which("nvidia-smi") is None:
        out = out.replace("kind: KIND_GPU", "kind: KIND_CPU")
    return out


def test_tritons_own_configs_load_and_serve(bertrt_bin, default_model, tmp_path):
    repo = tmp_path
    add_version(repo, "bert_base_tf_cpu", 1, "seq_cls")
    shutil.copy(CONFIGS / "bert_base_tf_cpu.pbtxt", repo / "bert_base_tf_cpu" / "config.pbtxt")
    (repo / "all-MiniLM-L6-v2").mkdir()
    (repo / "all-MiniLM-L6-v2" / "1").symlink_to(default_model, target_is_directory=True)
    shutil.copy(CONFIGS / "all-MiniLM-L6-v2.pbtxt", repo / "all-MiniLM-L6-v2" / "config.pbtxt")
    add_version(repo, "text_encoder", 1, "base")
    (repo / "text_encoder" / "config.pbtxt").write_text(
        adjust_text_encoder((CONFIGS / "text_encoder.pbtxt").read_text()))
    s = Server(bertrt_bin, ["--model-repository", str(repo), "--model-control-mode", "poll",
                            "--repository-poll-secs", "0.5"])
    try:
        c = http_client(s)
        # Each serves, as its config declares it.
        logits = infer_texts(c, "bert_base_tf_cpu", ["hello world"]).as_numpy("logits")
        assert logits.shape == (1, 3)
        emb = infer_texts(c, "all-MiniLM-L6-v2", ["bertrt is fast"]).as_numpy("embedding")
        assert emb.shape == (1, 384) and abs(np.linalg.norm(emb) - 1) < 1e-4
        ids = th.InferInput("input_ids", [2, 5], "INT32")  # text_encoder's TYPE_INT32 [-1]
        ids.set_data_from_numpy(np.array([[2, 7, 8, 9, 3], [2, 10, 3, 0, 0]], dtype=np.int32))
        r = c.infer("text_encoder", [ids], outputs=[th.InferRequestedOutput("pooler_output"),
                                                    th.InferRequestedOutput("last_hidden_state")])
        assert r.as_numpy("pooler_output").shape == (2, 32)
        assert r.as_numpy("last_hidden_state").shape == (2, 5, 32)
        # Their settings are in effect.
        cpu = c.get_model_config("bert_base_tf_cpu")
        assert cpu["max_batch_size"] == 4
        assert cpu["dynamic_batching"]["preferred_batch_size"] == [1]
        assert cpu["dynamic_batching"]["max_queue_delay_microseconds"] == 2000000
        assert [(g["kind"], g["count"]) for g in cpu["instance_group"]] == [("KIND_CPU", 2)]
        enc = c.get_model_config("text_encoder")
        assert enc["max_batch_size"] == 8
        assert [(i["name"], i["data_type"], i["dims"]) for i in enc["input"]] == \
            [("input_ids", "TYPE_INT32", [-1])]
        assert [(o["name"], o["dims"]) for o in enc["output"]] == \
            [("pooler_output", [32]), ("last_hidden_state", [-1, 32])]
        assert c.get_model_config("all-MiniLM-L6-v2")["max_batch_size"] == 64
        time.sleep(2)  # a few polls that find nothing changed
        assert infer_texts(c, "bert_base_tf_cpu", ["again"]).as_numpy("logits").shape == (1, 3)
    finally:
        s.stop()
    log = s.proc.stderr.read()
    # What bertrt does not use is said once, not at every poll.
    for ignored in ('all-MiniLM-L6-v2/config.pbtxt: ignored: backend "vllm"',
                    "all-MiniLM-L6-v2/config.pbtxt: ignored: instance_group 1: kind KIND_MODEL",
                    'text_encoder/config.pbtxt: ignored: platform "onnxruntime_onnx"',
                    "text_encoder/config.pbtxt: ignored: optimization",
                    'text_encoder/config.pbtxt: ignored: parameters "cudnn_conv_algo_search", '
                    '"execution_mode"'):
        assert log.count(ignored) == 1, (ignored, log)
    assert "bert_base_tf_cpu/config.pbtxt: ignored" not in log, log


def test_blocks_that_disagree_with_the_model_fail_the_load_clearly(bertrt_bin, tmp_path):
    add_version(tmp_path, "cls", 1, "seq_cls")
    config = tmp_path / "cls" / "config.pbtxt"
    cases = {
        'max_batch_size: 8 input [ { name: "input_ids" data_type: TYPE_FP32 dims: [ -1 ] } ]':
            'config.pbtxt: input "input_ids": data_type TYPE_FP32 does not match the model, '
            'which takes token ids as TYPE_INT32 or TYPE_INT64',
        'max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]':
            'config.pbtxt: input "INPUT0": the model takes no such input',
        'max_batch_size: 8 output [ { name: "logits" data_type: TYPE_FP32 dims: [ 2 ] } ]':
            'config.pbtxt: output "logits" dims [2]',
        'output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ -1, 3 ] } ]':
            'the model returns no such output; it returns logits, last_hidden_state',
    }
    for text, fragment in cases.items():
        config.write_text(text)
        assert_start_fails(bertrt_bin, ["--model-repository", str(tmp_path)], fragment)
    # The same blocks, agreeing with the model, load and serve.
    config.write_text('max_batch_size: 8 '
                      'input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] } ] '
                      'output [ { name: "logits" data_type: TYPE_FP32 dims: [ 3 ] } ]')
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path)])
    try:
        ids = th.InferInput("input_ids", [1, 4], "INT64")
        ids.set_data_from_numpy(np.array([[2, 5, 6, 3]], dtype=np.int64))
        assert http_client(s).infer("cls", [ids]).as_numpy("logits").shape == (1, 3)
    finally:
        s.stop()


def test_ignored_fields_are_said_once_across_failed_loads(bertrt_bin, tmp_path):
    """A load that fails and is asked for again does not repeat the notices."""
    add_version(tmp_path, "cls", 1, "seq_cls")
    (tmp_path / "cls" / "config.pbtxt").write_text(
        'backend: "onnxruntime" max_batch_size: 8 '
        'input [ { name: "input_ids" data_type: TYPE_FP32 dims: [ -1 ] } ]')
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode", "explicit",
                            "--strict-readiness", "false"])
    try:
        for _ in range(3):
            r = requests.post(s.url + "/v2/repository/models/cls/load", timeout=60)
            assert r.status_code == 400 and "data_type TYPE_FP32" in r.json()["error"], r.text
    finally:
        s.stop()
    log = s.proc.stderr.read()
    assert log.count('ignored: backend "onnxruntime"') == 1, log
