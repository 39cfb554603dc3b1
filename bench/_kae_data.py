"""The 2-D sets of bench/kae.py (Laforgue et al. 2019, section 5.1 and Appendix C.1): three noisy concentric
circles (Fig. 3), Gaussian clusters (Fig. 6) and two moons (Fig. 7), and their train/test split.

The paper prints no radii, cluster positions, noise levels or sample counts: the choices below are ours and are
written into the section's text."""

import numpy as np
from sklearn.datasets import make_blobs
from sklearn.preprocessing import StandardScaler
from sklearn.utils import Bunch

from rkm.datasets import make_concentric_circles, make_moons

CIRCLES_NOISE = 0.05
# Three clusters on an equilateral triangle of side 2 (Fig. 6(c) shows three clusters), each of std 0.3, so the
# clusters are well apart (about 6.7 standard deviations between centres) yet elongated codes are possible.
CLUSTER_CENTERS = ((0.0, 0.0), (2.0, 0.0), (1.0, np.sqrt(3.0)))
CLUSTER_STD = 0.3
MOONS_NOISE = 0.1
DATASETS = ("circles", "clusters", "moons")


def make_clusters(n_samples=600, random_state=None):
    """The three Gaussian clusters (``CLUSTER_CENTERS``, std ``CLUSTER_STD``): (data, target)."""
    return make_blobs(
        n_samples=n_samples, centers=np.array(CLUSTER_CENTERS), cluster_std=CLUSTER_STD, random_state=random_state
    )


def load_toy(name, n_samples, random_state):
    """(X, y) of one of ``DATASETS``: ``n_samples`` points drawn with seed ``random_state``."""
    if name == "circles":
        bunch = make_concentric_circles(n_samples, noise=CIRCLES_NOISE, random_state=random_state)
        return bunch.data, bunch.target
    if name == "clusters":
        return make_clusters(n_samples, random_state=random_state)
    if name == "moons":
        bunch = make_moons(n_samples, noise=MOONS_NOISE, random_state=random_state)
        return bunch.data, bunch.target
    raise ValueError(f"name: must be one of {DATASETS}, got {name!r}")


def describe_toy(name):
    """One sentence on how a set is drawn."""
    return {
        "circles": f"three concentric circles of radii 1/3, 2/3, 1, uniform angles, Gaussian noise std {CIRCLES_NOISE}",
        "clusters": (
            f"three Gaussian clusters of std {CLUSTER_STD} centred on an equilateral triangle of side 2 "
            "(sklearn.datasets.make_blobs)"
        ),
        "moons": f"rkm.datasets.make_moons with noise {MOONS_NOISE}",
    }[name]


def split_toy(name, n_train, n_test, seed):
    """Draw ``n_train + n_test`` points with seed ``seed``, split them (the first ``n_train`` train), and
    standardize both with the training set's mean and standard deviation. Returns a Bunch of X_train, X_test,
    y_train, y_test and the scaler."""
    X, y = load_toy(name, n_train + n_test, seed)
    scaler = StandardScaler().fit(X[:n_train])
    return Bunch(
        X_train=scaler.transform(X[:n_train]),
        X_test=scaler.transform(X[n_train:]),
        y_train=y[:n_train],
        y_test=y[n_train:],
        scaler=scaler,
    )
