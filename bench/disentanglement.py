"""Constr-DRKM (Tonin, Patrinos & Suykens, 2021), section 5.3: disentanglement on dSprites-style sprites.

The paper's data sets (dSprites, noisy dSprites, Cars3D, SmallNORB) cannot be downloaded here; the study runs on
``rkm.datasets.make_sprites`` (the dSprites factor grid rendered offline) and its noisy dSprites, ``noise="uniform"``:
disentanglement_lib's variant (uniform [0, 1) noise added to the 3 channels, clipped at 1), the one behind published
noisy dSprites scores. (The paper's text describes a standard normal background, ``noise="gaussian"``, with 12 times
the background variance.)
Training follows Appendix A.2: Algorithm 1 (the quadratic penalty) with Adam inner solves (lr 1e-3, at most 500
iterations), mu_0 = 1, tau_0 = 0.1, p = 8, and the outer iterations capped at 2 (N = 50, 100), 4 (N = 200) and
7 (N = 400, 800). Every model is scored on the same 4000 points (drawn once, apart from the training draws) with
``rkm.metrics``: IRS, MIG and SAP (and DCI in the initialization part, with disentanglement_lib's boosted trees, the
default of ``rkm.metrics.dci``), the codes being 10 hidden features (the first level's for s = 10 and (10, 5), all
levels' for (2, 2, 6)), as the paper selects them.

Parts, each writing one subsection of "Constr-DRKM disentanglement (Tonin et al. 2021, section 5.3)" in
bench/RESULTS.md and boxplots / line charts in bench/figures/:

- ``layers`` (Fig. 5 and Figs. 6, B.2-B.5 without beta-VAE): 1, 2 and 3 levels (s = 10; (10, 5); (2, 2, 6)) and
  single-level kernel PCA (10 components), N in {50, 100, 200, 400, 800}, 5 seeds; the noisy variant with the
  two-level model and kernel PCA.
- ``gamma`` (Fig. 8): gamma = eta_1 / eta_2 in {0.01, 0.1, 1, 5, 25} for the two-level model, N in
  {50, 100, 200, 400}, 5 seeds, plain sprites.
- ``init`` (Table 3): random against level-wise initialization at N = 800, 5 seeds (level-wise is seed-free
  except for the training draw, which is fixed here to show its zero spread), with DCI (boosted trees; the scores
  of identical codes, the seed-free models', are computed once, all DCI runs at once in up to 8 processes).
- ``speed``: seconds of each metric on 10 000 codes x 10 dimensions (the issue's "in seconds"), DCI with both
  estimators (boosted trees timed once: minutes).
- ``betavae``: the beta-VAE rows of ``layers`` and ``init``: ``rkm.torch.BetaVAE`` (beta = 3, the Gen-RKM paper's
  Table 2 value; Table 3's dSprites networks, or its Teapot networks for the 3-channel noisy images) with 10 latents,
  trained on the same draws (N and seeds read from the saved ``layers`` and ``init`` records, so that the rows
  match the Constr-DRKM runs already there) and scored on the same 4000 evaluation points by the posterior means.
  Adam (lr 1e-3, batch 32) for ``BETA_VAE_STEPS`` steps whatever N, a CPU budget far below the paper's. The part
  then rewrites the ``layers`` and ``init`` subsections from their saved records with these rows, without
  refitting the Constr-DRKM models (needs torch; DCI for the beta-VAE only with ``--betavae-dci``: boosted trees
  take about 15 minutes per code matrix here).

Bandwidths: level 1 uses rkm's default gamma = 1 / n_features (1/4096; 1/12288 for the RGB noisy images), level 2
its default N / (2 s_1); they are not learned (see the RESULTS.md text for the measured cost of learning them).
The beta-VAE rows come from the ``betavae`` part (records in bench/figures/disentanglement_betavae.json).

    python bench/disentanglement.py                 # all parts, about 40 minutes on 2 cores
    python bench/disentanglement.py --part gamma
    python bench/disentanglement.py --quick         # 2 seeds, N up to 200, DCI on 1000 points: some minutes
"""

import hashlib
import json
import re
import time

import numpy as np
from _common import (
    FIGURES,
    RESULTS,
    _subsections,
    core_threads,
    load_average,
    log,
    quiet_convergence,
    save_figure,
    script_parser,
    timed_median,
    write_bench_part,
)
from joblib import Parallel, delayed

import rkm
from rkm import metrics
from rkm.cli.report import markdown_table
from rkm.datasets import make_sprites, sprites_factor_indices

HEADING = "## Constr-DRKM disentanglement (Tonin et al. 2021, section 5.3)"
INTRODUCTION = (
    "Section 5.3 of Tonin, Patrinos & Suykens (2021) on offline dSprites-style sprites (`rkm.datasets.make_sprites`) "
    "with `rkm.ConstrainedDeepRKM` and `rkm.metrics` (bench/disentanglement.py). Each part below was written by its "
    "own run; its first line names the command. The paper's numbers are on dSprites, Cars3D and SmallNORB, which "
    "cannot be loaded here, so the comparison is of trends (levels, N, gamma, initialization), not of values. "
    'Noisy sprites are disentanglement_lib\'s noisy dSprites (`make_sprites(noise="uniform")`: uniform [0, 1) '
    "noise added to 3 channels, clipped at 1); SAP standardizes each code before its classifiers, DCI uses "
    "disentanglement_lib's boosted trees."
)
TITLES = {
    "layers": "### Levels and N (Figs. 5-6): IRS, MIG, SAP on 4000 evaluation points",
    "gamma": "### gamma = eta_1 / eta_2 (Fig. 8): mean IRS +- standard error, two levels (10, 5)",
    "init": "### Random against level-wise initialization (Table 3)",
    "speed": "### Speed of the metrics on 10 000 codes x 10 dimensions",
    "betavae": "### beta-VAE baseline (rkm.torch.BetaVAE, beta = 3): training of the rows above",
}
PARTS = tuple(TITLES)
N_EVAL = 4000
# DCI's boosted trees cost minutes per call on the 4000 points; --quick scores DCI on the first 1000 of them.
QUICK_DCI_POINTS = 1000
# At most this many DCI runs at once, one process each (a boosted-tree fit is serial).
DCI_PROCESSES = 8
EVAL_SEED = 12345
OUTER_CAPS = {50: 2, 100: 2, 200: 4, 400: 7, 800: 7}
ARCHITECTURES = {"1 level (10)": (10,), "2 levels (10, 5)": (10, 5), "3 levels (2, 2, 6)": (2, 2, 6)}
KPCA = "kernel PCA (10)"
BETA_VAE = "beta-VAE"
BETA = 3.0  # the Gen-RKM paper's Table 2 (the Constr-DRKM paper's Table 3 quotes beta = 4 on Cars3D)
BETA_VAE_STEPS = 100
BETA_VAE_BATCH = 32
BETA_VAE_RECORDS = FIGURES / "disentanglement_betavae.json"
GAMMAS = (0.01, 0.1, 1.0, 5.0, 25.0)
DATASETS = {"sprites": None, "noisy sprites": "uniform"}
METRICS = ("IRS", "MIG", "SAP")


def sprites(n_samples, seed, noise):
    """(flattened float64 images, integer factor labels) of ``n_samples`` sprites drawn with ``seed``."""
    images, factors = make_sprites(n_samples, random_state=seed, noise=noise)
    return images.reshape(n_samples, -1).astype(np.float64), sprites_factor_indices(factors)


def penalty_options(n_samples):
    """Appendix A.2's Algorithm 1 settings (the inner Adam cap of 500 is rkm.stiefel's for inner="adam")."""
    return {"inner": "adam", "lr": 1e-3, "mu0": 1.0, "tau0": 0.1, "growth": 8, "max_outer": OUTER_CAPS[n_samples]}


def constr_drkm(sizes, n_samples, seed, n_threads, eta=1.0, init="random"):
    return rkm.ConstrainedDeepRKM(
        sizes,
        eta=eta,
        stiefel_method="penalty",
        init=init,
        max_iter=10**6,
        stiefel_options=penalty_options(n_samples),
        random_state=seed,
        n_threads=n_threads,
    )


def codes_of(model, X_eval, sizes):
    """The 10 codes the paper scores: the level with s = 10, or all levels concatenated when they sum to 10."""
    Z = model.transform(X_eval)
    return Z[:, :10] if sizes[0] == 10 else Z


def scores(codes, labels):
    out = {"IRS": metrics.irs(codes, labels), "MIG": metrics.mig(codes, labels), "SAP": metrics.sap(codes, labels)}
    return {k: float(v) for k, v in out.items()}


def _dci(codes, labels):
    """DCI with disentanglement_lib's boosted trees (rkm.metrics.dci's default) and its seconds."""
    start = time.perf_counter()
    d, c, i = metrics.dci(codes, labels)
    return {"DCI-D": float(d), "DCI-C": float(c), "DCI-I": float(i), "dci_seconds": time.perf_counter() - start}


def add_dci(records, codes, labels, max_jobs=DCI_PROCESSES):
    """Add the boosted-tree DCI of ``codes[k]`` against ``labels[k]`` to ``records[k]``: each distinct pair once (the
    seed-free models give identical codes for every seed), in parallel processes (one tree fit is serial)."""
    keys = [
        hashlib.sha256(np.ascontiguousarray(c).tobytes() + np.ascontiguousarray(y).tobytes()).hexdigest()
        for c, y in zip(codes, labels)
    ]
    unique = {key: (c, y) for key, c, y in zip(keys, codes, labels)}
    n_jobs = min(max_jobs, len(unique))
    log(f"DCI (boosted trees) of {len(unique)} distinct code matrices for {len(codes)} records, {n_jobs} processes")
    results = Parallel(n_jobs=n_jobs)(delayed(_dci)(c, y) for c, y in unique.values())
    by_key = dict(zip(unique, results))
    for record, key in zip(records, keys):
        record.update(by_key[key])


def run_model(name, build, X, X_eval, labels, sizes, keep_codes=False):
    """Fit one model and score its codes: a record of the scores, fit seconds and solver counts (and the codes)."""
    start = time.perf_counter()
    with quiet_convergence():
        model = build().fit(X)
    fit_seconds = time.perf_counter() - start
    codes = codes_of(model, X_eval, sizes) if sizes else model.transform(X_eval)
    record = {"model": name, "fit_seconds": fit_seconds, **scores(codes, labels)}
    if sizes:
        record.update({"n_iter": int(model.n_iter_), "feasibility": float(model.feasibility_)})
    return (record, codes) if keep_codes else record


# ---------------------------------------------------------------------------------------------------- the parts


def part_layers(seeds, sizes_n, n_threads):
    records = []
    for data, noise in DATASETS.items():
        X_eval, labels = sprites(N_EVAL, EVAL_SEED, noise)
        architectures = ARCHITECTURES if noise is None else {k: ARCHITECTURES[k] for k in ["2 levels (10, 5)"]}
        for n in sizes_n:
            for seed in seeds:
                X, _ = sprites(n, seed, noise)
                for name, sizes in architectures.items():
                    r = run_model(name, lambda: constr_drkm(sizes, n, seed, n_threads), X, X_eval, labels, sizes)
                    records.append({"data": data, "N": n, "seed": seed, **r})
                r = run_model(
                    KPCA, lambda: rkm.KernelPCA(10, kernel="rbf", n_threads=n_threads), X, X_eval, labels, None
                )
                records.append({"data": data, "N": n, "seed": seed, **r})
                log(
                    f"layers {data} N={n} seed={seed}: "
                    + ", ".join(f"{x['model']} IRS {x['IRS']:.3f}" for x in records[-len(architectures) - 1 :])
                )
    return records


def part_gamma(seeds, sizes_n, n_threads):
    records = []
    X_eval, labels = sprites(N_EVAL, EVAL_SEED, None)
    for n in sizes_n:
        for seed in seeds:
            X, _ = sprites(n, seed, None)
            for gamma in GAMMAS:
                r = run_model(
                    "2 levels (10, 5)",
                    lambda: constr_drkm((10, 5), n, seed, n_threads, eta=(gamma, 1.0)),
                    X,
                    X_eval,
                    labels,
                    (10, 5),
                )
                records.append({"data": "sprites", "N": n, "seed": seed, "gamma": gamma, **r})
            log(f"gamma N={n} seed={seed}: " + ", ".join(f"{x['gamma']}: {x['IRS']:.3f}" for x in records[-5:]))
    return records


def part_init(seeds, n, n_threads, dci_points=N_EVAL):
    records, all_codes, all_labels = [], [], []
    for data, noise in DATASETS.items():
        X_eval, labels = sprites(N_EVAL, EVAL_SEED, noise)
        X_fixed, _ = sprites(n, 0, noise)
        data_records, data_codes = [], []
        for seed in seeds:
            for init in ("random", "levelwise"):
                r, codes = run_model(
                    init,
                    lambda: constr_drkm((10, 5), n, seed, n_threads, init=init),
                    X_fixed,
                    X_eval,
                    labels,
                    (10, 5),
                    keep_codes=True,
                )
                data_records.append({"data": data, "N": n, "seed": seed, **r})
                data_codes.append(codes)
            r, codes = run_model(
                KPCA,
                lambda: rkm.KernelPCA(10, kernel="rbf", n_threads=n_threads),
                X_fixed,
                X_eval,
                labels,
                None,
                keep_codes=True,
            )
            data_records.append({"data": data, "N": n, "seed": seed, **r})
            data_codes.append(codes)
            log(
                f"init {data} seed={seed}: "
                + ", ".join(f"{x['model']} IRS {x['IRS']:.3f} MIG {x['MIG']:.3f}" for x in data_records[-3:])
            )
        records += [{**r, "dci_points": dci_points} for r in data_records]
        all_codes += [c[:dci_points] for c in data_codes]
        all_labels += [labels[:dci_points]] * len(data_codes)
    # After all fits, so that every distinct DCI runs at once.
    add_dci(records, all_codes, all_labels)
    return records


def beta_vae_fit(X, seed, n_threads):
    """rkm.torch.BetaVAE with 10 latents, BETA_VAE_STEPS Adam steps of BETA_VAE_BATCH rows (epochs rounded up)."""
    from rkm.torch import BetaVAE

    batch = min(BETA_VAE_BATCH, len(X))
    epochs = int(np.ceil(BETA_VAE_STEPS / np.ceil(len(X) / batch)))
    model = BetaVAE(
        10,
        beta=BETA,
        batch_size=batch,
        learning_rate=1e-3,
        max_epochs=epochs,
        n_iter_no_change=epochs + 1,
        n_threads=n_threads,
        random_state=seed,
    )
    return model.fit(X), epochs


def _beta_vae_record(data, n, seed, draw_seed, noise, X_eval, labels, n_threads, protocol):
    X, _ = sprites(n, draw_seed, noise)
    start = time.perf_counter()
    model, epochs = beta_vae_fit(X, seed, n_threads)
    fit_seconds = time.perf_counter() - start
    codes = model.transform(X_eval)
    record = {
        "protocol": protocol,
        "data": data,
        "N": n,
        "seed": seed,
        "draw_seed": draw_seed,
        "model": BETA_VAE,
        "epochs": epochs,
        "steps": epochs * int(np.ceil(n / min(BETA_VAE_BATCH, n))),
        "fit_seconds": fit_seconds,
        "final_reconstruction": model.term_history_["reconstruction"][-1],
        "final_kl": model.term_history_["KL"][-1],
        **scores(codes, labels),
    }
    log(
        f"betavae {protocol} {data} N={n} seed={seed}: IRS {record['IRS']:.3f} MIG {record['MIG']:.3f} ({fit_seconds:.0f} s)"
    )
    return record, codes


def part_betavae(n_threads, with_dci, datasets):
    """beta-VAE records with the protocols (N, seeds, draws) of the saved layers and init records."""
    layers = json.loads((FIGURES / "disentanglement_layers.json").read_text())
    init = json.loads((FIGURES / "disentanglement_init.json").read_text())
    old = json.loads(BETA_VAE_RECORDS.read_text()) if BETA_VAE_RECORDS.exists() else []
    records = [r for r in old if r["data"] not in datasets]
    init_codes, init_labels, init_records = [], [], []
    for data in datasets:
        noise = DATASETS[data]
        X_eval, labels = sprites(N_EVAL, EVAL_SEED, noise)
        done = {}
        for n in sorted({r["N"] for r in _select(layers, data=data)}):
            for seed in sorted({r["seed"] for r in _select(layers, data=data, N=n)}):
                record, codes = _beta_vae_record(data, n, seed, seed, noise, X_eval, labels, n_threads, "layers")
                records.append(record)
                done[n, seed, seed] = (record, codes)
        for n in sorted({r["N"] for r in _select(init, data=data)}):
            dci_points = init[0].get("dci_points", N_EVAL)
            for seed in sorted({r["seed"] for r in _select(init, data=data, N=n)}):
                # init fits every seed on the draw of seed 0 (layers' draw of seed 0 is the same one)
                if (n, seed, 0) in done:
                    record, codes = done[n, seed, 0]
                    record = {**record, "protocol": "init", "dci_points": dci_points}
                else:
                    record, codes = _beta_vae_record(data, n, seed, 0, noise, X_eval, labels, n_threads, "init")
                    record["dci_points"] = dci_points
                records.append(record)
                init_records.append(record)
                init_codes.append(codes[:dci_points])
                init_labels.append(labels[:dci_points])
    if with_dci and init_records:
        add_dci(init_records, init_codes, init_labels, max_jobs=n_threads)
    return records


def table_betavae(records):
    rows = [
        [
            r["protocol"],
            r["data"],
            str(r["N"]),
            str(r["seed"]),
            f"{r['epochs']} / {r['steps']}",
            f"{r['final_reconstruction']:.1f}",
            f"{r['final_kl']:.2f}",
            f"{r['fit_seconds']:.0f}",
        ]
        for r in records
    ]
    return (
        f"`rkm.torch.BetaVAE(10, beta={BETA:g})`: Table 3's dSprites networks (convolutions 20-40-80; the noisy, "
        "3-channel images get its Teapot networks 30-60-90), Adam at learning rate 1e-3, batch "
        f"min({BETA_VAE_BATCH}, N), {BETA_VAE_STEPS} steps whatever N (epochs rounded up), seed = the model seed of "
        "the row it fills; codes: the posterior means of the 4000 evaluation points. The step budget is what the "
        "shared 2-core machine allowed beside the other runs, far below a converged beta-VAE, so its rows are "
        "a lower bound on what a trained beta-VAE scores. Rows reused from ``layers`` for ``init`` (same draw, "
        "same seed) are fitted once.\n\n"
        + markdown_table(
            ["protocol", "data", "N", "seed", "epochs / steps", "final recon. SSE", "final KL", "fit [s]"], rows
        )
        + (f"\n\n{BETA_VAE_READING}" if BETA_VAE_STEPS == 100 else "")
    )


# Hand-written reading of the betavae run in RESULTS.md (100 steps, sprites and noisy sprites, N 50-200, seeds 0-1).
BETA_VAE_READING = (
    "Reading: with 100 Adam steps the beta-VAE's codes have an IRS at or above the other models' (means 0.52-0.59, "
    "against 0.46-0.56 for the Constr-DRKM and kernel PCA rows but the 3-level model's 0.13-0.32) and the lowest MIG "
    "and SAP (means: MIG 0.006-0.019, SAP 0.002-0.021; the Constr-DRKM models score MIG 0.09-0.17 and SAP 0.04-0.06). IRS rewards codes that stay put "
    "when the nuisance factors change, which an under-trained encoder satisfies cheaply: the final KL is 0.6-7.4 "
    "nats over 10 latents, so most latents sit at the prior, and the noisy-sprite runs barely reconstruct (squared "
    "error above 1000 per image, the noise included). MIG and SAP need one code per factor, which these codes lack. "
    "The Constr-DRKM paper's Cars3D beta-VAE (beta 4) has the same low MIG (0.010) with a higher IRS (0.752). These "
    "rows are a lower bound of a trained beta-VAE, not a converged comparison. DCI of the beta-VAE codes: not run "
    "(boosted trees took about 16 minutes per code matrix in the init part's run; ``--betavae-dci`` runs it)."
)


def beta_vae_records(protocol):
    """The saved beta-VAE records of one protocol ("layers" or "init"), [] when the betavae part has not run."""
    if not BETA_VAE_RECORDS.exists():
        return []
    return [r for r in json.loads(BETA_VAE_RECORDS.read_text()) if r["protocol"] == protocol]


def part_speed(repeats=3):
    """Seconds of each metric on 10 000 codes x 10 dims against the five sprite factors (sizes 3, 6, 40, 32, 32):
    random codes mixed with the factors, so that every metric has work to do. DCI with boosted trees, minutes per
    call, is timed once."""
    rng = np.random.default_rng(0)
    _, factors = make_sprites(10_000, random_state=0)
    labels = sprites_factor_indices(factors)
    codes = np.hstack([labels + rng.normal(size=labels.shape), rng.normal(size=(10_000, 5))])
    calls = {
        "MIG": lambda: metrics.mig(codes, labels),
        "SAP": lambda: metrics.sap(codes, labels),
        "IRS": lambda: metrics.irs(codes, labels),
        "DCI (random forests, not disentanglement_lib's)": lambda: metrics.dci(
            codes, labels, estimator="random_forest"
        ),
        "DCI (boosted trees, disentanglement_lib's; default)": lambda: metrics.dci(codes, labels),
    }
    records = []
    for name, call in calls.items():
        runs = 1 if name.startswith("DCI (boosted") else repeats
        seconds, _ = timed_median(call, runs, warm_up=False)
        records.append({"metric": name, "seconds": seconds, "runs": runs})
        log(f"speed {name}: {records[-1]['seconds']:.2f} s")
    return records


def table_speed(records):
    return markdown_table(
        ["metric", "seconds (median)", "runs"], [[r["metric"], f"{r['seconds']:.2f}", str(r["runs"])] for r in records]
    )


# ---------------------------------------------------------------------------------------------------- reporting


def _select(records, **where):
    return [r for r in records if all(r.get(k) == v for k, v in where.items())]


def _mean_std(values):
    return f"{np.mean(values):.3f} +- {np.std(values):.3f}" if values else "-"


def table_layers(records):
    lines = []
    beta = beta_vae_records("layers")
    records = [r for r in records if r["model"] != BETA_VAE] + beta
    for data in DATASETS:
        models = list(dict.fromkeys(r["model"] for r in _select(records, data=data) if r["model"] != BETA_VAE))
        models.append(BETA_VAE)
        sizes_n = sorted({r["N"] for r in _select(records, data=data)})
        if not sizes_n:
            continue
        rows = [
            [metric, model]
            + [_mean_std([r[metric] for r in _select(records, data=data, model=model, N=n)]) for n in sizes_n]
            for metric in METRICS
            for model in models
        ]
        lines += [
            f"**{data}** (mean +- std over seeds; beta-VAE: "
            + (
                f"`rkm.torch.BetaVAE`, beta = {BETA:g}, {BETA_VAE_STEPS} Adam steps, see the betavae subsection)"
                if _select(beta, data=data)
                else "not run)"
            ),
            "",
            markdown_table(["metric", "model"] + [f"N = {n}" for n in sizes_n], rows),
        ]
        fit = [
            f"{np.median([r['fit_seconds'] for r in _select(records, data=data, N=n, model=m)]):.1f}"
            for n in sizes_n
            for m in ["2 levels (10, 5)"]
        ]
        lines += [
            "",
            "Median fit seconds of the two-level model per N: "
            + ", ".join(f"{n}: {s}" for n, s in zip(sizes_n, fit))
            + ".",
            "",
        ]
    return "\n".join(lines)


def table_gamma(records):
    sizes_n = sorted({r["N"] for r in records})
    rows = []
    for n in sizes_n:
        cells = []
        for g in GAMMAS:
            v = [r["IRS"] for r in _select(records, N=n, gamma=g)]
            cells.append(f"{np.mean(v):.3f} +- {np.std(v, ddof=1) / np.sqrt(len(v)):.3f}" if len(v) > 1 else "-")
        rows.append([str(n)] + cells)
    return markdown_table(["N"] + [f"gamma = {g}" for g in GAMMAS], rows)


def table_init(records):
    columns = ("IRS", "MIG", "SAP", "DCI-D", "DCI-C", "DCI-I")
    rows = []
    for data in DATASETS:
        for model in ("random", "levelwise", KPCA):
            runs = _select(records, data=data, model=model)
            if runs:
                rows.append([data, model] + [_mean_std([r[c] for r in runs]) for c in columns])
        runs = _select(beta_vae_records("init"), data=data)
        if runs:
            rows.append(
                [data, BETA_VAE]
                + [_mean_std([r[c] for r in runs]) if all(c in r for r in runs) else "not run" for c in columns]
            )
        else:
            rows.append([data, BETA_VAE] + ["not run" for _ in columns])
    lines = [
        f"Two levels (10, 5), N = {records[0]['N']} training points (one draw), model seeds 0-"
        f"{max(r['seed'] for r in records)}; mean +- std over the seeds; DCI with disentanglement_lib's boosted "
        f"trees (`rkm.metrics.dci` default; random forests give another metric) on the first "
        f"{records[0].get('dci_points', N_EVAL)} of the {N_EVAL} evaluation points, median "
        f"{np.median([r['dci_seconds'] for r in records if 'dci_seconds' in r] or [np.nan]):.0f} s per DCI; noisy "
        "sprites: disentanglement_lib's noisy dSprites (uniform noise).",
        "",
        markdown_table(["data", "initialization", *columns], rows),
    ]
    lines += [
        "",
        "Paper (Cars3D, N = 800, sigma^2 = 50): random IRS 0.843 +- 0.044, MIG 0.012 +- 0.010; level-wise "
        "IRS 0.785 +- 0.000, MIG 0.040 +- 0.000; beta-VAE (beta = 4) IRS 0.752 +- 0.145, MIG 0.010 +- 0.011.",
    ]
    return "\n".join(lines)


def plot_layers(records):
    import matplotlib.pyplot as plt

    paths = []
    for data in DATASETS:
        rows = _select(records, data=data)
        if not rows:
            continue
        models = list(dict.fromkeys(r["model"] for r in rows))
        sizes_n = sorted({r["N"] for r in rows})
        fig, axes = plt.subplots(1, len(METRICS), figsize=(5 * len(METRICS), 3.6))
        width = 0.8 / len(models)
        for ax, metric in zip(axes, METRICS):
            for k, model in enumerate(models):
                values = [[r[metric] for r in _select(rows, model=model, N=n)] for n in sizes_n]
                positions = np.arange(len(sizes_n)) + (k - (len(models) - 1) / 2) * width
                box = ax.boxplot(values, positions=positions, widths=width * 0.9, patch_artist=True, whis=(0, 100))
                for patch in box["boxes"]:
                    patch.set_facecolor(f"C{k}")
                ax.plot([], [], color=f"C{k}", lw=6, label=model)
            ax.set_xticks(np.arange(len(sizes_n)), [str(n) for n in sizes_n])
            ax.set_xlabel("N")
            ax.set_title(f"{metric}, {data}")
        axes[0].legend(fontsize=7)
        paths.append(save_figure(fig, FIGURES / f"disentanglement_layers_{data.replace(' ', '_')}.png", dpi=90))
    return paths


def plot_gamma(records):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6))
    for k, n in enumerate(sorted({r["N"] for r in records})):
        means = np.array([np.mean([r["IRS"] for r in _select(records, N=n, gamma=g)]) for g in GAMMAS])
        errors = np.array(
            [
                np.std([r["IRS"] for r in _select(records, N=n, gamma=g)], ddof=1)
                / np.sqrt(len(_select(records, N=n, gamma=g)))
                for g in GAMMAS
            ]
        )
        ax.plot(range(len(GAMMAS)), means, color=f"C{k}", label=f"N = {n}")
        ax.fill_between(range(len(GAMMAS)), means - errors, means + errors, color=f"C{k}", alpha=0.2)
    ax.set_xticks(range(len(GAMMAS)), [str(g) for g in GAMMAS])
    ax.set_xlabel("gamma = eta_1 / eta_2")
    ax.set_ylabel("IRS")
    ax.legend(fontsize=7)
    return [save_figure(fig, FIGURES / "disentanglement_gamma.png", dpi=90)]


REPORTS = {
    "layers": lambda records: (table_layers(records), plot_layers(records)),
    "gamma": lambda records: (table_gamma(records), plot_gamma(records)),
    "init": lambda records: (table_init(records), []),
    "speed": lambda records: (table_speed(records), []),
    "betavae": lambda records: (table_betavae(records), []),
}


def _measuring_run(part):
    """The command (and date) that measured a part's Constr-DRKM records, from its subsection in RESULTS.md: its
    provenance, or, once the betavae part has rewritten it, the run that note names."""
    text = _subsections(RESULTS, HEADING).get(TITLES[part], "")
    named = re.search(r"the records of (`[^`]+` on \S+)", text) or re.search(r"Written by (`[^`]+` on \S+?):", text)
    return named.group(1) if named and "--part betavae" not in named.group(1) else "an earlier run"


def write_part(part, records, text, figures, elapsed, n_threads, note=""):
    facts = f"Load average {load_average():.1f}; {elapsed / 60:.1f} min" + (f". {note}" if note else "")
    section = (HEADING, INTRODUCTION, list(TITLES.values()), TITLES[part])
    write_bench_part(
        "bench/disentanglement.py", f"disentanglement_{part}", records, text, figures, facts, n_threads, section
    )


def main():
    parser = script_parser(
        __doc__, PARTS, quick="2 seeds, N up to 200, Table 3 at N = 200 with DCI on 1000 points", from_records=True
    )
    parser.add_argument("--betavae-dci", action="store_true", help="betavae: also the boosted-tree DCI of init")
    parser.add_argument(
        "--betavae-data", nargs="+", choices=list(DATASETS), default=list(DATASETS), help="betavae: the data sets"
    )
    args = parser.parse_args()
    seeds = range(2) if args.quick else range(5)
    sizes_n = [50, 100, 200] if args.quick else [50, 100, 200, 400, 800]
    FIGURES.mkdir(exist_ok=True)
    with core_threads(args.n_threads):
        for part in args.part:
            start = time.perf_counter()
            log(f"part {part}")
            if args.from_records:
                records = json.loads((FIGURES / f"disentanglement_{part}.json").read_text())
            elif part == "layers":
                records = part_layers(seeds, sizes_n, args.n_threads)
            elif part == "gamma":
                records = part_gamma(seeds, [n for n in sizes_n if n <= 400], args.n_threads)
            elif part == "init":
                records = part_init(seeds, sizes_n[-1], args.n_threads, QUICK_DCI_POINTS if args.quick else N_EVAL)
            elif part == "betavae":
                records = part_betavae(args.n_threads, args.betavae_dci, args.betavae_data)
            else:
                records = part_speed()
            text, figures = REPORTS[part](records)
            write_part(part, records, text, figures, time.perf_counter() - start, args.n_threads)
            log(f"part {part} written")
            if part == "betavae" and not args.from_records:
                # The rows it fills: the layers and init subsections rewritten from their saved records.
                for other in ("layers", "init"):
                    saved = json.loads((FIGURES / f"disentanglement_{other}.json").read_text())
                    text, figures = REPORTS[other](saved)
                    note = (
                        f"Constr-DRKM and kernel PCA rows: the records of {_measuring_run(other)} "
                        f"(bench/figures/disentanglement_{other}.json); beta-VAE rows: --part betavae"
                    )
                    write_part(other, saved, text, figures, time.perf_counter() - start, args.n_threads, note)
                    log(f"part {other} rewritten with the beta-VAE rows")


if __name__ == "__main__":
    main()
