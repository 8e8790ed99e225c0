/* conv -> bias(add) -> relu built through the C API with the call sequence of the C++ frontend
 * (spec §2.2), serialized (two-call), deserialized, and checked.  Exit 0 = pass. */
#include "../c_testlib.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT(cond)                                                          \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static hipdnnBackendDescriptor_t make_tensor(int64_t uid, const char* name, int64_t n, int64_t c,
                                             int64_t h, int64_t w, bool isVirtual)
{
    int64_t dims[4] = {n, c, h, w};
    int64_t strides[4] = {c * h * w, h * w, w, 1};
    return hdt_tensor(uid, name, HIPDNN_DATA_FLOAT, 4, dims, strides, isVirtual);
}

static void set_tensor(hipdnnBackendDescriptor_t op, hipdnnBackendAttributeName_t name,
                       hipdnnBackendDescriptor_t t)
{
    CHECK(hipdnnBackendSetAttribute(op, name, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t));
}

#define pointwise hdt_pointwise

int main(void)
{
    hipdnnHandle_t handle = NULL;
    CHECK(hipdnnCreate(&handle));

    /* 1. tensors, in first-seen order of a topological walk */
    hipdnnBackendDescriptor_t x = make_tensor(1, "x", 1, 4, 8, 8, false);
    hipdnnBackendDescriptor_t w = make_tensor(2, "w", 8, 4, 3, 3, false);
    hipdnnBackendDescriptor_t y = make_tensor(3, "", 1, 8, 6, 6, true);
    hipdnnBackendDescriptor_t b = make_tensor(4, "bias", 1, 8, 1, 1, false);
    hipdnnBackendDescriptor_t z = make_tensor(5, "", 1, 8, 6, 6, true);
    hipdnnBackendDescriptor_t o = make_tensor(6, "out", 1, 8, 6, 6, false);

    /* 2. operations */
    hipdnnBackendDescriptor_t conv = NULL;
    int64_t pad[2] = {0, 0}, stride[2] = {1, 1}, dil[2] = {1, 1};
    hipdnnConvolutionMode_t mode = HIPDNN_CROSS_CORRELATION;
    hipdnnDataType_t comp = HIPDNN_DATA_FLOAT;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &conv));
    set_tensor(conv, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
    set_tensor(conv, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
    set_tensor(conv, HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_PRE_PADDINGS, HIPDNN_TYPE_INT64, 2, pad));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_POST_PADDINGS, HIPDNN_TYPE_INT64, 2, pad));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_FILTER_STRIDES, HIPDNN_TYPE_INT64, 2, stride));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_DILATIONS, HIPDNN_TYPE_INT64, 2, dil));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_CONV_MODE, HIPDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    CHECK(hipdnnBackendSetAttribute(conv, HIPDNN_ATTR_CONVOLUTION_COMP_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &comp));
    CHECK(hipdnnBackendFinalize(conv));
    hipdnnBackendDescriptor_t add = pointwise(HIPDNN_POINTWISE_ADD, y, b, z);
    hipdnnBackendDescriptor_t relu = pointwise(HIPDNN_POINTWISE_RELU_FWD, z, NULL, o);

    /* 3. the graph */
    hipdnnBackendDescriptor_t graph = NULL;
    hipdnnBackendDescriptor_t ops[3] = {conv, add, relu};
    hipdnnDataType_t io = HIPDNN_DATA_FLOAT;
    bool override = false;
    const char* gname = "conv_bias_relu";
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_OPS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 3, ops));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &comp));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &io));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, HIPDNN_TYPE_BOOLEAN, 1, &override));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, HIPDNN_TYPE_CHAR, (int64_t)strlen(gname), gname));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, HIPDNN_TYPE_HANDLE, 1, &handle));
    CHECK(hipdnnBackendFinalize(graph));

    /* 4. the frontend destroys every tensor and op wrapper; only the graph survives */
    hipdnnBackendDescriptor_t tmp[9] = {x, w, y, b, z, o, conv, add, relu};
    for (int i = 0; i < 9; ++i)
        CHECK(hipdnnBackendDestroyDescriptor(tmp[i]));

    /* serialize: two-call */
    size_t size = 0;
    CHECK(hipdnnBackendGetSerializedBinaryGraph_ext(graph, 0, &size, NULL));
    EXPECT(size > 0);
    uint8_t* blob = malloc(size);
    EXPECT(hipdnnBackendGetSerializedBinaryGraph_ext(graph, size - 1, &size, blob)
           == HIPDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT);
    CHECK(hipdnnBackendGetSerializedBinaryGraph_ext(graph, size, &size, blob));

    int flags = 0;
    CHECK(hipdnnBackendGetSerializedBinaryContents_ext(blob, size, &flags));
    EXPECT(flags == HIPDNN_SERIALIZED_CONTENT_GRAPH);

    /* deserialize and check */
    hipdnnBackendDescriptor_t g2 = NULL;
    CHECK(hipdnnBackendCreateAndDeserializeGraph_ext(&g2, blob, size));
    int64_t n = 0;
    CHECK(hipdnnBackendGetAttribute(g2, HIPDNN_ATTR_OPERATIONGRAPH_OPS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL));
    EXPECT(n == 3);
    hipdnnBackendDescriptor_t ops2[3] = {NULL, NULL, NULL};
    CHECK(hipdnnBackendGetAttribute(g2, HIPDNN_ATTR_OPERATIONGRAPH_OPS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 3, &n, ops2));
    hipdnnOperationType_ext_t types[3];
    for (int i = 0; i < 3; ++i) {
        int64_t c = 0;
        CHECK(hipdnnBackendGetAttribute(ops2[i], HIPDNN_ATTR_OPERATION_TYPE_EXT, HIPDNN_TYPE_OPERATION_TYPE_EXT, 1, &c, &types[i]));
        EXPECT(c == 1);
    }
    EXPECT(types[0] == HIPDNN_OPERATION_TYPE_CONVOLUTION_FORWARD_EXT);
    EXPECT(types[1] == HIPDNN_OPERATION_TYPE_POINTWISE_EXT);
    EXPECT(types[2] == HIPDNN_OPERATION_TYPE_POINTWISE_EXT);

    hipdnnBackendDescriptor_t x2 = NULL;
    int64_t c = 0, uid = 0, dims[4] = {0};
    CHECK(hipdnnBackendGetAttribute(ops2[0], HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, &x2));
    CHECK(hipdnnBackendGetAttribute(x2, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &c, &uid));
    EXPECT(uid == 1);
    CHECK(hipdnnBackendGetAttribute(x2, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 4, &c, dims));
    EXPECT(c == 4 && dims[0] == 1 && dims[1] == 4 && dims[2] == 8 && dims[3] == 8);
    hipdnnConvolutionMode_t mode2 = HIPDNN_CONVOLUTION;
    CHECK(hipdnnBackendGetAttribute(ops2[0], HIPDNN_ATTR_CONVOLUTION_CONV_MODE, HIPDNN_TYPE_CONVOLUTION_MODE, 1, &c, &mode2));
    EXPECT(mode2 == HIPDNN_CROSS_CORRELATION);
    hipdnnPointwiseMode_t pm = HIPDNN_POINTWISE_ABS;
    CHECK(hipdnnBackendGetAttribute(ops2[2], HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &c, &pm));
    EXPECT(pm == HIPDNN_POINTWISE_RELU_FWD);
    char name[64] = {0};
    CHECK(hipdnnBackendGetAttribute(g2, HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, HIPDNN_TYPE_CHAR, sizeof name, &c, name));
    EXPECT(strcmp(name, gname) == 0);

    /* round trip: identical bytes, before and after HANDLE + finalize */
    size_t size2 = 0;
    CHECK(hipdnnBackendGetSerializedBinaryGraph_ext(g2, 0, &size2, NULL));
    EXPECT(size2 == size);
    uint8_t* blob2 = malloc(size2);
    CHECK(hipdnnBackendGetSerializedBinaryGraph_ext(g2, size2, &size2, blob2));
    EXPECT(memcmp(blob, blob2, size) == 0);
    CHECK(hipdnnBackendSetAttribute(g2, HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, HIPDNN_TYPE_HANDLE, 1, &handle));
    CHECK(hipdnnBackendFinalize(g2));
    CHECK(hipdnnBackendGetSerializedBinaryGraph_ext(g2, size2, &size2, blob2));
    EXPECT(size2 == size && memcmp(blob, blob2, size) == 0);

    /* JSON two-call, and back */
    size_t jsize = 0;
    CHECK(hipdnnBackendGetSerializedJsonGraph_ext(graph, 0, &jsize, NULL));
    char* json = malloc(jsize);
    CHECK(hipdnnBackendGetSerializedJsonGraph_ext(graph, jsize, &jsize, json));
    EXPECT(json[jsize - 1] == '\0' && strlen(json) == jsize - 1);
    hipdnnBackendDescriptor_t g3 = NULL;
    CHECK(hipdnnBackendCreateAndDeserializeJsonGraph_ext(&g3, json, jsize));
    size_t size3 = 0;
    CHECK(hipdnnBackendGetSerializedBinaryGraph_ext(g3, size2, &size3, blob2));
    EXPECT(size3 == size && memcmp(blob, blob2, size) == 0);

    for (int i = 0; i < 3; ++i)
        CHECK(hipdnnBackendDestroyDescriptor(ops2[i]));
    CHECK(hipdnnBackendDestroyDescriptor(x2));
    CHECK(hipdnnBackendDestroyDescriptor(g2));
    CHECK(hipdnnBackendDestroyDescriptor(g3));
    CHECK(hipdnnBackendDestroyDescriptor(graph));
    CHECK(hipdnnDestroy(handle));
    free(blob);
    free(blob2);
    free(json);
    printf("graph_build: OK (%zu bytes)\n", size);
    return 0;
}
