"""Large N for the models with a primal form: the LS-SVM and the multi-view RKM on a million rows, and
``partial_fit`` over batches against the one-shot fit.

Writes (or replaces) the sections "Large N: ..." of bench/RESULTS.md. Every fit runs in a fresh process, which
generates its own seeded data, so that its peak resident memory (VmHWM, above what the data took) is its own.
Threads: --n-threads (default 2) for OpenMP and BLAS alike.

- lssvm: ``LSSVMRegressor(feature_map=Nystroem(2000))`` on N = 1 000 000 rows of Friedman's first function with
  16 features (5 of them relevant, noise 1), its test MSE against the noise-free function on 20 000 new points;
  and on a subset of 20 000 rows, where the exact dual (Cholesky) fits too, the test MSE of both.
- multiview: ``MultiViewRKM(10, kernel=(RandomFourierFeatures(2000), "linear"))`` on the same rows: view 0 the
  16 inputs, view 1 the target; the test MSE of the target inferred from the inputs (eq. 15).
- partial_fit: the LS-SVM, KernelPCA (``Nystroem(2000)``) and the multi-view model fitted on the same N rows by
  ``partial_fit`` over 100 batches of N / 100 rows, against one ``fit``.

    python bench/large_n_models.py                 # everything (about 15 minutes on 2 cores)
    python bench/large_n_models.py --part lssvm
"""

import os
import time

import numpy as np
from _common import RESULTS, gib, log, run_measured_case, script_parser, write_script_section

from rkm.cli.report import markdown_table

PARTS = ("lssvm", "multiview", "partial_fit")
HEADINGS = {
    "lssvm": "## Large N: LS-SVM regression, N = 1 000 000",
    "multiview": "## Large N: multi-view RKM in the primal, N = 1 000 000",
    "partial_fit": "## Large N: partial_fit over batches against one fit",
}
N_FEATURES = 16
# Friedman's first function: gamma about 1 / (the mean squared distance of uniform inputs in 16 dimensions, 2.7)
# / 4, and lam chosen for the exact dual on the 20 000-row subset from {1e-1, 1e-2, 1e-3} x gamma {0.1, 0.3, 1}
# by its test MSE (0.179 at gamma 0.1, lam 1e-3; the next best 0.262).
GAMMA, LAM = 0.1, 1e-3
RANK = 2000
N_TEST, SUBSET = 20_000, 20_000
BATCHES = 100


def _data(n, random_state=0, noise=1.0):
    from sklearn.datasets import make_friedman1

    return make_friedman1(n, n_features=N_FEATURES, noise=noise, random_state=random_state)


def _test_data():
    return _data(N_TEST, random_state=1, noise=0.0)


def _model(name, n_threads, rank, exact=False):
    import rkm
    from rkm.features import Nystroem, RandomFourierFeatures

    if name == "lssvm":
        if exact:
            return rkm.LSSVMRegressor(gamma=GAMMA, lam=LAM, solver="cholesky", n_threads=n_threads)
        feature_map = Nystroem(rank, gamma=GAMMA, random_state=0, n_threads=n_threads)
        return rkm.LSSVMRegressor(feature_map=feature_map, lam=LAM, n_threads=n_threads)
    if name == "kpca":
        feature_map = Nystroem(rank, gamma=GAMMA, random_state=0, n_threads=n_threads)
        return rkm.KernelPCA(10, feature_map=feature_map, n_threads=n_threads)
    feature_map = RandomFourierFeatures(rank, gamma=GAMMA, orthogonal=True, random_state=0, n_threads=n_threads)
    return rkm.MultiViewRKM(10, kernel=(feature_map, "linear"), random_state=0, n_threads=n_threads)


def _arguments(name, X, y):
    """What fit and partial_fit take: (X, y) for the LS-SVM, (X,) for kernel PCA, ([X, y],) for the views."""
    if name == "lssvm":
        return X, y
    if name == "kpca":
        return (X,)
    return ([X, y[:, None]],)


def _test_mse(name, model):
    X_test, f_test = _test_data()
    if name == "lssvm":
        predicted = model.predict(X_test)
    elif name == "multiview":
        predicted = model.predict_view([X_test, None], missing=1)[:, 0]
    else:
        return float("nan")
    return float(np.mean((predicted - f_test) ** 2))


def _case_data(case, kwargs):
    return _data(kwargs["n"])


def run_case(case, **kwargs):
    """CASES[case](X, y, **kwargs) in a fresh process; its result dict with the peak memory the case added."""
    return run_measured_case(CASES, _case_data, case, kwargs)


def case_fit(X, y, name, n_threads, rank, exact=False, **_):
    """One fit (reading a solved attribute, which a deferred solve would need): seconds and test MSE."""
    model = _model(name, n_threads, rank, exact)
    began = time.perf_counter()
    model.fit(*_arguments(name, X, y))
    _ = model.eigenvalues_ if name != "lssvm" else model.intercept_
    seconds = time.perf_counter() - began
    return dict(seconds=seconds, mse=_test_mse(name, model), eigenvalues=getattr(model, "eigenvalues_", None))


def case_partial(X, y, name, n_threads, rank, **_):
    """partial_fit over BATCHES batches of the rows in order, then the deferred solve: seconds and test MSE."""
    model = _model(name, n_threads, rank)
    arguments = _arguments(name, X, y)
    began = time.perf_counter()
    for rows in np.array_split(np.arange(X.shape[0]), BATCHES):
        batch = [
            [view[rows] for view in argument] if isinstance(argument, list) else argument[rows]
            for argument in arguments
        ]
        model.partial_fit(*batch)
    _ = model.eigenvalues_ if name != "lssvm" else model.intercept_
    seconds = time.perf_counter() - began
    return dict(seconds=seconds, mse=_test_mse(name, model), eigenvalues=getattr(model, "eigenvalues_", None))


CASES = dict(fit=case_fit, partial=case_partial)


def part_lssvm(args, log):
    full = run_case("fit", n=args.n, n_threads=args.n_threads, rank=args.rank, name="lssvm")
    log(f"lssvm Nystroem N={args.n}: {full}")
    exact = run_case("fit", n=SUBSET, n_threads=args.n_threads, rank=args.rank, name="lssvm", exact=True)
    log(f"lssvm exact N={SUBSET}: {exact}")
    subset = run_case("fit", n=SUBSET, n_threads=args.n_threads, rank=args.rank, name="lssvm")
    log(f"lssvm Nystroem N={SUBSET}: {subset}")
    rows = [
        [
            f"Nystroem({args.rank})",
            str(args.n),
            f"{full['seconds']:.1f}",
            gib(full["peak_bytes"]),
            f"{full['mse']:.4f}",
            "-",
        ],
        [
            "exact dual (Cholesky)",
            str(SUBSET),
            f"{exact['seconds']:.1f}",
            gib(exact["peak_bytes"]),
            f"{exact['mse']:.4f}",
            "1.000",
        ],
        [
            f"Nystroem({args.rank})",
            str(SUBSET),
            f"{subset['seconds']:.1f}",
            gib(subset["peak_bytes"]),
            f"{subset['mse']:.4f}",
            f"{subset['mse'] / exact['mse']:.3f}",
        ],
    ]
    return (
        f"LSSVMRegressor(feature_map=Nystroem({args.rank}, gamma={GAMMA}), lam={LAM}) on make_friedman1(N, n_features="
        f"{N_FEATURES}, noise=1.0) (float64; the data take {args.n * N_FEATURES * 8 / 2**30:.2f} GiB, not counted in "
        f"the peak); test MSE against the noise-free function on {N_TEST} new points. The first {SUBSET} rows are the "
        "subset where the exact dual (solver='cholesky', same gamma and lam) fits too: the Nyström model's test MSE "
        "there, relative to the exact one's, is the last column.\n\n"
        + markdown_table(["model", "N", "fit s", "peak memory GiB", "test MSE", "vs exact"], rows)
    )


def part_multiview(args, log):
    r = run_case("fit", n=args.n, n_threads=args.n_threads, rank=args.rank, name="multiview")
    log(f"multiview N={args.n}: {r}")
    row = [str(args.n), f"{args.rank} + 1", f"{r['seconds']:.1f}", gib(r["peak_bytes"]), f"{r['mse']:.4f}"]
    return (
        f'MultiViewRKM(10, kernel=(RandomFourierFeatures({args.rank}, gamma={GAMMA}, orthogonal=True), "linear")) on the '
        f"rows of the LS-SVM section: view 0 the {N_FEATURES} inputs, view 1 the target (solver 'auto': the primal, "
        "streamed in two passes over blocks of rows: the covariance of the features, then H). Test MSE: the "
        "target inferred from the inputs alone (predict_view, eq. 15) against the noise-free function.\n\n"
        + markdown_table(["N", "features d", "fit s", "peak memory GiB", "test MSE of the inferred view"], [row])
    )


def part_partial_fit(args, log):
    rows = []
    for name, label in (
        ("lssvm", f"LSSVMRegressor, Nystroem({args.rank})"),
        ("kpca", f"KernelPCA(10), Nystroem({args.rank})"),
        ("multiview", f"MultiViewRKM(10), RFF({args.rank}) + linear"),
    ):
        one = run_case("fit", n=args.n, n_threads=args.n_threads, rank=args.rank, name=name)
        log(f"{name} fit: {one}")
        streamed = run_case("partial", n=args.n, n_threads=args.n_threads, rank=args.rank, name=name)
        log(f"{name} partial_fit: {streamed}")
        difference = "-"
        if one["eigenvalues"] is not None:
            difference = f"{np.max(np.abs(streamed['eigenvalues'] - one['eigenvalues']) / one['eigenvalues']):.1e}"
        rows.append(
            [
                label,
                f"{one['seconds']:.1f}",
                f"{streamed['seconds']:.1f}",
                f"{streamed['seconds'] / one['seconds']:.2f}x",
                gib(one["peak_bytes"]),
                gib(streamed["peak_bytes"]),
                difference if name != "lssvm" else f"{streamed['mse']:.4f} / {one['mse']:.4f}",
            ]
        )
    return (
        f"The same N = {args.n} rows fitted once by fit and by partial_fit over {BATCHES} batches of {args.n // BATCHES} "
        "rows (in order), each ending with the solve (a fitted attribute read). The Nyström landmarks of a "
        "partial_fit come from its first batch, those of fit from all rows, so the models differ by that draw; the "
        "last column compares them: the eigenvalues' largest relative difference, or the LS-SVM's test MSE "
        "(partial_fit / fit). KernelPCA's fit also computes the hidden features H_ of every row (a second pass), "
        "which partial_fit keeps for its reservoir of 2000 rows only.\n\n"
        + markdown_table(
            ["model", "fit s", "partial_fit s", "ratio", "fit GiB", "partial_fit GiB", "eigenvalues / test MSE"], rows
        )
    )


def main():
    parser = script_parser(__doc__, PARTS)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument(
        "--rank", type=int, default=RANK, help="landmarks and random features (smaller for a smoke run)"
    )
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.n_threads)  # inherited by the case processes
    parts = dict(lssvm=part_lssvm, multiview=part_multiview, partial_fit=part_partial_fit)
    for name in args.part:
        section = parts[name](args, log)
        write_script_section(args.output, HEADINGS[name], "bench/large_n_models.py", args.n_threads, section)


if __name__ == "__main__":
    main()
