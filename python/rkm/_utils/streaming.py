"""What ``partial_fit`` shares across models: the deferred solve of streamed moments and a reservoir of rows.

A model with a primal form is fitted from the moments of its features (:class:`rkm._utils.primal.MomentStream`),
which ``partial_fit`` accumulates one batch at a time. The solve of those moments (an m x m eigenproblem or linear
system, and for Nyström features the m^3 products that map them) would cost as much per call as a batch of
several thousand rows, so ``partial_fit`` defers it: the model's solved attributes are computed once, when one
of them is first read (by the user, ``predict``, ``transform`` or a pre-image), and again only after more rows.

Pre-images and smoothers that average training rows cannot keep every row of a stream; they keep a uniform
random sample of at most :data:`RESERVOIR_ROWS` rows (Vitter's algorithm R, seeded by the model's
``random_state``), which stands for the training set there.

References
----------
J. S. Vitter, "Random sampling with a reservoir", ACM Transactions on Mathematical Software 11(1), 1985.
"""

import numpy as np
from sklearn.utils import check_random_state

# Rows a partial_fit model keeps for its pre-images (the training set a kernel smoother averages).
RESERVOIR_ROWS = 2000


class DeferredSolveMixin:
    """Computes a ``partial_fit`` model's solved attributes when one of them is first read.

    A subclass lists the attributes its solve sets in ``_deferred_attributes`` and implements ``_solve_stream()``;
    ``partial_fit`` calls ``_defer_solve()`` after adding a batch. ``fit`` calls ``_forget_stream()``, and a
    ``partial_fit`` that starts a new stream ``_forget_fit()``.
    """

    _deferred_attributes: tuple = ()

    def _defer_solve(self):
        for name in self._deferred_attributes:
            self.__dict__.pop(name, None)
        self.__dict__["_solve_pending"] = True

    def _forget_stream(self):
        for name in ("_stream", "_stream_dtype", "_stream_views", "_solve_pending", "_reservoir", "n_samples_seen_"):
            self.__dict__.pop(name, None)

    def _forget_fit(self):
        """Forgets any stream and every fitted attribute (those ending in "_")."""
        self._forget_stream()
        for name in [name for name in vars(self) if name.endswith("_") and not name.startswith("__")]:
            delattr(self, name)

    def _solve_now(self):
        """Runs a pending solve (a no-op when there is none)."""
        if self.__dict__.get("_solve_pending"):
            self.__dict__["_solve_pending"] = False
            try:
                self._solve_stream()
            except BaseException:
                self.__dict__["_solve_pending"] = True
                raise

    def __getattr__(self, name):
        # Called only when normal lookup fails: a deferred attribute not solved yet, or a missing one.
        if name in type(self)._deferred_attributes and self.__dict__.get("_solve_pending"):
            self._solve_now()
            if name in self.__dict__:
                return self.__dict__[name]
        if any(name in vars(klass) for klass in type(self).__mro__):
            # A class attribute whose descriptor raised AttributeError (scikit-learn's available_if): raise its own
            # message again rather than a generic one.
            return object.__getattribute__(self, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


class Reservoir:
    """A uniform random sample of at most `size` rows of a stream of batches (Vitter's algorithm R).

    After t rows, every row seen is in the sample with probability min(1, size / t); the sample depends only on
    the rows, their order and `random_state`, not on how the stream is cut into batches.
    """

    def __init__(self, size, random_state):
        self.size, self.seen, self.rows = size, 0, None
        self._rng = np.random.RandomState(check_random_state(random_state).randint(np.iinfo(np.int32).max))

    def add(self, X):
        if self.rows is None:
            self.rows = np.empty((0, X.shape[1]), dtype=X.dtype)
        free = max(0, min(self.size - self.rows.shape[0], X.shape[0]))
        if free:
            self.rows = np.concatenate([self.rows, X[:free]])
        if X.shape[0] > free:
            # Row t (counted from 0) replaces a uniform slot j < size when a uniform draw in [0, t] lands there.
            positions = self.seen + np.arange(free, X.shape[0])
            slots = (self._rng.random_sample(positions.size) * (positions + 1)).astype(np.int64)
            for row, slot in zip(np.flatnonzero(slots < self.size) + free, slots[slots < self.size], strict=True):
                self.rows[slot] = X[row]
        self.seen += X.shape[0]
