"""
Kernel PCA on 100 000 rows: Nyström features and Dask
=====================================================

Exact kernel PCA needs the N x N kernel matrix: 80 GB in float64 at N = 100 000, and an eigensolver over it.
With an explicit feature map phi of m features whose inner products approximate the kernel, the same model is
solved in the primal (Suykens 2017, section 3.4): the m x m covariance of the centred features, accumulated in
one streamed pass over the rows, then eigendecomposed. :class:`rkm.KernelPCA` does this when given
``feature_map=rkm.features.Nystroem(m)`` (Williams & Seeger's Nyström approximation on m uniformly drawn
landmarks). This example

* checks the Nyström fit against exact kernel PCA on a subset small enough for the exact one,
* fits 100 000 rows with it, and
* fits the same rows again as a Dask array (one map-reduce over its chunks), which gives the same model.

The times and memory figures are measured by the script itself on the machine that built these docs (2 shared
cores for the published build): read them as orders of magnitude, not benchmarks.
"""

# %%
# Data
# ----
# Noisy digits: the 1797 8x8 digits of :func:`rkm.datasets.load_digits` resampled to 100 000 rows with Gaussian
# pixel noise of standard deviation 0.1 (d = 64), as in the project's large-N benchmarks. The rbf bandwidth is
# scikit-learn's ``gamma="scale"``, 1 / (d Var(X)).
import resource
import sys
import time

import dask
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np

import rkm
from rkm.datasets import load_digits
from rkm.features import Nystroem

N, M, S = 100_000, 200, 10  # rows, Nyström landmarks, components
digits = load_digits().data
rng = np.random.default_rng(0)
X = digits[rng.integers(0, len(digits), N)] + 0.1 * rng.standard_normal((N, digits.shape[1]))
gamma = 1.0 / (X.shape[1] * X.var())
print(f"X: {X.shape[0]} x {X.shape[1]} float64, {X.nbytes / 2**20:.0f} MiB; rbf gamma = {gamma:.4f}")
print(f"an exact N x N kernel matrix would take {8 * N**2 / 2**30:.0f} GiB")


def peak_rss_mib():
    """Peak resident memory of this process so far (ru_maxrss is in bytes on macOS, kilobytes on Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def timed(function):
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def nystroem_kpca():
    return rkm.KernelPCA(S, feature_map=Nystroem(M, gamma=gamma, random_state=0))


# %%
# Nyström against exact kernel PCA on a subset
# --------------------------------------------
# On the first 4000 rows the exact model is cheap (a 4000 x 4000 kernel matrix, 122 MiB). Kernel PCA's
# eigenvalues are those of the centred kernel matrix, which grow with the number of rows: divided by it, they
# estimate the eigenvalues of the kernel's integral operator, comparable across sample sizes.
subset = X[:4000]
exact, exact_seconds = timed(lambda: rkm.KernelPCA(S, gamma=gamma, random_state=0).fit(subset))
approximate, approximate_seconds = timed(lambda: nystroem_kpca().fit(subset))
gap = np.abs(approximate.eigenvalues_ / exact.eigenvalues_ - 1).max()
print(f"exact, 4000 rows:        {exact_seconds:5.2f} s")
print(f"Nyström (m = {M}), 4000 rows: {approximate_seconds:5.2f} s; eigenvalues within {gap:.1%} of the exact ones")

# %%
# All 100 000 rows
# ----------------
# The Nyström fit streams the rows through the feature map block by block: it holds the m x m covariance and one
# block of features (at most 128 MiB, with a centred copy), whatever N; at this N and m = 200 the 153 MiB of
# features are two blocks. The memory reported is how much the process's peak resident memory grew during the
# fit.
rss_before = peak_rss_mib()
model, seconds = timed(lambda: nystroem_kpca().fit(X))
print(f"Nyström (m = {M}), {N} rows: {seconds:.2f} s; peak memory grew by {peak_rss_mib() - rss_before:.0f} MiB")
relative = np.abs(model.eigenvalues_ / N / (exact.eigenvalues_ / len(subset)) - 1)
print(f"eigenvalues / N against the exact ones / 4000 on the subset: within {relative.max():.1%}")

# %%
# The same fit on a Dask array
# ----------------------------
# A Dask array of 4 chunks of 25 000 rows (12 MiB each) stands for data that lives on disk or on a cluster.
# ``fit`` computes the feature moments as one map-reduce over the chunks, on the scheduler in use; here Dask's
# default threaded scheduler (a ``distributed.Client`` would run the same tasks on its workers). The features
# are summed in another order, so the eigenvalues agree to rounding, not bit for bit. ``transform`` of a Dask
# array returns a lazy Dask array.
X_dask = da.from_array(X, chunks=(25_000, X.shape[1]))
with dask.config.set(scheduler="threads"):
    dask_model, dask_seconds = timed(lambda: nystroem_kpca().fit(X_dask))
    dask_hidden = dask_model.transform(X_dask[:1000]).compute()
print(f"Dask, {X_dask.numblocks[0]} chunks: {dask_seconds:.2f} s")
print(
    f"eigenvalues: largest relative difference to the in-memory fit {np.abs(dask_model.eigenvalues_ / model.eigenvalues_ - 1).max():.1e}"
)
print(f"hidden features of 1000 rows: largest difference {np.abs(dask_hidden - model.transform(X[:1000])).max():.1e}")

# %%
# Cost against N
# --------------
# Exact kernel PCA costs O(N^2) memory and at least O(N^2) time per block product; the Nyström fit O(N m^2) time
# and O(m^2) memory. Fit times for a few sizes (exact up to 4000 rows, Nyström up to 100 000):
exact_sizes, nystroem_sizes = [1000, 2000, 4000], [20_000, 50_000]
exact_times = [timed(lambda n=n: rkm.KernelPCA(S, gamma=gamma, random_state=0).fit(X[:n]))[1] for n in exact_sizes]
exact_times[-1] = exact_seconds
nystroem_times = [timed(lambda n=n: nystroem_kpca().fit(X[:n]))[1] for n in nystroem_sizes]
nystroem_sizes.append(N)
nystroem_times.append(seconds)

fig, (ax_time, ax_eigen) = plt.subplots(1, 2, figsize=(12, 4.3))
ax_time.loglog(exact_sizes, exact_times, "o-", label="exact (dense kernel matrix)")
ax_time.loglog(nystroem_sizes, nystroem_times, "s-", label=f"Nyström, m = {M}")
ax_time.loglog([N], [dask_seconds], "D", color="tab:red", label="Nyström on a Dask array")
ax_time.set(xlabel="rows N", ylabel="fit time [s] (this build machine)", title="Kernel PCA fit time, 10 components")
ax_time.legend()
index = np.arange(1, S + 1)
ax_eigen.plot(index, exact.eigenvalues_ / len(subset), "o", ms=9, mfc="none", label="exact, 4000 rows")
ax_eigen.plot(index, approximate.eigenvalues_ / len(subset), "x", label="Nyström, 4000 rows")
ax_eigen.plot(index, model.eigenvalues_ / N, "s", ms=4, label=f"Nyström, {N} rows")
ax_eigen.plot(index, dask_model.eigenvalues_ / N, ".", color="black", label=f"Nyström on Dask, {N} rows")
ax_eigen.set(xlabel="component", ylabel="eigenvalue / N", title="Leading eigenvalues of the centred kernel")
ax_eigen.legend()
fig.tight_layout()
plt.show()
