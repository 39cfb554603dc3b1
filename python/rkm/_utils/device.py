"""The ``device`` parameter: "cpu", or "cuda" / "cuda:N" for the CUDA path (rkm built with RKM_CUDA=ON)."""

import importlib.util
import os
import re

from rkm import _core
from rkm._core import DeviceError

_CUDA = re.compile(r"cuda(?::(\d+))?")

# Where a CUDA toolkit keeps its libraries when no package manager put them on the library search path.
_TOOLKIT_LIBRARY_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib")


def check_device(device, name="device"):
    """None for the CPU, the CUDA device's index for "cuda" (device 0) or "cuda:N"; ValueError otherwise.

    Whether the CUDA path exists and the device is usable is checked by :func:`require_cuda` (or by the core
    when it runs), which raises rkm.exceptions.DeviceError saying why (rkm built without CUDA, no driver, no
    such device).
    """
    if isinstance(device, str):
        if device == "cpu":
            return None
        match = _CUDA.fullmatch(device)
        if match:
            return int(match.group(1) or 0)
    raise ValueError(f"{name}: must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")


def cublas_directories():
    """Directories that may hold cuBLAS, in the order tried: $RKM_CUBLAS_DIR (a path list), the nvidia-cublas
    wheels' (CUDA 13 and 12 layouts, found without importing anything), $CUDA_HOME's and the toolkit's usual
    places. The core then tries the dynamic linker's own search, which also finds a copy PyTorch or CuPy loaded."""
    directories = [d for d in os.environ.get("RKM_CUBLAS_DIR", "").split(os.pathsep) if d]
    spec = importlib.util.find_spec("nvidia")
    for base in spec.submodule_search_locations if spec and spec.submodule_search_locations else ():
        directories += [os.path.join(base, "cu13", "lib"), os.path.join(base, "cublas", "lib")]
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            directories.append(os.path.join(os.environ[variable], "lib64"))
    directories += _TOOLKIT_LIBRARY_DIRS
    return [d for d in directories if os.path.isdir(d)]


def require_cuda(index, *, cublas=False):
    """The description (name, free_bytes, ...) of CUDA device `index`; DeviceError when rkm was built without
    CUDA, no driver or no such device is present, or (cublas=True, for the routines that multiply on the GPU)
    cuBLAS cannot be loaded. Allocates nothing on the device."""
    info = _core.cuda_info(index)
    devices = info["devices"]
    if not devices:
        raise DeviceError(f"device='cuda': {info['reason']}")
    if index >= len(devices):
        raise DeviceError(f"device: no CUDA device {index} ({len(devices)} visible)")
    if cublas:
        _core.cuda_load_cublas(cublas_directories())
    return devices[index]


def cuda_for_input(device, kernel_name, *, feature_map=False, sparse=False, in_memory=True):
    """The CUDA device index an estimator's fit uses (None: the CPU), after the checks every model shares:
    ValueError naming ``device`` for what the GPU path cannot take (a feature map, a precomputed or callable
    kernel, sparse or out-of-memory X), then DeviceError when the GPU or cuBLAS is missing."""
    index = check_device(device)
    if index is None:
        return None
    if feature_map:
        raise ValueError("device: 'cuda' holds the exact kernel on the GPU; with a feature_map use device='cpu'")
    if callable(kernel_name) or kernel_name == "precomputed":
        raise ValueError("device: 'cuda' evaluates a named kernel on the GPU, not a precomputed or callable one")
    if sparse or not in_memory:
        raise ValueError("device: 'cuda' takes dense in-memory X (not sparse or Dask arrays)")
    require_cuda(index, cublas=True)
    return index


# ---------------------------------------------------------------- DLPack: CuPy arrays and PyTorch CUDA tensors

_DLPACK_CUDA = 2  # kDLCUDA
_DLPACK_LIBRARIES = ("torch", "cupy")


def cuda_tensor_device(A):
    """The CUDA device of A when A is an array of a DLPack library in CUDA memory (a CuPy array, a PyTorch CUDA
    tensor), else None (NumPy arrays, CPU tensors, lists)."""
    dlpack_device = getattr(A, "__dlpack_device__", None)
    if dlpack_device is None or type(A).__module__.split(".")[0] == "numpy":
        return None
    device_type, device_id = dlpack_device()
    return int(device_id) if int(device_type) == _DLPACK_CUDA else None


def check_cuda_tensors(device, arrays):
    """The device index of a computation on CUDA tensors: `arrays` maps argument names to inputs (None: absent),
    the first a CUDA tensor; ValueError naming the argument when another one is not on the same device, or
    naming ``device`` when it does not ask for that device."""
    name, first = next(iter(arrays.items()))
    index = cuda_tensor_device(first)
    for other, A in arrays.items():
        if A is not None and cuda_tensor_device(A) != index:
            raise ValueError(f"{other}: must be a CUDA tensor on {name}'s device (cuda:{index}), like {name}")
    if check_device(device) not in (index, None) or device == "cpu":
        raise ValueError(f"device: {name} is in CUDA memory (cuda:{index}); pass device='cuda:{index}'")
    library = type(first).__module__.split(".")[0]
    if library not in _DLPACK_LIBRARIES:
        raise ValueError(f"{name}: CUDA arrays of CuPy or PyTorch are accepted, got a {type(first).__name__}")
    require_cuda(index, cublas=True)
    return index


def dlpack_capsule(A):
    """A's DLPack capsule, ordered after the work queued on A's stream: stream 1 is CUDA's legacy default stream,
    on which rkm runs."""
    return A.__dlpack__(stream=1)


class _ExportedTensor:
    """A result rkm computed on a GPU, as the DLPack producer ``from_dlpack`` takes (once)."""

    def __init__(self, capsule, device):
        self._capsule, self._device = capsule, device

    def __dlpack__(self, stream=None, **kwargs):
        # The result is complete when the core returns (it synchronises the device), so any stream may read it.
        capsule, self._capsule = self._capsule, None
        if capsule is None:
            raise BufferError("this result was exported already")
        return capsule

    def __dlpack_device__(self):
        return (_DLPACK_CUDA, self._device)


def tensor_like(capsule, device, template):
    """The capsule of a result on CUDA device `device` as an array of `template`'s library (CuPy or PyTorch),
    without a copy."""
    exported = _ExportedTensor(capsule, device)
    if type(template).__module__.split(".")[0] == "torch":
        import torch

        return torch.from_dlpack(exported)
    import cupy

    return cupy.from_dlpack(exported)
