/* test_onnx_cuda: the onnx backend's CUDA engine on a GPU. Without a usable CUDA device every
 * case is skipped: the process prints why and exits 77, which CTest reports as skipped
 * (SKIP_RETURN_CODE), not as passed. What needs no device (options, the plans, the load error of
 * a missing device) is tested in test_onnx on every machine. */
#include "test_onnx.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define SKIP_CODE 77

int main(void)
{
    TCase *(*makers[])(void) = {tcase_cuda_nodes, tcase_cuda_engine};
    const char *only = getenv("CK_RUN_CASE");
    Suite *s;
    SRunner *sr;
    size_t i;
    int n = 0, failed;
    cudaError_t e = cudaGetDeviceCount(&n);

    if (e != cudaSuccess || n == 0) {
        printf("SKIPPED %s: no usable CUDA device (%s%s); the GPU tests need one, see "
               "deploy/gpu/README.md\n",
               only ? only : "all cases", e != cudaSuccess ? "cudaGetDeviceCount: " : "",
               e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
        return SKIP_CODE;
    }
    s = suite_create("onnx_cuda");
    for (i = 0; i < sizeof(makers) / sizeof(makers[0]); i++)
        suite_add_tcase(s, makers[i]());
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    if (srunner_ntests_run(sr) == 0) /* a CK_RUN_CASE that names no case */
        failed = 1;
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
