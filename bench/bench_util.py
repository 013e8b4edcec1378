"""What the benchmark scripts that start `bertrt serve` and drive it with `bertrt bench`
share: a free port, the readiness wait, one `bertrt bench` run, a process's RSS and threads.
Imported by served_profile.py, scale_out.py, soak.py and hostile_clients.py (run as
`python3 bench/NAME.py`, so this folder is on the path)."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready(url, timeout=1):
    """Whether the server at url answers /v2/health/ready with 200."""
    try:
        with urllib.request.urlopen(url + "/v2/health/ready", timeout=timeout) as r:
            return r.status == 200
    except OSError:
        return False


def wait_ready(proc, url, who, seconds=600):
    """Waits until the server process `proc` at url is ready; exits the script (naming
    `who`) when it ends first or the wait passes `seconds`."""
    deadline = time.time() + seconds
    while not ready(url):
        if proc.poll() is not None:
            sys.exit(f"{who}: bertrt serve exited ({proc.returncode})")
        if time.time() > deadline:
            sys.exit(f"{who}: bertrt serve did not become ready in {seconds} s")
        time.sleep(0.1)


def run_bench(cmd, json_path, who, **popen):
    """Runs `bertrt bench ... --json json_path` (cmd, without --json) and returns its steps;
    exits the script (naming `who`) with the command's stderr when it fails."""
    cmd = [*cmd, "--json", json_path]
    proc = subprocess.run(cmd, capture_output=True, text=True, **popen)
    if proc.returncode != 0:
        sys.exit(f"{who}: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    with open(json_path) as f:
        return json.load(f)["steps"]


def rss_mb_and_threads(pid):
    """The process's resident size in MB and its number of threads."""
    with open(f"/proc/{pid}/status") as f:
        rss = int(next(line for line in f if line.startswith("VmRSS")).split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/task"))
