"""Large-N kernel PCA: matrix-free, Nyström and random Fourier features, against scikit-learn's pipelines.

Writes (or replaces) the sections "Large-N kernel PCA ..." of bench/RESULTS.md. Every case runs in a fresh
process, which generates its own data, so that its peak resident memory (VmHWM) is its own. Timings use the
thread count given (default 2) for OpenMP and BLAS alike.

    python bench/large_n.py                  # everything (about 25 minutes on 2 cores)
    python bench/large_n.py --only width approx
"""

import os
import time

import numpy as np
from _common import (
    RESULTS,
    added_peak,
    gib,
    log,
    mean_distance_gamma,
    pinned_threads,
    run_measured_case,
    script_parser,
    write_script_section,
)

from rkm.cli.report import markdown_table

PARTS = ("width", "dense", "matrix_free", "million", "peers", "approx")
HEADINGS = {
    "width": "## Large-N kernel PCA: matrix-free block width",
    "dense": "## Large-N kernel PCA: matrix-free against the stored kernel",
    "matrix_free": "## Large-N kernel PCA: matrix-free, N = 200 000",
    "million": "## Large-N kernel PCA: Nyström and random Fourier features, N = 1 000 000",
    "peers": "## Large-N kernel PCA: against scikit-learn's Nystroem / RBFSampler + PCA",
    "approx": "## Large-N kernel PCA: kernel approximation error against rank",
}
N_COMPONENTS = 10


def _data(n, d=64, random_state=0):
    """d = 64 data: scikit-learn's digits resampled with pixel noise (noisy_digits), or a Gaussian mixture of
    d features when d != 64."""
    from rkm.cli.bench import noisy_digits

    if d == 64:
        return noisy_digits(n, random_state)
    rng = np.random.default_rng(random_state)
    centres = rng.standard_normal((20, d)) * 2
    return centres[rng.integers(0, 20, n)] + rng.standard_normal((n, d))


def _gamma(X):
    """1 / the mean squared distance between the two halves of the first 20 000 rows (as `rkm bench` sets its
    kernel PCA bandwidth)."""
    return mean_distance_gamma(X[:20000])


def _case_data(case, kwargs):
    return (_data(kwargs["n"], kwargs.get("d", 64)),)


def run_case(case, **kwargs):
    """CASES[case](X, **kwargs) in a fresh process; its result dict with the peak memory the case added."""
    return run_measured_case(CASES, _case_data, case, kwargs)


# ----------------------------------------------------------------------------------------------------- cases


def case_width(X, n_threads, width, tol, **_):
    """The matrix-free Krylov solve with a given block width."""
    # The core's matrix-free Krylov eigensolver itself is what this case times, at block widths of its choice:
    # KernelPCA(kernel_storage="matrix_free") picks its block width and start block itself, with no public knob.
    from rkm import _core

    start = np.random.default_rng(0).standard_normal((X.shape[0], width))
    with pinned_threads(1):
        began = time.perf_counter()
        w, V, residuals, n_iter, converged, *_ = _core.kernel_top_eigsh(
            X, "rbf", _gamma(X), 3.0, 1.0, True, N_COMPONENTS, start, tol, None, n_threads
        )
        seconds = time.perf_counter() - began
    return dict(seconds=seconds, products=n_iter, residual=float(residuals.max()), converged=converged)


def kernel_pca(method, gamma, n_threads, random_state=0, rank=None, tol=None):
    """rkm's KernelPCA with the kernel held as `method` says: stored ("dense"), recomputed ("matrix_free"), or
    through a feature map of rank `rank` ("nystrom": uniform landmarks; "rff": orthogonal random features)."""
    import rkm

    common = {"gamma": gamma, "random_state": random_state, "n_threads": n_threads}
    if method == "nystrom":
        feature_map = rkm.features.Nystroem(rank, **common)
    elif method == "rff":
        feature_map = rkm.features.RandomFourierFeatures(rank, orthogonal=True, **common)
    else:
        return rkm.KernelPCA(N_COMPONENTS, kernel_storage=method, tol=tol, **common)
    return rkm.KernelPCA(N_COMPONENTS, feature_map=feature_map, tol=tol, n_threads=n_threads)


def case_fit(X, n_threads, method, tol=None, rank=None, **_):
    """A KernelPCA fit of X: time, eigenvalues, residuals."""
    model = kernel_pca(method, _gamma(X), n_threads, rank=rank, tol=tol)
    began = time.perf_counter()
    model.fit(X)
    seconds = time.perf_counter() - began
    return dict(
        seconds=seconds,
        eigenvalues=model.eigenvalues_,
        residual=float(model.eigen_residuals_.max()),
        products=model.n_iter_,
    )


def _exact_eigenvalues(X, n_threads):
    return kernel_pca("dense", _gamma(X), n_threads).fit(X).eigenvalues_


SEEDS = 5


def case_peer(X, n_threads, library, method, rank, exact=True, seeds=SEEDS, **_):
    """rkm's primal kernel PCA or scikit-learn's feature map + PCA at the same rank, for `seeds` random states:
    the median time, the peak memory of the fits, and with `exact` the mean and largest relative error of the
    top eigenvalues against the exact (dense) kernel PCA."""
    from sklearn.decomposition import PCA
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.pipeline import make_pipeline

    gamma = _gamma(X)

    def fit(seed):
        if library == "rkm":
            return kernel_pca(method, gamma, n_threads, random_state=seed, rank=rank).fit(X).eigenvalues_
        features = (
            Nystroem(gamma=gamma, n_components=rank, random_state=seed)
            if method == "nystrom"
            else RBFSampler(gamma=gamma, n_components=rank, random_state=seed)
        )
        pipeline = make_pipeline(features, PCA(N_COMPONENTS, random_state=seed)).fit(X)
        # PCA's variances are the centred kernel's eigenvalues over n - 1.
        return pipeline[-1].explained_variance_ * (X.shape[0] - 1)

    times, spectra = [], []
    for seed in range(seeds):
        began = time.perf_counter()
        spectra.append(fit(seed))
        times.append(time.perf_counter() - began)
    result = dict(seconds=float(np.median(times)), peak_bytes=added_peak())
    if not exact:
        return dict(result, error=float("nan"), worst=float("nan"))
    reference = _exact_eigenvalues(X, n_threads)
    errors = [float(np.max(np.abs(values - reference)) / reference[0]) for values in spectra]
    return dict(result, error=float(np.mean(errors)), worst=float(np.max(errors)))


def case_approx(X, n_threads, method, rank, **_):
    """Over SEEDS random states: the mean ||K - Phi Phi^T||_F / ||K||_F of a feature map, and the mean largest
    relative error of the top eigenvalues of its primal kernel PCA against the exact kernel PCA."""
    import rkm
    from rkm import features

    gamma = _gamma(X)
    K = rkm.kernels.kernel_matrix(X, gamma=gamma, n_threads=n_threads)
    K_norm = np.linalg.norm(K)
    exact = _exact_eigenvalues(X, n_threads)
    kernel_errors, eigen_errors = [], []
    for seed in range(SEEDS):
        if method == "nystrom":
            fm = features.Nystroem(rank, gamma=gamma, random_state=seed, n_threads=n_threads)
        else:
            fm = features.RandomFourierFeatures(
                rank, gamma=gamma, orthogonal=method == "orf", random_state=seed, n_threads=n_threads
            )
        Phi = fm.fit_transform(X)
        kernel_errors.append(float(np.linalg.norm(K - Phi @ Phi.T) / K_norm))
        eigenvalues = _primal_eigenvalues(Phi, N_COMPONENTS)
        eigen_errors.append(float(np.max(np.abs(eigenvalues - exact)) / exact[0]))
    return dict(kernel_error=float(np.mean(kernel_errors)), eigen_error=float(np.mean(eigen_errors)))


def _primal_eigenvalues(Phi, n_components):
    """The top eigenvalues of the centred scatter matrix (Phi - mean)^T (Phi - mean) of the features: those of the
    primal kernel PCA on them (eta = 1), the nonzero eigenvalues of the centred approximate kernel matrix."""
    centred = Phi - Phi.mean(axis=0)
    return np.linalg.eigvalsh(centred.T @ centred)[::-1][:n_components]


CASES = dict(width=case_width, fit=case_fit, peer=case_peer, approx=case_approx)


# ----------------------------------------------------------------------------------------------------- parts


def part_width(args, log):
    rows = []
    for tol in (1e-6, 1e-10):
        for width in (8, 16, 32, 64):
            r = run_case("width", n=20000, n_threads=args.n_threads, width=width, tol=tol)
            log(f"width {width} tol {tol:g}: {r}")
            rows.append(
                [
                    f"{tol:g}",
                    str(width),
                    str(r["products"]),
                    str(r["products"] * width),
                    f"{r['seconds']:.2f}",
                    f"{r['seconds'] / r['products']:.3f}",
                    f"{r['residual']:.1e}",
                ]
            )
    return (
        "Matrix-free top-10 of the centred RBF kernel of N = 20000 noisy digits (d = 64), by block width b "
        "(`_core.kernel_top_eigsh` from a random start block; KernelPCA starts from a small Nyström fit instead, "
        "which saves 2-3 products). Each product recomputes the kernel, so its cost is a fixed part (the kernel) "
        "plus a part per column; wider blocks need fewer products.\n\n"
        + markdown_table(["tol", "b", "products", "columns", "seconds", "s / product", "max residual"], rows)
    )


def part_dense(args, log):
    rows, eigenvalues = [], {}
    for method in ("dense", "matrix_free"):
        r = run_case("fit", n=30000, n_threads=args.n_threads, method=method)
        log(f"{method} N=30000: {r}")
        eigenvalues[method] = r["eigenvalues"]
        rows.append([method, f"{r['seconds']:.1f}", gib(r["peak_bytes"]), str(r["products"]), f"{r['residual']:.1e}"])
    difference = np.max(np.abs(eigenvalues["dense"] - eigenvalues["matrix_free"]) / eigenvalues["dense"])
    return (
        f"KernelPCA(10, kernel_storage=...) on N = 30000 noisy digits (d = 64, float64, default tol 1e-10). Largest relative "
        f"difference between the two methods' eigenvalues: {difference:.1e}.\n\n"
        + markdown_table(["method", "fit s", "peak memory GiB", "block products", "max residual"], rows)
    )


def part_matrix_free(args, log):
    r = run_case("fit", n=args.matrix_free_n, n_threads=args.n_threads, method="matrix_free", tol=1e-6)
    log(f"matrix_free N={args.matrix_free_n}: {r}")
    row = [
        str(args.matrix_free_n),
        f"{r['seconds']:.0f}",
        f"{r['seconds'] / 60:.1f}",
        gib(r["peak_bytes"]),
        str(r["products"]),
        f"{r['residual']:.1e}",
    ]
    return (
        f'KernelPCA(10, kernel_storage="matrix_free", tol=1e-6) on N = {args.matrix_free_n} noisy digits (d = 64, '
        "float64). The stored kernel would take "
        f"{args.matrix_free_n**2 * 8 / 2**30:.0f} GiB. Peak memory is what the fit added to the process.\n\n"
        + markdown_table(["N", "fit s", "fit min", "peak memory GiB", "block products", "max residual"], [row])
    )


def part_million(args, log):
    rows = []
    for method in ("nystrom", "rff"):
        r = run_case("fit", n=args.million_n, n_threads=args.n_threads, method=method, rank=2000)
        log(f"{method} N={args.million_n}: {r}")
        rows.append([method, "2000", f"{r['seconds']:.1f}", gib(r["peak_bytes"])])
    return (
        f"KernelPCA(10, feature_map=Nystroem(2000) or RandomFourierFeatures(2000, orthogonal=True)) on N = {args.million_n} noisy digits (d = 64, float64; the data take "
        f"{args.million_n * 64 * 8 / 2**30:.2f} GiB).\n\n"
        + markdown_table(["method", "m", "fit s", "peak memory GiB"], rows)
    )


def part_peers(args, log):
    rows = []
    for n, ranks in ((20000, (500, 2000)), (args.peers_large_n, (2000,))):
        for method in ("nystrom", "rff"):
            for rank in ranks:
                r = {}
                for library in ("rkm", "sklearn"):
                    r[library] = run_case(
                        "peer",
                        n=n,
                        n_threads=args.n_threads,
                        library=library,
                        method=method,
                        rank=rank,
                        exact=n <= 20000,
                        seeds=SEEDS if n <= 20000 else 1,
                    )
                    log(f"{library} {method} N={n} m={rank}: {r[library]}")
                rows.append(
                    [
                        str(n),
                        method,
                        str(rank),
                        f"{r['rkm']['seconds']:.2f}",
                        f"{r['sklearn']['seconds']:.2f}",
                        f"{r['sklearn']['seconds'] / r['rkm']['seconds']:.2f}x",
                        gib(r["rkm"]["peak_bytes"]),
                        gib(r["sklearn"]["peak_bytes"]),
                        f"{r['rkm']['error']:.1e} / {r['rkm']['worst']:.1e}",
                        f"{r['sklearn']['error']:.1e} / {r['sklearn']['worst']:.1e}",
                    ]
                )
    return (
        "Top-10 kernel PCA through an explicit feature map of rank m: rkm's KernelPCA(feature_map=Nystroem(m) | RandomFourierFeatures(m, orthogonal=True)) "
        "against scikit-learn's make_pipeline(Nystroem | RBFSampler, PCA(10)), same gamma and rank (rkm's rff uses "
        f"orthogonal random features), each with random_state 0 to {SEEDS - 1}. Times: median fit. Eigenvalue "
        "error: largest |lambda - lambda_exact| / lambda_exact,1 against the exact kernel PCA (rkm's dense solver), "
        f"mean / worst over the {SEEDS} seeds (nan where N is too large to run the exact one; there one seed is "
        "timed). Peak memory: what the "
        f"fits added to the process.\n\n"
        + markdown_table(
            [
                "N",
                "map",
                "m",
                "rkm s",
                "sklearn s",
                "speed-up",
                "rkm GiB",
                "sklearn GiB",
                "rkm eig. error",
                "sklearn eig. error",
            ],
            rows,
        )
    )


def part_approx(args, log):
    rows = []
    for method in ("nystrom", "rff", "orf"):
        for rank in (250, 500, 1000, 2000):
            r = run_case("approx", n=5000, n_threads=args.n_threads, method=method, rank=rank)
            log(f"{method} m={rank}: {r}")
            rows.append([method, str(rank), f"{r['kernel_error']:.2e}", f"{r['eigen_error']:.2e}"])
    return (
        f"N = 5000 noisy digits, RBF, means over random_state 0 to {SEEDS - 1}: relative Frobenius error "
        "||K - Phi Phi^T|| / ||K|| of the feature map, and the largest relative error of the top-10 eigenvalues of "
        "the primal kernel PCA on those features against the exact dense fit. "
        "nystrom: uniform landmarks; rff: plain random Fourier features; orf: orthogonal random features (what "
        "the large-N user guide's RandomFourierFeatures(orthogonal=True) example uses for rbf).\n\n"
        + markdown_table(["map", "m", "kernel error", "eigenvalue error"], rows)
    )


def main():
    parser = script_parser(__doc__, PARTS, option="--only")
    parser.add_argument("--matrix-free-n", type=int, default=200_000)
    parser.add_argument("--million-n", type=int, default=1_000_000)
    parser.add_argument("--peers-large-n", type=int, default=100_000)
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.n_threads)  # inherited by the case processes

    parts = dict(
        width=part_width,
        dense=part_dense,
        matrix_free=part_matrix_free,
        million=part_million,
        peers=part_peers,
        approx=part_approx,
    )
    for name in args.only:
        section = parts[name](args, log)
        write_script_section(args.output, HEADINGS[name], "bench/large_n.py", args.n_threads, section)


if __name__ == "__main__":
    main()
