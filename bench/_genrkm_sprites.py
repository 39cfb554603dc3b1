"""Part of bench/genrkm.py: section 5 "Disentanglement" of Pandey, Schreurs & Suykens (2021) on rendered sprites.

The paper's set-up (section 5, Fig. 5, Table 2, Table 4's Dsprites row): ellipses ("ovals") and hearts at the
32 x 32 dSprites positions, N_subset = 1024 training images, s = 2 and s = 10 components, one view (the image).
dSprites itself cannot be downloaded here, so the images come from ``rkm.datasets.render_sprites`` (the dSprites
grid rendered offline, 64 x 64 binary). The factors the paper leaves free are fixed: scale 1 (the largest dSprites
scale, ``SPRITE_FACTORS["scale"][-1]``) and orientation 0. The 2048 grid points (2 shapes x 32 x 32 positions) are
rendered and 1024 of them drawn without replacement (seeded), so the training set holds about half of each shape's
positions.

Model: ``rkm.GenRKM(s, kernel="rbf", gamma=...)`` with the image as its only view. Table 4 gives no bandwidth for
Dsprites; gamma = 1 / median squared distance between distinct training images (the median rule), and the
``sensitivity`` study below refits with 1/4 to 4 times that gamma.

What is reported (``run`` returns the records, the markdown body of the subsection and the PNG written):

- (a) the Pearson correlation of each component with the x and y positions (Fig. 5: the components trace y and x);
- (b) traversals along components 0 and 1 from the training ellipse and the training heart nearest the centre
  (Fig. 5 rows 1-4), each component walked over its training range with the other latents held at the start, and
  decoded by the kernel smoother (eq. 8, n_r = 4); each frame is summarized by the factors of its nearest training
  image (position reached, shape kept);
- (c) DCI with Lasso and random forest regressors (``rkm.metrics.dci(..., estimator="lasso" |
  "random_forest_regressor")``, Eastwood & Williams' qedr set-up that the paper cites) on the 1024 training latents
  against the factors (x, y), for s = 2 and s = 10, beside Table 2's Gen-RKM values; ``dci`` holds out a third of
  the 1024 latents to measure informativeness (the normalized RMSE, lower is better);
- (d) the scatter of the two latents of s = 2 coloured by x and by y, with the traversal paths (Fig. 5's first
  column), in the same PNG as the traversals.

The full run repeats the fit and scores over 5 draws of the 1024 training images (mean and standard deviation)
and refits at 5 bandwidths; ``quick`` keeps one draw and the median-rule bandwidth.

Run it alone (prints the markdown and writes the PNG under bench/figures/):

    python bench/_genrkm_sprites.py [--quick] [--n-threads 2]
"""

import argparse
import time

import numpy as np
from _common import FIGURES, log, pinned_threads, save_figure

import rkm
from rkm import metrics
from rkm.cli.report import markdown_table
from rkm.datasets import SPRITE_FACTORS, render_sprites

N_TRAIN = 1024  # Table 4, Dsprites: N_subset
SHAPES = {"ellipse": 2.0, "heart": 3.0}  # the dSprites shape values of the paper's "oval" and heart
SCALE = float(SPRITE_FACTORS["scale"][-1])  # 1.0, the largest dSprites scale
ORIENTATION = 0.0
COMPONENTS = (2, 10)  # Table 2's h_dim
REGRESSORS = {"lasso": "Lasso", "random_forest_regressor": "random forest"}
# Table 2, DSprites, Gen-RKM: (disentanglement, completeness, informativeness) per s and regressor.
PAPER_TABLE2 = {
    10: {"lasso": (0.30, 0.10, 0.87), "random_forest_regressor": (0.12, 0.10, 0.28)},
    2: {"lasso": (0.72, 0.71, 0.64), "random_forest_regressor": (0.05, 0.19, 0.03)},
}
N_FRAMES = 10  # frames per traversal row
N_NEIGHBORS = 4  # the smoother's n_r (Table 4 gives none for Dsprites; MNIST's 4)
N_DRAWS = 5  # draws of the 1024 training images in the full run
GAMMA_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)  # multiples of the median-rule gamma in the full run
X_COLUMN, Y_COLUMN, SHAPE_COLUMN = 3, 4, 0  # columns of the dSprites factor rows
FIGURE_NAME = "genrkm_sprites.png"


# ------------------------------------------------------------------------------------------------------- data


def sprite_grid():
    """The 2048 factor rows (shape, scale, orientation, pos_x, pos_y) of ellipses and hearts at scale 1,
    orientation 0 and every one of the 32 x 32 positions."""
    x, y = np.meshgrid(SPRITE_FACTORS["pos_x"], SPRITE_FACTORS["pos_y"], indexing="ij")
    n = x.size
    blocks = [
        np.column_stack([np.full(n, shape), np.full(n, SCALE), np.full(n, ORIENTATION), x.ravel(), y.ravel()])
        for shape in SHAPES.values()
    ]
    return np.vstack(blocks)


def training_set(seed):
    """(images (1024, 4096) float64, factors (1024, 5)): 1024 of the 2048 grid points drawn without replacement."""
    grid = sprite_grid()
    rows = np.sort(np.random.default_rng(seed).choice(len(grid), N_TRAIN, replace=False))
    factors = grid[rows]
    images = render_sprites(factors, dtype=np.float64).reshape(N_TRAIN, -1)
    return images, factors


def squared_distances(A, B):
    """Squared Euclidean distances between the rows of A and B (exact for the binary images: integer counts)."""
    return np.maximum(np.sum(A**2, axis=1)[:, None] + np.sum(B**2, axis=1)[None, :] - 2.0 * A @ B.T, 0.0)


def median_gamma(X):
    """1 / the median squared distance between distinct training images (the median rule)."""
    distances = squared_distances(X, X)
    return 1.0 / float(np.median(distances[np.triu_indices(len(X), 1)]))


# ------------------------------------------------------------------------------------------------------ model


def fit(X, n_components, gamma, n_threads):
    """Gen-RKM with the images as its only view (rbf kernel), seeded."""
    model = rkm.GenRKM(
        n_components, kernel="rbf", gamma=gamma, n_neighbors=N_NEIGHBORS, n_threads=n_threads, random_state=0
    )
    return model.fit([X])


def correlation_ratio(h, values):
    """eta^2: the share of the variance of ``h`` explained by the mean of ``h`` at each value of a discrete factor
    (1: h is a function of the factor alone, monotone or not; 0: its mean does not depend on the factor)."""
    levels, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=h) / counts
    return float(np.sum(counts * (means - h.mean()) ** 2) / np.sum((h - h.mean()) ** 2))


def correlations(H, factors):
    """Pearson r of every component (column of H) with x, y and the shape, and the correlation ratios eta^2:
    {"x": [...], "y": [...], "shape": [...], "eta2_x": [...], "eta2_y": [...], "eta2_shape": [...]}."""
    out = {}
    for name, column in (("x", X_COLUMN), ("y", Y_COLUMN), ("shape", SHAPE_COLUMN)):
        out[name] = [float(np.corrcoef(H[:, i], factors[:, column])[0, 1]) for i in range(H.shape[1])]
        out[f"eta2_{name}"] = [correlation_ratio(H[:, i], factors[:, column]) for i in range(H.shape[1])]
    return out


def dci_scores(H, factors, seed):
    """{regressor: (D, C, I)} of the latents against the two position factors, and the seconds of each."""
    out, seconds = {}, {}
    for estimator in REGRESSORS:
        start = time.perf_counter()
        scores = metrics.dci(H, factors[:, [X_COLUMN, Y_COLUMN]], estimator=estimator, random_state=seed)
        seconds[estimator] = time.perf_counter() - start
        out[estimator] = [float(v) for v in scores]
    return out, seconds


def start_index(factors, shape):
    """The training sprite of ``shape`` nearest the centre (0.5, 0.5) of the frame."""
    rows = np.flatnonzero(factors[:, SHAPE_COLUMN] == SHAPES[shape])
    offsets = factors[rows][:, [X_COLUMN, Y_COLUMN]] - 0.5
    return int(rows[np.argmin(np.sum(offsets**2, axis=1))])


def traversals(model, X, factors):
    """Fig. 5 rows: from the central ellipse and heart, walk components 0 and 1 over their training range.

    Returns {(shape, component): {"latents", "images", "nearest_x", "nearest_y", "shape_kept"}}: the latents and
    decoded images of the ``N_FRAMES`` frames, the position of each frame's nearest training image and the fraction of
    frames whose nearest training image has the start's shape.
    """
    H = model.H_
    out = {}
    for shape in SHAPES:
        start = start_index(factors, shape)
        for component in (0, 1):
            values = np.linspace(H[:, component].min(), H[:, component].max(), N_FRAMES) - H[start, component]
            (images,) = model.traverse(component, values, start=H[start])
            latents = np.repeat(H[start][None, :], N_FRAMES, axis=0)
            latents[:, component] += values
            nearest = np.argmin(squared_distances(images, X), axis=1)
            out[shape, component] = {
                "start": start,
                "latents": latents,
                "images": images,
                "nearest_x": factors[nearest, X_COLUMN].tolist(),
                "nearest_y": factors[nearest, Y_COLUMN].tolist(),
                "shape_kept": float(np.mean(factors[nearest, SHAPE_COLUMN] == SHAPES[shape])),
            }
    return out


def evaluate(X, factors, gamma, n_threads, seed, with_traversals=False):
    """Fit s = 2 and s = 10 and score them: {s: {"correlations", "dci", "seconds", ...}} (and the models)."""
    results, models = {}, {}
    for s in COMPONENTS:
        start = time.perf_counter()
        model = fit(X, s, gamma, n_threads)
        fit_seconds = time.perf_counter() - start
        dci, dci_seconds = dci_scores(model.H_, factors, seed)
        results[s] = {
            "correlations": correlations(model.H_, factors),
            "dci": dci,
            "eigenvalues": model.eigenvalues_.tolist(),
            "fit_seconds": fit_seconds,
            "dci_seconds": dci_seconds,
        }
        if with_traversals:
            walks = traversals(model, X, factors)
            results[s]["traversals"] = {
                f"{shape} component {c}": {k: v for k, v in walk.items() if k not in ("latents", "images")}
                for (shape, c), walk in walks.items()
            }
            models[s] = (model, walks)
    return results, models


# ----------------------------------------------------------------------------------------------------- figure


def figure(model, walks, factors, path):
    """One PNG: the s = 2 latents coloured by x and by y with the traversal paths (Fig. 5's first column), and the
    traversal rows (ellipse and heart, components 0 and 1) of s = 2 and of s = 10."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(s, shape, c) for s in COMPONENTS for shape in SHAPES for c in (0, 1)]
    fig = plt.figure(figsize=(15, 8.5))
    grid = fig.add_gridspec(2, 2, width_ratios=(1.0, 1.45))
    H = model.H_
    for k, (name, column) in enumerate((("x", X_COLUMN), ("y", Y_COLUMN))):
        axis = fig.add_subplot(grid[k, 0])
        points = axis.scatter(H[:, 0], H[:, 1], c=factors[:, column], s=5, cmap="viridis")
        for (shape, c), walk in walks[2].items():
            axis.plot(walk["latents"][:, 0], walk["latents"][:, 1], "-", color="tab:green" if c else "tab:red", lw=1)
            axis.plot(*H[walk["start"], :2], "o", color="k", ms=4)
        axis.set_aspect("equal")
        axis.set_xlabel("component 0")
        axis.set_ylabel("component 1")
        axis.set_title(
            f"s = 2 latents coloured by {name} (dots: starts; walks of component 0 red, 1 green)", fontsize=9
        )
        fig.colorbar(points, ax=axis, fraction=0.05, label=name)
    # All traversal rows as one mosaic: 64 x 64 frames with a grey 2-pixel border.
    strips = []
    for s, shape, c in rows:
        frames = walks[s][shape, c]["images"].reshape(N_FRAMES, 64, 64)
        strips.append(np.concatenate([np.pad(f, 2, constant_values=0.5) for f in frames], axis=1))
    mosaic = np.concatenate(strips, axis=0)
    axis = fig.add_subplot(grid[:, 1])
    axis.imshow(mosaic, cmap="gray", vmin=0, vmax=1)
    axis.set_yticks(68 * np.arange(len(rows)) + 34)
    axis.set_yticklabels([f"s={s}, {shape}, comp. {c}" for s, shape, c in rows], fontsize=9)
    axis.set_xticks(68 * np.arange(N_FRAMES) + 34)
    axis.set_xticklabels([str(k) for k in range(N_FRAMES)], fontsize=8)
    axis.set_xlabel("frame (component walked from its training minimum to its maximum)")
    axis.set_title(
        "Traversals from the training ellipse / heart nearest the centre (kernel smoother, n_r = 4)", fontsize=9
    )
    return save_figure(fig, path, dpi=110)


# ----------------------------------------------------------------------------------------------------- report


def _mean_std(values):
    values = np.asarray(values, dtype=float)
    return float(values.mean()), float(values.std())


def _cell(mean, std, n):
    return f"{mean:.2f}" if n == 1 else f"{mean:.2f} ± {std:.2f}"


def markdown(records):
    """The subsection body: set-up, the four tables and the reading."""
    main = records["draws"][0]
    n_draws = len(records["draws"])
    gamma = records["gamma"]
    lines = [
        f"Set-up: {N_TRAIN} of the 2048 rendered sprites (ellipse and heart, scale {SCALE:g}, orientation "
        f"{ORIENTATION:g}, every one of the 32 x 32 positions), drawn without replacement; 64 x 64 binary images, one "
        f"view, rbf kernel with gamma = 1 / median squared distance between training images = {gamma:.3g} "
        f"(median {1 / gamma:.0f} differing pixels; Table 4 gives no bandwidth for Dsprites), n_r = {N_NEIGHBORS}. "
        + (
            f"Scores: mean ± standard deviation over {n_draws} draws of the training images (seeds "
            f"{records['seeds'][0]}-{records['seeds'][-1]}); traversals and plot of the first draw."
            if n_draws > 1
            else f"One draw of the training images (seed {records['seeds'][0]})."
        )
        + f" Fit of s = 2: {main['2']['fit_seconds']:.1f} s, s = 10: {main['10']['fit_seconds']:.1f} s.",
        "",
        "(a) Pearson correlation of each component with the positions, s = 2 (first draw; the s = 10 model's first "
        "two components are the same up to sign):",
        "",
    ]
    corr = main["2"]["correlations"]
    rows = [
        [f"component {i}", f"{corr['x'][i]:+.2f}", f"{corr['y'][i]:+.2f}", f"{corr['shape'][i]:+.2f}"] for i in (0, 1)
    ]
    lines += [markdown_table(["s = 2", "r with x", "r with y", "r with shape"], rows), ""]
    corr10 = main["10"]["correlations"]
    lines += [
        "Correlation ratio eta^2 (share of a component's variance explained by its mean at each value of the factor; "
        "1 for any function of that factor alone, monotone or not) of the s = 10 components (first draw):",
        "",
        markdown_table(
            ["eta^2", *(str(i) for i in range(10))],
            [[name, *(f"{v:.2f}" for v in corr10[f"eta2_{name}"])] for name in ("x", "y", "shape")],
        ),
        "",
    ]
    if n_draws > 1:
        best = [
            _mean_std([max(abs(d["2"]["correlations"][f][i]) for i in (0, 1)) for d in records["draws"]])
            for f in ("x", "y")
        ]
        lines += [
            f"Over the {n_draws} draws, the component most correlated with x has |r| = {best[0][0]:.2f} ± "
            f"{best[0][1]:.2f}, with y |r| = {best[1][0]:.2f} ± {best[1][1]:.2f}.",
            "",
        ]
    lines += [
        "(b) Traversals (first draw; PNG): each component walked over its training range from the training sprite "
        "nearest the centre, the other latents held; each frame described by its nearest training image "
        "(positions reached, first to last frame, and the fraction of frames whose nearest training image keeps "
        "the start's shape):",
        "",
    ]
    rows = []
    for s in COMPONENTS:
        for key, walk in main[str(s)]["traversals"].items():
            xs, ys = walk["nearest_x"], walk["nearest_y"]
            rows.append(
                [
                    str(s),
                    key,
                    f"{xs[0]:.2f} → {xs[-1]:.2f} ({min(xs):.2f}-{max(xs):.2f})",
                    f"{ys[0]:.2f} → {ys[-1]:.2f} ({min(ys):.2f}-{max(ys):.2f})",
                    f"{walk['shape_kept']:.1f}",
                ]
            )
    lines += [markdown_table(["s", "start, component", "x (range)", "y (range)", "shape kept"], rows), ""]
    lines += [
        "(c) DCI (Eastwood & Williams' regressors, `rkm.metrics.dci`) of the 1024 training latents against (x, y); "
        "informativeness is the test NRMSE on a third of them (lower is better). Paper: Table 2, DSprites, Gen-RKM.",
        "",
    ]
    rows = []
    for s in COMPONENTS:
        for estimator, label in REGRESSORS.items():
            ours = np.array([d[str(s)]["dci"][estimator] for d in records["draws"]])
            cells = [_cell(m, sd, n_draws) for m, sd in zip(ours.mean(axis=0), ours.std(axis=0))]
            paper = PAPER_TABLE2[s][estimator]
            rows.append([str(s), label, *cells, *(f"{v:.2f}" for v in paper)])
    header = ["s", "regressor", "D (ours)", "C (ours)", "I (ours)", "D (paper)", "C (paper)", "I (paper)"]
    lines += [markdown_table(header, rows), ""]
    if records.get("sensitivity"):
        lines += [
            "Bandwidth sensitivity (first draw): gamma as a multiple of the median-rule value; |r| of the component "
            "most correlated with x and with y for s = 2, and DCI (D / C / I).",
            "",
        ]
        rows = []
        for entry in records["sensitivity"]:
            corr = entry["2"]["correlations"]
            cells = [
                f"{entry['factor']:g}",
                f"{entry['gamma']:.3g}",
                f"{max(abs(v) for v in corr['x']):.2f}",
                f"{max(abs(v) for v in corr['y']):.2f}",
            ]
            for s in COMPONENTS:
                for estimator in REGRESSORS:
                    cells.append(" / ".join(f"{v:.2f}" for v in entry[str(s)]["dci"][estimator]))
            rows.append(cells)
        header = ["x gamma", "gamma", "|r| x", "|r| y"] + [
            f"s={s} {REGRESSORS[e]}" for s in COMPONENTS for e in REGRESSORS
        ]
        lines += [markdown_table(header, rows), ""]
    lines += ["Reading: " + reading(records)]
    return "\n".join(lines)


def _versus(ours, paper):
    """ "above", "below" or "close to" (within 0.05)."""
    return "close to" if abs(ours - paper) < 0.05 else ("above" if ours > paper else "below")


def reading(records):
    """A short reading of the numbers against the paper, from the records."""
    draws = records["draws"]
    main = draws[0]
    corr = main["2"]["correlations"]
    y_component = int(np.argmax(np.abs(corr["y"][:2])))
    x_component = 1 - y_component
    traces = (
        f"With s = 2 the two components trace the two positions, component {y_component} y (r = "
        f"{corr['y'][y_component]:+.2f}) and component {x_component} x (r = {corr['x'][x_component]:+.2f}), the "
        f"order of Fig. 5 (its first component is y, its second x); the cross-correlations are "
        f"{corr['x'][y_component]:+.2f} and {corr['y'][x_component]:+.2f}, and neither component carries the shape "
        f"(|r| ≤ {max(abs(v) for v in corr['shape'][:2]):.2f}). The map is not monotone, though (scatter): the "
        f"latents fill a disc, and the sprites at the frame's edges, which overlap fewer training sprites, fold back "
        f"from its rim towards its middle."
    )
    walks = main["2"]["traversals"]
    kept = {shape: np.mean([walks[f"{shape} component {c}"]["shape_kept"] for c in (0, 1)]) for shape in SHAPES}
    walks10 = main["10"]["traversals"]
    kept10 = {shape: np.mean([walks10[f"{shape} component {c}"]["shape_kept"] for c in (0, 1)]) for shape in SHAPES}
    walk_text = (
        f"Traversals (s = 2): component {y_component} moves the sprite along y and component {x_component} along "
        f"x, in jumps rather than steps and over part of the frame only (table (b)), since a straight walk through "
        f"the disc crosses the fold. The shape is kept in {kept['ellipse']:.0%} of the ellipse frames and "
        f"{kept['heart']:.0%} of the heart frames: the two latents hold the position only, so the smoother "
        f"averages the training sprites nearest that position whatever their shape, and Fig. 5's rows 3-4 (hearts "
        f"staying hearts) are not reproduced with both shapes in one model. With s = 10 and the other eight "
        f"latents held at the start, the walks move the sprite less and keep the shape in {kept10['ellipse']:.0%} "
        f"of the ellipse and {kept10['heart']:.0%} of the heart frames."
    )

    def mean(s, estimator):
        return np.mean([d[str(s)]["dci"][estimator] for d in draws], axis=0)

    corr10 = main["10"]["correlations"]
    single = sum(max(a, b) >= 0.8 for a, b in zip(corr10["eta2_x"], corr10["eta2_y"]))
    eta_shape = corr10["eta2_shape"]
    rest = max([max(a, b) for a, b in zip(corr10["eta2_x"], corr10["eta2_y"]) if max(a, b) < 0.8], default=0.0)
    lasso2, forest2 = mean(2, "lasso"), mean(2, "random_forest_regressor")
    lasso10, forest10 = mean(10, "lasso"), mean(10, "random_forest_regressor")
    spread_text = ""
    if len(draws) > 1:
        # The Lasso zeroes coefficients below alpha: its s = 2 D follows how much each component leaks the other factor.
        pairs = []
        for draw in draws:
            c = draw["2"]["correlations"]
            yc = int(np.argmax(np.abs(c["y"][:2])))
            pairs.append((draw["2"]["dci"]["lasso"][0], max(abs(c["x"][yc]), abs(c["y"][1 - yc]))))
        low, high = min(pairs), max(pairs)
        forest_d = [draw["2"]["dci"]["random_forest_regressor"][0] for draw in draws]
        spread_text = (
            f"Over the {len(draws)} draws the Lasso's s = 2 D ranges {low[0]:.2f}-{high[0]:.2f}: it follows the "
            f"cross-correlation of the components (largest |r| of a component with its other factor "
            f"{low[1]:.2f} in the draw scoring {low[0]:.2f}, {high[1]:.2f} in the draw scoring {high[0]:.2f}): the "
            f"leak gives the other component a Lasso coefficient that the penalty alpha = 0.02 zeroes when it is "
            f"small; the forest's D ranges {min(forest_d):.2f}-{max(forest_d):.2f}. "
        )
    paper = PAPER_TABLE2
    dci_text = (
        f"DCI: Table 2's Gen-RKM rows most likely come from the explicit (convolutional) feature maps (Table 3 "
        f"lists a Dsprites network with latent dimension 2/10, Table 4 five mini-batches, and section 5 says the "
        f"compared models share the encoder/decoder architecture), not from the rbf kernel used here (explicit maps "
        f"come with the PyTorch bridge), so the values need not agree. With the Lasso, s = 2 gives D "
        f"{lasso2[0]:.2f} and C {lasso2[1]:.2f}, "
        f"{_versus(lasso2[0], paper[2]['lasso'][0])} the paper's 0.72 and 0.71, and an error I {lasso2[2]:.2f} "
        f"({_versus(lasso2[2], paper[2]['lasso'][2])} its 0.64, lower is better; the fold above keeps a linear "
        f"model from going much lower). s = 10 gives D {lasso10[0]:.2f}, C {lasso10[1]:.2f}, I {lasso10[2]:.2f}, "
        f"against the paper's "
        f"0.30, 0.10, 0.87: here the eight further kernel PCA components are not noise but further functions of "
        f"the positions ({single} of the 10 are functions of x or of y alone, eta^2 ≥ 0.8; the others are explained "
        f"by neither alone, eta^2 ≤ {rest:.2f}, nor by the shape, eta^2 ≤ {max(eta_shape):.2f}), so they "
        f"{'lower' if lasso10[2] < lasso2[2] else 'do not lower'} the error, with D {_versus(lasso10[0], lasso2[0])} "
        f"and C {_versus(lasso10[1], lasso2[1])} s = 2's, where the paper calls its s = 10 components noisy (its "
        f"Lasso scores all worse than at s = 2). {spread_text}"
        f"With the random forest, s = 2 gives D {forest2[0]:.2f}, C {forest2[1]:.2f}, I {forest2[2]:.2f} (paper "
        f"0.05, 0.19, 0.03) and s = 10 D {forest10[0]:.2f}, C {forest10[1]:.2f}, I {forest10[2]:.2f} (paper 0.12, "
        f"0.10, 0.28). The paper's forest D of 0.05 at s = 2 sits oddly with its Lasso's 0.72 on the same latents "
        f"and with its Fig. 6 (the two factors well separated); its forest settings are not given (ours: qedr's 10 "
        f"trees, the depth per factor chosen on a validation quarter), so the forest columns are the least "
        f"comparable."
    )
    out = [traces, walk_text, dci_text]
    if records.get("sensitivity"):
        sensitivity = records["sensitivity"]
        lasso = [e["2"]["dci"]["lasso"][0] for e in sensitivity]
        forest = [e["2"]["dci"]["random_forest_regressor"][0] for e in sensitivity]
        rmin = min(min(max(abs(v) for v in e["2"]["correlations"][f]) for f in ("x", "y")) for e in sensitivity)
        falling = all(np.diff(lasso) <= 0) and all(np.diff(forest) <= 0)
        trend = ", falling as gamma grows (narrower kernels)" if falling else ""
        out.append(
            f"Bandwidth: from 1/4 to 4 times the median-rule gamma the s = 2 components keep tracing x and y (|r| ≥ "
            f"{rmin:.2f}); the s = 2 disentanglement ranges {min(lasso):.2f}-{max(lasso):.2f} with the Lasso and "
            f"{min(forest):.2f}-{max(forest):.2f} with the forest{trend}: the qualitative picture does not hinge on "
            f"the rule, the scores move by up to "
            f"{max(max(lasso) - min(lasso), max(forest) - min(forest)):.2f}."
        )
    return " ".join(out)


# -------------------------------------------------------------------------------------------------------- run


def _draw_record(results):
    return {str(s): r for s, r in results.items()}


def run(quick: bool, n_threads: int, seed: int = 0):
    """The sprites part: (records, markdown body of the subsection, [PNG paths])."""
    started = time.perf_counter()
    seeds = [seed] if quick else [seed + k for k in range(N_DRAWS)]
    records = {
        "setup": {
            "n_train": N_TRAIN,
            "shapes": SHAPES,
            "scale": SCALE,
            "orientation": ORIENTATION,
            "n_neighbors": N_NEIGHBORS,
            "gamma_rule": "1 / median squared distance between distinct training images (first draw)",
            "dci": "rkm.metrics.dci(H_, factors[:, (x, y)], estimator=lasso | random_forest_regressor, "
            "random_state=seed)",
        },
        "paper_table2": {str(s): v for s, v in PAPER_TABLE2.items()},
        "seeds": seeds,
        "quick": quick,
        "draws": [],
    }
    paths = []
    with pinned_threads(n_threads):
        X, factors = training_set(seeds[0])
        gamma = median_gamma(X)
        records["gamma"] = gamma
        for k, draw_seed in enumerate(seeds):
            if k:
                X, factors = training_set(draw_seed)
            results, models = evaluate(X, factors, gamma, n_threads, draw_seed, with_traversals=k == 0)
            records["draws"].append(_draw_record(results))
            summary = "; ".join(
                f"s={s} {REGRESSORS[e]} {np.round(results[s]['dci'][e], 2).tolist()}"
                for s in COMPONENTS
                for e in REGRESSORS
            )
            log(f"sprites draw {draw_seed}: {summary}")
            if k == 0:
                walks = {s: models[s][1] for s in COMPONENTS}
                first = (X, factors, models[2][0])
        X, factors, model2 = first
        FIGURES.mkdir(exist_ok=True)
        paths.append(figure(model2, walks, factors, FIGURES / FIGURE_NAME))
        if not quick:
            records["sensitivity"] = []
            for factor in GAMMA_FACTORS:
                results, _ = evaluate(X, factors, factor * gamma, n_threads, seeds[0])
                records["sensitivity"].append({"factor": factor, "gamma": factor * gamma, **_draw_record(results)})
                log(f"sprites gamma x {factor:g}: s=2 Lasso {np.round(results[2]['dci']['lasso'], 2).tolist()}")
    records["seconds"] = time.perf_counter() - started
    return records, markdown(records), paths


def main():
    parser = argparse.ArgumentParser(description="Gen-RKM sprites part (bench/genrkm.py) on its own")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n-threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    records, text, paths = run(args.quick, args.n_threads, args.seed)
    print(text)
    log(f"{records['seconds']:.0f} s; wrote {', '.join(str(p) for p in paths)}")


if __name__ == "__main__":
    main()
