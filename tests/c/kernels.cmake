# C tests of the kernels (GEMM, fused bias-GELU). Included by tests/c/CMakeLists.txt,
# which provides tt_add_c_test(name source).
tt_add_c_test(test_gemm ${CMAKE_CURRENT_LIST_DIR}/test_gemm.c)
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/test_gelu.c)
  tt_add_c_test(test_gelu ${CMAKE_CURRENT_LIST_DIR}/test_gelu.c)
endif()
