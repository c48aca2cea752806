#include "../check_main.h"
#include "test_onnx.h"

CHECK_MAIN("onnx", tcase_node_conv, tcase_node_relu, tcase_node_maxpool, tcase_node_averagepool,
           tcase_node_globalaveragepool, tcase_node_batchnorm, tcase_node_elementwise,
           tcase_node_gemm, tcase_node_matmul, tcase_node_flatten, tcase_node_reshape,
           tcase_node_softmax, tcase_node_identity, tcase_node_constant, tcase_node_cast,
           tcase_node_convtranspose, tcase_node_instancenorm, tcase_node_leakyrelu,
           tcase_node_concat, tcase_node_3d, tcase_load_errors, tcase_options, tcase_plugin,
           tcase_fusion, tcase_batching, tcase_cast, tcase_fmnist_accuracy, tcase_cuda_plan,
           tcase_cuda_plan_nodes, tcase_cuda_plan_resnet50, tcase_cuda_options)
