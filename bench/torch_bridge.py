"""PyTorch bridge: the differentiable rbf kernel matrix against the core's, and the kernel PCA step dual against primal.

Parts, each writing one subsection of "PyTorch bridge: differentiable kernels and the kernel PCA step" in
bench/RESULTS.md (records in bench/figures/torch_bridge_<part>.json):

- ``kernel``: ``rkm.torch.kernel_matrix(X, gamma=...)`` (rbf, Y None) forward, and forward + backward of the scalar
  loss sum(W * K) to X (and to X and a tensor gamma), against the compiled core's forward
  ``rkm.kernels.kernel_matrix`` at N = 2000, d = 784 (MNIST's width; uniform [0, 1) data), float64 and float32,
  same process, same thread count (``torch.set_num_threads`` and the core's ``n_threads``, OpenMP and BLAS pinned
  by threadpoolctl); medians of repeats. The issue's target: forward + backward within 2x of the core's forward.
- ``kpca``: ``rkm.torch.kpca`` on a batch of 256 with an image view of 128 features and a label view of 20 (the
  MNIST Gen-RKM shape), s = 20: the dual (eigh of 256 x 256) against the primal (eigh of 148 x 148), forward and
  forward + backward of energy + a reconstruction loss, float64 and float32.

    python bench/torch_bridge.py                 # both parts, about 4 minutes on 2 cores at load 7-9
    python bench/torch_bridge.py --part kernel
    python bench/torch_bridge.py --quick         # fewer repeats
"""

import time

import numpy as np
import torch
from _common import load_average, log, pinned_threads, script_parser, timed_median, write_bench_part

from rkm.cli.report import markdown_table
from rkm.kernels import kernel_matrix as core_kernel_matrix
from rkm.torch import kernel_matrix, kpca

PARTS = ("kernel", "kpca")
HEADING = "## PyTorch bridge: differentiable kernels and the kernel PCA step"
INTRODUCTION = (
    "`rkm.torch` (issue 25): the autograd-aware kernel matrix against the compiled core's forward pass, and the "
    "differentiable multi-view kernel PCA step of a mini-batch in its dual (eq. 3) and primal (eq. 10) forms."
)
TITLES = {
    "kernel": "### Kernel matrix: rbf at N = 2000, d = 784, forward and backward against the core's forward",
    "kpca": "### Kernel PCA step: dual against primal (batch 256, D = 128 + 20, s = 20)",
}
SEED = 0
KERNEL_SHAPE = (2000, 784)
BATCH, WIDTHS, N_COMPONENTS = 256, (128, 20), 20
DTYPES = {"float64": (torch.float64, np.float64), "float32": (torch.float32, np.float32)}


def part_kernel(quick, n_threads):
    repeats = 3 if quick else 7
    records = {"n_samples": KERNEL_SHAPE[0], "n_features": KERNEL_SHAPE[1], "repeats": repeats, "rows": []}
    # The setting (n_threads), and one thread, which no inter-thread waiting on a loaded machine disturbs.
    for threads in sorted({n_threads, 1}, reverse=True):
        records["rows"] += _kernel_rows(repeats, threads)
    torch.set_num_threads(n_threads)
    return records


def _kernel_rows(repeats, n_threads):
    rng = np.random.default_rng(SEED)
    torch.set_num_threads(n_threads)
    gamma = 1.0 / KERNEL_SHAPE[1]
    rows = []
    for dtype_name, (torch_dtype, numpy_dtype) in DTYPES.items():
        X_numpy = rng.random(KERNEL_SHAPE).astype(numpy_dtype)
        X = torch.from_numpy(X_numpy)
        W = torch.from_numpy(rng.standard_normal((KERNEL_SHAPE[0],) * 2).astype(numpy_dtype))
        X_grad = X.clone().requires_grad_(True)
        gamma_tensor = torch.tensor(gamma, dtype=torch_dtype, requires_grad=True)

        def core():
            return core_kernel_matrix(X_numpy, gamma=gamma, n_threads=n_threads)

        def forward():
            with torch.no_grad():
                return kernel_matrix(X, gamma=gamma)

        def forward_backward():
            (kernel_matrix(X_grad, gamma=gamma) * W).sum().backward()
            X_grad.grad = None

        def forward_backward_gamma():
            (kernel_matrix(X_grad, gamma=gamma_tensor) * W).sum().backward()
            X_grad.grad = gamma_tensor.grad = None

        with pinned_threads(n_threads):
            seconds = {
                "core_forward": timed_median(core, repeats)[0],
                "torch_forward": timed_median(forward, repeats)[0],
                "torch_forward_backward": timed_median(forward_backward, repeats)[0],
                "torch_forward_backward_gamma": timed_median(forward_backward_gamma, repeats)[0],
            }
        difference = float(np.abs(forward().numpy() - core()).max())
        rows.append({"dtype": dtype_name, "threads": n_threads, "seconds": seconds, "max_abs_difference": difference})
        log(
            f"kernel {dtype_name}, {n_threads} threads: "
            + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in seconds.items())
        )
    return rows


def _threads_note(rows, keys, label):
    """How the multi-threaded medians compare with the one-thread ones of the same run (a loaded machine's
    waits between threads can make them slower)."""
    single = {(r["dtype"], r.get("form")): r for r in rows if r["threads"] == 1}
    ratios = [
        r["seconds"][key] / single[(r["dtype"], r.get("form"))]["seconds"][key]
        for r in rows
        if r["threads"] != 1 and (r["dtype"], r.get("form")) in single
        for key in keys
    ]
    if not ratios:
        return ""
    return (
        f" In this run the {label} at {max(r['threads'] for r in rows)} threads took {min(ratios):.2f} to "
        f"{max(ratios):.2f} times their one-thread medians."
    )


def kernel_text(records):
    rows = []
    for row in records["rows"]:
        s = row["seconds"]
        core = s["core_forward"]
        rows.append(
            [
                row["dtype"],
                str(row["threads"]),
                f"{core * 1e3:.0f}",
                f"{s['torch_forward'] * 1e3:.0f} ({s['torch_forward'] / core:.2f}x)",
                f"{s['torch_forward_backward'] * 1e3:.0f} ({s['torch_forward_backward'] / core:.2f}x)",
                f"{s['torch_forward_backward_gamma'] * 1e3:.0f} ({s['torch_forward_backward_gamma'] / core:.2f}x)",
                f"{row['max_abs_difference']:.1e}",
            ]
        )
    table = markdown_table(
        [
            "dtype",
            "threads",
            "core forward (ms)",
            "torch forward (ms, / core)",
            "torch forward + backward to X (ms, / core)",
            "... to X and gamma (ms, / core)",
            "max abs difference of K",
        ],
        rows,
    )
    return (
        f"Medians of {records['repeats']} runs after a warm-up; the loss is sum(W * K) with a fixed random W, so "
        "the backward pass gets a dense dL/dK. The core builds one triangle of K with double accumulation (float32 "
        "input too) and mirrors it; the torch forward computes the lower block triangle of the GEMM in 4 row "
        "blocks (5/8 of the full product) in the input's dtype, and its backward (a custom autograd function) is "
        "one N x N temporary and one full GEMM (dL/dX = -2 gamma (diag(S 1) X - S X), S = (dL/dK + dL/dK^T) * K), "
        "which no symmetric trick shortens: forward + backward takes 5/8 + 1 = 13/8 N^2 d multiply-adds against the "
        "core's N^2 d / 2, 3.25 times as many; only a faster GEMM (MKL's, and float32 arithmetic where the core "
        "accumulates float32 input in double) brings the ratio of times below that. The one-thread rows are free of "
        "the waits between threads that a loaded machine adds to both sides, to torch's many parallel regions more "
        "than to the core's few."
        + _threads_note(records["rows"], ["torch_forward", "torch_forward_backward"], "torch timings")
        + "\n\n"
        + table
    )


def part_kpca(quick, n_threads):
    repeats = 10 if quick else 30
    records = {"batch": BATCH, "widths": list(WIDTHS), "n_components": N_COMPONENTS, "repeats": repeats, "rows": []}
    for threads in sorted({n_threads, 1}, reverse=True):
        records["rows"] += _kpca_rows(repeats, threads)
    torch.set_num_threads(n_threads)
    return records


def _kpca_rows(repeats, n_threads):
    rng = np.random.default_rng(SEED)
    torch.set_num_threads(n_threads)
    rows = []
    for dtype_name, (torch_dtype, _) in DTYPES.items():
        image = torch.tensor(rng.standard_normal((BATCH, WIDTHS[0])), dtype=torch_dtype)
        labels = torch.nn.functional.one_hot(torch.from_numpy(rng.integers(0, 10, BATCH)), WIDTHS[1]).to(torch_dtype)
        features = image.clone().requires_grad_(True)
        for form in ("dual", "primal"):

            def forward(form=form):
                with torch.no_grad():
                    return kpca([image, labels], N_COMPONENTS, [1.0, 1.0], form=form)

            def forward_backward(form=form):
                step = kpca([features, labels], N_COMPONENTS, [1.0, 1.0], form=form)
                reconstruction = step.means[0] + step.H @ step.U[0].mT
                (step.energy + ((reconstruction - features.detach()) ** 2).mean()).backward()
                features.grad = None

            with pinned_threads(n_threads):
                seconds = {
                    "forward": timed_median(forward, repeats)[0],
                    "forward_backward": timed_median(forward_backward, repeats)[0],
                }
            rows.append({"dtype": dtype_name, "threads": n_threads, "form": form, "seconds": seconds})
            log(
                f"kpca {dtype_name} {form}, {n_threads} threads: "
                + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in seconds.items())
            )
    return rows


def kpca_text(records):
    rows = [
        [
            r["dtype"],
            str(r["threads"]),
            r["form"],
            f"{r['seconds']['forward'] * 1e3:.2f}",
            f"{r['seconds']['forward_backward'] * 1e3:.2f}",
        ]
        for r in records["rows"]
    ]
    table = markdown_table(["dtype", "threads", "form", "forward (ms)", "forward + backward (ms)"], rows)
    return (
        f"Medians of {records['repeats']} runs. Forward: centring, the eigendecomposition (dual: of the "
        f"{records['batch']} x {records['batch']} kernel matrix; primal: of the {sum(records['widths'])} x "
        f"{sum(records['widths'])} covariance), H, U and the energy; backward: of energy + the mean squared "
        'reconstruction error of the image view, to its features. `form="auto"` picks the primal here (D <= N).'
        + _threads_note(records["rows"], ["forward", "forward_backward"], "steps")
        + "\n\n"
        + table
    )


def main():
    args = script_parser(__doc__, PARTS, quick="fewer repeats").parse_args()
    torch.set_num_threads(args.n_threads)
    for part in args.part:
        start, load = time.perf_counter(), load_average()
        log(f"part {part}")
        records = part_kernel(args.quick, args.n_threads) if part == "kernel" else part_kpca(args.quick, args.n_threads)
        text = kernel_text(records) if part == "kernel" else kpca_text(records)
        facts = (
            f"PyTorch {torch.__version__} with {torch.get_num_threads()} threads; 1-minute load average {load:.1f} "
            f"at the start, {load_average():.1f} at the end (other processes share the cores); "
            f"{(time.perf_counter() - start) / 60:.1f} min"
        )
        section = (HEADING, INTRODUCTION, list(TITLES.values()), TITLES[part])
        write_bench_part(
            "bench/torch_bridge.py", f"torch_bridge_{part}", records, text, [], facts, args.n_threads, section
        )


if __name__ == "__main__":
    main()
