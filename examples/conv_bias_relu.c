/* conv -> bias (pointwise ADD) -> relu through the hipDNN backend C API.
 *
 * The call sequence is the one hipDNN's C++ frontend issues (spec/backend-behavior.md §2.2-2.7):
 * tensors and operation descriptors, the operation graph, the engine heuristic, engine configs,
 * the execution plan, a variant pack, hipdnnBackendExecute.  It runs on the default engine (the
 * heuristic's first choice): with host buffers for a host engine (the CPU reference engine), with
 * device buffers for a GPU engine (the HIP runtime or the CUDA runtime is opened with dlopen, so the
 * program has no link-time dependency on either).
 *
 * Prints the engine that ran, the output checksum and the comparison with a naive C reference.
 * Exit status: 0 = match, 1 = mismatch or API error, 2 = no engine supports the graph.
 *
 *   gcc -std=c11 -I include examples/conv_bias_relu.c -L hipdnn_cabi/lib -lhipdnn_backend \
 *       -Wl,-rpath,$PWD/hipdnn_cabi/lib -lm -o conv_bias_relu
 */
#include <hipdnn_backend.h>

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 2
#define C 3
#define H 8
#define W 8
#define K 4
#define R 3
#define S 3
#define PAD 1
#define OH (H + 2 * PAD - R + 1)
#define OW (W + 2 * PAD - S + 1)

enum { UID_X = 1, UID_W = 2, UID_CONV = 3, UID_B = 4, UID_ADD = 5, UID_Y = 6 };

#define CHECK(call)                                                                        \
    do {                                                                                   \
        hipdnnStatus_t st_ = (call);                                                       \
        if (st_ != HIPDNN_STATUS_SUCCESS) {                                                \
            char msg_[2048];                                                               \
            hipdnnGetLastErrorString(msg_, sizeof msg_);                                   \
            fprintf(stderr, "conv_bias_relu: %s failed: %s (%d): %s\n", #call,             \
                    hipdnnGetErrorString(st_), (int)st_, msg_);                            \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* ---- device memory for a GPU engine (HIP on ROCm, the CUDA runtime on NVIDIA), via dlopen */
typedef int (*gpu_malloc_t)(void**, size_t);
typedef int (*gpu_memcpy_t)(void*, const void*, size_t, int);
typedef int (*gpu_free_t)(void*);
typedef int (*gpu_sync_t)(void);
typedef struct {
    gpu_malloc_t malloc_;
    gpu_memcpy_t memcpy_;
    gpu_free_t free_;
    gpu_sync_t sync;
    const char* runtime;
} gpu_t;
enum { GPU_H2D = 1, GPU_D2H = 2 }; /* hipMemcpyHostToDevice/DeviceToHost == cudaMemcpy... */

static int gpu_open(gpu_t* g)
{
    static const char* libs[][2] = {
        {"libamdhip64.so", "hip"}, {"libamdhip64.so.6", "hip"}, {"libamdhip64.so.7", "hip"},
        {"libcudart.so", "cuda"}, {"libcudart.so.13", "cuda"}, {"libcudart.so.12", "cuda"},
        {"/usr/local/cuda/lib64/libcudart.so", "cuda"},
    };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; ++i) {
        void* h = dlopen(libs[i][0], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            continue;
        int hip = libs[i][1][0] == 'h';
        g->malloc_ = (gpu_malloc_t)dlsym(h, hip ? "hipMalloc" : "cudaMalloc");
        g->memcpy_ = (gpu_memcpy_t)dlsym(h, hip ? "hipMemcpy" : "cudaMemcpy");
        g->free_ = (gpu_free_t)dlsym(h, hip ? "hipFree" : "cudaFree");
        g->sync = (gpu_sync_t)dlsym(h, hip ? "hipDeviceSynchronize" : "cudaDeviceSynchronize");
        g->runtime = libs[i][0];
        if (g->malloc_ && g->memcpy_ && g->free_ && g->sync)
            return 0;
    }
    return -1;
}

static void* to_device(const gpu_t* g, const void* host, size_t n)
{
    void* d = NULL;
    if (g->malloc_(&d, n) != 0 || (host && g->memcpy_(d, host, n, GPU_H2D) != 0)) {
        fprintf(stderr, "conv_bias_relu: device allocation/copy failed (%s)\n", g->runtime);
        exit(1);
    }
    return d;
}

static hipdnnBackendDescriptor_t create(hipdnnBackendDescriptorType_t type)
{
    hipdnnBackendDescriptor_t d = NULL;
    CHECK(hipdnnBackendCreateDescriptor(type, &d));
    return d;
}

/* §2.2 step 1: UNIQUE_ID, NAME_EXT (non-empty), DATA_TYPE, DIMENSIONS, STRIDES, IS_VIRTUAL, Finalize */
static hipdnnBackendDescriptor_t tensor(int64_t uid, const char* name, const int64_t dims[4],
                                        bool isVirtual)
{
    hipdnnBackendDescriptor_t t = create(HIPDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_NAME_EXT, HIPDNN_TYPE_CHAR,
                                    (int64_t)strlen(name), name));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 4, dims));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 4, strides));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_IS_VIRTUAL, HIPDNN_TYPE_BOOLEAN, 1, &isVirtual));
    CHECK(hipdnnBackendFinalize(t));
    return t;
}

static void set_desc(hipdnnBackendDescriptor_t d, hipdnnBackendAttributeName_t name,
                     hipdnnBackendDescriptor_t value)
{
    CHECK(hipdnnBackendSetAttribute(d, name, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value));
}

static hipdnnBackendDescriptor_t pointwise(hipdnnPointwiseMode_t mode, hipdnnBackendDescriptor_t in0,
                                           hipdnnBackendDescriptor_t in1, hipdnnBackendDescriptor_t out)
{
    hipdnnBackendDescriptor_t op = create(HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    hipdnnDataType_t prec = HIPDNN_DATA_FLOAT;
    set_desc(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, in0);
    if (in1 != NULL)
        set_desc(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT, in1);
    set_desc(op, HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, out);
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &mode));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_MATH_PREC, HIPDNN_TYPE_DATA_TYPE, 1, &prec));
    CHECK(hipdnnBackendFinalize(op));
    return op;
}

/* deterministic inputs in [-1, 1) */
static float next_value(uint32_t* state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

static void reference(const float* x, const float* w, const float* b, float* y)
{
    for (int n = 0; n < N; ++n)
        for (int k = 0; k < K; ++k)
            for (int oh = 0; oh < OH; ++oh)
                for (int ow = 0; ow < OW; ++ow) {
                    double acc = 0.0;
                    for (int c = 0; c < C; ++c)
                        for (int r = 0; r < R; ++r)
                            for (int s = 0; s < S; ++s) {
                                int ih = oh + r - PAD, iw = ow + s - PAD;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                acc += (double)x[((n * C + c) * H + ih) * W + iw] *
                                       (double)w[((k * C + c) * R + r) * S + s];
                            }
                    acc += b[k];
                    y[((n * K + k) * OH + oh) * OW + ow] = acc > 0.0 ? (float)acc : 0.0f;
                }
}

int main(void)
{
    hipdnnHandle_t handle = NULL;
    CHECK(hipdnnCreate(&handle));

    /* ---- §2.2 build_operation_graph: tensors in first-seen order, op descriptors, graph */
    const int64_t dx[4] = {N, C, H, W}, dw[4] = {K, C, R, S}, db[4] = {1, K, 1, 1}, dy[4] = {N, K, OH, OW};
    hipdnnBackendDescriptor_t tx = tensor(UID_X, "x", dx, false);
    hipdnnBackendDescriptor_t tw = tensor(UID_W, "w", dw, false);
    hipdnnBackendDescriptor_t tconv = tensor(UID_CONV, "conv_out", dy, true);

    hipdnnBackendDescriptor_t conv = create(HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    set_desc(conv, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, tx);
    set_desc(conv, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, tw);
    set_desc(conv, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, tconv);
    {
        hipdnnConvolutionMode_t mode = HIPDNN_CROSS_CORRELATION;
        hipdnnDataType_t comp = HIPDNN_DATA_FLOAT;
        int64_t ones[2] = {1, 1}, pads[2] = {PAD, PAD};
        CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_CONV_MODE, HIPDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
        CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_DILATIONS, HIPDNN_TYPE_INT64, 2, ones));
        CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_FILTER_STRIDES, HIPDNN_TYPE_INT64, 2, ones));
        CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_POST_PADDINGS, HIPDNN_TYPE_INT64, 2, pads));
        CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_PRE_PADDINGS, HIPDNN_TYPE_INT64, 2, pads));
        CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_COMP_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &comp));
    }
    CHECK(hipdnnBackendFinalize(conv));

    hipdnnBackendDescriptor_t tb = tensor(UID_B, "bias", db, false);
    hipdnnBackendDescriptor_t tadd = tensor(UID_ADD, "add_out", dy, true);
    hipdnnBackendDescriptor_t add = pointwise(HIPDNN_POINTWISE_ADD, tconv, tb, tadd);
    hipdnnBackendDescriptor_t ty = tensor(UID_Y, "y", dy, false);
    hipdnnBackendDescriptor_t relu = pointwise(HIPDNN_POINTWISE_RELU_FWD, tadd, NULL, ty);

    hipdnnBackendDescriptor_t graph = create(HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    {
        hipdnnBackendDescriptor_t ops[3] = {conv, add, relu};
        hipdnnDataType_t f32 = HIPDNN_DATA_FLOAT;
        bool override = false;
        const char* gname = "conv_bias_relu";
        CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_OPS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 3, ops));
        CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &f32));
        CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &f32));
        CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &f32));
        CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, HIPDNN_TYPE_BOOLEAN, 1, &override));
        CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, HIPDNN_TYPE_CHAR, (int64_t)strlen(gname), gname));
        CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, HIPDNN_TYPE_HANDLE, 1, &handle));
        CHECK(hipdnnBackendFinalize(graph));
    }
    /* step 4: only the graph wrapper survives */
    hipdnnBackendDescriptor_t wrappers[] = {tx, tw, tconv, tb, tadd, ty, conv, add, relu};
    for (size_t i = 0; i < sizeof wrappers / sizeof wrappers[0]; ++i)
        CHECK(hipdnnBackendDestroyDescriptor(wrappers[i]));

    /* ---- §2.3 create_execution_plans */
    hipdnnBackendDescriptor_t heur = create(HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    hipdnnBackendHeurMode_t heurMode = HIPDNN_HEUR_MODE_FALLBACK;
    set_desc(heur, HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    CHECK(hipdnnBackendSetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_MODE, HIPDNN_TYPE_HEUR_MODE, 1, &heurMode));
    CHECK(hipdnnBackendFinalize(heur));
    int64_t count = 0;
    CHECK(hipdnnBackendGetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
    if (count == 0) {
        fprintf(stderr, "conv_bias_relu: No engine configurations available for the graph "
                        "(no loaded engine supports conv -> bias -> relu on host memory; "
                        "is the CPU reference engine installed?)\n");
        return 2;
    }
    hipdnnBackendDescriptor_t* cfgs = calloc((size_t)count, sizeof *cfgs);
    for (int64_t i = 0; i < count; ++i)
        cfgs[i] = create(HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    int64_t got = 0;
    CHECK(hipdnnBackendGetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgs));
    CHECK(hipdnnBackendDestroyDescriptor(heur));
    if (got == 0) {
        fprintf(stderr, "conv_bias_relu: No engine configurations available for the graph.\n");
        return 2;
    }
    /* the default engine = the heuristic's first choice */
    hipdnnBackendDescriptor_t cfg = cfgs[0];
    CHECK(hipdnnBackendFinalize(cfg));
    hipdnnBackendDescriptor_t engine = NULL;
    CHECK(hipdnnBackendGetAttribute(cfg, HIPDNN_ATTR_ENGINECFG_ENGINE, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, NULL, &engine));
    int64_t engineId = 0, nameLen = 0;
    CHECK(hipdnnBackendGetAttribute(engine, HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, HIPDNN_TYPE_INT64, 1, NULL, &engineId));
    CHECK(hipdnnBackendGetAttribute(engine, HIPDNN_ATTR_ENGINE_NAME_EXT, HIPDNN_TYPE_CHAR, 0, &nameLen, NULL));
    char* engineName = calloc((size_t)nameLen + 1, 1);
    CHECK(hipdnnBackendGetAttribute(engine, HIPDNN_ATTR_ENGINE_NAME_EXT, HIPDNN_TYPE_CHAR, nameLen, &nameLen, engineName));
    CHECK(hipdnnBackendDestroyDescriptor(engine));

    /* ---- §2.5 build_plans (heuristics choice), §2.6 workspace */
    hipdnnBackendDescriptor_t plan = create(HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set_desc(plan, HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg);
    CHECK(hipdnnBackendFinalize(plan));
    int64_t wsSize = 0;
    CHECK(hipdnnBackendGetAttribute(plan, HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, HIPDNN_TYPE_INT64, 1, NULL, &wsSize));

    /* ---- §2.7 execute */
    static float x[N * C * H * W], w[K * C * R * S], b[K], y[N * K * OH * OW], ref[N * K * OH * OW];
    uint32_t seed = 12345u;
    for (size_t i = 0; i < sizeof x / sizeof x[0]; ++i) x[i] = next_value(&seed);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; ++i) w[i] = next_value(&seed);
    for (size_t i = 0; i < sizeof b / sizeof b[0]; ++i) b[i] = next_value(&seed);
    for (size_t i = 0; i < sizeof y / sizeof y[0]; ++i) y[i] = NAN;
    /* A GPU engine gets device memory (our HIP GPU engine's name says so; HIPDNN_DEMO_DEVICE=1
     * forces it for another device engine). */
    const char* forced = getenv("HIPDNN_DEMO_DEVICE");
    int onDevice = strstr(engineName, "HIP_KERNELS") != NULL || (forced && forced[0] == '1');
    gpu_t gpu = {0};
    if (onDevice && gpu_open(&gpu) != 0) {
        fprintf(stderr, "conv_bias_relu: engine %s needs device memory but no HIP/CUDA runtime "
                        "library could be opened\n", engineName);
        return 1;
    }
    void* workspace = NULL;
    void* ptrs[4] = {x, w, b, y};
    if (onDevice) {
        ptrs[0] = to_device(&gpu, x, sizeof x);
        ptrs[1] = to_device(&gpu, w, sizeof w);
        ptrs[2] = to_device(&gpu, b, sizeof b);
        ptrs[3] = to_device(&gpu, NULL, sizeof y);
        if (wsSize > 0)
            workspace = to_device(&gpu, NULL, (size_t)wsSize);
        printf("memory: device (%s)\n", gpu.runtime);
    } else {
        workspace = wsSize > 0 ? malloc((size_t)wsSize) : NULL;
    }

    hipdnnBackendDescriptor_t vp = create(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    int64_t uids[4] = {UID_X, UID_W, UID_B, UID_Y};
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, 4, ptrs));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 4, uids));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, HIPDNN_TYPE_VOID_PTR, 1, &workspace));
    CHECK(hipdnnBackendFinalize(vp));
    CHECK(hipdnnBackendExecute(handle, plan, vp));
    if (onDevice) {
        if (gpu.sync() != 0 || gpu.memcpy_(y, ptrs[3], sizeof y, GPU_D2H) != 0) {
            fprintf(stderr, "conv_bias_relu: copying the result back failed (%s)\n", gpu.runtime);
            return 1;
        }
        for (int i = 0; i < 4; ++i)
            gpu.free_(ptrs[i]);
        if (workspace)
            gpu.free_(workspace);
        workspace = NULL;
    }

    /* ---- check */
    reference(x, w, b, ref);
    double checksum = 0.0, maxErr = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < sizeof y / sizeof y[0]; ++i) {
        double err = fabs((double)y[i] - (double)ref[i]);
        checksum += y[i];
        if (!(err <= 1e-4 + 1e-4 * fabs((double)ref[i])))
            ++bad;
        if (!(err <= maxErr))
            maxErr = err;
    }
    printf("engine: %s (id %lld)\n", engineName, (long long)engineId);
    printf("output: y[%d,%d,%d,%d] float32, workspace %lld bytes\n", N, K, OH, OW, (long long)wsSize);
    printf("checksum: %.6f\n", checksum);
    printf("check vs naive C reference: max abs error %.3g, %zu mismatches -> %s\n", maxErr, bad,
           bad == 0 ? "PASS" : "FAIL");

    CHECK(hipdnnBackendDestroyDescriptor(vp));
    CHECK(hipdnnBackendDestroyDescriptor(plan));
    for (int64_t i = 0; i < count; ++i)
        CHECK(hipdnnBackendDestroyDescriptor(cfgs[i]));
    CHECK(hipdnnBackendDestroyDescriptor(graph));
    CHECK(hipdnnDestroy(handle));
    free(cfgs);
    free(engineName);
    free(workspace);
    return bad == 0 ? 0 : 1;
}
