"""Private utilities shared by every model family: argument validation, threads, configuration, eigen-step
helpers, primal feature moments, the L-BFGS driver, exceptions and Dask plumbing. Nothing here is public API."""
