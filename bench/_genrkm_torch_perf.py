"""Part of bench/genrkm_torch.py: one training epoch of the explicit Gen-RKM on the MNIST subset (image view and
one-hot label view), split between the networks and the RKM eigen step, against a VAE epoch with the same networks.

The two models are built as their ``fit`` builds them (``_check_params_vs_input``, ``_build``; same seed, so the
same initial networks) and trained batch by batch on the same rows, alternating which model goes first, so that
both see the same load from the other jobs sharing the cores. Each training step is timed whole (the model's
``_batch_loss``, ``backward``, Adam's ``step``). The eigen step (``rkm.torch.kpca``: centring, the kernel or
covariance matrix, the eigendecomposition, H and U, forward and backward) is timed separately on the same batch's
features (detached), with a fixed random upstream gradient on the reconstructed features mean_v + H U_v^T, which is
how the model uses them. Epoch seconds are sums over the batches; per-batch medians are given beside them.
"""

import time

import numpy as np
import torch
from _common import log
from genrkm import markdown_table

from rkm._utils.progress import Progress
from rkm.datasets import load_mnist_subset
from rkm.torch import VAE, ExplicitGenRKM, kpca

BATCHES = (256,)  # the class default


def _built(cls, s, batch, arrays, seed):
    model = cls(s, label_views=[1], batch_size=batch, learning_rate=1e-3, random_state=seed)
    model.device_, model.dtype_ = torch.device("cpu"), torch.float32
    model._progress = Progress(cls.__name__, 0)
    model._check_params_vs_input(arrays)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model._build(arrays)
    model._set_mode(train=True)
    return model, torch.optim.Adam(model._trained_parameters(), lr=1e-3)


def _step(model, optimizer, batch):
    start = time.perf_counter()
    loss, _ = model._batch_loss(batch)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - start


def _eigen_step(model, batch, generator):
    """Seconds of kpca forward + backward on this batch's (detached) features."""
    with torch.no_grad():
        features = [net(x) for net, x in zip(model.feature_networks_, batch)]
    features = [f.detach().requires_grad_(True) for f in features]
    upstream = [torch.randn(f.shape, generator=generator) for f in features]
    start = time.perf_counter()
    step = kpca(features, model.n_components, model.etas_, form=model.form)
    total = sum(((mean + step.H @ U.mT) * g).sum() for mean, U, g in zip(step.means, step.U, upstream))
    total.backward()
    return time.perf_counter() - start, step.form


def _epoch(s, batch, X, onehot, seed):
    arrays = [X, onehot]
    gen, gen_opt = _built(ExplicitGenRKM, s, batch, arrays, seed)
    vae, vae_opt = _built(VAE, s, batch, arrays, seed)
    tensors = [torch.as_tensor(A, dtype=torch.float32) for A in arrays]
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(X), generator=generator)
    times = {"gen": [], "vae": [], "eigen": []}
    form = None
    for k, rows in enumerate(gen._batches(order)):
        batch_views = [t[rows] for t in tensors]
        pair = [("gen", gen, gen_opt), ("vae", vae, vae_opt)]
        for name, model, optimizer in pair if k % 2 == 0 else pair[::-1]:
            times[name].append(_step(model, optimizer, batch_views))
        seconds, form = _eigen_step(gen, batch_views, generator)
        times["eigen"].append(seconds)
    return times, form


def run(config, n_threads, seed):
    data = load_mnist_subset(config["n_samples"])
    X = np.asarray(data.data, dtype=np.float64)
    X = X / 255.0 if X.max() > 1.0 else X
    onehot = np.eye(10)[data.target.astype(int)]
    records = {"n_samples": len(X), "s": config["s"], "threads": torch.get_num_threads(), "rows": []}
    for batch in BATCHES if config["batch"] == 256 else (config["batch"],):
        log(f"perf: one epoch of each model, batch {batch}")
        # A short warm-up outside the timing (the first Adam step imports torch._dynamo, first convolutions pick
        # their kernels).
        _epoch(config["s"], batch, X[: 2 * batch], onehot[: 2 * batch], seed)
        times, form = _epoch(config["s"], batch, X, onehot, seed)
        gen, vae, eigen = (np.array(times[k]) for k in ("gen", "vae", "eigen"))
        row = {
            "batch": batch,
            "n_batches": len(gen),
            "form": form,
            "gen_epoch": float(gen.sum()),
            "vae_epoch": float(vae.sum()),
            "eigen_epoch": float(eigen.sum()),
            "gen_median": float(np.median(gen)),
            "vae_median": float(np.median(vae)),
            "eigen_median": float(np.median(eigen)),
            "ratio_median": float(np.median(gen / vae)),
        }
        records["rows"].append(row)
        log(
            f"  Gen-RKM {row['gen_epoch']:.1f} s, VAE {row['vae_epoch']:.1f} s, eigen step {row['eigen_epoch']:.2f} s "
            f"({row['eigen_epoch'] / row['gen_epoch']:.1%})"
        )
    return records, markdown(records), []


def _forms(records, row):
    """The eigenproblem of each batch, counted: primal when the summed feature width (Table 3: 128 + 20) is at most
    the batch's rows (eq. 10's condition), so a short last batch solves the dual."""
    n, batch, s = records["n_samples"], row["batch"], records["s"]
    sizes = [batch] * (n // batch) + ([n % batch] if n % batch else [])
    if len(sizes) > 1 and sizes[-1] <= s:
        sizes[-2:] = [sizes[-2] + sizes[-1]]
    width = records.get("feature_width", 148)
    counts = {}
    for size in sizes:
        form = "primal" if width <= size else "dual"
        counts[form] = counts.get(form, 0) + 1
    return ", ".join(f"{form} ({count})" for form, count in counts.items())


def markdown(records):
    rows = [
        [
            r["batch"],
            r["n_batches"],
            _forms(records, r),
            f"{r['gen_epoch']:.1f}",
            f"{r['eigen_epoch']:.2f} ({r['eigen_epoch'] / r['gen_epoch']:.1%})",
            f"{r['gen_epoch'] - r['eigen_epoch']:.1f}",
            f"{r['vae_epoch']:.1f}",
            f"**{r['gen_epoch'] / r['vae_epoch']:.2f}x** (median per batch {r['ratio_median']:.2f}x)",
            f"{r['gen_median'] * 1000:.0f} / {r['eigen_median'] * 1000:.1f} / {r['vae_median'] * 1000:.0f}",
        ]
        for r in records["rows"]
    ]
    return (
        f"One epoch over the {records['n_samples']} digits (image view with Table 3's networks, one-hot label view), "
        f"s = {records['s']}, float32, {records['threads']} torch threads; both models trained on the same batches "
        "in one run, interleaved. Eigen step: `rkm.torch.kpca` forward and backward on the batch's features "
        "(timed separately on the same batch); networks: the rest of the Gen-RKM step (feature and pre-image "
        "networks forward and backward, Adam). Targets: eigen step under 20% of the epoch, Gen-RKM within 1.5x "
        "of the VAE.\n\n"
        + markdown_table(
            [
                "batch",
                "batches",
                "eigenproblem",
                "Gen-RKM epoch [s]",
                "eigen step [s] (share)",
                "networks [s]",
                "VAE epoch [s]",
                "Gen-RKM / VAE",
                "median step [ms] Gen-RKM / eigen / VAE",
            ],
            rows,
        )
    )
