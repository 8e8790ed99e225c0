"""cpu_reference: hipDNN's CPU reference graph executor as a Python engine plugin (numpy).

One engine, ``HIPDNN_CABI_CPU_REFERENCE_ENGINE``: convolution (fwd / bwd data / bwd filter),
batchnorm (inference, inference with variance, training forward, backward), every pointwise
mode, matmul, reduction, layernorm and rmsnorm (forward / backward) and multi-node graphs of
them, on host-accessible memory.  Plugin API version 1.2.0 (runtime pass-by-value scalars).
See docs/cpu_reference.md.

Load it in-process with ``hipdnn_cabi.plugin_sdk.loader.load_python_plugin(<this directory>)``
or by module name ``engine_plugins.cpu_reference``; as an entry point of the
``hipdnn_cabi.engine_plugins`` group: ``cpu_reference = engine_plugins.cpu_reference:hipdnn_plugin``.

Importing this package does not import the plugin SDK until the plugin is asked for, so the
numeric kernels (``.kernels``) stay usable on their own.
"""
from __future__ import annotations

ENGINE_NAME = "HIPDNN_CABI_CPU_REFERENCE_ENGINE"


def create_plugin():
    """The plugin instance (what load_python_plugin looks for)."""
    from .engine import CpuReferencePlugin
    return CpuReferencePlugin()


def __getattr__(name):
    # ``hipdnn_plugin`` (the plugin class) resolved lazily
    if name == "hipdnn_plugin":
        from .engine import CpuReferencePlugin
        return CpuReferencePlugin
    raise AttributeError(name)
