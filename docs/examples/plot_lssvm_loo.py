"""
LS-SVM regression tuned by exact leave-one-out
==============================================

The LS-SVM regressor is the shallow restricted kernel machine of Suykens (2017, eqs. 3.14-3.17): one linear
system

.. math::

    \\begin{bmatrix} \\tfrac{1}{\\eta} K + \\lambda I & 1 \\\\ 1^T & 0 \\end{bmatrix}
    \\begin{bmatrix} H \\\\ b^T \\end{bmatrix} = \\begin{bmatrix} Y \\\\ 0 \\end{bmatrix}

gives the hidden features H and the bias b. Its leave-one-out residuals have a closed form (Cawley & Talbot
2004): y_i - yhat^(-i)(x_i) = h_i / (C^{-1})_ii, with C the bordered matrix above, so leave-one-out
cross-validation costs about one more factorization instead of N refits. This example

* checks the closed form against N explicit refits (:class:`rkm.LSSVMRegressor` with ``loo=True``),
* draws the leave-one-out error over lambda and the rbf bandwidth, computed by :class:`rkm.LSSVMRegressorCV`
  from one eigendecomposition per bandwidth,
* and fits the chosen model to the data of Suykens (2017), Table 2 (:func:`rkm.datasets.make_deep_rkm_regression`:
  f(x) = sin(0.3x) + cos(0.5x) + sin(2x) with noise of standard deviation 0.5).
"""

# %%
# The data of Table 2
# -------------------
# 201 noisy training points on -10:0.1:10, 179 noisy validation points and 286 noise-free test points. The
# paper averages over 100 noise realizations; this example draws one (``random_state=0``).
import time

import matplotlib.pyplot as plt
import numpy as np

import rkm
from rkm.datasets import make_deep_rkm_regression
from rkm.kernels import RBF

data = make_deep_rkm_regression(noise=0.5, random_state=0)
X, y = data.data, data.target
print(data.description)


def test_mse(model):
    return float(np.mean((model.predict(data.data_test) - data.target_test) ** 2))


# %%
# Closed-form leave-one-out against N refits
# ------------------------------------------
# At the paper's sigma = 1 (kernel exp(-||x - y||^2 / sigma^2), i.e. ``gamma = 1``) and lambda = 0.01, compare
# ``loo_residuals_`` with the residuals of 201 models, each refitted without one training point. These systems
# are tiny (201 x 201): ``n_threads=1`` avoids the cost of waking a thread team for each of them, which on a
# busy machine can exceed the solve itself.
gamma = RBF.from_sigma(1.0, convention="suykens").gamma
model = rkm.LSSVMRegressor(gamma=gamma, lam=0.01, loo=True, n_threads=1)
start = time.perf_counter()
model.fit(X, y)
closed_seconds = time.perf_counter() - start

start = time.perf_counter()
explicit = np.empty(len(X))
for i in range(len(X)):
    keep = np.arange(len(X)) != i
    refit = rkm.LSSVMRegressor(gamma=gamma, lam=0.01, n_threads=1).fit(X[keep], y[keep])
    explicit[i] = y[i] - refit.predict(X[i : i + 1])[0]
explicit_seconds = time.perf_counter() - start

difference = np.abs(model.loo_residuals_.ravel() - explicit).max()
print(f"closed-form LOO: {closed_seconds:.4f} s (fit included); {len(X)} refits: {explicit_seconds:.2f} s")
print(f"largest difference between the two sets of residuals: {difference:.1e}")
print(f"LOO MSE {model.loo_mse_:.4f}, test MSE {test_mse(model):.4f} (paper's Basic column: 0.0403 +- 0.0098)")

# %%
# The leave-one-out error over lambda and sigma
# ---------------------------------------------
# :class:`rkm.LSSVMRegressorCV` eigendecomposes the kernel matrix once per bandwidth and then evaluates the
# leave-one-out residuals of a whole lambda path in O(N^2) each. The grids: sigma = 2^(k/2) for k = -2..6 and
# 41 values of lambda from 1e-6 to 1e2. It refits the pair with the lowest leave-one-out MSE on all the data.
sigmas = 2.0 ** (np.arange(-2, 7) / 2)
lams = np.logspace(-6, 2, 41)
start = time.perf_counter()
cv = rkm.LSSVMRegressorCV(gammas=1.0 / sigmas**2, lams=lams).fit(X, y)
cv_seconds = time.perf_counter() - start
chosen_sigma = 1.0 / np.sqrt(cv.gamma_)
print(f"LSSVMRegressorCV: {sigmas.size} x {lams.size} = {sigmas.size * lams.size} pairs in {cv_seconds:.2f} s")
print(
    f"chosen sigma = {chosen_sigma:.3f}, lambda = {cv.lam_:.2g}: LOO MSE {cv.best_score_:.4f}, test MSE {test_mse(cv):.4f}"
)

# %%
# For comparison, the test MSE along the lambda path of the chosen sigma (refits; the test set plays no part in
# the choice). Leave-one-out follows the test error closely: both are flat over about two decades of lambda and
# rise where the model under- or over-smooths.
row = int(np.argmin(np.abs(cv.gammas_ - cv.gamma_)))
path_test = [test_mse(rkm.LSSVMRegressor(gamma=cv.gamma_, lam=lam, n_threads=1).fit(X, y)) for lam in lams]

fig, (ax_path, ax_map) = plt.subplots(1, 2, figsize=(13, 4.5))
ax_path.loglog(lams, cv.loo_mse_path_[row], "-", label="leave-one-out MSE (noisy targets)")
ax_path.loglog(lams, path_test, "--", label="test MSE (noise-free targets)")
ax_path.axvline(cv.lam_, color="grey", lw=1, label=f"chosen lambda = {cv.lam_:.2g}")
ax_path.set(xlabel="lambda", ylabel="mean squared error", title=f"Along the lambda path at sigma = {chosen_sigma:.2f}")
ax_path.legend()
image = ax_map.pcolormesh(lams, sigmas, np.log10(cv.loo_mse_path_), shading="nearest", cmap="viridis")
ax_map.plot(cv.lam_, chosen_sigma, "r*", ms=14, label="lowest leave-one-out MSE")
ax_map.set(xscale="log", yscale="log", xlabel="lambda", ylabel="sigma", title="log10 leave-one-out MSE")
ax_map.legend(loc="upper left")
fig.colorbar(image, ax=ax_map)
fig.tight_layout()

# %%
# The fitted function
# -------------------
# The model chosen by leave-one-out against the noisy training targets and the true function.
grid = np.linspace(-10, 10, 1000)[:, None]
fig, ax = plt.subplots(figsize=(10, 4))
ax.plot(X.ravel(), y, ".", color="grey", ms=4, label="noisy training targets (std 0.5)")
ax.plot(data.data_test.ravel(), data.target_test, "-", color="black", lw=1, label="f(x)")
ax.plot(grid.ravel(), cv.predict(grid), "-", color="tab:red", label=f"LS-SVM, test MSE {test_mse(cv):.4f}")
ax.set(xlabel="x", ylabel="y", title=f"LS-SVM with sigma = {chosen_sigma:.2f}, lambda = {cv.lam_:.2g} chosen by LOO")
ax.legend(loc="lower left")
fig.tight_layout()
plt.show()
