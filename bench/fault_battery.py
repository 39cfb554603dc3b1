"""Fault battery: every public estimator, feature map and function against bad inputs, faults and misuse.

Each scenario is one call (or one fit followed by its output method) in a child process, so that a segfault, an
abort or a process exit is caught and counted instead of ending the battery; a scenario that runs past
``--timeout`` seconds is a hang, and its child is killed and replaced. The scenarios are a fixed, seeded list:

- data classes (``fit`` and, after a good fit, the output method): NaN, +-inf, no rows, no columns, one and two
  samples, 1-D, 3-D, strings, objects, None, a scalar, lists, sparse CSR/CSC, float16, int, bool, complex,
  huge (1e200) and tiny (1e-300) values, values whose squares overflow (1e160), constant columns, all rows
  equal, read-only and Fortran-ordered arrays, a zero-stride view whose kernel matrix cannot fit in memory,
  and at predict time the wrong width;
- targets of supervised models: NaN, inf, wrong length, strings, one class, 2-D, huge values;
- hyperparameters: each constructor parameter set to each of a list of invalid values, then a fit;
- concurrency: 8 threads fitting clones of one estimator (results must equal the serial fit), 8 threads sharing
  one fitted estimator's output method;
- pickling: a fitted estimator through pickle (outputs must be equal).

Outcomes: ``clear error`` (ValueError, TypeError, MemoryError, OverflowError, NotFittedError, DivergenceError,
with a message), ``other error`` (any other exception: reported, not a failure of the battery), ``handled``
(no exception and finite outputs), ``crash`` (the child died), ``hang`` (timeout), ``silent non-finite`` (no
exception but a NaN or inf in the outputs) and ``inconsistent`` (threads or pickling changed a result). The
battery passes with 0 crashes, 0 hangs, 0 silent non-finite and 0 inconsistent results.

    python bench/fault_battery.py                 # the full battery (>= 10 000 calls), writes RESULTS.md
    python bench/fault_battery.py --quick         # every 25th scenario, prints only (tests/test_fault_battery.py)
    python bench/fault_battery.py --only KernelPCA --print-failures
"""

import argparse
import json
import os
import pickle
import select
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SECTION = "## Fault battery: bad inputs, faults and misuse"
N, D = 24, 3
OUTCOMES = ("clear error", "other error", "handled", "crash", "hang", "silent non-finite", "inconsistent")
FAILURES = ("crash", "hang", "silent non-finite", "inconsistent")


# --------------------------------------------------------------------------------------------------- targets
# Each target is built by name inside the child: (kind, factory). Kinds: "unsupervised", "regressor",
# "classifier", "precomputed" (fits a Gram matrix), "multiview", "forecaster".


def _targets():
    import rkm
    from rkm.features import Nystroem, RandomFourierFeatures

    small = {"random_state": 0}
    return {
        "KernelPCA": ("unsupervised", lambda: rkm.KernelPCA(2, **small)),
        "KernelPCA[krylov]": ("unsupervised", lambda: rkm.KernelPCA(2, solver="krylov", **small)),
        "KernelPCA[matrix_free]": ("unsupervised", lambda: rkm.KernelPCA(2, kernel_storage="matrix_free", **small)),
        "KernelPCA[nystroem]": (
            "unsupervised",
            lambda: rkm.KernelPCA(2, feature_map=Nystroem(8, random_state=0)),
        ),
        "KernelPCA[precomputed]": ("precomputed", lambda: rkm.KernelPCA(2, kernel="precomputed")),
        "LSSVMRegressor": ("regressor", lambda: rkm.LSSVMRegressor()),
        "LSSVMRegressor[cg]": ("regressor", lambda: rkm.LSSVMRegressor(solver="cg")),
        "LSSVMRegressor[loo]": ("regressor", lambda: rkm.LSSVMRegressor(loo=True)),
        "LSSVMRegressor[rff]": (
            "regressor",
            lambda: rkm.LSSVMRegressor(feature_map=RandomFourierFeatures(20, random_state=0)),
        ),
        "LSSVMRegressor[precomputed]": ("precomputed", lambda: rkm.LSSVMRegressor(kernel="precomputed")),
        "LSSVMClassifier": ("classifier", lambda: rkm.LSSVMClassifier()),
        "LSSVMClassifier[minimum_output]": ("classifier", lambda: rkm.LSSVMClassifier(coding="minimum_output")),
        "KernelSVD": ("unsupervised", lambda: rkm.KernelSVD(2, kernel="rbf")),
        "KernelSVD[linear]": ("unsupervised", lambda: rkm.KernelSVD(2, kernel="linear")),
        "KernelPMF": ("unsupervised", lambda: rkm.KernelPMF()),
        "KernelPMF[laplacian]": ("unsupervised", lambda: rkm.KernelPMF(kernel="laplacian", gamma=0.5)),
        "DeepRKM[regression]": ("regressor", lambda: rkm.DeepRKM(task="regression")),
        "DeepRKM[classification]": ("classifier", lambda: rkm.DeepRKM(task="classification")),
        "DeepRKM[kpca_kpca_lssvm]": (
            "regressor",
            lambda: rkm.DeepRKM("kpca_kpca_lssvm", n_components=(2, 2), task="regression"),
        ),
        "DeepRKM[reduced_set]": (
            "classifier",
            lambda: rkm.DeepRKM(
                "kpca_kpca_lssvm",
                solver="reduced_set",
                n_components=(2, 1),
                n_reduced=8,
                max_iter=30,
                task="classification",
                random_state=0,
            ),
        ),
        "ConstrainedDeepRKM": ("unsupervised", lambda: rkm.ConstrainedDeepRKM((2, 1), **small)),
        "ConstrainedDeepRKM[cayley_adam]": (
            "unsupervised",
            lambda: rkm.ConstrainedDeepRKM((2, 1), stiefel_method="cayley_adam", max_iter=100, **small),
        ),
        "ConstrainedDeepRKM[penalty]": (
            "unsupervised",
            lambda: rkm.ConstrainedDeepRKM((2, 1), stiefel_method="penalty", max_iter=100, **small),
        ),
        "KernelAutoencoder": ("unsupervised", lambda: rkm.KernelAutoencoder(max_iter=30, **small)),
        "KernelAutoencoder[gradient]": (
            "unsupervised",
            lambda: rkm.KernelAutoencoder(last_layer="gradient", max_iter=30, **small),
        ),
        "KernelAutoencoder[precomputed]": (
            "precomputed",
            lambda: rkm.KernelAutoencoder(kernel="precomputed", max_iter=30, **small),
        ),
        "MultiViewRKM": ("multiview", lambda: rkm.MultiViewRKM(2, **small)),
        "MultiViewRKM[stiefel]": ("multiview", lambda: rkm.MultiViewRKM(2, solver="dual_stiefel", **small)),
        "RKMForecaster": ("forecaster", lambda: rkm.RKMForecaster(4, n_components=2, **small)),
        "Nystroem": ("unsupervised", lambda: Nystroem(8, random_state=0)),
        "Nystroem[kmeans++]": ("unsupervised", lambda: Nystroem(8, landmarks="kmeans++", random_state=0)),
        "RandomFourierFeatures": ("unsupervised", lambda: RandomFourierFeatures(20, random_state=0)),
    }


def _functions():
    """Public functions: name -> call(X), with X in the place of one array argument."""
    from rkm import features, metrics, preimage, stiefel
    from rkm.kernels import kernel_gradient, kernel_matrix, kernel_product

    rng = np.random.default_rng(1)
    good = rng.normal(size=(N, D))
    factors = rng.integers(0, 3, size=(N, 2))
    return {
        "kernel_matrix": lambda X: kernel_matrix(X),
        "kernel_matrix[X,Y]": lambda X: kernel_matrix(good, X),
        "kernel_matrix[tanimoto]": lambda X: kernel_matrix(X, kernel="tanimoto"),
        "kernel_product": lambda X: kernel_product(X, good, np.ones((N, 2))),
        "kernel_gradient": lambda X: kernel_gradient(good, X, np.ones((N, N))),
        "metrics.mig": lambda X: metrics.mig(X, factors),
        "metrics.sap": lambda X: metrics.sap(X, factors),
        "metrics.irs": lambda X: metrics.irs(X, factors),
        "metrics.dci": lambda X: metrics.dci(X, factors),
        "metrics.mig[factors]": lambda X: metrics.mig(good, X),
        "metrics.discretize": lambda X: metrics.discretize(X),
        "stiefel.project": lambda X: stiefel.project(X),
        "stiefel.feasibility": lambda X: stiefel.feasibility(X),
        "stiefel.riemannian_gradient": lambda X: stiefel.riemannian_gradient(stiefel.project(good), X),
        "stiefel.minimize": lambda X: (
            stiefel.minimize(_trace_objective(X), stiefel.project(good[:, :2]), max_iter=50).x
        ),
        "preimage.kernel_smoother": lambda X: preimage.kernel_smoother(X, good[:D], 2),
        "preimage.gaussian_fixed_point": lambda X: preimage.gaussian_fixed_point(
            np.ones((2, N)) / N, X, 0.5, good[:2], max_iter=20
        )[0],
        "features.renyi_entropy": lambda X: features.renyi_entropy(X),
    }


def _trace_objective(X):
    """-1/2 Tr(H^T A H) with A = X X^T (n x n), the Stiefel engine's model problem, and its gradient."""
    A = np.asarray(X) @ np.asarray(X).T
    return lambda H: (-0.5 * float(np.sum(H * (A @ H))), -(A @ H))


# ------------------------------------------------------------------------------------------------------- data


def _good(dtype):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)).astype(dtype)
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2).astype(dtype)
    labels = np.where(X[:, 0] + 0.3 * rng.normal(size=N) > 0, 1, 0)
    return X, y, labels


def _with(X, index, value):
    bad = np.array(X, dtype=np.float64, copy=True)
    bad[index] = value
    return bad.astype(X.dtype) if np.isfinite(value) else bad


def _data_cases(X):
    """Bad versions of the (n, d) array X: name -> builder (functions, so that nothing is built unless used)."""
    import scipy.sparse

    readonly = X.copy()
    readonly.flags.writeable = False
    return {
        "nan": lambda: _with(X, (3, 1), np.nan),
        "inf": lambda: _with(X, (0, 0), np.inf),
        "-inf": lambda: _with(X, (5, 2), -np.inf),
        "no rows": lambda: X[:0],
        "no columns": lambda: X[:, :0],
        "one sample": lambda: X[:1],
        "two samples": lambda: X[:2],
        "1-D": lambda: X[:, 0],
        "3-D": lambda: X[:, :, None],
        "strings": lambda: X.astype(str),
        "words": lambda: np.full(X.shape, "a"),
        "objects with None": lambda: np.where(np.arange(X.size).reshape(X.shape) == 4, None, X.astype(object)),
        "None": lambda: None,
        "scalar": lambda: 3.0,
        "list": lambda: X.tolist(),
        "sparse CSR": lambda: scipy.sparse.csr_matrix(X),
        "sparse CSC": lambda: scipy.sparse.csc_array(X),
        "float16": lambda: X.astype(np.float16),
        "int": lambda: np.round(X * 3).astype(np.int64),
        "bool": lambda: X > 0,
        "complex": lambda: X + 1j,
        "huge 1e200": lambda: X * 1e200,
        "squares overflow 1e160": lambda: X * 1e160,
        "tiny 1e-300": lambda: X * 1e-300,
        "constant column": lambda: _with(X, (slice(None), 1), 2.0),
        "all rows equal": lambda: np.repeat(X[:1], len(X), axis=0),
        "zeros": lambda: np.zeros_like(X),
        "read-only": lambda: readonly,
        "Fortran": lambda: np.asfortranarray(X),
        "cannot fit in memory": lambda: np.broadcast_to(X[0], (400_000, X.shape[1])),
    }


def _gram(X):
    from rkm.kernels import kernel_matrix

    return kernel_matrix(np.asarray(X, dtype=np.float64), kernel="rbf", gamma=0.5)


def _gram_cases(X):
    K = _gram(X)
    cases = {name: build for name, build in _data_cases(K).items() if name not in ("no columns", "3-D")}
    cases["not square"] = lambda: K[:, :-2]
    cases["indefinite"] = lambda: K - 2 * np.eye(len(K))
    cases["asymmetric"] = lambda: K + np.triu(np.ones_like(K), 1)
    return cases


def _target_cases(y, labels, kind):
    cases = {
        "y nan": lambda: _with(y, 2, np.nan) if kind == "regressor" else labels.astype(float) * np.nan,
        "y inf": lambda: _with(y, 2, np.inf),
        "y wrong length": lambda: (y if kind == "regressor" else labels)[:-3],
        "y strings": lambda: np.array(["a", "b"] * (N // 2)),
        "y one class": lambda: np.zeros(N, dtype=int),
        "y 2-D three columns": lambda: np.column_stack([y, y, y]),
        "y huge 1e200": lambda: y * 1e200,
        "y None": lambda: None,
        "y 3-D": lambda: y[:, None, None],
    }
    return cases


# Invalid values tried for every constructor parameter.
BAD_VALUES = {
    "-1": -1,
    "0": 0,
    "nan": float("nan"),
    "inf": float("inf"),
    "1e10": 1e10,
    "-1e10": -1e10,
    "'bogus'": "bogus",
    "object()": object(),
    "True": True,
    "[]": [],
    "None": None,
    "[-1.0, 2.0]": [-1.0, 2.0],
}


# ----------------------------------------------------------------------------------------------- scenarios


def scenarios():
    """The full, fixed list of scenarios: (target, group, case, dtype)."""
    import rkm  # noqa: F401  (the child builds the same lists)

    listed = []
    for name, (kind, factory) in _targets().items():
        for dtype in ("float64", "float32"):
            X, y, labels = _good(dtype)
            data = _gram_cases(X) if kind == "precomputed" else _data_cases(X)
            listed += [(name, "fit", case, dtype) for case in data if (name, case) not in _SCALES_PAST_MEMORY]
            listed += [(name, "output", case, dtype) for case in data]
            listed.append((name, "output", "wrong width", dtype))
            if kind in ("regressor", "classifier"):
                listed += [(name, "target", case, dtype) for case in _target_cases(y, labels, kind)]
            if kind == "multiview":
                listed += [(name, "views", case, dtype) for case in _VIEW_CASES]
            if kind == "forecaster":
                listed += [(name, "steps", case, dtype) for case in _STEP_CASES]
            listed += [(name, "threads", "8 threads fit", dtype), (name, "threads", "8 threads output", dtype)]
            listed.append((name, "pickle", "round trip", dtype))
        for parameter in factory().get_params(deep=False):
            listed += [(name, "hyperparameter", f"{parameter}={label}", "float64") for label in BAD_VALUES]
    for name in _functions():
        for dtype in ("float64", "float32"):
            X, _, _ = _good(dtype)
            listed += [(name, "call", case, dtype) for case in _data_cases(X)]
            listed += [(name, "threads", "8 threads call", dtype)]
    return listed


# Kernel PCA without a stored kernel is exact at any N (kernel_storage="auto" goes matrix-free where the matrix
# cannot fit), and the kernel pmf sums kernel rows without storing them: on the 400 000-sample case they rightly
# run for hours (1.6e11 kernel values) instead of refusing, so that case is not a fit scenario for them (the Krylov path's Ctrl-C checks are tested in tests/test_kpca.py).
_SCALES_PAST_MEMORY = {
    (name, "cannot fit in memory")
    for name in ("KernelPCA", "KernelPCA[krylov]", "KernelPCA[matrix_free]", "KernelPMF", "KernelPMF[laplacian]")
}

_VIEW_CASES = ("one view", "not a list", "views of different lengths", "empty list", "view nan", "view sparse")
_STEP_CASES = ("steps -1", "steps 0", "steps 1.5", "steps '3'", "steps 1e12", "steps None")


# -------------------------------------------------------------------------------------------- running one


def _arrays(value):
    """Every float array inside a result (tuples, lists, dataclasses and namedtuples are opened)."""
    if isinstance(value, np.ndarray):
        return [value] if np.issubdtype(value.dtype, np.number) else []
    if isinstance(value, (float, np.floating)):
        return [np.asarray(value)]
    if isinstance(value, (tuple, list)):
        return [array for item in value for array in _arrays(item)]
    if hasattr(value, "__dataclass_fields__"):
        return [array for field in value.__dataclass_fields__ for array in _arrays(getattr(value, field))]
    return []


def _views(X):
    X = np.asarray(X) if not isinstance(X, list) else X
    return [X, X[:, :2]] if isinstance(X, np.ndarray) and X.ndim == 2 and X.shape[1] >= 2 else [X, X]


class _Adapter:
    """Fits a target and asks its outputs uniformly, whatever its kind."""

    def __init__(self, kind, dtype):
        self.kind, self.dtype = kind, dtype
        self.X, self.y, self.labels = _good(dtype)
        if kind == "precomputed":
            self.X = _gram(self.X).astype(dtype)
        self.series = np.sin(np.linspace(0, 12, 60)).astype(dtype)

    def target(self):
        return {"classifier": self.labels, "regressor": self.y}.get(self.kind)

    def fit(self, estimator, X=None, y="default"):
        X = self.X if X is None else X
        y = self.target() if isinstance(y, str) else y
        if self.kind == "multiview":
            return estimator.fit(_views(X))
        if self.kind == "forecaster":
            return estimator.fit(self.series if X is self.X else X)
        if self.kind in ("regressor", "classifier"):
            return estimator.fit(X, y)
        return estimator.fit(X)

    def output(self, estimator, X=None):
        X = self.X if X is None else X
        if self.kind == "multiview":
            return estimator.transform(_views(X))
        if self.kind == "forecaster":
            return estimator.predict(5) if X is self.X else estimator.predict(5, context=X)
        for method in ("predict", "transform", "score_samples"):
            if hasattr(estimator, method):
                return getattr(estimator, method)(X)
        raise AttributeError(f"{type(estimator).__name__} has no output method")

    def wrong_width(self):
        if self.kind == "precomputed":
            return np.ones((3, len(self.X) + 2), dtype=self.dtype)
        return np.ones((3, D + 2), dtype=self.dtype)


def _same(a, b):
    arrays_a, arrays_b = _arrays(a), _arrays(b)
    return len(arrays_a) == len(arrays_b) and all(
        x.shape == z.shape and np.allclose(x, z, rtol=1e-8, atol=1e-10, equal_nan=True)
        for x, z in zip(arrays_a, arrays_b)
    )


def _in_threads(function, count=8):
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: function(), range(count)))


def _run_estimator(name, group, case, dtype):
    from sklearn.base import clone

    kind, factory = _targets()[name]
    adapter = _Adapter(kind, dtype)
    estimator = factory()
    if group == "fit":
        cases = _gram_cases(_good(dtype)[0]) if kind == "precomputed" else _data_cases(adapter.X)
        X = cases[case]()
        fitted = adapter.fit(estimator, X)
        # A model fitted on the 400 000 rows is asked about the small data: its output on all of them would be
        # a legitimately long O(N^2) computation (a density of 400 000 points at 400 000 points).
        return adapter.output(fitted, None if case == "cannot fit in memory" else X)
    if group == "hyperparameter":
        parameter, label = case.split("=", 1)
        estimator.set_params(**{parameter: BAD_VALUES[label]})
        return adapter.output(adapter.fit(estimator))
    fitted = adapter.fit(estimator)
    if group == "output":
        if case == "wrong width":
            return adapter.output(fitted, adapter.wrong_width())
        cases = _gram_cases(_good(dtype)[0]) if kind == "precomputed" else _data_cases(adapter.X)
        if kind == "precomputed":
            cases = {key: (lambda build=build: build()[:5]) for key, build in cases.items()}
        return adapter.output(fitted, cases[case]())
    if group == "target":
        return adapter.output(adapter.fit(factory(), y=_target_cases(adapter.y, adapter.labels, kind)[case]()))
    if group == "views":
        return _view_case(factory(), adapter, case)
    if group == "steps":
        steps = {"steps -1": -1, "steps 0": 0, "steps 1.5": 1.5, "steps '3'": "3", "steps 1e12": 10**12}
        return fitted.predict(steps.get(case))
    if group == "threads":
        serial = adapter.output(fitted)
        if case == "8 threads fit":
            results = _in_threads(lambda: adapter.output(adapter.fit(clone(estimator))))
        else:
            results = _in_threads(lambda: adapter.output(fitted))
        if not all(_same(result, serial) for result in results):
            raise _Inconsistent("a result computed in 8 threads differs from the serial one")
        return serial
    if group == "pickle":
        restored = pickle.loads(pickle.dumps(fitted))
        if not _same(adapter.output(restored), adapter.output(fitted)):
            raise _Inconsistent("the unpickled estimator gives other outputs")
        return adapter.output(restored)
    raise ValueError(f"unknown group {group}")


def _view_case(estimator, adapter, case):
    import scipy.sparse

    X = adapter.X
    views = {
        "one view": [X],
        "not a list": X,
        "views of different lengths": [X, X[:-3]],
        "empty list": [],
        "view nan": [_with(X, (1, 1), np.nan), X],
        "view sparse": [scipy.sparse.csr_matrix(X), X[:, :2]],
    }[case]
    return estimator.fit(views).transform(views)


def _run_function(name, group, case, dtype):
    function = _functions()[name]
    X, _, _ = _good(dtype)
    if group == "threads":
        serial = function(X)
        if not all(_same(result, serial) for result in _in_threads(lambda: function(X))):
            raise _Inconsistent("a result computed in 8 threads differs from the serial one")
        return serial
    return function(_data_cases(X)[case]())


class _Inconsistent(Exception):
    pass


def _clear_errors():
    from sklearn.exceptions import NotFittedError

    from rkm.exceptions import DivergenceError

    return (ValueError, TypeError, MemoryError, OverflowError, NotFittedError, DivergenceError)


def run_one(scenario):
    """Run one scenario here; return (outcome, detail)."""
    name, group, case, dtype = scenario
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with np.errstate(all="ignore"):
                if name in _functions():
                    result = _run_function(name, group, case, dtype)
                else:
                    result = _run_estimator(name, group, case, dtype)
        except _Inconsistent as error:
            return "inconsistent", str(error)
        except _clear_errors() as error:
            message = str(error)
            return ("clear error" if message.strip() else "other error"), f"{type(error).__name__}: {message[:300]}"
        except Exception as error:  # noqa: BLE001  (every other exception is counted, not raised)
            return "other error", f"{type(error).__name__}: {str(error)[:300]}"
    if any(not np.all(np.isfinite(array)) for array in _arrays(result)):
        return "silent non-finite", "no exception, but NaN or inf in the output"
    return "handled", ""


def worker():
    """Child loop: read scenario indices on stdin, answer one JSON line each on stdout."""
    # Answers go to a private copy of stdout; file descriptor 1 itself then points at stderr, so that nothing
    # else (the library's prints, a build step's output, a C library) can mix with them.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    listed = scenarios()
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        outcome, detail = run_one(listed[int(line)])
        out.write(json.dumps([outcome, detail]) + "\n")
        out.flush()


# ---------------------------------------------------------------------------------------------- the parent


class _Child:
    def __init__(self, threads):
        environment = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONFAULTHANDLER": "0"}
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=environment,
        )
        # The import (and an editable install's build check) can take minutes on a loaded machine: it is not
        # part of any scenario's time.
        ready, _, _ = select.select([self.process.stdout], [], [], 1800)
        if not ready or self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("the battery's child process did not start")

    def ask(self, index, timeout):
        self.process.stdin.write(f"{index}\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            self.process.kill()
            self.process.wait()
            return "hang", f"no answer after {timeout:g} s"
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            return "crash", f"the child process ended with status {code}"
        return tuple(json.loads(line))

    def alive(self):
        return self.process.poll() is None

    def close(self):
        if self.alive():
            self.process.stdin.close()
            self.process.wait()


def run(indices, timeout, jobs, threads):
    """Run the scenarios `indices` over `jobs` child processes; return {index: (outcome, detail)}."""
    results = {}
    chunks = [indices[job::jobs] for job in range(jobs)]

    def drive(chunk):
        child = _Child(threads)
        for done, index in enumerate(chunk):
            if done % 500 == 0:
                print(f"[{time.strftime('%H:%M:%S')}] {done} of {len(chunk)} scenarios", file=sys.stderr, flush=True)
            if not child.alive():
                child = _Child(threads)
            try:
                results[index] = child.ask(index, timeout)
            except (BrokenPipeError, OSError):
                results[index] = ("crash", "the child process had ended")
                child = _Child(threads)
        child.close()

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(drive, chunks))
    return results


def table(listed, results):
    """Markdown table: one row per target (configurations summed), one column per outcome."""
    rows = {}
    for index, (outcome, _) in results.items():
        target = listed[index][0].split("[")[0]
        rows.setdefault(target, dict.fromkeys(OUTCOMES, 0))[outcome] += 1
    lines = ["| target | calls | " + " | ".join(OUTCOMES) + " |", "|---|---:|" + "---:|" * len(OUTCOMES)]
    totals = dict.fromkeys(OUTCOMES, 0)
    for target in sorted(rows):
        counts = rows[target]
        for outcome in OUTCOMES:
            totals[outcome] += counts[outcome]
        cells = " | ".join(str(counts[outcome]) for outcome in OUTCOMES)
        lines.append(f"| {target} | {sum(counts.values())} | {cells} |")
    cells = " | ".join(f"**{totals[outcome]}**" for outcome in OUTCOMES)
    lines.append(f"| **all** | **{sum(totals.values())}** | {cells} |")
    return "\n".join(lines), totals


def _write(text, seconds, args):
    sys.path.insert(0, HERE)
    from _common import RESULTS, write_script_section

    write_script_section(RESULTS, SECTION, "bench/fault_battery.py", args.threads, text, seconds=seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="every 25th scenario; print, write nothing")
    parser.add_argument("--only", nargs="+", help="targets whose name starts with one of these")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a scenario is a hang")
    parser.add_argument("--jobs", type=int, default=2, help="child processes at once")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the children")
    parser.add_argument("--print-failures", action="store_true", help="list every failure and other error")
    parser.add_argument("--json", action="store_true", help="print the totals as one JSON line at the end")
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    listed = scenarios()
    indices = list(range(len(listed)))
    if args.only:
        indices = [i for i in indices if listed[i][0].startswith(tuple(args.only))]
    if args.quick:
        indices = indices[::25]
    start = time.perf_counter()
    results = run(indices, args.timeout, args.jobs, args.threads)
    seconds = time.perf_counter() - start
    text, totals = table(listed, results)
    print(text)
    if args.print_failures:
        for index in sorted(results):
            outcome, detail = results[index]
            if outcome in FAILURES or outcome == "other error":
                print(f"{outcome:18s} {' / '.join(listed[index])}: {detail}")
    if not args.quick and not args.only:
        note = (
            f"{len(indices)} scenarios in child processes ({args.jobs} at once, OMP_NUM_THREADS={args.threads}, "
            f"timeout {args.timeout:g} s), {seconds / 60:.1f} min. `other error` is an exception other than "
            "ValueError, TypeError, MemoryError, OverflowError, NotFittedError or DivergenceError (or one without "
            "a message): not a fault, but a message that may not name the argument."
        )
        _write(f"{note}\n\n{text}", seconds, args)
    if args.json:
        print(json.dumps({"calls": len(indices), **totals}))
    sys.exit(1 if any(totals[outcome] for outcome in FAILURES) else 0)


if __name__ == "__main__":
    main()
