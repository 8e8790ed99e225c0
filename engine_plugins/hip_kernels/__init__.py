"""hip_kernels: the HIP GPU engine plugin (Python, on hipdnn_cabi.plugin_sdk).

One engine, ``HIPDNN_CABI_HIP_KERNELS_ENGINE``: kernels are HIP-dialect C++ (``kernels/*.hip``
plus sources generated per plan with every size baked in), compiled at plan build with
hiprtc (ROCm) or NVRTC (NVIDIA) through :mod:`hipdnn_cabi.device`, cached on disk, and launched
asynchronously on the handle's stream.  With no GPU runtime the engine is never applicable
(0 engines), so loading it everywhere is harmless.  See docs/gpu.md.

Load in-process: ``hipdnn_cabi.plugin_sdk.loader.load_python_plugin(<this directory>)``; entry
point: ``hip_kernels = engine_plugins.hip_kernels:hipdnn_plugin``.
"""
from __future__ import annotations

ENGINE_NAME = "HIPDNN_CABI_HIP_KERNELS_ENGINE"


def create_plugin():
    from .engine import HipKernelsPlugin
    return HipKernelsPlugin()


def __getattr__(name):
    if name == "hipdnn_plugin":
        from .engine import HipKernelsPlugin
        return HipKernelsPlugin
    raise AttributeError(name)
