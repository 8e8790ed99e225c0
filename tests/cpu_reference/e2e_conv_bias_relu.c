/* End to end through the backend C API on the CPU reference engine:
 * conv (NHWC x, 3x3, pad 1) -> + bias -> relu, virtual intermediates, host pointers.
 * Usage: e2e_conv_bias_relu PLUGIN_DIR  (prints "OK <engine name>"; exit 1 on failure). */
#define _POSIX_C_SOURCE 200809L
#include "../c_testlib.h"
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef hipdnnBackendDescriptor_t D;
#define tensor(uid, dims, strides, virt) hdt_tensor(uid, NULL, HIPDNN_DATA_FLOAT, 4, dims, strides, virt)
#define pointwise hdt_pointwise
enum { NB = 2, C = 3, H = 5, W = 5, K = 4, R = 3 };

int main(int argc, char** argv)
{
    if(argc > 1) {
        const char* paths[1] = {argv[1]};
        CHECK(hipdnnSetEnginePluginPaths_ext(1, paths, HIPDNN_PLUGIN_LOADING_ABSOLUTE));
    }
    hipdnnHandle_t h;
    CHECK(hipdnnCreate(&h));
    int64_t xd[4] = {NB, C, H, W}, xs[4] = {H * W * C, 1, W * C, C};          /* NHWC */
    int64_t wd[4] = {K, C, R, R}, ws[4] = {C * R * R, R * R, R, 1};
    int64_t yd[4] = {NB, K, H, W}, ys[4] = {H * W * K, 1, W * K, K};          /* NHWC */
    int64_t bd[4] = {1, K, 1, 1}, bs[4] = {K, 1, 1, 1};
    D x = tensor(1, xd, xs, false), w = tensor(2, wd, ws, false), y = tensor(3, yd, ys, true);
    D b = tensor(4, bd, bs, false), z = tensor(5, yd, ys, true), r = tensor(6, yd, ys, false);
    D conv;
    int64_t pad[2] = {1, 1}, one[2] = {1, 1};
    hipdnnConvolutionMode_t mode = HIPDNN_CROSS_CORRELATION;
    hipdnnDataType_t comp = HIPDNN_DATA_FLOAT;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &conv));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_PRE_PADDINGS, HIPDNN_TYPE_INT64, 2, pad));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_POST_PADDINGS, HIPDNN_TYPE_INT64, 2, pad));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_FILTER_STRIDES, HIPDNN_TYPE_INT64, 2, one));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_DILATIONS, HIPDNN_TYPE_INT64, 2, one));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_CONV_MODE, HIPDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_COMP_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &comp));
    CHECK(hipdnnBackendFinalize(conv));
    D ops[3] = {conv, pointwise(HIPDNN_POINTWISE_ADD, y, b, z), pointwise(HIPDNN_POINTWISE_RELU_FWD, z, NULL, r)};
    D graph, heur, plan, vp;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_OPS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 3, ops));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, HIPDNN_TYPE_HANDLE, 1, &h));
    CHECK(hipdnnBackendFinalize(graph));
    hipdnnBackendHeurMode_t hm = HIPDNN_HEUR_MODE_FALLBACK;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    CHECK(hipdnnBackendSetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
    CHECK(hipdnnBackendSetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_MODE, HIPDNN_TYPE_HEUR_MODE, 1, &hm));
    CHECK(hipdnnBackendFinalize(heur));
    int64_t count = 0;
    D cfg, eng;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg));
    CHECK(hipdnnBackendGetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &cfg));
    if(count < 1) { fprintf(stderr, "no engine config\n"); return 1; }
    CHECK(hipdnnBackendFinalize(cfg));
    CHECK(hipdnnBackendGetAttribute(cfg, HIPDNN_ATTR_ENGINECFG_ENGINE, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, NULL, &eng));
    char name[256] = {0};
    int64_t nlen = 0;
    CHECK(hipdnnBackendGetAttribute(eng, HIPDNN_ATTR_ENGINE_NAME_EXT, HIPDNN_TYPE_CHAR, sizeof name, &nlen, name));
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
    CHECK(hipdnnBackendSetAttribute(plan, HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg));
    CHECK(hipdnnBackendSetAttribute(plan, HIPDNN_ATTR_EXECUTION_PLAN_HANDLE, HIPDNN_TYPE_HANDLE, 1, &h));
    CHECK(hipdnnBackendFinalize(plan));
    int64_t wsz = -1;
    CHECK(hipdnnBackendGetAttribute(plan, HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, HIPDNN_TYPE_INT64, 1, NULL, &wsz));
    if(wsz != 0) { fprintf(stderr, "workspace %lld\n", (long long)wsz); return 1; }
    static float xb[NB * C * H * W], wb[K * C * R * R], bb[K], rb[NB * K * H * W];
    unsigned s = 12345;
    for(int i = 0; i < NB * C * H * W; i++) { s = s * 1103515245u + 12345u; xb[i] = (float)((s >> 16) % 2001) / 1000.0f - 1.0f; }
    for(int i = 0; i < K * C * R * R; i++) { s = s * 1103515245u + 12345u; wb[i] = (float)((s >> 16) % 2001) / 1000.0f - 1.0f; }
    for(int i = 0; i < K; i++) bb[i] = 0.25f * (float)i - 0.4f;
    for(int i = 0; i < NB * K * H * W; i++) rb[i] = NAN;
    void* ptrs[4] = {xb, wb, bb, rb};
    int64_t uids[4] = {1, 2, 4, 6};
    void* work = NULL;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, 4, ptrs));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 4, uids));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, HIPDNN_TYPE_VOID_PTR, 1, &work));
    CHECK(hipdnnBackendFinalize(vp));
    CHECK(hipdnnBackendExecute(h, plan, vp));
    /* reference: direct loops, NHWC x / y, KCRS w */
    for(int n = 0; n < NB; n++)
        for(int k = 0; k < K; k++)
            for(int i = 0; i < H; i++)
                for(int j = 0; j < W; j++) {
                    double acc = 0;
                    for(int c = 0; c < C; c++)
                        for(int p = 0; p < R; p++)
                            for(int q = 0; q < R; q++) {
                                int ii = i - 1 + p, jj = j - 1 + q;
                                if(ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                                acc += (double)xb[n * xs[0] + c * xs[1] + ii * xs[2] + jj * xs[3]] *
                                       (double)wb[k * ws[0] + c * ws[1] + p * ws[2] + q];
                            }
                    acc += bb[k];
                    if(acc < 0) acc = 0;
                    float got = rb[n * ys[0] + k * ys[1] + i * ys[2] + j * ys[3]];
                    if(!(fabs(got - acc) <= 1e-4 * (1 + fabs(acc)))) {
                        fprintf(stderr, "mismatch at n%d k%d i%d j%d: %g vs %g\n", n, k, i, j, (double)got, acc);
                        return 1;
                    }
                }
    CHECK(hipdnnBackendDestroyDescriptor(vp));
    CHECK(hipdnnBackendDestroyDescriptor(plan));
    CHECK(hipdnnBackendDestroyDescriptor(eng));
    CHECK(hipdnnBackendDestroyDescriptor(cfg));
    CHECK(hipdnnBackendDestroyDescriptor(heur));
    CHECK(hipdnnBackendDestroyDescriptor(graph));
    CHECK(hipdnnDestroy(h));
    printf("OK %s\n", name);
    return 0;
}
