# C tests of the kernels (GEMM, fused bias-GELU, attention, layer norm / softmax rows). Included by tests/c/CMakeLists.txt,
# which provides tt_add_c_test(name source).
tt_add_c_test(test_gemm ${CMAKE_CURRENT_LIST_DIR}/test_gemm.c)
tt_add_c_test(test_gelu ${CMAKE_CURRENT_LIST_DIR}/test_gelu.c)
tt_add_c_test(test_attention ${CMAKE_CURRENT_LIST_DIR}/test_attention.c)
tt_add_c_test(test_rownorm ${CMAKE_CURRENT_LIST_DIR}/test_rownorm.c)
# Regressions of fuzzing findings (a deadlock and a hang among them): a timeout turns a
# regression into a failure instead of a stalled suite.
tt_add_c_test(test_reliability ${CMAKE_CURRENT_LIST_DIR}/test_reliability.c)
set_tests_properties(test_reliability PROPERTIES TIMEOUT 60)
# Fusion programs (tt_fusion_*): every op, broadcasting, reductions, ACCUMULATE, invalid IR,
# and the generated C compiled with cc when one is on PATH (dlopen: CMAKE_DL_LIBS).
tt_add_c_test(test_fusion ${CMAKE_CURRENT_LIST_DIR}/test_fusion.c)
target_link_libraries(test_fusion PRIVATE ${CMAKE_DL_LIBS})
set_tests_properties(test_fusion PROPERTIES TIMEOUT 600)
# The training-step kernels and the convolution helpers (Adam, embedding, ReLU, im2col,
# col2im, max pooling) against naive loops, every ISA, 1 and 2 threads.
tt_add_c_test(test_train_ops ${CMAKE_CURRENT_LIST_DIR}/test_train_ops.c)
set_tests_properties(test_train_ops PROPERTIES TIMEOUT 300)
# Header promises and argument checks (attention d = 0 and int64 limits, max-pool argmax on
# empty planes, conv dimension limits, the fusion source size query, cross-entropy's shifted
# softmax): a timeout catches the d = 0 loop coming back.
tt_add_c_test(test_argument_promises ${CMAKE_CURRENT_LIST_DIR}/test_argument_promises.c)
set_tests_properties(test_argument_promises PROPERTIES TIMEOUT 60)
# The INT8 GEMM (tt_qgemm_*): exact int32 against int64 loops on every kernel this machine
# runs, the row quantization, the float epilogue, and refused input.
tt_add_c_test(test_qgemm ${CMAKE_CURRENT_LIST_DIR}/test_qgemm.c)
set_tests_properties(test_qgemm PROPERTIES ENVIRONMENT "OMP_WAIT_POLICY=passive" TIMEOUT 300)
# The threading model: the same bits on 1, 2, 3 and 7 threads for every threaded kernel
# family, calls that complete with every worker held, nesting, two calling threads, fork.
tt_add_c_test(test_threads ${CMAKE_CURRENT_LIST_DIR}/test_threads.c)
target_link_libraries(test_threads PRIVATE Threads::Threads)
set_tests_properties(test_threads PROPERTIES TIMEOUT 120)
