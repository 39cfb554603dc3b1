"""The progress lines that `verbose` prints, one format for every estimator."""

import time


class Progress:
    """Prints ``Name [  elapsed s] message`` lines while a fit runs, when verbose > 0.

    Created at the start of a fit, so that the elapsed time counts from there; ``level`` lets a message ask
    for a higher verbosity (per-iteration lines at verbose >= 2, for example).
    """

    def __init__(self, name, verbose):
        self.name, self.verbose, self.start = name, verbose, time.perf_counter()

    def __call__(self, message, level=1):
        if self.verbose >= level:
            print(f"{self.name} [{time.perf_counter() - self.start:7.2f} s] {message}", flush=True)

    def elapsed(self):
        """Seconds since the fit began."""
        return time.perf_counter() - self.start
