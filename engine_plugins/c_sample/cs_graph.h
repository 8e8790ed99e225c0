/*
 * cs_graph.h -- the C sample engine's view of a hipDNN Graph FlatBuffer: a "program" of pointwise
 * nodes (ADD, MUL, RELU_FWD) over FLOAT tensors, plus the host-side kernel that runs it.
 */
#ifndef HIPDNN_CABI_C_SAMPLE_CS_GRAPH_H
#define HIPDNN_CABI_C_SAMPLE_CS_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#define CS_MAX_DIMS 8
#define CS_MAX_TENSORS 4096
#define CS_MAX_NODES 4096
/* Largest element count of one tensor, and largest element span of a strided user tensor. */
#define CS_MAX_ELEMENTS ((int64_t)1 << 32)
#define CS_MAX_SPAN ((int64_t)1 << 40)

/* Schema facts (hipdnn_schemas.json). */
#define CS_DT_UNSET 0
#define CS_DT_FLOAT 1
#define CS_NODE_ATTR_POINTWISE 2
#define CS_PW_ADD 2
#define CS_PW_MUL 30
#define CS_PW_RELU_FWD 34
#define CS_TENSOR_VALUE_FLOAT32 1

/* Result of parsing/compiling a graph. */
#define CS_OK 0
#define CS_MALFORMED 1 /* not a readable Graph FlatBuffer -> BAD_PARAM */
#define CS_UNSUPPORTED 2 /* well-formed, but not something this engine runs -> not applicable */
#define CS_NOMEM 3

#define CS_WHY_LEN 512

typedef struct cs_tensor
{
    int64_t uid;
    int32_t ndims;
    int64_t dims[CS_MAX_DIMS];
    int64_t strides[CS_MAX_DIMS];
    int is_virtual; /* graph-internal: lives in plugin-owned scratch (packed row-major) */
    int is_const; /* by-value Float32Value scalar baked into the graph */
    float const_value;
    int32_t producer; /* index of the node writing it, -1 if none */
    int used; /* referenced by some node */
} cs_tensor;

typedef struct cs_node
{
    int8_t mode; /* CS_PW_* */
    int32_t in0;
    int32_t in1; /* -1 for unary */
    int32_t out;
    int has_lower_clip;
    float lower_clip;
    int has_upper_clip;
    float upper_clip;
} cs_node;

typedef struct cs_program
{
    int32_t n_tensors;
    cs_tensor* tensors;
    int32_t n_nodes;
    cs_node* nodes;
    int override_shape_enabled;
} cs_program;

/* Parse and check a Graph buffer. On CS_OK *prog owns heap memory (cs_program_free).
   On failure `why` says why (and *prog is left empty). */
int cs_program_from_graph(const void* data, size_t size, cs_program* prog, char* why, size_t why_len);

/* Only check that the buffer is a readable Graph FlatBuffer (CS_OK / CS_MALFORMED). */
int cs_graph_well_formed(const void* data, size_t size, char* why, size_t why_len);

void cs_program_free(cs_program* prog);

/* Re-check shapes of a (possibly overridden) tensor table against the nodes. CS_OK or CS_UNSUPPORTED. */
int cs_check_shapes(const cs_program* prog, const cs_tensor* tensors, char* why, size_t why_len);

/* Elements of a tensor (product of dims). */
int64_t cs_elements(const cs_tensor* t);

/* Fill packed row-major strides for t->dims. */
void cs_packed_strides(cs_tensor* t);

/* Run every node. ptrs[i] is the base pointer of tensor i (user buffer, scratch or constant). */
void cs_run(const cs_program* prog, const cs_tensor* tensors, float* const* ptrs);

#endif /* HIPDNN_CABI_C_SAMPLE_CS_GRAPH_H */
