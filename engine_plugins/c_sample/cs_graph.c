/* cs_graph.c -- Graph FlatBuffer -> pointwise program, shape checks and the host kernel. */
#include "cs_graph.h"
#include "fb_reader.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Slot numbers (hipdnn_schemas.json: graph.fbs, tensor_attributes.fbs, pointwise_attributes.fbs). */
enum
{
    GRAPH_NAME = 0,
    GRAPH_COMPUTE_DT = 1,
    GRAPH_INTERMEDIATE_DT = 2,
    GRAPH_IO_DT = 3,
    GRAPH_TENSORS = 4,
    GRAPH_NODES = 5,
    GRAPH_PREFERRED_ENGINE = 6,
    GRAPH_OVERRIDE_SHAPES = 7,
    GRAPH_MIN_API_VERSION = 8, /* struct EngineApiVersion {uint major, minor, patch} (12 bytes) */
    GRAPH_ID = 9 /* struct Uuid (16 bytes) */
};
enum
{
    NODE_NAME = 0,
    NODE_COMPUTE_DT = 1,
    NODE_ATTRIBUTES_TYPE = 2,
    NODE_ATTRIBUTES = 3
};
enum
{
    TENSOR_UID = 0,
    TENSOR_NAME = 1,
    TENSOR_DATA_TYPE = 2,
    TENSOR_STRIDES = 3,
    TENSOR_DIMS = 4,
    TENSOR_VIRTUAL = 5,
    TENSOR_VALUE_TYPE = 6,
    TENSOR_VALUE = 7,
    TENSOR_PASS_BY_VALUE = 8,
    TENSOR_RAGGED_OFFSET_UID = 9,
    TENSOR_ALIGNMENT = 10,
    TENSOR_RAGGED_MULTIPLIER = 11
};
enum
{
    PW_OPERATION = 0,
    PW_RELU_LOWER_CLIP = 1,
    PW_RELU_UPPER_CLIP = 2,
    PW_RELU_LOWER_CLIP_SLOPE = 3,
    PW_AXIS = 4,
    PW_IN_0 = 5,
    PW_IN_1 = 6,
    PW_IN_2 = 7,
    PW_OUT_0 = 8
};

/* Highest engine API this plugin implements (see c_sample_plugin.c, hipdnnPluginGetApiVersion). */
#define CS_API_MAJOR 1u
#define CS_API_MINOR 1u
#define CS_API_PATCH 0u

typedef struct cs_why
{
    char* buf;
    size_t len;
    int unsupported;
} cs_why;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void cs_unsupported(cs_why* w, const char* fmt, ...)
{
    if(w->unsupported)
        return; /* keep the first reason */
    w->unsupported = 1;
    if(w->buf != NULL && w->len > 0)
    {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->buf, w->len, fmt, ap);
        va_end(ap);
    }
}

static int cs_malformed(cs_why* w, const fb_buffer* b)
{
    if(w->buf != NULL && w->len > 0)
        snprintf(w->buf, w->len, "%s", b->err);
    return CS_MALFORMED;
}

int64_t cs_elements(const cs_tensor* t)
{
    int64_t n = 1;
    for(int32_t d = 0; d < t->ndims; d++)
        n *= t->dims[d];
    return n;
}

void cs_packed_strides(cs_tensor* t)
{
    int64_t s = 1;
    for(int32_t d = t->ndims - 1; d >= 0; d--)
    {
        t->strides[d] = s;
        s *= t->dims[d];
    }
}

void cs_program_free(cs_program* prog)
{
    if(prog == NULL)
        return;
    free(prog->tensors);
    free(prog->nodes);
    memset(prog, 0, sizeof *prog);
}

/* ---- uid lookup -------------------------------------------------------------------------- */

typedef struct cs_uid_index
{
    int64_t uid;
    int32_t index;
} cs_uid_index;

static int cs_uid_cmp(const void* a, const void* b)
{
    int64_t x = ((const cs_uid_index*)a)->uid;
    int64_t y = ((const cs_uid_index*)b)->uid;
    return (x > y) - (x < y);
}

static int32_t cs_find_uid(const cs_uid_index* idx, int32_t n, int64_t uid)
{
    int32_t lo = 0, hi = n - 1;
    while(lo <= hi)
    {
        int32_t mid = lo + (hi - lo) / 2;
        if(idx[mid].uid == uid)
            return idx[mid].index;
        if(idx[mid].uid < uid)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* ---- tensors ----------------------------------------------------------------------------- */

static int cs_read_long_vector(const fb_table* t, unsigned slot, int64_t* out, int32_t* n, int* present,
                               int* too_long)
{
    fb_vector v;
    int rc = fb_vector_field(t, slot, 8, &v);
    *present = 0;
    *too_long = 0;
    *n = 0;
    if(rc == FB_BAD)
        return FB_BAD;
    if(rc == FB_ABSENT)
        return FB_OK;
    *present = 1;
    if(v.len > CS_MAX_DIMS)
    {
        *too_long = 1;
        *n = (int32_t)(v.len > 1000000u ? 1000000u : v.len);
        return FB_OK;
    }
    for(uint32_t i = 0; i < v.len; i++)
        if(fb_vec_i64(&v, i, &out[i]) != FB_OK)
            return FB_BAD;
    *n = (int32_t)v.len;
    return FB_OK;
}

static int cs_read_tensor(const fb_table* tt, int32_t i, int8_t io_dt, int8_t inter_dt, cs_tensor* out,
                          cs_why* w, fb_buffer* b)
{
    memset(out, 0, sizeof *out);
    out->producer = -1;
    const char* name = NULL;
    uint32_t name_len = 0;
    if(fb_i64(tt, TENSOR_UID, 0, &out->uid) == FB_BAD || fb_string(tt, TENSOR_NAME, &name, &name_len) == FB_BAD)
        return CS_MALFORMED;
    (void)name;
    (void)name_len;

    int is_virtual = 0;
    int8_t dt = 0;
    if(fb_bool(tt, TENSOR_VIRTUAL, 0, &is_virtual) == FB_BAD || fb_i8(tt, TENSOR_DATA_TYPE, 0, &dt) == FB_BAD)
        return CS_MALFORMED;
    out->is_virtual = is_virtual;
    if(dt == CS_DT_UNSET)
        dt = is_virtual ? inter_dt : io_dt;
    if(dt != CS_DT_FLOAT)
        cs_unsupported(w, "tensor uid %lld has data type %d; only FLOAT (1) is supported", (long long)out->uid,
                       (int)dt);

    int64_t dims[CS_MAX_DIMS], strides[CS_MAX_DIMS];
    int32_t nd = 0, ns = 0;
    int dims_present = 0, strides_present = 0, dims_long = 0, strides_long = 0;
    if(cs_read_long_vector(tt, TENSOR_DIMS, dims, &nd, &dims_present, &dims_long) == FB_BAD
       || cs_read_long_vector(tt, TENSOR_STRIDES, strides, &ns, &strides_present, &strides_long) == FB_BAD)
        return CS_MALFORMED;
    if(dims_long || strides_long)
        cs_unsupported(w, "tensor uid %lld has more than %d dimensions", (long long)out->uid, CS_MAX_DIMS);
    else if(!dims_present || nd == 0)
        cs_unsupported(w, "tensor uid %lld has no dims", (long long)out->uid);
    else if(!is_virtual && (!strides_present || ns != nd))
        cs_unsupported(w, "tensor uid %lld: strides (%d) do not match dims (%d)", (long long)out->uid, (int)ns,
                       (int)nd);
    else if(is_virtual && strides_present && ns != nd)
        cs_unsupported(w, "virtual tensor uid %lld: strides (%d) do not match dims (%d)", (long long)out->uid,
                       (int)ns, (int)nd);
    else
    {
        out->ndims = nd;
        int64_t elems = 1, span = 1;
        for(int32_t d = 0; d < nd; d++)
        {
            out->dims[d] = dims[d];
            out->strides[d] = strides_present ? strides[d] : 0;
            if(dims[d] < 1 || dims[d] > CS_MAX_ELEMENTS)
            {
                cs_unsupported(w, "tensor uid %lld: dim %d is %lld", (long long)out->uid, (int)d, (long long)dims[d]);
                break;
            }
            if(elems > CS_MAX_ELEMENTS / dims[d])
            {
                cs_unsupported(w, "tensor uid %lld has too many elements", (long long)out->uid);
                break;
            }
            elems *= dims[d];
            if(!is_virtual)
            {
                int64_t s = strides[d];
                if(s < 0 || s > CS_MAX_SPAN)
                {
                    cs_unsupported(w, "tensor uid %lld: stride %d is %lld", (long long)out->uid, (int)d, (long long)s);
                    break;
                }
                if(dims[d] > 1 && s > (CS_MAX_SPAN - span) / (dims[d] - 1))
                {
                    cs_unsupported(w, "tensor uid %lld spans too much memory", (long long)out->uid);
                    break;
                }
                span += (dims[d] - 1) * s;
            }
        }
        if(is_virtual)
            cs_packed_strides(out); /* plugin-owned layout for intermediates */
    }

    uint8_t value_type = 0;
    if(fb_u8(tt, TENSOR_VALUE_TYPE, 0, &value_type) == FB_BAD)
        return CS_MALFORMED;
    if(value_type == CS_TENSOR_VALUE_FLOAT32)
    {
        const uint8_t* p = NULL;
        int rc = fb_struct_ref(tt, TENSOR_VALUE, 4, &p);
        if(rc == FB_BAD)
            return CS_MALFORMED;
        if(rc == FB_ABSENT)
            cs_unsupported(w, "tensor uid %lld has a value tag but no value", (long long)out->uid);
        else
        {
            uint32_t bits = fb_le32(p);
            memcpy(&out->const_value, &bits, sizeof bits);
            out->is_const = 1;
            if(is_virtual || (out->ndims > 0 && cs_elements(out) != 1))
                cs_unsupported(w, "by-value tensor uid %lld must be a non-virtual single element", (long long)out->uid);
        }
    }
    else if(value_type != 0)
        cs_unsupported(w, "tensor uid %lld has a by-value constant of type %u; only Float32Value is supported",
                       (long long)out->uid, (unsigned)value_type);

    int pbv = 0;
    int64_t ragged = 0, alignment = 16, multiplier = 1;
    int ragged_rc = fb_i64(tt, TENSOR_RAGGED_OFFSET_UID, 0, &ragged);
    if(fb_bool(tt, TENSOR_PASS_BY_VALUE, 0, &pbv) == FB_BAD || ragged_rc == FB_BAD
       || fb_i64(tt, TENSOR_ALIGNMENT, 16, &alignment) == FB_BAD
       || fb_i64(tt, TENSOR_RAGGED_MULTIPLIER, 1, &multiplier) == FB_BAD)
        return CS_MALFORMED;
    if(pbv)
        cs_unsupported(w, "tensor uid %lld is runtime pass-by-value (needs engine API 1.2.0)", (long long)out->uid);
    if(ragged_rc == FB_OK)
        cs_unsupported(w, "tensor uid %lld is ragged (needs engine API 1.3.0)", (long long)out->uid);
    if(alignment != 16)
        cs_unsupported(w, "tensor uid %lld has alignment %lld (needs engine API 1.3.0)", (long long)out->uid,
                       (long long)alignment);
    if(multiplier != 1)
        cs_unsupported(w, "tensor uid %lld has ragged offset multiplier %lld (needs engine API 1.4.0)",
                       (long long)out->uid, (long long)multiplier);
    (void)i;
    (void)b;
    return CS_OK;
}

/* ---- nodes ------------------------------------------------------------------------------- */

typedef struct cs_raw_node
{
    int8_t mode;
    int64_t in0, in1, out;
    int has_in1;
    int has_in2;
} cs_raw_node;

static int cs_read_node(const fb_table* nt, int32_t i, cs_node* out, cs_raw_node* raw, cs_why* w)
{
    memset(out, 0, sizeof *out);
    memset(raw, 0, sizeof *raw);
    out->in0 = out->in1 = out->out = -1;
    const char* name = NULL;
    uint32_t name_len = 0;
    int8_t compute_dt = 0;
    uint8_t attr_type = 0;
    if(fb_string(nt, NODE_NAME, &name, &name_len) == FB_BAD || fb_i8(nt, NODE_COMPUTE_DT, 0, &compute_dt) == FB_BAD
       || fb_u8(nt, NODE_ATTRIBUTES_TYPE, 0, &attr_type) == FB_BAD)
        return CS_MALFORMED;
    if(compute_dt != CS_DT_UNSET && compute_dt != CS_DT_FLOAT)
        cs_unsupported(w, "node %d computes in data type %d; only FLOAT (1) is supported", (int)i, (int)compute_dt);
    if(attr_type != CS_NODE_ATTR_POINTWISE)
    {
        cs_unsupported(w, "node %d is not a pointwise node (attributes type %u)", (int)i, (unsigned)attr_type);
        return CS_OK;
    }
    fb_table pw;
    int rc = fb_table_field(nt, NODE_ATTRIBUTES, &pw);
    if(rc == FB_BAD)
        return CS_MALFORMED;
    if(rc == FB_ABSENT)
    {
        cs_unsupported(w, "node %d has no pointwise attributes", (int)i);
        return CS_OK;
    }
    int64_t axis = 0, in2 = 0;
    float slope = 0.0f;
    int lo_rc = fb_f32(&pw, PW_RELU_LOWER_CLIP, &out->lower_clip);
    int hi_rc = fb_f32(&pw, PW_RELU_UPPER_CLIP, &out->upper_clip);
    int slope_rc = fb_f32(&pw, PW_RELU_LOWER_CLIP_SLOPE, &slope);
    int in1_rc = fb_i64(&pw, PW_IN_1, 0, &raw->in1);
    int in2_rc = fb_i64(&pw, PW_IN_2, 0, &in2);
    if(fb_i8(&pw, PW_OPERATION, 0, &raw->mode) == FB_BAD || lo_rc == FB_BAD || hi_rc == FB_BAD || slope_rc == FB_BAD
       || fb_i64(&pw, PW_AXIS, 0, &axis) == FB_BAD || fb_i64(&pw, PW_IN_0, 0, &raw->in0) == FB_BAD || in1_rc == FB_BAD
       || in2_rc == FB_BAD || fb_i64(&pw, PW_OUT_0, 0, &raw->out) == FB_BAD)
        return CS_MALFORMED;
    out->mode = raw->mode;
    out->has_lower_clip = lo_rc == FB_OK;
    out->has_upper_clip = hi_rc == FB_OK;
    raw->has_in1 = in1_rc == FB_OK;
    raw->has_in2 = in2_rc == FB_OK;
    switch(raw->mode)
    {
    case CS_PW_ADD:
    case CS_PW_MUL:
        if(!raw->has_in1)
            cs_unsupported(w, "binary pointwise node %d has no second input", (int)i);
        if(raw->has_in2)
            cs_unsupported(w, "pointwise node %d has a third input", (int)i);
        break;
    case CS_PW_RELU_FWD:
        if(raw->has_in1 || raw->has_in2)
            cs_unsupported(w, "RELU_FWD node %d has more than one input", (int)i);
        if(slope_rc == FB_OK && slope != 0.0f)
            cs_unsupported(w, "RELU_FWD node %d has a lower clip slope (leaky relu is not supported)", (int)i);
        break;
    default:
        cs_unsupported(w, "pointwise node %d has mode %d; only ADD (2), MUL (30) and RELU_FWD (34) are supported",
                       (int)i, (int)raw->mode);
        break;
    }
    return CS_OK;
}

/* ---- shape checks ------------------------------------------------------------------------ */

static int cs_broadcastable(const cs_tensor* x, const cs_tensor* y)
{
    if(cs_elements(x) == 1)
        return 1;
    if(x->ndims != y->ndims)
        return 0;
    for(int32_t d = 0; d < y->ndims; d++)
        if(x->dims[d] != y->dims[d] && x->dims[d] != 1)
            return 0;
    return 1;
}

int cs_check_shapes(const cs_program* prog, const cs_tensor* tensors, char* why, size_t why_len)
{
    for(int32_t i = 0; i < prog->n_nodes; i++)
    {
        const cs_node* n = &prog->nodes[i];
        const cs_tensor* y = &tensors[n->out];
        int32_t ins[2] = {n->in0, n->in1};
        for(int k = 0; k < 2; k++)
        {
            if(ins[k] < 0)
                continue;
            const cs_tensor* x = &tensors[ins[k]];
            if(!cs_broadcastable(x, y))
            {
                if(why != NULL && why_len > 0)
                    snprintf(why, why_len,
                             "node %d: input uid %lld (rank %d) does not broadcast to output uid %lld (rank %d)",
                             (int)i, (long long)x->uid, (int)x->ndims, (long long)y->uid, (int)y->ndims);
                return CS_UNSUPPORTED;
            }
        }
    }
    return CS_OK;
}

/* ---- graph ------------------------------------------------------------------------------- */

static int cs_check_version(const fb_table* g, cs_why* w)
{
    uint16_t off = fb_field_offset(g, GRAPH_MIN_API_VERSION);
    if(off == 0)
        return CS_OK; /* unstamped: 1.0.0 */
    /* Slot 8 was once a uint32 min_reader_version; the current layout is a 12-byte struct followed by the
       Uuid at slot 9. Take the struct when slot 9 exists or the 12 bytes fit in the inline table. */
    const uint8_t* p = NULL;
    int new_layout = fb_field_offset(g, GRAPH_ID) != 0 || (size_t)off + 12 <= g->inline_size;
    if(new_layout)
    {
        if(fb_struct(g, GRAPH_MIN_API_VERSION, 12, &p) != FB_OK)
            return CS_MALFORMED;
        uint32_t major = fb_le32(p), minor = fb_le32(p + 4), patch = fb_le32(p + 8);
        int newer = major != CS_API_MAJOR
                    || (minor > CS_API_MINOR || (minor == CS_API_MINOR && patch > CS_API_PATCH));
        if(newer)
            cs_unsupported(w, "graph requires engine API %u.%u.%u; this plugin implements %u.%u.%u", (unsigned)major,
                           (unsigned)minor, (unsigned)patch, CS_API_MAJOR, CS_API_MINOR, CS_API_PATCH);
    }
    else
    {
        if(fb_struct(g, GRAPH_MIN_API_VERSION, 4, &p) != FB_OK)
            return CS_MALFORMED;
        if(fb_le32(p) != 0)
            cs_unsupported(w, "graph has legacy min_reader_version %u (runtime pass-by-value)", (unsigned)fb_le32(p));
    }
    return CS_OK;
}

static int cs_parse(const void* data, size_t size, cs_program* prog, char* why, size_t why_len, int structure_only)
{
    cs_why w = {why, why_len, 0};
    if(why != NULL && why_len > 0)
        why[0] = '\0';
    memset(prog, 0, sizeof *prog);

    fb_buffer b;
    fb_table g;
    if(fb_init(&b, data, size, "Graph") != FB_OK || fb_root(&b, &g) != FB_OK)
        return cs_malformed(&w, &b);

    int8_t compute_dt = 0, inter_dt = 0, io_dt = 0;
    int64_t preferred = 0;
    const char* name = NULL;
    uint32_t name_len = 0;
    if(fb_string(&g, GRAPH_NAME, &name, &name_len) == FB_BAD || fb_i8(&g, GRAPH_COMPUTE_DT, 0, &compute_dt) == FB_BAD
       || fb_i8(&g, GRAPH_INTERMEDIATE_DT, 0, &inter_dt) == FB_BAD || fb_i8(&g, GRAPH_IO_DT, 0, &io_dt) == FB_BAD
       || fb_i64(&g, GRAPH_PREFERRED_ENGINE, 0, &preferred) == FB_BAD
       || fb_bool(&g, GRAPH_OVERRIDE_SHAPES, 0, &prog->override_shape_enabled) == FB_BAD)
        return cs_malformed(&w, &b);
    if(cs_check_version(&g, &w) != CS_OK)
        return cs_malformed(&w, &b);
    if(fb_field_offset(&g, GRAPH_ID) != 0)
    {
        const uint8_t* id = NULL;
        if(fb_struct(&g, GRAPH_ID, 16, &id) != FB_OK)
            return cs_malformed(&w, &b);
    }

    fb_vector tv = {0}, nv = {0};
    int trc = fb_vector_field(&g, GRAPH_TENSORS, 4, &tv);
    int nrc = fb_vector_field(&g, GRAPH_NODES, 4, &nv);
    if(trc == FB_BAD || nrc == FB_BAD)
        return cs_malformed(&w, &b);
    uint32_t n_tensors = trc == FB_OK ? tv.len : 0;
    uint32_t n_nodes = nrc == FB_OK ? nv.len : 0;

    if(n_tensors > CS_MAX_TENSORS || n_nodes > CS_MAX_NODES)
    {
        /* Still walk the structure so that junk is reported as junk. */
        for(uint32_t i = 0; i < n_tensors; i++)
        {
            fb_table t;
            if(fb_vec_table(&tv, i, &t) != FB_OK)
                return cs_malformed(&w, &b);
        }
        for(uint32_t i = 0; i < n_nodes; i++)
        {
            fb_table t;
            if(fb_vec_table(&nv, i, &t) != FB_OK)
                return cs_malformed(&w, &b);
        }
        cs_unsupported(&w, "graph has %u tensors and %u nodes (limits %d / %d)", (unsigned)n_tensors,
                       (unsigned)n_nodes, CS_MAX_TENSORS, CS_MAX_NODES);
        return structure_only ? CS_OK : CS_UNSUPPORTED;
    }

    cs_tensor* tensors = calloc(n_tensors ? n_tensors : 1, sizeof *tensors);
    cs_node* nodes = calloc(n_nodes ? n_nodes : 1, sizeof *nodes);
    cs_raw_node* raw = calloc(n_nodes ? n_nodes : 1, sizeof *raw);
    cs_uid_index* index = calloc(n_tensors ? n_tensors : 1, sizeof *index);
    int32_t* first_reader = malloc((n_tensors ? n_tensors : 1) * sizeof *first_reader);
    int result = CS_OK;
    if(tensors == NULL || nodes == NULL || raw == NULL || index == NULL || first_reader == NULL)
    {
        if(why != NULL && why_len > 0)
            snprintf(why, why_len, "out of memory parsing a graph of %u tensors / %u nodes", (unsigned)n_tensors,
                     (unsigned)n_nodes);
        result = CS_NOMEM;
        goto done;
    }

    for(uint32_t i = 0; i < n_tensors; i++)
    {
        fb_table t;
        if(fb_vec_table(&tv, i, &t) != FB_OK
           || cs_read_tensor(&t, (int32_t)i, io_dt, inter_dt, &tensors[i], &w, &b) != CS_OK)
        {
            result = cs_malformed(&w, &b);
            goto done;
        }
        index[i].uid = tensors[i].uid;
        index[i].index = (int32_t)i;
        first_reader[i] = -1;
    }
    for(uint32_t i = 0; i < n_nodes; i++)
    {
        fb_table t;
        if(fb_vec_table(&nv, i, &t) != FB_OK || cs_read_node(&t, (int32_t)i, &nodes[i], &raw[i], &w) != CS_OK)
        {
            result = cs_malformed(&w, &b);
            goto done;
        }
    }
    if(structure_only)
        goto done;
    if(w.unsupported)
    {
        result = CS_UNSUPPORTED;
        goto done;
    }
    if(n_nodes == 0)
    {
        cs_unsupported(&w, "graph has no nodes");
        result = CS_UNSUPPORTED;
        goto done;
    }

    qsort(index, n_tensors, sizeof *index, cs_uid_cmp);
    for(uint32_t i = 1; i < n_tensors; i++)
        if(index[i].uid == index[i - 1].uid)
        {
            cs_unsupported(&w, "tensor uid %lld appears twice", (long long)index[i].uid);
            result = CS_UNSUPPORTED;
            goto done;
        }

    /* Resolve uids and check the data flow (nodes must be in topological order). */
    for(uint32_t i = 0; i < n_nodes && !w.unsupported; i++)
    {
        cs_node* n = &nodes[i];
        const cs_raw_node* r = &raw[i];
        int64_t uids[3] = {r->in0, r->has_in1 ? r->in1 : 0, r->out};
        int32_t idx[3] = {-1, -1, -1};
        for(int k = 0; k < 3; k++)
        {
            if(k == 1 && !r->has_in1)
                continue;
            idx[k] = cs_find_uid(index, (int32_t)n_tensors, uids[k]);
            if(idx[k] < 0)
                cs_unsupported(&w, "node %u references tensor uid %lld which is not in the graph", (unsigned)i,
                               (long long)uids[k]);
        }
        if(w.unsupported)
            break;
        n->in0 = idx[0];
        n->in1 = idx[1];
        n->out = idx[2];
        for(int k = 0; k < 2; k++)
        {
            if(idx[k] < 0)
                continue;
            cs_tensor* x = &tensors[idx[k]];
            if(x->is_virtual && x->producer < 0)
                cs_unsupported(&w, "node %u reads virtual tensor uid %lld before any node produces it", (unsigned)i,
                               (long long)x->uid);
            if(idx[k] == idx[2])
                cs_unsupported(&w, "node %u reads and writes tensor uid %lld", (unsigned)i, (long long)x->uid);
            if(first_reader[idx[k]] < 0)
                first_reader[idx[k]] = (int32_t)i;
            x->used = 1;
        }
        cs_tensor* y = &tensors[idx[2]];
        if(y->is_const)
            cs_unsupported(&w, "node %u writes by-value tensor uid %lld", (unsigned)i, (long long)y->uid);
        if(y->producer >= 0)
            cs_unsupported(&w, "tensor uid %lld is written by nodes %d and %u", (long long)y->uid, (int)y->producer,
                           (unsigned)i);
        if(first_reader[idx[2]] >= 0 && first_reader[idx[2]] < (int32_t)i)
            cs_unsupported(&w, "tensor uid %lld is read by node %d before node %u writes it", (long long)y->uid,
                           (int)first_reader[idx[2]], (unsigned)i);
        y->producer = (int32_t)i;
        y->used = 1;
    }
    if(w.unsupported)
    {
        result = CS_UNSUPPORTED;
        goto done;
    }

    prog->n_tensors = (int32_t)n_tensors;
    prog->tensors = tensors;
    prog->n_nodes = (int32_t)n_nodes;
    prog->nodes = nodes;
    if(cs_check_shapes(prog, tensors, why, why_len) != CS_OK)
    {
        memset(prog, 0, sizeof *prog);
        result = CS_UNSUPPORTED;
        goto done;
    }
    tensors = NULL; /* owned by prog now */
    nodes = NULL;

done:
    free(tensors);
    free(nodes);
    free(raw);
    free(index);
    free(first_reader);
    if(structure_only && result == CS_OK)
        memset(prog, 0, sizeof *prog);
    return result;
}

int cs_program_from_graph(const void* data, size_t size, cs_program* prog, char* why, size_t why_len)
{
    return cs_parse(data, size, prog, why, why_len, 0);
}

int cs_graph_well_formed(const void* data, size_t size, char* why, size_t why_len)
{
    cs_program scratch;
    int rc = cs_parse(data, size, &scratch, why, why_len, 1);
    cs_program_free(&scratch);
    return rc;
}

/* ---- kernel ------------------------------------------------------------------------------ */

static void cs_effective_strides(const cs_tensor* x, const cs_tensor* y, int64_t* s)
{
    int scalar = cs_elements(x) == 1;
    for(int32_t d = 0; d < y->ndims; d++)
        s[d] = (scalar || x->dims[d] == 1) ? 0 : x->strides[d];
}

static void cs_run_node(const cs_node* n, const cs_tensor* tensors, float* const* ptrs)
{
    const cs_tensor* y = &tensors[n->out];
    const cs_tensor* a = &tensors[n->in0];
    const cs_tensor* b = n->in1 >= 0 ? &tensors[n->in1] : NULL;
    int32_t nd = y->ndims;
    int64_t sa[CS_MAX_DIMS] = {0}, sb[CS_MAX_DIMS] = {0}, idx[CS_MAX_DIMS] = {0};
    cs_effective_strides(a, y, sa);
    if(b != NULL)
        cs_effective_strides(b, y, sb);
    float* py = ptrs[n->out];
    const float* pa = ptrs[n->in0];
    const float* pb = b != NULL ? ptrs[n->in1] : NULL;
    if(n->mode != CS_PW_RELU_FWD && pb == NULL)
        return; /* unreachable: binary nodes are checked to have a second input */
    float lo = n->has_lower_clip ? n->lower_clip : 0.0f;
    int64_t total = cs_elements(y);
    int64_t oy = 0, oa = 0, ob = 0;
    for(int64_t k = 0; k < total; k++)
    {
        float va = pa[oa];
        float r;
        switch(n->mode)
        {
        case CS_PW_ADD: r = va + pb[ob]; break;
        case CS_PW_MUL: r = va * pb[ob]; break;
        default:
            r = va > lo ? va : lo;
            if(n->has_upper_clip && r > n->upper_clip)
                r = n->upper_clip;
            break;
        }
        py[oy] = r;
        for(int32_t d = nd - 1; d >= 0; d--)
        {
            oy += y->strides[d];
            oa += sa[d];
            ob += sb[d];
            if(++idx[d] < y->dims[d])
                break;
            oy -= y->strides[d] * y->dims[d];
            oa -= sa[d] * y->dims[d];
            ob -= sb[d] * y->dims[d];
            idx[d] = 0;
        }
    }
}

void cs_run(const cs_program* prog, const cs_tensor* tensors, float* const* ptrs)
{
    for(int32_t i = 0; i < prog->n_nodes; i++)
        cs_run_node(&prog->nodes[i], tensors, ptrs);
}
