/* hipDNN's C++ frontend call sequence, replayed from C on libhipdnn_backend.so with DEVICE buffers:
 * conv forward and the four batchnorm kinds (inference, inference with variance,
 * training with running statistics, backward) in FLOAT / HALF / BFLOAT16 x NCHW / NHWC; plus
 * upstream's BnTraining sample graph (samples/batchnorm/BnTraining.cpp, full training: FLOAT
 * scale / bias / statistics / running statistics beside 16-bit x and y, epsilon and momentum
 * by-value DOUBLE scalars) and its mixed-precision variant (saved and next running statistics
 * in the data type, as frameworks build it).
 * As the frontend does: tensor uids from 0 in creation order, graph-level io / intermediate /
 * compute data types, node compute type FLOAT, 16-bit data with FLOAT scale / bias / statistics,
 * epsilon and momentum by-value scalars, heuristics FALLBACK -> every config finalized -> config 0
 * planned; the workspace is queried and allocated for conv only (batchnorm passes none).
 * Each case must be planned on the GPU engine; the same graph is then planned on the CPU
 * reference engine (another config of the same heuristic) and run on host copies of the inputs;
 * the outputs must agree.  Prints one line per case and "OK" at the end.
 * Built with -DREPLAY_HOST_ONLY (no CUDA): "device" buffers are malloc'd and config 0 may be the
 * CPU engine - the same call sequence checked on a machine without a GPU.
 * Usage: c_frontend_replay [op-filter] */
#define _POSIX_C_SOURCE 200809L
#include <hipdnn_backend.h>
#ifndef REPLAY_HOST_ONLY
#include <cuda_runtime_api.h>
#define CU(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { fprintf(stderr, "%s -> %s\n", #call, \
    cudaGetErrorString(e_)); exit(2); } } while (0)
#define DMALLOC(p, n) CU(cudaMalloc((p), (n)))
#define DFREE(p) CU(cudaFree(p))
#define H2D(d, h, n) CU(cudaMemcpy((d), (h), (n), cudaMemcpyHostToDevice))
#define D2H(h, d, n) CU(cudaMemcpy((h), (d), (n), cudaMemcpyDeviceToHost))
#define DSYNC(s) CU(cudaStreamSynchronize(s))
static const int g_host_only = 0;
#else
typedef void* cudaStream_t;
#define DMALLOC(p, n) (*(p) = malloc(n))
#define DFREE(p) free(p)
#define H2D(d, h, n) memcpy((d), (h), (n))
#define D2H(h, d, n) memcpy((h), (d), (n))
#define DSYNC(s) (void)(s)
static const int g_host_only = 1;
#endif
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPU_ENGINE "HIPDNN_CABI_HIP_KERNELS_ENGINE"
#define CPU_ENGINE "HIPDNN_CABI_CPU_REFERENCE_ENGINE"
#define MAXT 16
typedef hipdnnBackendDescriptor_t D;

static int g_fail = 0;
static char g_why[4096];

#define CHECK(call) do { hipdnnStatus_t s_ = (call); if (s_ != HIPDNN_STATUS_SUCCESS) { char m_[2048] = {0}; \
    hipdnnGetLastErrorString(m_, sizeof m_); snprintf(g_why, sizeof g_why, "%s -> %d: %s", #call, (int)s_, m_); \
    return -1; } } while (0)

/* ---------------------------------------------------------------- 16-bit conversions */
static uint16_t f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t m = x & 0x7fffffu;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}
static float h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu, x;
    if (e == 0) {
        if (m == 0) x = sign;
        else { int k = -1; do { k++; m <<= 1; } while (!(m & 0x400u)); x = sign | ((uint32_t)(127 - 15 - k) << 23) | ((m & 0x3ffu) << 13); }
    } else if (e == 31) x = sign | 0x7f800000u | (m << 13);
    else x = sign | ((e - 15 + 127) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static uint16_t f2b(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    uint32_t r = 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)((x + r) >> 16);
}
static float b2f(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static size_t esize(hipdnnDataType_t t) { return t == HIPDNN_DATA_FLOAT ? 4 : 2; }
static void put(void* p, size_t i, hipdnnDataType_t t, float v)
{
    if (t == HIPDNN_DATA_FLOAT) ((float*)p)[i] = v;
    else if (t == HIPDNN_DATA_HALF) ((uint16_t*)p)[i] = f2h(v);
    else ((uint16_t*)p)[i] = f2b(v);
}
static float get(const void* p, size_t i, hipdnnDataType_t t)
{
    if (t == HIPDNN_DATA_FLOAT) return ((const float*)p)[i];
    if (t == HIPDNN_DATA_HALF) return h2f(((const uint16_t*)p)[i]);
    return b2f(((const uint16_t*)p)[i]);
}

/* ---------------------------------------------------------------- tensors */
typedef struct {
    int64_t uid, dims[4], strides[4];
    hipdnnDataType_t dt;
    bool byval, out;
    float value;          /* by-value scalars (FLOAT; DOUBLE ones: dvalue) */
    double dvalue;
    float lo, hi;         /* input value range */
    size_t n;             /* elements */
    void *host, *dev, *cpu;
    D desc;
} Ten;

typedef struct {
    Ten t[MAXT];
    int nt;
} Case;

static uint64_t g_rng = 88172645463325252ull;
static float urand(float lo, float hi)
{
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((g_rng >> 11) * (1.0 / 9007199254740992.0));
}

/* the frontend numbers tensors 0, 1, 2, ... in creation order */
static Ten* add(Case* c, const int64_t* dims, hipdnnDataType_t dt, bool nhwc, bool out, float lo, float hi)
{
    Ten* t = &c->t[c->nt];
    memset(t, 0, sizeof *t);
    t->uid = c->nt++;
    memcpy(t->dims, dims, sizeof t->dims);
    int order[4] = {0, 1, 2, 3};
    if (nhwc) { order[1] = 2; order[2] = 3; order[3] = 1; }
    int64_t s = 1;
    for (int k = 3; k >= 0; k--) { t->strides[order[k]] = s; s *= dims[order[k]]; }
    t->n = (size_t)s;
    t->dt = dt;
    t->out = out;
    t->lo = lo;
    t->hi = hi;
    return t;
}
static Ten* chan(Case* c, int64_t C, bool out, float lo, float hi)
{
    int64_t d[4] = {1, C, 1, 1};
    return add(c, d, HIPDNN_DATA_FLOAT, false, out, lo, hi);
}
static Ten* scalar(Case* c, float v)
{
    int64_t d[4] = {1, 1, 1, 1};
    Ten* t = add(c, d, HIPDNN_DATA_FLOAT, false, false, 0, 0);
    t->byval = true;
    t->value = v;
    return t;
}
/* a by-value DOUBLE scalar: what upstream's samples pass (set_value(0.1) on a double) */
static Ten* dscalar(Case* c, double v)
{
    int64_t d[4] = {1, 1, 1, 1};
    Ten* t = add(c, d, HIPDNN_DATA_DOUBLE, false, false, 0, 0);
    t->byval = true;
    t->dvalue = v;
    return t;
}
static Ten* chan_t(Case* c, int64_t C, hipdnnDataType_t dt, bool out, float lo, float hi)
{
    int64_t d[4] = {1, C, 1, 1};
    return add(c, d, dt, false, out, lo, hi);
}

static int make_desc(Ten* t)
{
    bool virt = false;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t->desc));
    CHECK(hipdnnBackendSetAttribute(t->desc, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &t->uid));
    CHECK(hipdnnBackendSetAttribute(t->desc, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &t->dt));
    CHECK(hipdnnBackendSetAttribute(t->desc, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 4, t->dims));
    CHECK(hipdnnBackendSetAttribute(t->desc, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 4, t->strides));
    CHECK(hipdnnBackendSetAttribute(t->desc, HIPDNN_ATTR_TENSOR_IS_VIRTUAL, HIPDNN_TYPE_BOOLEAN, 1, &virt));
    if (t->byval && t->dt == HIPDNN_DATA_DOUBLE)
        CHECK(hipdnnBackendSetAttribute(t->desc, HIPDNN_ATTR_TENSOR_VALUE_EXT, HIPDNN_TYPE_CHAR, 8, &t->dvalue));
    else if (t->byval)
        CHECK(hipdnnBackendSetAttribute(t->desc, HIPDNN_ATTR_TENSOR_VALUE_EXT, HIPDNN_TYPE_CHAR, 4, &t->value));
    CHECK(hipdnnBackendFinalize(t->desc));
    return 0;
}

static int set_t(D op, hipdnnBackendAttributeName_t a, Ten* t)
{
    CHECK(hipdnnBackendSetAttribute(op, a, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->desc));
    return 0;
}

/* ---------------------------------------------------------------- the five graphs */
enum { CONV, BN_INF, BN_INF_VAR, BN_TRAIN, BN_BWD, BN_TRAIN_UP, BN_TRAIN_MIX, NOPS };
static const char* OPNAME[NOPS] = {"conv_fwd", "bn_inference", "bn_inference_variance", "bn_training", "bn_backward",
                                   "bn_training_upstream", "bn_training_mixed"};

static int build_op(int op, hipdnnDataType_t dt, bool nhwc, Case* c, D* opd)
{
    const int64_t N = 2, C = 16, H = 7, W = 5, K = 24;
    hipdnnDataType_t f32 = HIPDNN_DATA_FLOAT;
    c->nt = 0;
    int64_t xd[4] = {N, C, H, W};
    if (op == CONV) {
        int64_t wd[4] = {K, C, 3, 3}, yd[4] = {N, K, H, W};
        Ten* x = add(c, xd, dt, nhwc, false, -1, 1);
        Ten* w = add(c, wd, dt, nhwc, false, -0.5f, 0.5f);
        Ten* y = add(c, yd, dt, nhwc, true, 0, 0);
        for (int i = 0; i < c->nt; i++) if (make_desc(&c->t[i])) return -1;
        int64_t pad[2] = {1, 1}, one[2] = {1, 1};
        hipdnnConvolutionMode_t mode = HIPDNN_CROSS_CORRELATION;
        CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, opd));
        if (set_t(*opd, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x) || set_t(*opd, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y)) return -1;
        CHECK(hipdnnBackendSetAttribute(*opd, HIPDNN_ATTR_CONVOLUTION_COMP_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &f32));
        CHECK(hipdnnBackendSetAttribute(*opd, HIPDNN_ATTR_CONVOLUTION_CONV_MODE, HIPDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
        CHECK(hipdnnBackendSetAttribute(*opd, HIPDNN_ATTR_CONVOLUTION_DILATIONS, HIPDNN_TYPE_INT64, 2, one));
        CHECK(hipdnnBackendSetAttribute(*opd, HIPDNN_ATTR_CONVOLUTION_FILTER_STRIDES, HIPDNN_TYPE_INT64, 2, one));
        CHECK(hipdnnBackendSetAttribute(*opd, HIPDNN_ATTR_CONVOLUTION_POST_PADDINGS, HIPDNN_TYPE_INT64, 2, pad));
        CHECK(hipdnnBackendSetAttribute(*opd, HIPDNN_ATTR_CONVOLUTION_PRE_PADDINGS, HIPDNN_TYPE_INT64, 2, pad));
    } else if (op == BN_INF || op == BN_INF_VAR) {
        Ten* x = add(c, xd, dt, nhwc, false, -2, 2);
        Ten* mean = chan(c, C, false, -0.5f, 0.5f);
        Ten* iv = chan(c, C, false, 0.5f, 1.5f);      /* inv_variance, or variance */
        Ten* sc = chan(c, C, false, 0.5f, 1.5f);
        Ten* bi = chan(c, C, false, -0.5f, 0.5f);
        Ten* eps = op == BN_INF_VAR ? scalar(c, 1e-5f) : NULL;
        Ten* y = add(c, xd, dt, nhwc, true, 0, 0);
        for (int i = 0; i < c->nt; i++) if (make_desc(&c->t[i])) return -1;
        if (op == BN_INF) {
            CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_BATCHNORM_INFERENCE_DESCRIPTOR_EXT, opd));
            if (set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_X_EXT, x) || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_MEAN_EXT, mean)
                || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_INV_VARIANCE_EXT, iv)
                || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_SCALE_EXT, sc) || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_BIAS_EXT, bi)
                || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_Y_EXT, y)) return -1;
            CHECK(hipdnnBackendSetAttribute(*opd, HIPDNN_ATTR_BATCHNORM_INF_COMP_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &f32));
        } else {
            CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_BATCHNORM_INFERENCE_VARIANCE_DESCRIPTOR_EXT, opd));
            if (set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_VARIANCE_X_EXT, x)
                || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_VARIANCE_MEAN_EXT, mean)
                || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_VARIANCE_VARIANCE_EXT, iv)
                || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_VARIANCE_SCALE_EXT, sc)
                || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_VARIANCE_BIAS_EXT, bi)
                || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_VARIANCE_EPSILON_EXT, eps)
                || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INFERENCE_VARIANCE_Y_EXT, y)) return -1;
            CHECK(hipdnnBackendSetAttribute(*opd, HIPDNN_ATTR_BATCHNORM_INF_VAR_COMP_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &f32));
        }
    } else if (op == BN_TRAIN || op == BN_TRAIN_UP || op == BN_TRAIN_MIX) {
        /* BN_TRAIN_UP: upstream's sample (x, then scale, bias, epsilon set_value(double), prev
         * running stats, momentum set_value(0.1): DOUBLE); BN_TRAIN_MIX: saved and next running
         * statistics in the data type */
        hipdnnDataType_t st = op == BN_TRAIN_MIX ? dt : HIPDNN_DATA_FLOAT;
        bool up = op != BN_TRAIN;
        Ten* x = add(c, xd, dt, nhwc, false, -2, 2);
        Ten* sc = chan(c, C, false, 0.5f, 1.5f);
        Ten* bi = chan(c, C, false, -0.5f, 0.5f);
        Ten* eps = up ? dscalar(c, 1e-5) : scalar(c, 1e-5f);
        Ten* mom = up ? dscalar(c, 0.1) : scalar(c, 0.1f);
        Ten* prm = chan(c, C, false, -0.5f, 0.5f);
        Ten* prv = chan(c, C, false, 0.5f, 1.5f);
        Ten* y = add(c, xd, dt, nhwc, true, 0, 0);
        Ten* mean = chan_t(c, C, st, true, 0, 0);
        Ten* iv = chan_t(c, C, st, true, 0, 0);
        Ten* nrm = chan_t(c, C, st, true, 0, 0);
        Ten* nrv = chan_t(c, C, st, true, 0, 0);
        for (int i = 0; i < c->nt; i++) if (make_desc(&c->t[i])) return -1;
        CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_BATCHNORM_DESCRIPTOR_EXT, opd));
        if (set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_X_EXT, x) || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_SCALE_EXT, sc)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_BIAS_EXT, bi) || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_EPSILON_EXT, eps)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_MOMENTUM_EXT, mom)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_PREV_RUNNING_MEAN_EXT, prm)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_PREV_RUNNING_VARIANCE_EXT, prv)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_Y_EXT, y) || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_MEAN_EXT, mean)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_INV_VARIANCE_EXT, iv)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_NEXT_RUNNING_MEAN_EXT, nrm)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_NEXT_RUNNING_VARIANCE_EXT, nrv)) return -1;
        CHECK(hipdnnBackendSetAttribute(*opd, HIPDNN_ATTR_BATCHNORM_COMP_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &f32));
    } else {
        Ten* dy = add(c, xd, dt, nhwc, false, -1, 1);
        Ten* x = add(c, xd, dt, nhwc, false, -2, 2);
        Ten* mean = chan(c, C, false, -0.5f, 0.5f);
        Ten* iv = chan(c, C, false, 0.5f, 1.5f);
        Ten* sc = chan(c, C, false, 0.5f, 1.5f);
        Ten* dx = add(c, xd, dt, nhwc, true, 0, 0);
        Ten* dsc = chan(c, C, true, 0, 0);
        Ten* dbi = chan(c, C, true, 0, 0);
        for (int i = 0; i < c->nt; i++) if (make_desc(&c->t[i])) return -1;
        CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_BATCHNORM_BACKWARD_DESCRIPTOR_EXT, opd));
        if (set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_BACKWARD_DY_EXT, dy) || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_BACKWARD_X_EXT, x)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_BACKWARD_MEAN_EXT, mean)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_BACKWARD_INV_VARIANCE_EXT, iv)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_BACKWARD_SCALE_EXT, sc)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_BACKWARD_DX_EXT, dx)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_BACKWARD_DSCALE_EXT, dsc)
            || set_t(*opd, HIPDNN_ATTR_OPERATION_BATCHNORM_BACKWARD_DBIAS_EXT, dbi)) return -1;
        CHECK(hipdnnBackendSetAttribute(*opd, HIPDNN_ATTR_BATCHNORM_BACKWARD_COMP_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &f32));
    }
    CHECK(hipdnnBackendFinalize(*opd));
    return 0;
}

static int engine_name_of(D cfg, char* name, size_t len)
{
    D eng;
    int64_t n = 0;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINE_DESCRIPTOR, &eng));
    CHECK(hipdnnBackendGetAttribute(cfg, HIPDNN_ATTR_ENGINECFG_ENGINE, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng));
    CHECK(hipdnnBackendGetAttribute(eng, HIPDNN_ATTR_ENGINE_NAME_EXT, HIPDNN_TYPE_CHAR, 0, &n, NULL));
    if (n <= 0 || (size_t)n >= len) { snprintf(g_why, sizeof g_why, "engine name length %lld", (long long)n); return -1; }
    int64_t m = 0;
    CHECK(hipdnnBackendGetAttribute(eng, HIPDNN_ATTR_ENGINE_NAME_EXT, HIPDNN_TYPE_CHAR, n, &m, name));
    name[n < (int64_t)len ? n : (int64_t)len - 1] = '\0';
    CHECK(hipdnnBackendDestroyDescriptor(eng));
    return 0;
}

static int plan_of(hipdnnHandle_t h, D cfg, D* plan, int64_t* ws)
{
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan));
    (void)h;
    CHECK(hipdnnBackendSetAttribute(*plan, HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg));
    CHECK(hipdnnBackendFinalize(*plan));
    CHECK(hipdnnBackendGetAttribute(*plan, HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, HIPDNN_TYPE_INT64, 1, NULL, ws));
    return 0;
}

static int execute(hipdnnHandle_t h, D plan, Case* c, bool device, void* ws)
{
    void* ptrs[MAXT];
    int64_t uids[MAXT];
    int n = 0;
    for (int i = 0; i < c->nt; i++) {
        if (c->t[i].byval) continue;
        uids[n] = c->t[i].uid;
        ptrs[n++] = device ? c->t[i].dev : c->t[i].cpu;
    }
    D vp;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, n, ptrs));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, n, uids));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, HIPDNN_TYPE_VOID_PTR, 1, &ws));
    CHECK(hipdnnBackendFinalize(vp));
    CHECK(hipdnnBackendExecute(h, plan, vp));
    CHECK(hipdnnBackendDestroyDescriptor(vp));
    return 0;
}

static const char* dtname(hipdnnDataType_t t)
{
    return t == HIPDNN_DATA_FLOAT ? "FLOAT" : t == HIPDNN_DATA_HALF ? "HALF" : "BFLOAT16";
}

static int run_case(hipdnnHandle_t h, cudaStream_t stream, int op, hipdnnDataType_t dt, bool nhwc, char* info, size_t ilen)
{
    Case c;
    D opd, graph, heur;
    if (build_op(op, dt, nhwc, &c, &opd)) return -1;
    hipdnnDataType_t f32 = HIPDNN_DATA_FLOAT;
    bool off = false;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_OPS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &opd));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &dt));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &f32));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &f32));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, HIPDNN_TYPE_BOOLEAN, 1, &off));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, HIPDNN_TYPE_HANDLE, 1, &h));
    CHECK(hipdnnBackendFinalize(graph));
    hipdnnBackendHeurMode_t hm = HIPDNN_HEUR_MODE_FALLBACK;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    CHECK(hipdnnBackendSetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
    CHECK(hipdnnBackendSetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_MODE, HIPDNN_TYPE_HEUR_MODE, 1, &hm));
    CHECK(hipdnnBackendFinalize(heur));
    int64_t count = 0;
    CHECK(hipdnnBackendGetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
    if (count < (g_host_only ? 1 : 2)) {
        char m[2048] = {0};
        hipdnnGetLastErrorString(m, sizeof m);
        snprintf(g_why, sizeof g_why, "%lld engine configs (GPU and CPU engines expected): %s", (long long)count, m);
        return -1;
    }
    D cfgs[8];
    int64_t n = 0;
    if (count > 8) count = 8;
    for (int i = 0; i < count; i++) CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
    CHECK(hipdnnBackendGetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, count, &n, cfgs));
    int cpu = -1;
    char names[8][128];
    for (int i = 0; i < n; i++) {
        CHECK(hipdnnBackendFinalize(cfgs[i]));     /* the frontend finalizes every config */
        if (engine_name_of(cfgs[i], names[i], sizeof names[i])) return -1;
        if (strcmp(names[i], CPU_ENGINE) == 0) cpu = i;
    }
    if ((!g_host_only && strcmp(names[0], GPU_ENGINE) != 0) || cpu < 0) {
        snprintf(g_why, sizeof g_why, "config 0 is %s (want %s), CPU config %d", names[0], GPU_ENGINE, cpu);
        return -1;
    }
    int64_t cfg_ws = -1, ws = -1, cpu_ws = -1;
    CHECK(hipdnnBackendGetAttribute(cfgs[0], HIPDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, HIPDNN_TYPE_INT64, 1, NULL, &cfg_ws));
    D plan, cplan;
    if (plan_of(h, cfgs[0], &plan, &ws)) return -1;
    if (cfg_ws != ws) {
        snprintf(g_why, sizeof g_why, "ENGINECFG_WORKSPACE_SIZE %lld != EXECUTION_PLAN_WORKSPACE_SIZE %lld", (long long)cfg_ws, (long long)ws);
        return -1;
    }
    if (op != CONV && ws != 0) {
        snprintf(g_why, sizeof g_why, "batchnorm plan asks %lld bytes of workspace (hipDNN's samples pass none)", (long long)ws);
        return -1;
    }
    if (plan_of(h, cfgs[cpu], &cplan, &cpu_ws)) return -1;
    /* buffers: device (GPU engine) and host copies (CPU engine) of the same inputs */
    for (int i = 0; i < c.nt; i++) {
        Ten* t = &c.t[i];
        if (t->byval) continue;
        size_t nb = t->n * esize(t->dt);
        t->host = malloc(nb);
        t->cpu = malloc(nb);
        for (size_t k = 0; k < t->n; k++) put(t->host, k, t->dt, t->out ? NAN : urand(t->lo, t->hi));
        memcpy(t->cpu, t->host, nb);
        DMALLOC(&t->dev, nb);
        H2D(t->dev, t->host, nb);
    }
    void* dws = NULL;
    if (op == CONV && ws > 0) DMALLOC(&dws, (size_t)ws);
    if (execute(h, plan, &c, true, dws)) return -1;
    DSYNC(stream);
    if (execute(h, cplan, &c, false, NULL)) return -1;
    double rtol = dt == HIPDNN_DATA_FLOAT ? 1e-4 : dt == HIPDNN_DATA_HALF ? 4e-3 : 2e-2;
    double worst = 0;
    char what[256] = "";
    for (int i = 0; i < c.nt; i++) {
        Ten* t = &c.t[i];
        if (!t->out) continue;
        size_t nb = t->n * esize(t->dt);
        D2H(t->host, t->dev, nb);
        double tol = t->dt == HIPDNN_DATA_FLOAT ? (rtol > 1e-4 ? rtol / 4 : 1e-4) : rtol;
        if (op == BN_BWD && t->dims[0] == 1) tol = 1e-3;   /* dscale / dbias: sums over N*H*W */
        for (size_t k = 0; k < t->n; k++) {
            double g = get(t->host, k, t->dt), r = get(t->cpu, k, t->dt);
            double e = fabs(g - r) / (1.0 + fabs(r));
            if (!(e <= tol)) {
                snprintf(g_why, sizeof g_why, "uid %lld [%zu]: GPU %g, CPU reference %g (tol %g)", (long long)t->uid, k, g, r, tol);
                return -1;
            }
            if (e / tol > worst) { worst = e / tol; snprintf(what, sizeof what, "uid %lld", (long long)t->uid); }
        }
    }
    snprintf(info, ilen, "engine=%s configs=%lld ws=%lld worst=%.2f of tol at %s", names[0], (long long)n, (long long)ws, worst, what);
    for (int i = 0; i < c.nt; i++) {
        Ten* t = &c.t[i];
        if (!t->byval) { free(t->host); free(t->cpu); DFREE(t->dev); }
        CHECK(hipdnnBackendDestroyDescriptor(t->desc));
    }
    if (dws) DFREE(dws);
    CHECK(hipdnnBackendDestroyDescriptor(plan));
    CHECK(hipdnnBackendDestroyDescriptor(cplan));
    for (int i = 0; i < count; i++) CHECK(hipdnnBackendDestroyDescriptor(cfgs[i]));
    CHECK(hipdnnBackendDestroyDescriptor(heur));
    CHECK(hipdnnBackendDestroyDescriptor(graph));
    CHECK(hipdnnBackendDestroyDescriptor(opd));
    return 0;
}

int main(int argc, char** argv)
{
    const char* only = argc > 1 ? argv[1] : NULL;
    hipdnnHandle_t h;
    if (hipdnnCreate(&h) != HIPDNN_STATUS_SUCCESS) { fprintf(stderr, "hipdnnCreate failed\n"); return 1; }
    cudaStream_t stream = NULL;
#ifndef REPLAY_HOST_ONLY
    CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    if (hipdnnSetStream(h, (hipStream_t)stream) != HIPDNN_STATUS_SUCCESS) { fprintf(stderr, "hipdnnSetStream failed\n"); return 1; }
#endif
    hipdnnDataType_t dts[3] = {HIPDNN_DATA_FLOAT, HIPDNN_DATA_HALF, HIPDNN_DATA_BFLOAT16};
    int cases = 0;
    for (int op = 0; op < NOPS; op++) {
        if (only && strstr(OPNAME[op], only) == NULL) continue;
        for (int d = 0; d < 3; d++)
            for (int lay = 0; lay < 2; lay++) {
                char info[512] = "";
                g_why[0] = '\0';
                int rc = run_case(h, stream, op, dts[d], lay == 1, info, sizeof info);
                printf("%s %s %s %s: %s\n", rc ? "FAIL" : "ok", OPNAME[op], dtname(dts[d]), lay ? "NHWC" : "NCHW",
                       rc ? g_why : info);
                fflush(stdout);
                g_fail += rc != 0;
                cases++;
            }
    }
    hipdnnDestroy(h);
    if (g_fail) { printf("%d of %d cases failed\n", g_fail, cases); return 1; }
    printf("OK (%d cases)\n", cases);
    return 0;
}
