"""hipDNN FlatBuffers schemas: our .fbs files, flatc-generated Python code, a verifier.

* ``fbs/*.fbs`` — schema files generated from the pinned facts
  (``tools/gen_fbs.py``; namespace ``hipdnn_flatbuffers_sdk.data_objects``).
* ``_generated/<Type>.py`` — flatc's Python classes, one module per type
  (``tools/gen_flatbuffers_py.py``), e.g.
  ``from hipdnn_cabi.schemas._generated.Graph import Graph`` (reader) and
  ``from hipdnn_cabi.schemas._generated import Graph as G; G.Start(b) ...`` (builder);
  ``_generated/schema_table.py`` — compact table/union/struct/enum description.
* ``verifier`` — ``verify(buf, root_table, file_identifier=None)``: run it on every
  untrusted buffer before reading it.
* ``tensor_value`` — the ``TensorAttributes.value`` union (members are structs,
  which flatc's Python generator cannot express).
* ``dump`` — ``to_dict(buf, root_table)`` generic reader (debugging/tests).

See docs/schemas.md.
"""
from .verifier import VerificationError, verify, verify_file_root, has_identifier  # noqa: F401

__all__ = ["VerificationError", "verify", "verify_file_root", "has_identifier"]
