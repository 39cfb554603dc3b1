"""Gen-RKM with explicit (neural) feature maps, rkm.torch (Pandey, Schreurs & Suykens 2021, section 5, Tables 1-4):
Gen-RKM against the VAE and beta-VAE with the same networks, optimiser, batches and epochs.

Parts, each writing one subsection of "Gen-RKM with neural feature maps (rkm.torch)" in bench/RESULTS.md and PNGs
in bench/figures/genrkm_torch_*:

- ``mnist`` (Table 1, Figs. 2, 4b, 8): the 5000-digit MNIST subset (``rkm.datasets.load_mnist_subset``, pixels in
  [0, 1]), an image view and a one-hot label view, ``rkm.torch.ExplicitGenRKM`` against ``rkm.torch.VAE`` for the
  latent sizes of ``MNIST_RUNS``. Scores: the Frechet distance (FID's formula) between 1000 generated images and
  the 5000 real ones in the feature space of a small CNN classifier trained here on the real digits
  (bench/_genrkm_torch_eval.py; FID proper needs Inception weights, which cannot be downloaded here), the same
  for 1000 reconstructions; label consistency of 3 draws of 300 generated pairs (a 5-NN classifier of the real
  digits, as bench/genrkm.py) with the distinct nearest training images and the classes generated.
- ``labels``: ``ExplicitGenRKM`` with its defaults on the MNIST subset (image and label views), at Table 3's
  learning rate and at 3e-3: label consistency with Table 4's 10 mixture components and with 30.
- ``fashion``: the same on the 1000 Fashion-MNIST images of ``rkm.datasets.load_fashion_mnist_subset``.
- ``sprites`` (Table 2): DCI with Lasso and random forest regressors of the latents of 1024 sprites, s = 2 and 10,
  explicit Gen-RKM, implicit Gen-RKM (``rkm.GenRKM`` as bench/genrkm.py sets it up), VAE and beta-VAE (beta = 3)
  (bench/_genrkm_torch_sprites.py).
- ``perf``: one explicit-model epoch on the MNIST subset: the networks against the RKM eigen step, and a Gen-RKM
  epoch against a VAE epoch with the same networks, batch by batch in one run.

Threads: torch and BLAS pinned to ``--n-threads`` (default 2). Epochs are set by the CPU budget (see the
constants and each subsection).

    python bench/genrkm_torch.py                  # all parts: about 35 min on 2 idle cores
    python bench/genrkm_torch.py --part mnist labels fashion sprites   # as run (perf: --part perf)
    python bench/genrkm_torch.py --part mnist
    python bench/genrkm_torch.py --quick          # small sizes, one epoch (a smoke test, a few minutes)
    python bench/genrkm_torch.py --part mnist --from-records   # rewrite a subsection's text from its records
"""

import json
import time
import warnings

import numpy as np
import torch
from _common import (
    FIGURES,
    RESULTS,
    _subsections,
    load_average,
    log,
    pinned_threads,
    script_parser,
    timed,
    write_bench_part,
    write_subsection,
)
from _genrkm_torch_eval import CLASSIFIER_EPOCHS, FeatureClassifier, frechet_distance, plot_models
from genrkm import CONSISTENCY_TARGET, DRAWS, KNN, N_GENERATED, _score_samples, markdown_table
from sklearn.mixture import GaussianMixture
from sklearn.neighbors import KNeighborsClassifier

from rkm.datasets import load_fashion_mnist_subset, load_mnist_subset
from rkm.exceptions import ConvergenceWarning
from rkm.torch import VAE, ExplicitGenRKM

PARTS = ("mnist", "labels", "fashion", "sprites", "perf")
HEADING = "## Gen-RKM with neural feature maps (rkm.torch)"
INTRODUCTION = (
    "The explicit Gen-RKM of Pandey, Schreurs & Suykens (2021), `rkm.torch.ExplicitGenRKM` (Algorithm 1: Table 3's "
    "convolutional feature and transposed-convolutional pre-image networks, the kernel PCA of every mini-batch, "
    "Adam on eq. 9), against `rkm.torch.VAE` and `rkm.torch.BetaVAE` built on exactly the same networks and trained "
    "with the same optimiser (Adam, learning rate 1e-3), batches and epochs (bench/genrkm_torch.py). Gen-RKM samples "
    "its latents from a Gaussian mixture (10 components) fitted to the training latents, the VAEs from N(0, I). "
    "Everything runs on the CPU of a 2-core machine (2 torch threads; on a busy machine 1 thread can be faster: "
    "with one other busy process 2 OpenMP threads ran an epoch 3.7 times slower than 1), so the epochs are far "
    "fewer than the paper's 'until convergence': each subsection gives them, and the comparisons are between "
    "models with the same training budget."
)
TITLES = {
    "mnist": "### MNIST (Table 1, Figs. 2, 4b, 8): Frechet distance, label consistency and diversity",
    "labels": "### MNIST: label consistency of the default model",
    "fashion": "### Fashion-MNIST: Frechet distance and label consistency",
    "sprites": "### Sprites (Table 2): DCI of explicit and implicit Gen-RKM, VAE and beta-VAE",
    "perf": "### Performance: one epoch, networks against the eigen step, Gen-RKM against VAE",
}
SEED = 0
N_FD = 1000  # generated (and reconstructed) images per Frechet distance
LEARNING_RATE = 1e-3  # Table 3 for MNIST and Fashion-MNIST
# Per latent size: batch and epochs. Table 4: MNIST in m = 50 mini-batches of the 5000 digits (batch 100); 40 epochs
# of 50 batches, 2000 Adam steps (1000 left label consistency at 0.70 with the mixture of Table 4). Table 1's s = 10 and 30
# (s = 50 left out for the CPU budget: an epoch of the 5000 digits takes 3 s at load 2 and over 100 s at load 8 on
# this shared 2-core machine).
MNIST_RUNS = {
    "full": [dict(s=s, batch=100, epochs=40) for s in (10, 30)],
    "quick": [dict(s=5, batch=32, epochs=1)],
}
MNIST_QUICK_SAMPLES = 600
FASHION_RUNS = {"full": [dict(s=10, batch=32, epochs=8)], "quick": [dict(s=5, batch=32, epochs=1)]}
PAPER_TABLE1 = {"Gen-RKM": {10: 89.825, 30: 130.497, 50: 131.696}, "VAE": {10: 250.0, 30: 234.749, 50: 205.282}}
MODELS = {"Gen-RKM (explicit)": ExplicitGenRKM, "VAE": VAE}
# Table 4's mixture has l = 10 components; with 10 classes in a 10-dimensional latent space its components straddle
# classes, so the consistency is also measured with this many components (sampling only, the training is the same).
WIDE_MIXTURE = 30
LABEL_LEARNING_RATES = (1e-3, 3e-3)
PERF = {"full": dict(s=10, batch=256, n_samples=5000), "quick": dict(s=5, batch=128, n_samples=512)}


def network_model(cls, s, batch, epochs, n_threads, label_views=(1,), **extra):
    """A model of rkm.torch with the bench's shared settings (no early stop: every model runs ``epochs``)."""
    return cls(
        s,
        label_views=label_views,
        learning_rate=LEARNING_RATE,
        batch_size=batch,
        max_epochs=epochs,
        n_iter_no_change=epochs + 1,
        n_threads=n_threads,
        random_state=SEED,
        verbose=1,  # one line per epoch in the log
        **extra,
    )


# ---------------------------------------------------------------------------------------------- generation parts


def _score_model(model, X, onehot, classifier, knn, real_features, n_fd):
    """Frechet distances of samples and reconstructions, reconstruction error, label consistency and diversity."""
    images, scores = model.sample(n_fd, random_state=SEED)
    rows = np.random.default_rng(SEED).choice(len(X), n_fd, replace=False)
    reconstructed = model.reconstruct([X[rows], onehot[rows]])
    consistency = _score_samples(model, X, knn)
    return {
        "consistency_wide_mixture": _wide_mixture_consistency(model, knn) if hasattr(model, "H_") else None,
        "fd_samples": frechet_distance(classifier.features(images), real_features),
        "fd_reconstructions": frechet_distance(classifier.features(reconstructed[0]), real_features),
        "reconstruction_mse": float(np.mean(np.sum((reconstructed[0] - X[rows]) ** 2, axis=1))),
        "label_from_image": float(np.mean(reconstructed[1].argmax(axis=1) == onehot[rows].argmax(axis=1))),
        "cnn_consistency": float(np.mean(classifier.predict(images) == scores.argmax(axis=1))),
        **{k: v for k, v in consistency.items() if not k.startswith("_")},
        "_panel": {
            "samples": images[:60],
            "labels": scores[:60].argmax(axis=1),
            "originals": X[rows[:10]],
            "reconstructions": reconstructed[0][:10],
        },
    }


def _wide_mixture_consistency(model, knn):
    """Mean label consistency of DRAWS draws of N_GENERATED pairs decoded from latents of a WIDE_MIXTURE-component
    Gaussian mixture fitted, as the model's own, to the scaled training latents."""
    mixture = GaussianMixture(WIDE_MIXTURE, covariance_type="full", random_state=SEED).fit(
        model.H_ * model.latent_scale_
    )
    scores = []
    for draw in range(DRAWS):
        mixture.random_state = SEED + draw
        images, labels = model.decode(mixture.sample(N_GENERATED)[0] / model.latent_scale_)
        scores.append(float(np.mean(knn.predict(images) == labels.argmax(axis=1))))
    return float(np.mean(scores))


def _generation_part(name, X, y, names, runs, n_threads, quick):
    """Train the classifier, then per latent size each model: scores and one PNG."""
    onehot = np.eye(10)[y]
    n_held_out = len(X) // 5
    seconds, classifier = timed(
        lambda: FeatureClassifier(X, y, n_held_out, SEED, epochs=1 if quick else CLASSIFIER_EPOCHS)
    )
    log(f"{name}: feature classifier {classifier.accuracy_:.3f} held-out accuracy ({seconds:.0f} s)")
    # The classifier trained on 4/5 of the images; its features of all real images are the reference.
    real_features = classifier.features(X)
    # At most half the real images per set, so that the floor (a real subset against all) is not trivially 0.
    n_fd = min(N_FD, len(X) // 2)
    floor_rows = np.random.default_rng(SEED + 1).choice(len(X), n_fd, replace=False)
    records = {
        "n_samples": len(X),
        "n_fd": n_fd,
        "classifier_accuracy": classifier.accuracy_,
        "classifier_held_out": n_held_out,
        "classifier_seconds": seconds,
        "fd_real_subset": frechet_distance(classifier.features(X[floor_rows]), real_features),
        "runs": [],
    }
    knn = KNeighborsClassifier(KNN).fit(X, y)
    figures = []
    for run in runs:
        panels = []
        for label, cls in MODELS.items():
            model = network_model(cls, run["s"], run["batch"], run["epochs"], n_threads)
            log(f"{name}: {label}, s {run['s']}, batch {run['batch']}, {run['epochs']} epochs")
            fit_seconds, model = timed(lambda model=model: model.fit([X, onehot]))
            row = _score_model(model, X, onehot, classifier, knn, real_features, n_fd)
            panel = row.pop("_panel")
            panels.append({"name": f"{label}, s = {run['s']}", **panel})
            row.update(
                model=label,
                s=run["s"],
                batch=run["batch"],
                epochs=run["epochs"],
                steps=run["epochs"] * int(np.ceil(len(X) / run["batch"])),
                fit_seconds=fit_seconds,
                final_loss=model.objective_history_[-1],
                final_reconstruction=model.term_history_["reconstruction"][-1],
            )
            records["runs"].append(row)
            log(
                f"  FD samples {row['fd_samples']:.2f}, reconstructions {row['fd_reconstructions']:.2f}, "
                f"consistency {row['consistency']:.3f} (lowest {row['consistency_min']:.3f}), distinct "
                f"{row['distinct_neighbours']}, classes {row['classes']}, {fit_seconds:.0f} s"
            )
        figures.append(
            plot_models(
                panels,
                (28, 28),
                names,
                FIGURES / f"genrkm_torch_{name}_s{run['s']}.png",
                f"{name}: generated images with their generated labels (red) and reconstructions, s = {run['s']}, "
                f"{run['epochs']} epochs of batch {run['batch']}",
            )
        )
    return records, figures


def generation_table(records):
    rows = [
        [
            r["model"],
            r["s"],
            f"{r['batch']} / {r['epochs']} / {r['steps']}",
            f"{r['fd_samples']:.2f}",
            f"{r['fd_reconstructions']:.2f}",
            f"{r['reconstruction_mse']:.1f}",
            f"{r['consistency']:.3f}, {r['consistency_min']:.3f}",
            "-" if r.get("consistency_wide_mixture") is None else f"{r['consistency_wide_mixture']:.3f}",
            f"{r['cnn_consistency']:.3f}",
            r["distinct_neighbours"],
            r["classes"],
            f"{r['label_from_image']:.3f}",
            f"{r['fit_seconds']:.0f}",
        ]
        for r in records["runs"]
    ]
    header = [
        "model",
        "s",
        "batch / epochs / steps",
        "FD samples",
        "FD reconstructions",
        "recon. SSE",
        f"consistency {KNN}-NN (mean, lowest)",
        f"consistency, {WIDE_MIXTURE}-component mixture",
        "consistency CNN",
        "distinct nearest",
        "classes",
        "label from image",
        "fit [s]",
    ]
    return (
        f"{records['n_samples']} images, image view + one-hot label view. FD: Frechet distance (FID's formula) between "
        f"{records['n_fd']} generated (or reconstructed training) images and all {records['n_samples']} real ones, in the "
        f"{64}-unit hidden layer of a small CNN classifier trained here on the real images (held-out accuracy "
        f"{records['classifier_accuracy']:.3f} on {records['classifier_held_out']}); not FID, which needs Inception "
        "weights that cannot be downloaded here, so the values compare the models of this table only, not the "
        f"paper's. Floor: {records['n_fd']} real images against all of them give FD {records['fd_real_subset']:.2f}. "
        f"Recon. SSE: squared error per image (sum over pixels, mean over images) of {records['n_fd']} reconstructed training images. "
        f"Consistency: {DRAWS} draws of {N_GENERATED} generated pairs, share whose generated label the {KNN}-NN "
        "classifier of the real images (CNN: the feature classifier) gives to the generated image (target "
        f">= {CONSISTENCY_TARGET}), with Gen-RKM's mixture of Table 4 (10 components) and with one of {WIDE_MIXTURE} "
        "components fitted to the same latents (the VAEs sample N(0, I)); distinct nearest: distinct nearest training images among the first draw's "
        f"{N_GENERATED}; label from image: the label view of reconstructions from both views (a check of the label "
        "path, not an inference from the image alone).\n\n" + markdown_table(header, rows)
    )


def paper_table1(records):
    sizes = sorted({r["s"] for r in records["runs"]})
    rows = [
        [model, *(f"{PAPER_TABLE1[model][s]:.1f}" if s in PAPER_TABLE1[model] else "-" for s in sizes)]
        + [
            f"{next(r['fd_samples'] for r in records['runs'] if r['s'] == s and r['model'].startswith(model)):.2f}"
            for s in sizes
        ]
        for model in PAPER_TABLE1
    ]
    header = ["model", *(f"paper FID s={s}" for s in sizes), *(f"ours FD s={s}" for s in sizes)]
    return "Table 1 (MNIST FID, paper) beside ours (other feature space, other scale):\n\n" + markdown_table(
        header, rows
    )


def part_mnist(quick, n_threads):
    data = load_mnist_subset(MNIST_QUICK_SAMPLES if quick else None)
    X = np.asarray(data.data, dtype=np.float64)
    if X.max() > 1.0:
        X = X / 255.0
    names = [str(digit) for digit in range(10)]
    runs = MNIST_RUNS["quick" if quick else "full"]
    return _generation_part("mnist", X, data.target.astype(int), names, runs, n_threads, quick)


def part_labels(quick, n_threads):
    """ExplicitGenRKM with its defaults (batch 256, 100 epochs) at Table 3's learning rate and at 3e-3: label
    consistency with the mixture of Table 4 and with WIDE_MIXTURE components, and the label of reconstructions."""
    data = load_mnist_subset(MNIST_QUICK_SAMPLES if quick else None)
    X, y = data.data.astype(np.float32), data.target
    onehot = np.eye(10)[y]
    knn = KNeighborsClassifier(KNN).fit(X, y)
    rows = []
    for learning_rate in LABEL_LEARNING_RATES:
        model = ExplicitGenRKM(
            10, label_views=[1], learning_rate=learning_rate, n_threads=n_threads, random_state=SEED, verbose=1
        )
        if quick:
            model.set_params(max_epochs=1)
        log(f"labels: ExplicitGenRKM defaults, learning rate {learning_rate:g}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            fit_seconds, model = timed(lambda model=model: model.fit([X, onehot]))
        reconstructed = model.reconstruct([X[:N_FD], onehot[:N_FD]])[1].argmax(axis=1)
        row = {
            "learning_rate": learning_rate,
            "epochs": model.n_iter_,
            "convergence_warning": any(issubclass(w.category, ConvergenceWarning) for w in caught),
            "final_reconstruction": model.term_history_["reconstruction"][-1],
            "consistency_wide_mixture": _wide_mixture_consistency(model, knn),
            "label_from_image": float(np.mean(reconstructed == y[:N_FD])),
            "fit_seconds": fit_seconds,
            **{k: v for k, v in _score_samples(model, X, knn).items() if not k.startswith("_")},
        }
        rows.append(row)
        log(f"  consistency {row['consistency']:.3f}, {WIDE_MIXTURE} components {row['consistency_wide_mixture']:.3f}")
    return {"n_samples": len(X), "rows": rows}


def labels_table(records):
    header = [
        "learning rate",
        "epochs (steps)",
        "ConvergenceWarning",
        "final recon. SSE",
        f"consistency {KNN}-NN, 10 components (mean, lowest)",
        f"consistency, {WIDE_MIXTURE} components",
        "distinct nearest",
        "classes",
        "label from image",
        "fit [s]",
    ]
    # part_labels fits with the default batch size
    steps_per_epoch = int(np.ceil(records["n_samples"] / ExplicitGenRKM(10).batch_size))
    rows = [
        [
            f"{r['learning_rate']:g}",
            f"{r['epochs']} ({r['epochs'] * steps_per_epoch})",
            "yes" if r["convergence_warning"] else "no",
            f"{r['final_reconstruction']:.1f}",
            f"{r['consistency']:.3f}, {r['consistency_min']:.3f}",
            f"{r['consistency_wide_mixture']:.3f}",
            r["distinct_neighbours"],
            r["classes"],
            f"{r['label_from_image']:.3f}",
            f"{r['fit_seconds']:.0f}",
        ]
        for r in records["rows"]
    ]
    return (
        f"`ExplicitGenRKM(10, label_views=[1], random_state=0)` with every other parameter at its default (batch 256, "
        f"max_epochs 100, early stop by tol 1e-4 over 10 epochs, Table 4's 10 mixture components), on the "
        f"{records['n_samples']} digits and their one-hot labels, at Table 3's learning rate (the default) and at "
        f"3e-3. Consistency as in the MNIST subsection ({DRAWS} draws of {N_GENERATED}), with the model's mixture and "
        f"with one of {WIDE_MIXTURE} components fitted to the same latents; label from image: the label view of "
        f"{N_FD} reconstructed training pairs.\n\n" + markdown_table(header, rows)
    )


def part_fashion(quick, n_threads):
    data = load_fashion_mnist_subset()
    X = np.asarray(data.data, dtype=np.float64)
    if X.max() > 1.0:
        X = X / 255.0
    names = ["top", "trous.", "pull.", "dress", "coat", "sandal", "shirt", "sneak.", "bag", "boot"]
    runs = FASHION_RUNS["quick" if quick else "full"]
    return _generation_part("fashion", X, data.target.astype(int), names, runs, n_threads, quick)


# ---------------------------------------------------------------------------------------------- main


def run_part(part, args):
    """(records, figures) of one part."""
    if part == "mnist":
        return part_mnist(args.quick, args.n_threads)
    if part == "labels":
        return part_labels(args.quick, args.n_threads), []
    if part == "fashion":
        return part_fashion(args.quick, args.n_threads)
    if part == "sprites":
        import _genrkm_torch_sprites

        records, _, figures = _genrkm_torch_sprites.run(args.quick, args.n_threads, SEED)
        return records, figures
    import _genrkm_torch_perf

    records, _, figures = _genrkm_torch_perf.run(PERF["quick" if args.quick else "full"], args.n_threads, SEED)
    return records, figures


def render(part, records):
    """The subsection's text from the part's records, with its reading."""
    if part == "mnist":
        text = generation_table(records) + "\n\n" + paper_table1(records)
    elif part == "labels":
        text = labels_table(records)
    elif part == "fashion":
        text = generation_table(records)
    elif part == "sprites":
        import _genrkm_torch_sprites

        text = _genrkm_torch_sprites.markdown(records)
    else:
        import _genrkm_torch_perf

        text = _genrkm_torch_perf.markdown(records)
    reading = "" if records.get("quick") else READINGS[part]
    return text + (f"\n\nReading: {reading}" if reading else "")


def rewrite_from_records(part):
    """Rewrite a subsection from its saved records (new tables or reading), keeping its first paragraph: the
    provenance, facts, records and plots of the run that measured the numbers."""
    records = json.loads((FIGURES / f"genrkm_torch_{part}.json").read_text())
    current = _subsections(RESULTS, HEADING).get(TITLES[part])
    if current is None:
        raise SystemExit(f"--from-records: no subsection {TITLES[part]!r} in {RESULTS} to keep the provenance of")
    first = current.split("\n\n")[0]
    write_subsection(
        RESULTS, HEADING, INTRODUCTION, list(TITLES.values()), TITLES[part], first + "\n\n" + render(part, records)
    )
    log(f"rewrote {TITLES[part]!r} from bench/figures/genrkm_torch_{part}.json")


# Hand-written readings of the measured numbers (the default run's), appended to each subsection.
READINGS = {
    "mnist": (
        "With the same networks, optimiser and budget (2000 Adam steps of batch 100, Table 4's 50 mini-batches), "
        "Gen-RKM's samples are much closer to the real digits than the VAE's at both latent sizes: FD 26.5 against "
        "77.6 at s = 10 and 15.1 against 75.6 at s = 30 (floor 1.3), the paper's ordering (Table 1: 89.8 against "
        "250, 130.5 against 234.7), and so are its reconstructions (FD 17.1 and 4.8 against 35.3 and 23.3). The "
        "paper's trend with s does not show at this budget: Gen-RKM improves from 10 to 30 latents (the paper: "
        "slightly worse) and the VAE barely moves (the paper: better). Label consistency misses the 0.9 target in "
        "this budget: with Table 4's 10 mixture components 0.837 (s = 10) and 0.764 (s = 30), with 30 components "
        "0.878 and 0.880; the VAE 0.67. The samples are diverse (279 distinct nearest training digits of 300, all "
        "10 classes), so this is not the easy score of blurred class averages. The label view itself has trained: "
        "reconstructed from both views, 92.5% (s = 10) and 95.9% (s = 30) of the labels are right. What lags is "
        "the mixture: 10 components in a latent space with 10 classes straddle classes, and samples between "
        "clusters decode to an image of one class and a label of another; 30 components follow the clusters "
        "better (see also the next subsection, with the defaults). This run uses 2 torch threads on an idle "
        "machine; the previous one (1000 steps, lowest consistency 0.663) was at 1 thread under load, and with "
        "the batch mean still added to the pre-image networks' input (see the sprites subsection)."
    ),
    "labels": (
        "With its defaults the model trains on the paper's data: reconstruction error 10.4 per image, all 10 "
        "classes, 280 distinct nearest training digits of 300, and 89.4% of the labels right when reconstructed "
        "from both views; the loss is still falling at epoch 100, so the ConvergenceWarning is deserved (in a "
        "200-epoch fit it fell 9% more between epochs 139 and 200). Label consistency: 0.846 with Table 4's 10 "
        "mixture components and 0.867 with 30 at the default learning rate, 0.860 and 0.914 at 3e-3 (labels "
        "from both views 94.5%). The 0.9 target is reached with 30 components at 3e-3 within 2000 steps; with "
        "Table 4's 10 components no run reached it (best 0.860 here; a 4000-step default fit gave 0.85 with 10 "
        "components and 0.91 with 30). Samples from a mixture with as many components as classes fall between "
        "the class clusters; the label path itself is right for 89-95% of the training pairs. The fit seconds "
        "of the second row include the test suite running beside it."
    ),
    "fashion": (
        "Same ordering on 1000 Fashion-MNIST images after 256 steps: Gen-RKM FD 8.4 against the VAE's 49.0 (floor "
        "0.50), reconstructions 5.3 against 10.6. The label view has not trained in 256 steps (consistency 0.48 and "
        "0.20, 6 classes generated by each, label from image 0.43 and 0.31), and the feature classifier is weak on "
        "800 training images (held-out accuracy 0.665), so this feature space is coarse: the FD ordering is the "
        "result, the label columns are a budget miss."
    ),
    "sprites": (
        "192 Adam steps (12 epochs of batch 64) per network model, 2 torch threads. The explicit Gen-RKM trains: "
        "final reconstruction error 140.5 at s = 2 and 34.8 at s = 10, against the VAE's 81.9 and 34.4 (an "
        "all-black image scores 333.4). Its previous run collapsed to all-black images at exactly that 333.4: the "
        "pre-image networks then received the batch mean of the features added back, an offset no term of eq. 9 "
        "bounds, which the feature networks grew (norm 0.2 to 342 in 14 steps) until the output sigmoid "
        "saturated; they now receive the centred features U h (eq. 6), and tests/test_torch_genrkm.py checks that "
        "binary sprites train at the default learning rate. At s = 2 the explicit latents follow both positions "
        "(|r| 0.85 with x, 0.89 with y) but mix them: Lasso D / C / I 0.10 / 0.10 / 0.27, against the paper's "
        "0.72 / 0.71 / 0.64; the implicit Gen-RKM, which needs no training, gives the cleanest s = 2 code (|r| "
        "0.90 and 0.89; Lasso 0.51 / 0.51 / 0.43). At s = 2 the VAE (Lasso 0.17 / 0.17 / 0.23) and the beta-VAE "
        "(0.05 / 0.05 / 0.29) also entangle x and y, as in the paper (0.04 / 0.01 and 0.13 / 0.40 for D / C). At "
        "s = 10 the implicit Gen-RKM has the forest's highest D (0.92) and lowest error (0.07), where the paper "
        "has the VAEs ahead (forest D 0.73 and 0.58 against Gen-RKM's 0.12); the explicit model's forest D is "
        "0.04 (error 0.08): its ten latents share the positions. beta = 3 does not raise the VAE's scores here. "
        "192 steps are far from the paper's training, so the explicit rows compare budgets, not converged models."
    ),
    "perf": (
        "At batch 256 the eigen step (19 primal 148 x 148 eigenproblems and a dual one for the last batch of 136 "
        "rows, forward and backward) takes 0.12 s of a 3.3 s epoch, 3.6% (target under 20%), and the Gen-RKM epoch "
        "is 1.01x the VAE's (median per batch 1.02x; target within 1.5x): both targets met. The two models run the "
        "same networks, which are 96% of the step; the VAE's linear heads and sampling cost about what the eigen "
        "step does. Measured at load 2.5 with 2 threads; the fit seconds of the other subsections come from other "
        "loads and thread counts and are not a speed comparison."
    ),
}


def main():
    parser = script_parser(__doc__, PARTS, quick="small sizes, one epoch (a smoke test)", from_records=True)
    args = parser.parse_args()
    FIGURES.mkdir(exist_ok=True)
    for part in args.part:
        if args.from_records:
            rewrite_from_records(part)
            continue
        start, load = time.perf_counter(), load_average()
        log(f"part {part}")
        with warnings.catch_warnings(), pinned_threads(args.n_threads):
            warnings.simplefilter("ignore", UserWarning)
            torch.set_num_threads(args.n_threads)
            records, figures = run_part(part, args)
        records = {**records, "torch_threads": torch.get_num_threads(), "quick": args.quick}
        facts = (
            f"torch.set_num_threads({args.n_threads}); 1-minute load average {load:.1f} at the start, "
            f"{load_average():.1f} at the end (other jobs share the 2 cores); {(time.perf_counter() - start) / 60:.1f} min"
        )
        section = (HEADING, INTRODUCTION, list(TITLES.values()), TITLES[part])
        write_bench_part(
            "bench/genrkm_torch.py",
            f"genrkm_torch_{part}",
            records,
            render(part, records),
            figures,
            facts,
            args.n_threads,
            section,
        )


if __name__ == "__main__":
    main()
