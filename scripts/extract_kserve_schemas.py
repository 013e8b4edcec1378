#!/usr/bin/env python3
"""Extract the OpenAPI schemas of KServe's custom resources from its CRD files, for the
offline manifest checks (tests/deploy/test_manifests.py).

  python3 scripts/extract_kserve_schemas.py KSERVE_CHECKOUT OUT_DIR [COMMIT]

Reads config/crd/full/serving.kserve.io_{clusterservingruntimes,inferenceservices}.yaml of a
KServe checkout (Apache-2.0) and writes OUT_DIR/<kind>.<version>.json.gz: each served
version's openAPIV3Schema, as the API server validates against it.
"""
import gzip
import json
import os
import sys

import yaml


def main():
    checkout, out = sys.argv[1], sys.argv[2]
    commit = sys.argv[3] if len(sys.argv) > 3 else "unknown"
    os.makedirs(out, exist_ok=True)
    for crd in ("clusterservingruntimes", "inferenceservices"):
        doc = yaml.safe_load(open(os.path.join(checkout, "config/crd/full", f"serving.kserve.io_{crd}.yaml")))
        kind = doc["spec"]["names"]["kind"]
        for version in doc["spec"]["versions"]:
            if not version.get("served"):
                continue
            schema = version["schema"]["openAPIV3Schema"]
            schema["x-bertrt-source"] = f"kserve/kserve {commit} config/crd/full/serving.kserve.io_{crd}.yaml"
            path = os.path.join(out, f"{kind}.{version['name']}.json.gz")
            with gzip.GzipFile(path, "wb", mtime=0) as f:
                f.write(json.dumps(schema, sort_keys=True).encode())
            print("wrote", path)


if __name__ == "__main__":
    main()
