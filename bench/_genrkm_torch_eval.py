"""Part of bench/genrkm_torch.py: the scores and figures of generated images.

- A small CNN classifier trained on the real images (two 3 x 3 convolutions with 16 and 32 channels, each followed
  by a ReLU and 2 x 2 max-pooling, a hidden layer of 64 units, 10 classes); its 64 hidden units are the feature
  space of the Frechet distance. FID proper uses Inception-v3's pool features, whose weights cannot be downloaded
  here: the distance below has FID's formula on another network, so its values are comparable between the
  models of this bench only, not with the paper's Table 1.
- The Frechet distance between two sets of features, ||mu_1 - mu_2||^2 + Tr(S_1 + S_2 - 2 (S_1 S_2)^(1/2)).
- PNGs of generated grids (with the generated labels) and reconstructions (Figs. 2, 8).
"""

import numpy as np
import scipy.linalg
import torch
from torch import nn

CLASSIFIER_EPOCHS = 4
CLASSIFIER_BATCH = 64
CLASSIFIER_LR = 1e-3
FEATURE_WIDTH = 64


def _classifier_network(side):
    quarter = side // 4
    return nn.Sequential(
        nn.Unflatten(1, (1, side, side)),
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * quarter * quarter, FEATURE_WIDTH),
        nn.ReLU(),
        nn.Linear(FEATURE_WIDTH, 10),
    )


class FeatureClassifier:
    """The small CNN of the module docstring, trained with Adam on (X, y); ``features(X)`` gives its hidden layer.

    Parameters
    ----------
    X : ndarray (n, side * side), pixels in [0, 1]
    y : ndarray (n,) of int labels 0-9
    n_held_out : int
        The last rows held out to measure the accuracy (``accuracy_``); the classifier trains on the others.
    seed : int
    """

    def __init__(self, X, y, n_held_out, seed, epochs=CLASSIFIER_EPOCHS):
        side = int(round(np.sqrt(X.shape[1])))
        generator = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.network = _classifier_network(side)
        train = slice(0, len(X) - n_held_out)
        Xt = torch.as_tensor(X[train], dtype=torch.float32)
        yt = torch.as_tensor(y[train], dtype=torch.long)
        optimizer = torch.optim.Adam(self.network.parameters(), lr=CLASSIFIER_LR)
        for _ in range(epochs):
            for rows in torch.split(torch.randperm(len(Xt), generator=generator), CLASSIFIER_BATCH):
                loss = nn.functional.cross_entropy(self.network(Xt[rows]), yt[rows])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        self.network.eval()
        held = slice(len(X) - n_held_out, len(X))
        self.accuracy_ = float(np.mean(self.predict(X[held]) == y[held])) if n_held_out else float("nan")

    def _forward(self, X, upto):
        out = []
        with torch.no_grad():
            for start in range(0, len(X), 1000):
                out.append(self.network[:upto](torch.as_tensor(X[start : start + 1000], dtype=torch.float32)))
        return torch.cat(out).double().numpy()

    def features(self, X):
        """The 64 hidden units (after the ReLU) of each row."""
        return self._forward(X, -1)

    def predict(self, X):
        return self._forward(X, len(self.network)).argmax(axis=1)


def frechet_distance(A, B):
    """FID's formula on two feature sets (rows): ||mu_A - mu_B||^2 + Tr(S_A + S_B - 2 (S_A S_B)^(1/2))."""
    mu_a, mu_b = A.mean(axis=0), B.mean(axis=0)
    cov_a, cov_b = np.cov(A, rowvar=False), np.cov(B, rowvar=False)
    root = scipy.linalg.sqrtm(cov_a @ cov_b)
    root = np.real(root)  # rounding leaves tiny imaginary parts
    return float(np.sum((mu_a - mu_b) ** 2) + np.trace(cov_a + cov_b - 2.0 * root))


# ---------------------------------------------------------------------------------------------- figures


def _mosaic(images, rows, cols, shape):
    h, w = shape
    canvas = np.ones((rows * (h + 2), cols * (w + 2)))
    for k, image in enumerate(images[: rows * cols]):
        r, c = divmod(k, cols)
        canvas[r * (h + 2) + 1 : r * (h + 2) + 1 + h, c * (w + 2) + 1 : c * (w + 2) + 1 + w] = image.reshape(shape)
    return canvas


def plot_models(panels, shape, names, path, title):
    """One PNG, one column per model: generated images (6 x 10, generated label above each when the model has a
    label view) and below them reconstructions (rows: real, reconstructed) of 10 training images (Figs. 2, 8).

    panels : list of dict with "name", "samples" (n, d), "labels" (n,) or None, "originals" (10, d),
        "reconstructions" (10, d).
    """
    import matplotlib.pyplot as plt
    from _common import save_figure

    figure, axes = plt.subplots(
        2, len(panels), figsize=(6.2 * len(panels), 6.4), gridspec_kw={"height_ratios": [6, 2]}, squeeze=False
    )
    h, w = shape
    for k, panel in enumerate(panels):
        ax = axes[0, k]
        ax.imshow(_mosaic(panel["samples"], 6, 10, shape), cmap="gray_r", vmin=0, vmax=1)
        if panel.get("labels") is not None:
            for j, label in enumerate(panel["labels"][:60]):
                r, c = divmod(j, 10)
                ax.text(c * (w + 2) + 2, r * (h + 2) + 6, names[label], color="tab:red", fontsize=6)
        ax.set_title(f"{panel['name']}: generated", fontsize=9)
        ax.axis("off")
        ax = axes[1, k]
        both = np.concatenate([panel["originals"][:10], panel["reconstructions"][:10]])
        ax.imshow(_mosaic(both, 2, 10, shape), cmap="gray_r", vmin=0, vmax=1)
        ax.set_title(f"{panel['name']}: training images (top) and reconstructions", fontsize=9)
        ax.axis("off")
    figure.suptitle(title, fontsize=10)
    return save_figure(figure, path, 90)
