"""The ``device`` parameter: "cpu", or "cuda" / "cuda:N" for the CUDA path (rkm built with RKM_CUDA=ON)."""

import re

_CUDA = re.compile(r"cuda(?::(\d+))?")


def check_device(device, name="device"):
    """None for the CPU, the CUDA device's index for "cuda" (device 0) or "cuda:N"; ValueError otherwise.

    Whether the CUDA path exists and the device is usable is checked by the core when it runs, which raises
    rkm.exceptions.DeviceError saying why (rkm built without CUDA, no driver, no such device).
    """
    if isinstance(device, str):
        if device == "cpu":
            return None
        match = _CUDA.fullmatch(device)
        if match:
            return int(match.group(1) or 0)
    raise ValueError(f"{name}: must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
