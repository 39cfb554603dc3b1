"""The CUDA path (issue 26): RBF kernel build + top-10 eigenpairs on one GPU, rkm against PyTorch, CuPy and rkm's
CPU path.

Cases (RBF kernel, double-centred, the 10 largest eigenvalues; N divided by 10 with ``--quick``):

- dense: N in {20 000, 50 000} x d in {64, 784}, float32 and float64;
- matrix-free: N = 200 000, d = 64, float32 and float64 (the kernel matrix is never stored).

Methods per case and dtype:

- ``rkm cuda``: ``rkm.KernelPCA(n_components=10, kernel="rbf", kernel_storage="dense" or "matrix_free",
  solver="krylov", device="cuda")``, the whole fit from host data;
- ``torch lobpcg``: X to the GPU, squared distances by one GEMM (``|x|^2 + |y|^2 - 2 X X^T``), ``exp`` in place,
  double-centring in place, ``torch.lobpcg(K, k=10, largest=True)`` (dense cases);
- ``torch eigh``: the same K, ``torch.linalg.eigh`` (dense cases with N <= 20 000);
- ``cupy eigsh``: the same K built with CuPy, ``cupyx.scipy.sparse.linalg.eigsh(K, k=10)``; in the matrix-free
  case a ``LinearOperator`` that recomputes K in row tiles at every product (centred as C K C, C = I - 11^T/n);
- ``rkm cpu``: ``rkm.KernelPCA`` with ``device="cpu"`` and ``--n-threads`` threads (default 16), only at the
  smallest dense N (20 000; 2000 with ``--quick``) unless ``--full``: at N = 50 000 the CPU takes minutes.

All methods start from X in host memory and end with the eigenvalues in host memory; every peer shifts X by its
column means first (as rkm does; it changes no kernel value and helps float32). Matrix products run in full
precision (no TF32). Seconds: median over ``--repeats`` runs (fewer when a run is slow, see ``--case-cap``),
after one warm-up fit per method and dtype at N = 1024; every timed region ends with a synchronisation (the
eigenvalues copied to the host, or ``torch.cuda.synchronize`` / CuPy's device synchronise).

Error: max_i |lambda_i - ref_i| / ref_1 over the 10 eigenvalues, against the float64 reference of the same case:
``torch eigh`` float64 where it ran, else ``rkm cuda`` float64, else another float64 row (the JSON names it).
Ratio: seconds over those of the fastest GPU peer (torch lobpcg, torch eigh, cupy eigsh) of the same case and
dtype.

Data: standard normal X with feature j (1-based) scaled by j^-1/2, gamma = 1 / sum_j j^-1: the mean squared
distance between two rows is 2 / gamma, and the top-10 eigenvalues of the centred kernel are distinct (ratios of
consecutive ones 1.06 to 1.6 at N = 2000).

Context, measured once: device memory bandwidth (a device-to-device ``torch`` copy of 2 GiB, bytes read plus
bytes written) and the cuBLAS GEMM rate of the matrix-free tile shape ((N x d) @ (d x 4096), ``torch.matmul``).
For the ``rkm cuda`` dense rows the notes estimate the eigen step: fit seconds minus the seconds of
``rkm.kernels.kernel_product(X, None, B, "rbf", device="cuda")`` with one column B (the kernel evaluated on the
device without being stored or copied), and from it GB/s per block product = N^2 * itemsize * n_iter_ / eigen
seconds (each block product reads K once). ``kernel_matrix(..., device="cuda")`` is timed too, but it copies K
to a new host array, so it is not the build time alone. For the ``rkm cuda`` matrix-free rows: kernel values per
second and the Gram GEMM rate assuming one full evaluation of K (2 N^2 d flops) per block product (estimates: the
solver may reuse symmetric tiles).

Failures are rows, not crashes: a missing library, an out-of-memory error or a solver failure is recorded with
its message. A method whose run takes over ``--case-cap`` seconds is skipped in the later (larger) cases of the
same dtype; with ``--budget`` no new run starts after that many seconds. The JSON and the table are rewritten
after every row, so a run stopped from outside keeps what it measured.

    python bench/cuda.py [--quick] [--out DIR]             # writes DIR/cuda_bench.json and DIR/cuda_bench.md
    python bench/cuda.py --quick --out "$OUT" --budget 200  # as bench/gpu_cuda.sh runs it (about 3 minutes)
    python bench/cuda.py --full                             # rkm's CPU path at every dense N too
    python bench/cuda.py --only rkm-cuda torch-lobpcg

Results go into bench/RESULTS.md by hand, with the GPU, driver and runtime named (the table's header gives them).
Needs rkm built with ``-Ccmake.define.RKM_CUDA=ON``; torch and cupy are optional (imported only when used).
"""

import argparse
import json
import os
import platform
import time
import traceback

import numpy as np

N_EIGEN = 10
DENSE_CASES = [(20_000, 64), (20_000, 784), (50_000, 64), (50_000, 784)]
MATRIX_FREE_CASES = [(200_000, 64)]
QUICK_DIVISOR = 10
CPU_MAX_N = 20_000  # rkm's CPU path runs at this full-size N and below, unless --full
EIGH_MAX_N = 20_000  # torch.linalg.eigh only up to this N (it is O(N^3))
WARM_UP_N = 1024
DTYPES = ("float32", "float64")
METHODS = ("rkm-cuda", "torch-lobpcg", "torch-eigh", "cupy-eigsh", "rkm-cpu")
LABELS = {
    "rkm-cuda": "rkm cuda",
    "torch-lobpcg": "torch lobpcg",
    "torch-eigh": "torch eigh",
    "cupy-eigsh": "cupy eigsh",
    "rkm-cpu": "rkm cpu",
}
GPU_PEERS = ("torch-lobpcg", "torch-eigh", "cupy-eigsh")
REFERENCE_ORDER = ("torch-eigh", "rkm-cuda", "torch-lobpcg", "cupy-eigsh", "rkm-cpu")
GEMM_COLUMNS = 4096  # the column count of the matrix-free tile in the GEMM-rate context measurement
CUPY_TILE_BYTES = 1 << 30  # row tiles of the CuPy matrix-free operator: at most 1 GiB of kernel values each


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---------------------------------------------------------------------------------------------- data, timing


def make_data(n, d, seed=0):
    """(X float64 of shape (n, d), gamma): standard normal features, feature j scaled by j^-1/2, gamma = 1 / sum of
    the feature variances (mean squared distance between rows 2 / gamma)."""
    scales = np.arange(1, d + 1) ** -0.5
    X = np.random.default_rng(seed).standard_normal((n, d)) * scales
    return X, 1.0 / float(np.sum(scales**2))


def synchronize():
    """Wait for every queued GPU operation of torch and CuPy (those already imported)."""
    import sys

    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    if "cupy" in sys.modules:
        try:
            sys.modules["cupy"].cuda.Device().synchronize()
        except Exception:  # noqa: BLE001 (no device: nothing to wait for)
            pass


def release_gpu_memory():
    """Return the memory that torch's and CuPy's caching allocators hold to the device (before rkm allocates)."""
    import gc
    import sys

    gc.collect()
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        sys.modules["torch"].cuda.empty_cache()
    if "cupy" in sys.modules:
        try:
            sys.modules["cupy"].get_default_memory_pool().free_all_blocks()
            sys.modules["cupy"].get_default_pinned_memory_pool().free_all_blocks()
        except Exception:  # noqa: BLE001
            pass


def measure(run, repeats, cap):
    """(median seconds, number of runs, result of the last run) of up to ``repeats`` synchronised calls of
    ``run``; stops early when one more run would take the calls past ``cap`` seconds."""
    seconds, result, start = [], None, time.perf_counter()
    while len(seconds) < repeats:
        synchronize()
        t0 = time.perf_counter()
        result = run()
        synchronize()
        seconds.append(time.perf_counter() - t0)
        if time.perf_counter() - start + seconds[-1] > cap:
            break
    return float(np.median(seconds)), len(seconds), result


def top_descending(values, k=N_EIGEN):
    return np.sort(np.asarray(values, dtype=np.float64))[::-1][:k]


# ---------------------------------------------------------------------------------------------- rkm


def rkm_fit(X, gamma, storage, device, n_threads):
    """rkm.KernelPCA fit: the top eigenvalues and the number of block products."""
    import rkm

    model = rkm.KernelPCA(
        n_components=N_EIGEN,
        kernel="rbf",
        gamma=gamma,
        kernel_storage=storage,
        solver="krylov",
        device=device,
        random_state=0,
        n_threads=n_threads,
    )
    model.fit(X)
    return {"eigenvalues": top_descending(model.eigenvalues_), "n_iter": int(model.n_iter_)}


def rkm_kernel_timings(X, gamma, repeats, cap):
    """Seconds of kernel_matrix (K to a new host array) and of kernel_product with one column (K evaluated on the
    device, neither stored nor copied) on the GPU, for the notes of the dense rkm cuda rows."""
    from rkm.kernels import kernel_matrix, kernel_product

    B = np.ones((X.shape[0], 1), dtype=X.dtype)
    out = {}
    for name, run in (
        ("kernel_product_seconds", lambda: kernel_product(X, None, B, "rbf", gamma=gamma, device="cuda")),
        ("kernel_matrix_seconds", lambda: kernel_matrix(X, None, "rbf", gamma=gamma, device="cuda")),
    ):
        try:
            out[name] = measure(run, repeats, cap)[0]
        except Exception as error:  # noqa: BLE001 (a note, not the row)
            out[name.replace("seconds", "error")] = f"{type(error).__name__}: {error}"
    return out


# ---------------------------------------------------------------------------------------------- PyTorch


def torch_module(device="cuda"):
    """torch, checked to have CUDA when ``device`` is a CUDA device, with TF32 off (full float32, as rkm's cuBLAS
    calls)."""
    import torch

    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError("torch: CUDA not available (torch.cuda.is_available() is False)")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return torch


def torch_centred_kernel(torch, X, gamma, device="cuda"):
    """The double-centred RBF kernel matrix of X (NumPy) on ``device``: one GEMM, then in-place passes."""
    Xt = torch.as_tensor(X, device=device)
    Xt = Xt - Xt.mean(dim=0)
    sq = (Xt * Xt).sum(dim=1)
    K = Xt @ Xt.T
    K.mul_(2.0 * gamma).sub_(gamma * sq[:, None]).sub_(gamma * sq[None, :]).clamp_(max=0.0).exp_()
    means = K.sum(dim=0, dtype=torch.float64) / K.shape[0]  # column means in double, also for float32
    K.sub_(means.to(K.dtype)[None, :]).sub_(means.to(K.dtype)[:, None]).add_(means.mean().item())
    return K


def torch_lobpcg(X, gamma, device="cuda"):
    torch = torch_module(device)
    torch.manual_seed(0)
    K = torch_centred_kernel(torch, X, gamma, device)
    steps = [0]

    def tracker(worker):
        steps[0] += 1

    values, _ = torch.lobpcg(K, k=N_EIGEN, largest=True, tracker=tracker)
    result = {"eigenvalues": top_descending(values.cpu().numpy()), "n_iter": steps[0]}
    del K
    return result


def torch_eigh(X, gamma, device="cuda"):
    torch = torch_module(device)
    K = torch_centred_kernel(torch, X, gamma, device)
    values, vectors = torch.linalg.eigh(K)  # eigenpairs, as the other methods compute
    result = {"eigenvalues": top_descending(values[-N_EIGEN:].cpu().numpy())}
    del K, vectors
    return result


# ---------------------------------------------------------------------------------------------- CuPy


def cupy_rbf_from_gram():
    """An elementwise kernel turning a Gram block G (with the rows' and columns' squared norms) into RBF values in
    place: exp(min(gamma (2 G - a_i - b_j), 0)) (the min clips rounding above 0 on the diagonal)."""
    import cupy

    return cupy.ElementwiseKernel(
        "T a, T b, T gamma",
        "T g",
        "T t = gamma * (2 * g - a - b); g = exp(t < (T)0 ? t : (T)0);",
        "rkm_bench_rbf_from_gram",
    )


def cupy_shifted(X):
    import cupy

    Xc = cupy.array(X)  # a copy (on the device), shifted in place
    Xc -= Xc.mean(axis=0)
    return cupy, Xc, (Xc * Xc).sum(axis=1)


def cupy_dense(X, gamma):
    from cupyx.scipy.sparse.linalg import eigsh

    cupy, Xc, sq = cupy_shifted(X)
    K = Xc @ Xc.T
    cupy_rbf_from_gram()(sq[:, None], sq[None, :], Xc.dtype.type(gamma), K)
    means = K.sum(axis=0, dtype=cupy.float64) / K.shape[0]
    K -= means.astype(K.dtype)[None, :]
    K -= means.astype(K.dtype)[:, None]
    K += K.dtype.type(float(means.mean()))
    values = eigsh(K, k=N_EIGEN, which="LA", return_eigenvectors=True)[0]
    result = {"eigenvalues": top_descending(cupy.asnumpy(values))}
    del K
    return result


def cupy_matrix_free(X, gamma):
    """eigsh on a LinearOperator v -> C K C v that recomputes K in row tiles (GEMM + elementwise kernel) at every
    product; n_iter counts the products."""
    from cupyx.scipy.sparse.linalg import LinearOperator, eigsh

    cupy, Xc, sq = cupy_shifted(X)
    n, dtype = Xc.shape[0], Xc.dtype
    rows = max(1, min(n, CUPY_TILE_BYTES // (n * dtype.itemsize)))
    tile = cupy.empty((rows, n), dtype=dtype)
    rbf = cupy_rbf_from_gram()
    g = dtype.type(gamma)
    products = [0]

    def matvec(v):
        products[0] += 1
        u = v.ravel() - v.mean()
        y = cupy.empty(n, dtype=dtype)
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            block = tile[: stop - start]
            cupy.matmul(Xc[start:stop], Xc.T, out=block)
            rbf(sq[start:stop, None], sq[None, :], g, block)
            y[start:stop] = block @ u
        return y - y.mean()

    operator = LinearOperator((n, n), matvec=matvec, dtype=dtype)
    values = eigsh(operator, k=N_EIGEN, which="LA", return_eigenvectors=True)[0]
    return {"eigenvalues": top_descending(cupy.asnumpy(values)), "n_iter": products[0]}


# ---------------------------------------------------------------------------------------------- context


def _version_text(value):
    """CUDA's integer versions (13000 -> "13.0"), (major, minor) pairs (9, 0) -> "9.0", anything else as text."""
    if isinstance(value, int) and value >= 1000:
        return f"{value // 1000}.{value % 1000 // 10}"
    if isinstance(value, (tuple, list)):
        return ".".join(str(part) for part in value)
    return str(value)


def device_description():
    """GPU name, memory, compute capability, driver and runtime versions: rkm's cuda_info, else torch."""
    info = {}
    try:
        from rkm import _core

        cuda = _core.cuda_info()
        info["rkm_cuda_info"] = {k: v for k, v in cuda.items() if k != "devices"}
        if cuda.get("devices"):
            device = cuda["devices"][0]
            info.update(
                gpu=device.get("name"),
                gpu_total_bytes=device.get("total_bytes"),
                compute_capability=_version_text(device.get("compute_capability")),
            )
        for key in ("runtime_version", "driver_version"):
            if cuda.get(key):
                info[key.replace("_version", "")] = _version_text(cuda[key])
    except Exception as error:  # noqa: BLE001
        info["rkm_error"] = f"{type(error).__name__}: {error}"
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info.setdefault("gpu", torch.cuda.get_device_name(0))
            info.setdefault("gpu_total_bytes", torch.cuda.get_device_properties(0).total_memory)
    except Exception as error:  # noqa: BLE001
        info["torch"] = f"unavailable ({type(error).__name__}: {error})"
    try:
        import cupy

        info["cupy"] = cupy.__version__
    except Exception as error:  # noqa: BLE001
        info["cupy"] = f"unavailable ({type(error).__name__}: {error})"
    try:
        import rkm

        info["rkm"] = getattr(rkm, "__version__", "installed")
    except Exception as error:  # noqa: BLE001
        info["rkm"] = f"unavailable ({type(error).__name__}: {error})"
    info.setdefault("gpu", "none found")
    return info


def context_measurements(gemm_rows, d):
    """Device copy bandwidth (bytes read + written per second) and the GEMM rate of (gemm_rows x d) @ (d x 4096)
    in float32 and float64, through torch with CUDA events; medians of 10 after 3 warm-ups."""
    out = {}
    try:
        torch = torch_module()

        def event_median(function, runs=10):
            for _ in range(3):
                function()
            times = []
            for _ in range(runs):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                function()
                stop.record()
                stop.synchronize()
                times.append(start.elapsed_time(stop) / 1e3)
            return float(np.median(times))

        source = torch.rand(1 << 29, device="cuda")  # 2 GiB of float32
        target = torch.empty_like(source)
        seconds = event_median(lambda source=source, target=target: target.copy_(source))
        out["copy_bytes"] = 2 * source.numel() * source.element_size()
        out["copy_gb_per_s"] = out["copy_bytes"] / seconds / 1e9
        del source, target
        out["gemm_shape"] = f"({gemm_rows} x {d}) @ ({d} x {GEMM_COLUMNS})"
        for dtype in DTYPES:
            A = torch.randn(gemm_rows, d, device="cuda", dtype=getattr(torch, dtype))
            B = torch.randn(d, GEMM_COLUMNS, device="cuda", dtype=A.dtype)
            C = torch.empty(gemm_rows, GEMM_COLUMNS, device="cuda", dtype=A.dtype)
            seconds = event_median(lambda A=A, B=B, C=C: torch.matmul(A, B, out=C))
            out[f"gemm_{dtype}_tflops"] = 2.0 * gemm_rows * d * GEMM_COLUMNS / seconds / 1e12
            del A, B, C
    except Exception as error:  # noqa: BLE001
        out["error"] = f"{type(error).__name__}: {error}"
    release_gpu_memory()
    return out


# ---------------------------------------------------------------------------------------------- the benchmark


class Bench:
    """Runs the cases, keeps the rows, rewrites the JSON and the markdown table after each row."""

    def __init__(self, args):
        self.args = args
        self.start = time.perf_counter()
        self.rows = []
        self.slow = {}  # (method, dtype) -> seconds of the run that went over --case-cap
        self.warm = set()
        self.references = {}
        self.meta = {}
        self.context = {}

    # ------------------------------------------------------------------ bookkeeping

    def elapsed(self):
        return time.perf_counter() - self.start

    def skip_reason(self, method, dtype):
        if (method, dtype) in self.slow:
            return f"skipped: an earlier case took {self.slow[method, dtype]:.0f} s (over --case-cap)"
        if self.args.budget is not None and self.elapsed() > self.args.budget:
            return f"skipped: --budget {self.args.budget:.0f} s spent"
        return None

    def add(self, row):
        self.rows.append(row)
        status = (
            f"{row['seconds']:.3f} s ({row['runs']} runs)"
            if row.get("seconds") is not None
            else row.get("error") or row.get("skipped")
        )
        log(f"  {row['case']} {row['dtype']} {LABELS[row['method']]}: {status}")
        self.save()

    def save(self):
        out = self.args.out
        os.makedirs(out, exist_ok=True)
        record = {
            "meta": {**self.meta, "elapsed_seconds": self.elapsed()},
            "context": self.context,
            "references": self.references,
            "rows": self.rows,
        }
        for name, text in (
            ("cuda_bench.json", json.dumps(record, indent=1, default=_json_default)),
            ("cuda_bench.md", render(record)),
        ):
            temporary = os.path.join(out, f".{name}.tmp")
            with open(temporary, "w") as file:
                file.write(text)
            os.replace(temporary, os.path.join(out, name))

    # ------------------------------------------------------------------ running

    def runner(self, method, storage):
        """The function X, gamma -> {"eigenvalues", "n_iter"?} of a method for a storage ("dense"/"matrix_free")."""
        threads = self.args.n_threads
        if method == "rkm-cuda":
            return lambda X, gamma: rkm_fit(X, gamma, storage, "cuda", threads)
        if method == "rkm-cpu":
            return lambda X, gamma: rkm_fit(X, gamma, storage, "cpu", threads)
        if method == "torch-lobpcg":
            return torch_lobpcg
        if method == "torch-eigh":
            return torch_eigh
        if method == "cupy-eigsh":
            return cupy_matrix_free if storage == "matrix_free" else cupy_dense
        raise ValueError(method)

    def applicable(self, method, storage, full_n):
        """None when ``method`` runs in this case, else why not."""
        if storage == "matrix_free" and method in ("torch-lobpcg", "torch-eigh"):
            return "not run: torch.lobpcg and eigh take a stored matrix"
        if method == "torch-eigh" and full_n > EIGH_MAX_N:
            return f"not run: eigh only up to N = {EIGH_MAX_N} (full size)"
        if method == "rkm-cpu" and not self.args.full and (storage == "matrix_free" or full_n > CPU_MAX_N):
            return f"not run: rkm cpu only at N = {CPU_MAX_N} (full size) without --full"
        return None

    def run_method(self, method, storage, X, gamma, case, dtype):
        """One row: warm-up (first use of the method and dtype), timed runs, notes."""
        row = {"case": case["name"], "n": case["n"], "d": case["d"], "storage": storage, "dtype": dtype}
        row["method"] = method
        reason = self.skip_reason(method, dtype)
        if reason:
            return {**row, "skipped": reason}
        run = self.runner(method, storage)
        context = _thread_limits(self.args.n_threads) if method == "rkm-cpu" else _nothing()
        try:
            with context:
                if (method, dtype) not in self.warm:
                    run(X[: min(WARM_UP_N, X.shape[0])].copy(), gamma)
                    self.warm.add((method, dtype))
                seconds, runs, result = measure(lambda: run(X, gamma), self.args.repeats, self.args.case_cap)
        except Exception as error:  # noqa: BLE001 (a missing library, out of memory, a solver failure: a row)
            release_gpu_memory()
            message = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
            return {**row, "error": message[:400], "traceback": traceback.format_exc(limit=4)[-2000:]}
        if seconds > self.args.case_cap:
            self.slow[method, dtype] = seconds
        row.update(seconds=seconds, runs=runs, eigenvalues=result["eigenvalues"].tolist())
        if "n_iter" in result:
            row["n_iter"] = result["n_iter"]
        if method == "rkm-cuda":
            row.update(self.rkm_cuda_notes(storage, X, gamma, row))
        release_gpu_memory()
        return row

    def rkm_cuda_notes(self, storage, X, gamma, row):
        """The estimates of the module docstring: dense: kernel timings, eigen seconds, GB/s per block product;
        matrix-free: kernel values per second and the Gram GEMM rate."""
        n, d, itemsize, iterations = X.shape[0], X.shape[1], X.dtype.itemsize, row.get("n_iter")
        notes = {}
        if storage == "dense":
            if self.skip_reason("rkm-cuda", str(X.dtype)):
                return notes  # over the budget or the case cap: no extra kernel timings
            notes.update(rkm_kernel_timings(X, gamma, self.args.repeats, self.args.case_cap))
            kernel = notes.get("kernel_product_seconds")
            if kernel is not None and iterations:
                eigen = row["seconds"] - kernel
                notes["eigen_seconds_estimate"] = eigen
                if eigen > 0:
                    notes["gb_per_s_per_block_product"] = n * n * itemsize * iterations / eigen / 1e9
        elif iterations:
            notes["kernel_values_per_s"] = n * n * iterations / row["seconds"]
            notes["gram_tflops_estimate"] = 2.0 * n * n * d * iterations / row["seconds"] / 1e12
        return notes

    def run_case(self, n, d, storage, full_n, methods):
        name = f"{'matrix-free' if storage == 'matrix_free' else 'dense'} N={n} d={d}"
        log(f"case {name}")
        case = {"name": name, "n": n, "d": d}
        X64, gamma = make_data(n, d)
        for dtype in DTYPES:
            X = np.ascontiguousarray(X64, dtype=dtype)
            for method in methods:
                reason = self.applicable(method, storage, full_n)
                if reason is None:
                    row = self.run_method(method, storage, X, gamma, case, dtype)
                    row["gamma"] = gamma
                    self.add(row)
        self.references[name] = reference_and_errors([r for r in self.rows if r["case"] == name])
        self.save()

    def run(self):
        args = self.args
        divisor = QUICK_DIVISOR if args.quick else 1
        self.meta = {
            "script": "bench/cuda.py",
            "quick": args.quick,
            "full": args.full,
            "repeats": args.repeats,
            "case_cap_seconds": args.case_cap,
            "budget_seconds": args.budget,
            "n_threads": args.n_threads,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "n_eigen": N_EIGEN,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        }
        self.meta.update(device_description())
        log(f"GPU: {self.meta.get('gpu')}; torch {self.meta.get('torch')}; cupy {self.meta.get('cupy')}")
        self.save()
        n_mf, d_mf = MATRIX_FREE_CASES[0]
        self.context = context_measurements(n_mf // divisor, d_mf)
        log(f"context: {self.context}")
        self.save()
        methods = [m for m in METHODS if m in args.only]
        cases = [(n, d, "dense") for n, d in DENSE_CASES] + [(n, d, "matrix_free") for n, d in MATRIX_FREE_CASES]
        for n, d, storage in cases:
            if storage in args.storage:
                self.run_case(n // divisor, d, storage, n, methods)
        self.meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        self.save()
        log(f"wrote {os.path.join(args.out, 'cuda_bench.json')} and cuda_bench.md ({self.elapsed():.0f} s)")


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _thread_limits(n_threads):
    """OpenMP and BLAS threads pinned to ``n_threads`` for rkm's CPU rows (threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_limits

        return threadpool_limits(limits=n_threads)
    except ImportError:
        return _nothing()


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def reference_and_errors(rows):
    """Pick the float64 reference of one case (REFERENCE_ORDER) and set every measured row's relative error."""
    measured = {(r["method"], r["dtype"]): r for r in rows if r.get("eigenvalues")}
    reference = next((m for m in REFERENCE_ORDER if (m, "float64") in measured), None)
    if reference is None:
        return {"method": None}
    ref = np.asarray(measured[reference, "float64"]["eigenvalues"])
    for row in measured.values():
        values = np.asarray(row["eigenvalues"])
        if values.shape == ref.shape:
            row["max_relative_error"] = float(np.max(np.abs(values - ref)) / abs(ref[0]))
    return {"method": reference, "eigenvalues": ref.tolist()}


# ---------------------------------------------------------------------------------------------- markdown


def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def _notes(row):
    if row.get("error"):
        return f"error: {row['error']}"
    if row.get("skipped"):
        return row["skipped"]
    parts = []
    if row.get("kernel_product_seconds") is not None:
        parts.append(f"K evaluated (kernel_product, 1 column) {row['kernel_product_seconds']:.3f} s")
    if row.get("kernel_matrix_seconds") is not None:
        parts.append(f"kernel_matrix (K to host) {row['kernel_matrix_seconds']:.3f} s")
    if row.get("eigen_seconds_estimate") is not None:
        parts.append(f"eigen step ~{row['eigen_seconds_estimate']:.3f} s")
    if row.get("gb_per_s_per_block_product") is not None:
        parts.append(f"~{row['gb_per_s_per_block_product']:.0f} GB/s per block product")
    if row.get("kernel_values_per_s") is not None:
        parts.append(f"~{row['kernel_values_per_s'] / 1e9:.1f} G kernel values/s")
    if row.get("gram_tflops_estimate") is not None:
        parts.append(f"Gram GEMM ~{row['gram_tflops_estimate']:.1f} TFLOP/s")
    for key in ("kernel_product_error", "kernel_matrix_error"):
        if row.get(key):
            parts.append(f"{key.split('_error')[0]} failed: {row[key]}")
    return "; ".join(parts)


def render(record):
    """The markdown table of a record (the JSON's content)."""
    meta, context, rows = record["meta"], record["context"], record["rows"]
    memory = meta.get("gpu_total_bytes")
    lines = [
        "# CUDA path: RBF kernel build + top-10 eigenpairs (bench/cuda.py)",
        "",
        f"- GPU: {meta.get('gpu')}"
        + (f", {memory / 2**30:.1f} GiB" if memory else "")
        + (f", compute capability {meta['compute_capability']}" if meta.get("compute_capability") else ""),
        f"- CUDA driver {meta.get('driver', '?')}, runtime {meta.get('runtime', '?')} (rkm.cuda_info); "
        f"torch {meta.get('torch')} (CUDA {meta.get('torch_cuda')}), cupy {meta.get('cupy')}, rkm {meta.get('rkm')}",
        f"- CPU: {meta.get('cpu_count')} cores, rkm cpu rows with n_threads={meta.get('n_threads')} "
        f"(OMP_NUM_THREADS={meta.get('omp_num_threads')}); {meta.get('platform')}",
        f"- {'--quick (N / 10)' if meta.get('quick') else 'full sizes'}"
        + (", --full (rkm cpu at every dense N)" if meta.get("full") else "")
        + f"; median of up to {meta.get('repeats')} runs; case cap {meta.get('case_cap_seconds')} s; "
        f"started {meta.get('started')}, {meta.get('elapsed_seconds', 0):.0f} s so far"
        + (", finished" if meta.get("finished") else " (not finished)"),
        "",
    ]
    if context:
        parts = []
        if context.get("copy_gb_per_s"):
            parts.append(
                f"device copy {context['copy_gb_per_s']:.0f} GB/s (read + write, {context['copy_bytes'] / 2**30:.0f} "
                "GiB moved per copy)"
            )
        gemm = [f"{context[f'gemm_{t}_tflops']:.1f} TFLOP/s {t}" for t in DTYPES if f"gemm_{t}_tflops" in context]
        if gemm:
            parts.append(f"cuBLAS GEMM {context['gemm_shape']}: {', '.join(gemm)} (torch.matmul, no TF32)")
        if context.get("error"):
            parts.append(f"not measured further: {context['error']}")
        lines += ["Context: " + "; ".join(parts) + ".", ""]
    fastest = {}
    for row in rows:
        if row["method"] in GPU_PEERS and row.get("seconds") is not None:
            key = (row["case"], row["dtype"])
            fastest[key] = min(fastest.get(key, np.inf), row["seconds"])
    header = ["case", "dtype", "method", "seconds", "runs", "max rel. eigenvalue error", "x fastest GPU peer"]
    header += ["n_iter", "notes"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        peer = fastest.get((row["case"], row["dtype"]))
        ratio = row["seconds"] / peer if row.get("seconds") is not None and peer else None
        cells = [
            row["case"],
            row["dtype"],
            LABELS[row["method"]],
            _fmt(row.get("seconds"), ".3f"),
            _fmt(row.get("runs"), "d"),
            _fmt(row.get("max_relative_error"), ".1e"),
            _fmt(ratio, ".2f"),
            _fmt(row.get("n_iter"), "d"),
            _notes(row).replace("|", "/"),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    references = record.get("references", {})
    if references:
        lines += ["", "References (float64; error = max_i |l_i - ref_i| / ref_1 over the top 10):"]
        for case, reference in references.items():
            lines.append(f"- {case}: {LABELS.get(reference.get('method'), 'none (no float64 row ran)')}")
    lines += [
        "",
        "Seconds: the whole pipeline from X in host memory to the eigenvalues in host memory. rkm cuda dense notes: "
        "K evaluated = kernel_product with one column (the kernel on the device, not stored); eigen step ~ = fit "
        "seconds minus that; GB/s per block product = N^2 * itemsize * n_iter / eigen step; kernel_matrix copies K "
        "to a new host array. Matrix-free notes assume one full evaluation of K per block product. n_iter: block "
        "products (rkm), LOBPCG iterations (torch), operator products (cupy matrix-free). Not run by design: torch "
        f"lobpcg and eigh in the matrix-free case (they take a stored matrix), torch eigh above N = {EIGH_MAX_N} and "
        f"rkm cpu above N = {CPU_MAX_N} or matrix-free without --full (sizes before --quick's division).",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] + " " + __doc__.splitlines()[1])
    parser.add_argument("--quick", action="store_true", help="N divided by 10 (2000, 5000, 20 000): about 3 minutes")
    parser.add_argument("--full", action="store_true", help="rkm's CPU path at every dense N (slow at 50 000)")
    parser.add_argument(
        "--out", default=os.environ.get("OUT", "."), help="folder for cuda_bench.json and cuda_bench.md ($OUT or .)"
    )
    parser.add_argument("--n-threads", type=int, default=16, help="threads of rkm's CPU rows (default 16)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per row, median reported (default 3)")
    parser.add_argument(
        "--case-cap",
        type=float,
        default=60.0,
        help="seconds: fewer repeats past it, and a method whose run takes longer skips its later cases (default 60)",
    )
    parser.add_argument("--budget", type=float, default=None, help="seconds after which no new run starts")
    parser.add_argument("--only", nargs="+", choices=METHODS, default=list(METHODS), help="methods to run")
    parser.add_argument(
        "--storage", nargs="+", choices=("dense", "matrix_free"), default=["dense", "matrix_free"], help="cases"
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.n_threads < 1:
        parser.error("--repeats and --n-threads: at least 1")
    return args


def main(argv=None):
    Bench(parse_args(argv)).run()


if __name__ == "__main__":
    main()
