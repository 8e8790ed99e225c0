"""Older spellings of hipDNN enumerators, emitted by tools/gen_headers.py as aliases (same values).

Code written against hipDNN headers of the last year must still compile: when upstream renamed an
enumerator (mostly the "_EXT only for extensions" clean-up, ROCm/rocm-libraries PR 6119, and the
SDPA FPROP/BPROP -> FWD/BWD renames), the old name stays available as an extra enumerator of the same
enum with the new name's value.  Define HIPDNN_CABI_NO_LEGACY_NAMES to hide them.  Sources for each
group are in docs/abi-choices.md ("Legacy enumerator spellings").

Every alias maps old name -> current name; the current name must exist in the pinned facts
(tools/gen_headers.py asserts it), so an alias can never carry a value of its own.
"""
from __future__ import annotations


def legacy_aliases(facts) -> dict[str, dict[str, str]]:
    """enum typedef -> {old name: current name}."""
    E = facts["enums"]
    out: dict[str, dict[str, str]] = {}

    def add(enum, old, new):
        vals = E[enum]["values"]
        assert new in vals, (enum, new)
        if old not in vals:
            out.setdefault(enum, {})[old] = new

    at, dt, ty = ("hipdnnBackendAttributeName_t", "hipdnnBackendDescriptorType_t",
                  "hipdnnBackendAttributeType_t")
    # Named in the issue / the pinned facts' notes.
    add(at, "HIPDNN_ATTR_ENGINE_SM_COUNT_TARGET", "HIPDNN_ATTR_ENGINE_CU_COUNT_TARGET_EXT")
    add(at, "HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE", "HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT")
    add(dt, "HIPDNN_INVALID_TYPE", "HIPDNN_INVALID_TYPE_EXT")
    add("hipdnnConvolutionMode_t", "HIPDNN_CONVOLUTION_MODE_CROSS_CORRELATION", "HIPDNN_CROSS_CORRELATION")
    add("hipdnnConvolutionMode_t", "HIPDNN_CONVOLUTION_MODE_CONVOLUTION", "HIPDNN_CONVOLUTION")
    add(ty, "HIPDNN_TYPE_DIAGONAL_ALIGNMENT", "HIPDNN_TYPE_DIAGONAL_ALIGNMENT_EXT")
    add(ty, "HIPDNN_TYPE_ATTENTION_IMPLEMENTATION", "HIPDNN_TYPE_ATTENTION_IMPLEMENTATION_EXT")
    # Descriptor types (facts notes + PR 6119).
    for old, new in [
        ("HIPDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DESCRIPTOR",
         "HIPDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR"),
        ("HIPDNN_BACKEND_OPERATION_SDPA_FPROP_DESCRIPTOR_EXT", "HIPDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR"),
        ("HIPDNN_BACKEND_OPERATION_SDPA_FPROP_DESCRIPTOR", "HIPDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR"),
        ("HIPDNN_BACKEND_OPERATION_SDPA_BPROP_DESCRIPTOR_EXT", "HIPDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR_EXT"),
        ("HIPDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR_EXT", "HIPDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR"),
        ("HIPDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR_EXT", "HIPDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR"),
        ("HIPDNN_BACKEND_KERNEL_CACHE_DESCRIPTOR_EXT", "HIPDNN_BACKEND_KERNEL_CACHE_DESCRIPTOR"),
        ("HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR_EXT",
         "HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR"),
        ("HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR_EXT",
         "HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR"),
    ]:
        add(dt, old, new)
    # Matmul attributes (PR 6119; the _EXT spelling is the one older backend code uses).
    for x in "ABC":
        add(at, f"HIPDNN_ATTR_OPERATION_MATMUL_{x}_EXT", f"HIPDNN_ATTR_OPERATION_MATMUL_{x}DESC")
        add(at, f"HIPDNN_ATTR_OPERATION_MATMUL_{x}", f"HIPDNN_ATTR_OPERATION_MATMUL_{x}DESC")
    # SDPA attributes: FPROP/BPROP -> FWD/BWD, same suffixes (PR 6119).
    for name in list(E[at]["values"]):
        for new_tok, old_tok in (("_SDPA_FWD_", "_SDPA_FPROP_"), ("_SDPA_BWD_", "_SDPA_BPROP_")):
            if new_tok in name:
                add(at, name.replace(new_tok, old_tok), name)
    # Pointwise modes: one snapshot spelled every mode HIPDNN_POINTWISE_MODE_<OP> (facts notes).
    pw = "hipdnnPointwiseMode_t"
    for name in list(E[pw]["values"]):
        add(pw, name.replace("HIPDNN_POINTWISE_", "HIPDNN_POINTWISE_MODE_", 1), name)
    return out
