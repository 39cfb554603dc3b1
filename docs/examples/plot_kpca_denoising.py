"""
Denoising with kernel PCA
=========================

Kernel PCA denoises by projecting a noisy point on the leading components in feature space and mapping the
projection back to input space (its *pre-image*). This example reproduces the 2-D experiment of Constr-DRKM
(Tonin, Patrinos & Suykens 2021, section 5.2 and Fig. 1: the perimeter of a square with white Gaussian noise)
with :class:`rkm.KernelPCA` and compares the three pre-image methods it offers:

* ``"fixed_point"``: the Gaussian fixed-point iteration of Mika et al. (Constr-DRKM eq. 11),
* ``"smoother"``: the kernel smoother over the nearest training points (Gen-RKM eq. 8),
* ``"ridge"``: a kernel ridge map from projections to inputs learned at fit time (scikit-learn's
  ``fit_inverse_transform``).

A second part denoises handwritten digits with :meth:`rkm.KernelPCA.denoise`, as scikit-learn's "Image
denoising using kernel PCA" example does on USPS.
"""

# %%
# A noisy square
# --------------
# :func:`rkm.datasets.make_square` draws points uniformly along the boundary of ``[-1, 1]^2`` and adds noise of
# standard deviation ``noise`` (the paper's sigma_n). ``clean`` holds each point before the noise. We use 1000
# points (the paper and ``rkm demo`` use 3000): the kernel matrix is then 1000 x 1000 and the whole example runs
# in a few seconds.
import time

import matplotlib.pyplot as plt
import numpy as np
from scipy.spatial import cKDTree

import rkm
from rkm.datasets import load_digits, make_square
from rkm.kernels import RBF

square = make_square(1000, noise=0.1, random_state=0)
X, clean = square.data, square.clean
print(square.description)

# A dense sample of the noise-free curve, to measure how far a point lies from it.
curve = make_square(20000, noise=0.0, random_state=1).clean
curve_tree = cKDTree(curve)


def distance_to_curve(points):
    """Mean squared distance from each point to the nearest point of the noise-free square."""
    return float(np.mean(curve_tree.query(points)[0] ** 2))


# %%
# Fit kernel PCA and denoise with each pre-image method
# -----------------------------------------------------
# The rbf bandwidth is sigma = 0.3 in the Gaussian convention exp(-||x - y||^2 / (2 sigma^2)), a third of the
# square's half side; :meth:`rkm.kernels.RBF.from_sigma` converts it to scikit-learn's ``gamma``. The four
# sides and corners need more components than a smooth curve: we keep 16. ``denoise(X)`` projects X on them
# and maps the projections back.
gamma = RBF.from_sigma(0.3, convention="gaussian").gamma
errors = {"noisy input": distance_to_curve(X)}
denoised = {}
for preimage in ("fixed_point", "smoother", "ridge"):
    model = rkm.KernelPCA(16, gamma=gamma, preimage=preimage, random_state=0)
    start = time.perf_counter()
    denoised[preimage] = model.fit(X).denoise(X)
    seconds = time.perf_counter() - start
    errors[preimage] = distance_to_curve(denoised[preimage])
    print(f"{preimage:12s} fit + denoise {seconds:5.2f} s")

print("\nmean squared distance to the noise-free square")
for name, error in errors.items():
    print(f"  {name:12s} {error:.5f}  ({errors['noisy input'] / error:4.1f}x lower than the noisy input)")

# %%
# The fixed point pulls every point onto the curve (it is mean shift in feature space), the smoother averages
# neighbouring training points, and the ridge map, a smooth regression from the 16 projections to the plane,
# rounds the corners off.
order = np.argsort(np.arctan2(clean[:, 1], clean[:, 0]))
outline = np.vstack([clean[order], clean[order[:1]]])
fig, axes = plt.subplots(1, 4, figsize=(14, 4), sharex=True, sharey=True)
panels = [("noisy input", X)] + [(f"{name.replace('_', '-')} pre-image", Z) for name, Z in denoised.items()]
for ax, (title, points), error in zip(axes, panels, errors.values()):
    ax.plot(*outline.T, "-", color="black", lw=1)
    ax.plot(*points.T, ".", ms=2, color="tab:blue")
    ax.set(title=f"{title}\nmean sq. distance {error:.4f}", xlabel="$x_1$", aspect="equal")
axes[0].set_ylabel("$x_2$")
fig.suptitle("Kernel PCA (rbf, sigma = 0.3, 16 components) on a noisy square; black: the noise-free square")
fig.tight_layout()

# %%
# How many components?
# --------------------
# Too few components cannot follow the corners, too many keep the noise. The distance after the fixed-point
# pre-image against the number of components:
n_components = [2, 4, 8, 16, 32, 64]
by_components = []
for s in n_components:
    model = rkm.KernelPCA(s, gamma=gamma, preimage="fixed_point", random_state=0).fit(X)
    by_components.append(distance_to_curve(model.denoise(X)))
print("components s:  " + "  ".join(f"{s}: {e:.5f}" for s, e in zip(n_components, by_components)))

fig, ax = plt.subplots(figsize=(6, 4))
ax.semilogx(n_components, by_components, "o-", base=2, label="denoised (fixed-point pre-image)")
ax.axhline(errors["noisy input"], color="grey", ls="--", label="noisy input")
ax.set(
    xlabel="number of components s",
    ylabel="mean squared distance to the square",
    title="Denoising error against the number of components",
)
ax.legend()
fig.tight_layout()

# %%
# Noisy digits
# ------------
# The same model on images: the 8x8 digits of :func:`rkm.datasets.load_digits` (pixels in [0, 1]) with Gaussian
# noise of standard deviation 0.25. Kernel PCA is fitted on 1000 noisy training digits and denoises the other
# 797, which it has not seen. The bandwidth is scikit-learn's ``gamma="scale"``, 1 / (d Var(X)).
digits = load_digits()
rng = np.random.default_rng(0)
noisy_digits = digits.data + 0.25 * rng.standard_normal(digits.data.shape)
train, test = noisy_digits[:1000], noisy_digits[1000:]
clean_test = digits.data[1000:]
digit_gamma = 1.0 / (train.shape[1] * train.var())
digit_model = rkm.KernelPCA(32, gamma=digit_gamma, preimage="fixed_point", random_state=0).fit(train)
denoised_digits = digit_model.denoise(test)
noisy_mse = np.mean((test - clean_test) ** 2)
denoised_mse = np.mean((denoised_digits - clean_test) ** 2)
print(f"digits: mean squared error per pixel to the clean images {noisy_mse:.4f} (noisy) -> {denoised_mse:.4f}")

fig, axes = plt.subplots(3, 8, figsize=(10, 4.2))
for column in range(8):
    for row, images in enumerate((clean_test, test, denoised_digits)):
        axes[row, column].imshow(images[column].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
        axes[row, column].set_xticks([])
        axes[row, column].set_yticks([])
for row, label in enumerate(("clean", "noisy", "denoised")):
    axes[row, 0].set_ylabel(label)
fig.suptitle(
    f"Unseen digits denoised by kernel PCA (32 components): MSE {noisy_mse:.3f} -> {denoised_mse:.3f} per pixel"
)
fig.tight_layout()
plt.show()
