"""The internal C → Python entry points of libhipdnn_backend.so.

Each exported hipDNN function is a C shim (cdef/shims.c) that validates what it can in C and then
calls one of these ``extern "Python"`` functions.  Their signatures are chosen for Python: handles
and descriptors travel as int64 ids, creators return the new id (or ``-status``), data travels as
``char*`` plus a byte count computed in C.

This list is the single source of truth: cdef/build_backend.py declares exactly these, and
:func:`hipdnn_cabi.backend.entry.install` refuses to start unless every one has a Python body
(an unattached extern would silently return 0 == HIPDNN_STATUS_SUCCESS).
"""

# name -> C declaration (without the trailing semicolon)
EXTERNS = {
    "hpy_create_handle": "int64_t hpy_create_handle(void)",
    "hpy_destroy_handle": "int hpy_destroy_handle(int64_t h)",
    "hpy_set_stream": "int hpy_set_stream(int64_t h, uint64_t stream)",
    "hpy_get_stream": "int hpy_get_stream(int64_t h, uint64_t* out)",
    "hpy_create_descriptor": "int64_t hpy_create_descriptor(int type)",
    "hpy_destroy_descriptor": "int hpy_destroy_descriptor(int64_t d)",
    "hpy_materialize_descriptor": "int hpy_materialize_descriptor(int64_t d, int type)",
    "hpy_finalize": "int hpy_finalize(int64_t d)",
    "hpy_set_attribute": "int hpy_set_attribute(int64_t d, int name, int type, int64_t count, "
                         "const char* arr, int64_t nbytes)",
    "hpy_get_attribute": "int hpy_get_attribute(int64_t d, int name, int type, int64_t req, "
                         "int64_t* count, char* arr)",
    "hpy_execute": "int hpy_execute(int64_t h, int64_t plan, int64_t vp)",
    "hpy_create_and_deserialize_graph":
        "int hpy_create_and_deserialize_graph(int64_t* out, const char* data, size_t size)",
    "hpy_create_and_deserialize_json_graph":
        "int hpy_create_and_deserialize_json_graph(int64_t* out, const char* data, size_t size)",
    "hpy_get_serialized_binary_graph":
        "int hpy_get_serialized_binary_graph(int64_t d, size_t req, size_t* size, char* buf)",
    "hpy_get_serialized_json_graph":
        "int hpy_get_serialized_json_graph(int64_t d, size_t req, size_t* size, char* buf)",
    "hpy_get_serialized_execution_plan":
        "int hpy_get_serialized_execution_plan(int64_t d, size_t req, size_t* size, char* buf)",
    "hpy_create_and_deserialize_execution_plan":
        "int hpy_create_and_deserialize_execution_plan(int64_t h, int64_t* out, const char* data, "
        "size_t size)",
    "hpy_get_serialized_binary_graph_and_plan":
        "int hpy_get_serialized_binary_graph_and_plan(int64_t g, int64_t p, size_t req, size_t* size, "
        "char* buf)",
    "hpy_get_serialized_binary_contents":
        "int hpy_get_serialized_binary_contents(const char* data, size_t size, int* flags)",
    "hpy_logging_callback": "void hpy_logging_callback(int severity, const char* msg)",
    "hpy_log_api": "void hpy_log_api(const char* fn, int phase, int status)",
    "hpy_set_engine_plugin_paths":
        "int hpy_set_engine_plugin_paths(size_t n, char** paths, int mode)",
    "hpy_set_heuristic_plugin_paths":
        "int hpy_set_heuristic_plugin_paths(size_t n, char** paths, int mode)",
    "hpy_set_plugin_unload_mode": "int hpy_set_plugin_unload_mode(int mode)",
    "hpy_get_loaded_engine_plugin_paths":
        "int hpy_get_loaded_engine_plugin_paths(int64_t h, size_t* n, char** paths, size_t* maxlen)",
    "hpy_set_user_log_callback":
        "int hpy_set_user_log_callback(uint64_t cb, int min_level, int mode, uint64_t user)",
    "hpy_set_global_log_level": "int hpy_set_global_log_level(int level)",
    "hpy_get_engine_count": "int hpy_get_engine_count(int64_t h, size_t* n)",
    "hpy_get_engine_info":
        "int hpy_get_engine_info(int64_t h, size_t idx, int64_t* id, char* name, size_t* name_len, "
        "char* plugin, size_t* plugin_len, char* version, size_t* version_len, char* type, "
        "size_t* type_len)",
    "hpy_get_engine_id_by_name": "int hpy_get_engine_id_by_name(int64_t h, const char* name, int64_t* id)",
    "hpy_get_engine_name_by_id":
        "int hpy_get_engine_name_by_id(int64_t h, int64_t id, char* name, size_t* len)",
    "hpy_get_heuristic_policy_count": "int hpy_get_heuristic_policy_count(int64_t h, size_t* n)",
    "hpy_get_heuristic_policy_info":
        "int hpy_get_heuristic_policy_info(int64_t h, size_t idx, int64_t* id, char* name, "
        "size_t* name_len, char* plugin, size_t* plugin_len, char* pver, size_t* pver_len, "
        "char* aver, size_t* aver_len)",
    "hpy_write_engine_ranking_results":
        "int hpy_write_engine_ranking_results(int64_t h, int64_t g, int64_t* ids, size_t n, "
        "int* outcome)",
}

# The Python-plugin dispatchers ``hpy_plugin_<PluginFunction>(int slot, <exact args>)`` are not
# listed here: cdef/build_backend.py declares them from hipdnn_cabi.plugin_sdk.signatures and
# entry.install() attaches them through hipdnn_cabi.plugin_sdk.slots.install().

# Externs returning an int64 id on success and -status on failure.
ID_RETURNING = {"hpy_create_handle", "hpy_create_descriptor"}
VOID_RETURNING = {"hpy_logging_callback", "hpy_log_api"}
