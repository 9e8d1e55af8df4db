# C tests of the kernels (GEMM, fused bias-GELU, attention, layer norm / softmax rows). Included by tests/c/CMakeLists.txt,
# which provides tt_add_c_test(name source).
tt_add_c_test(test_gemm ${CMAKE_CURRENT_LIST_DIR}/test_gemm.c)
tt_add_c_test(test_gelu ${CMAKE_CURRENT_LIST_DIR}/test_gelu.c)
tt_add_c_test(test_attention ${CMAKE_CURRENT_LIST_DIR}/test_attention.c)
tt_add_c_test(test_rownorm ${CMAKE_CURRENT_LIST_DIR}/test_rownorm.c)
# The tests run 2-thread kernels on a shared machine; passive waiting keeps a thread whose
# partner was descheduled from spinning (the tests measure correctness, not speed).
set_tests_properties(test_gemm test_gelu test_attention test_rownorm PROPERTIES ENVIRONMENT "OMP_WAIT_POLICY=passive")
# Regressions of fuzzing findings (a deadlock and a hang among them): a timeout turns a
# regression into a failure instead of a stalled suite.
tt_add_c_test(test_reliability ${CMAKE_CURRENT_LIST_DIR}/test_reliability.c)
set_tests_properties(test_reliability PROPERTIES TIMEOUT 60)
# Fusion programs (tt_fusion_*): every op, broadcasting, reductions, ACCUMULATE, invalid IR,
# and the generated C compiled with cc when one is on PATH (dlopen: CMAKE_DL_LIBS).
tt_add_c_test(test_fusion ${CMAKE_CURRENT_LIST_DIR}/test_fusion.c)
target_link_libraries(test_fusion PRIVATE ${CMAKE_DL_LIBS})
set_tests_properties(test_fusion PROPERTIES ENVIRONMENT "OMP_WAIT_POLICY=passive" TIMEOUT 600)
# The training-step kernels and the convolution helpers (Adam, embedding, ReLU, im2col,
# col2im, max pooling) against naive loops, every ISA, 1 and 2 threads.
tt_add_c_test(test_train_ops ${CMAKE_CURRENT_LIST_DIR}/test_train_ops.c)
set_tests_properties(test_train_ops PROPERTIES ENVIRONMENT "OMP_WAIT_POLICY=passive" TIMEOUT 300)
