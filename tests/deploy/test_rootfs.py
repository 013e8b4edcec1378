"""The container image's root filesystem, built offline (scripts/build_rootfs.sh: mmdebstrap
from Debian's packages, the binary under test and the default model), started with chroot
as user 1000 the way the image's entrypoint runs: it must find every library it links,
serve the default model and answer as the binary does outside it. Needs root (chroot) and
Debian's package mirror, as scripts/install_deps.sh does."""
import json
import os
import signal
import subprocess
import tarfile

import pytest
import requests

from conftest import ROOT, free_port, wait_until_ready


@pytest.fixture(scope="module")
def rootfs(bertrt_bin, default_model, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("chroot needs root")
    tmp = tmp_path_factory.mktemp("rootfs")
    tar = tmp / "bertrt-rootfs.tar"
    env = dict(os.environ, BERTRT_BIN=bertrt_bin, BERTRT_DEFAULT_MODEL_DIR=default_model)
    proc = subprocess.run(["bash", str(ROOT / "scripts/build_rootfs.sh"), str(tar)], env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    root = tmp / "root"
    root.mkdir()
    with tarfile.open(tar) as t:
        t.extractall(root, numeric_owner=True, filter="fully_trusted")
    tar.unlink()
    return root


def test_every_library_the_binary_links_is_in_the_image(rootfs):
    proc = subprocess.run(["chroot", str(rootfs), "ldd", "/usr/local/bin/bertrt"], capture_output=True, text=True)
    assert proc.returncode == 0 and "not found" not in proc.stdout, proc.stdout + proc.stderr


def test_the_image_serves_the_default_model_as_user_1000(rootfs, bertrt_bin, default_model):
    port = free_port()
    server = subprocess.Popen(
        ["chroot", "--userspec=1000:1000", str(rootfs), "/usr/local/bin/bertrt", "serve",
         "/models/all-MiniLM-L6-v2", "--host", "0.0.0.0", "--http-port", str(port), "--grpc-port",
         str(free_port()), "--threads", "1"], stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(server, url)
        status = open(f"/proc/{server.pid}/status").read()
        assert "\nUid:\t1000\t" in status  # chroot execs bertrt in its place
        r = requests.post(url + "/embed", json={"inputs": "bertrt in a container"}, timeout=30)
        assert r.status_code == 200, r.text
        # The same binary outside the image gives the same vector.
        out = subprocess.run([bertrt_bin, "run", default_model], input='{"text": "bertrt in a container"}\n',
                             capture_output=True, text=True)
        want = json.loads(out.stdout)["embedding"]
        assert max(abs(a - b) for a, b in zip(r.json()[0], want)) < 1e-6
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
