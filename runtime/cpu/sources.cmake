# Kernel sources of libtinytorch (GEMM driver + micro-kernels, fused bias-GELU,
# FlashAttention driver + per-ISA block kernels, layer-norm / softmax row kernels, the
# training-step kernels: Adam / AdamW and the embedding gather / scatter-add, and the
# data movement of convolution and max pooling: im2col / col2im, pooling with argmax, and
# the INT8 GEMM: driver qgemm.cpp, one kernel per ISA qgemm_kernel_<isa>.cpp).
#
# Included by the top-level CMakeLists.txt after add_library(tinytorch ...). Generic
# files are compiled for the baseline of the architecture (plain x86-64 / AArch64);
# only the *_avx2 / *_avx512 / *_neon files get ISA flags, and the library calls them
# only after run-time detection says the CPU has that ISA (runtime/core/isa.h).
set(TT_CPU_DIR ${CMAKE_CURRENT_LIST_DIR})

target_sources(tinytorch PRIVATE
  ${TT_CPU_DIR}/gemm.cpp
  ${TT_CPU_DIR}/gemm_reference.cpp
  ${TT_CPU_DIR}/gemm_kernel_scalar.cpp
  ${TT_CPU_DIR}/bias_gelu.cpp
  ${TT_CPU_DIR}/bias_gelu_reference.cpp
  ${TT_CPU_DIR}/attention.cpp
  ${TT_CPU_DIR}/attention_scalar.cpp
  ${TT_CPU_DIR}/rownorm.cpp
  ${TT_CPU_DIR}/train_ops.cpp
  ${TT_CPU_DIR}/conv.cpp
  ${TT_CPU_DIR}/qgemm.cpp
  ${TT_CPU_DIR}/qgemm_kernel_scalar.cpp
)

if(TT_ARCH_X86)
  target_sources(tinytorch PRIVATE
    ${TT_CPU_DIR}/gemm_kernel_avx2.cpp
    ${TT_CPU_DIR}/gemm_kernel_avx512.cpp
    ${TT_CPU_DIR}/bias_gelu_avx2.cpp
    ${TT_CPU_DIR}/bias_gelu_avx512.cpp
    ${TT_CPU_DIR}/attention_avx2.cpp
    ${TT_CPU_DIR}/attention_avx512.cpp
    ${TT_CPU_DIR}/rownorm_avx2.cpp
    ${TT_CPU_DIR}/rownorm_avx512.cpp
    ${TT_CPU_DIR}/train_ops_avx2.cpp
    ${TT_CPU_DIR}/train_ops_avx512.cpp
    ${TT_CPU_DIR}/qgemm_kernel_avx2.cpp
    ${TT_CPU_DIR}/qgemm_kernel_avx512bw.cpp
    ${TT_CPU_DIR}/qgemm_kernel_avx512_vnni.cpp
  )
  if(MSVC)
    set(TT_AVX2_FLAGS "/arch:AVX2")
    set(TT_AVX512_FLAGS "/arch:AVX512")
  else()
    set(TT_AVX2_FLAGS "-mavx2;-mfma;-mf16c")
    set(TT_AVX512_FLAGS "-mavx512f;-mavx512vl;-mavx512bw;-mavx512dq;-mavx2;-mfma;-mf16c")
  endif()
  set_source_files_properties(
    ${TT_CPU_DIR}/gemm_kernel_avx2.cpp
    ${TT_CPU_DIR}/bias_gelu_avx2.cpp
    ${TT_CPU_DIR}/attention_avx2.cpp
    ${TT_CPU_DIR}/rownorm_avx2.cpp
    ${TT_CPU_DIR}/train_ops_avx2.cpp
    ${TT_CPU_DIR}/qgemm_kernel_avx2.cpp
    PROPERTIES COMPILE_OPTIONS "${TT_AVX2_FLAGS}")
  set_source_files_properties(
    ${TT_CPU_DIR}/gemm_kernel_avx512.cpp
    ${TT_CPU_DIR}/bias_gelu_avx512.cpp
    ${TT_CPU_DIR}/attention_avx512.cpp
    ${TT_CPU_DIR}/rownorm_avx512.cpp
    ${TT_CPU_DIR}/train_ops_avx512.cpp
    ${TT_CPU_DIR}/qgemm_kernel_avx512bw.cpp
    PROPERTIES COMPILE_OPTIONS "${TT_AVX512_FLAGS}")
  # The INT8 VNNI kernel alone gets vpdpbusd (run only where CPUID reports AVX512_VNNI);
  # the AVX-512BW kernel must not, or the compiler could fuse its exact 16-bit scheme.
  if(MSVC)
    set(TT_AVX512_VNNI_FLAGS "/arch:AVX512")
  else()
    set(TT_AVX512_VNNI_FLAGS "${TT_AVX512_FLAGS};-mavx512vnni")
  endif()
  set_source_files_properties(${TT_CPU_DIR}/qgemm_kernel_avx512_vnni.cpp
    PROPERTIES COMPILE_OPTIONS "${TT_AVX512_VNNI_FLAGS}")
elseif(TT_ARCH_ARM64)
  # NEON (Advanced SIMD) is part of the AArch64 baseline: no extra flags needed.
  target_sources(tinytorch PRIVATE
    ${TT_CPU_DIR}/gemm_kernel_neon.cpp
    ${TT_CPU_DIR}/bias_gelu_neon.cpp
    ${TT_CPU_DIR}/attention_neon.cpp
    ${TT_CPU_DIR}/rownorm_neon.cpp
    ${TT_CPU_DIR}/train_ops_neon.cpp
    ${TT_CPU_DIR}/qgemm_kernel_neon.cpp
  )
endif()

# The INT8 row code (qgemm_rows.h) must round x * inv before adding the rounding constant, and
# its epilogue must match NumPy's float32 steps: no multiply-add contraction in those files.
# (-Wno-psabi: qgemm_rows.h passes 64-byte vectors between inline functions of one file;
# -Wno-maybe-uninitialized: GCC 12 flags its own AVX-512 conversion intrinsics.)
if(NOT MSVC)
  set_property(SOURCE ${TT_CPU_DIR}/qgemm.cpp ${TT_CPU_DIR}/qgemm_kernel_scalar.cpp
               ${TT_CPU_DIR}/qgemm_kernel_avx2.cpp ${TT_CPU_DIR}/qgemm_kernel_avx512bw.cpp
               ${TT_CPU_DIR}/qgemm_kernel_avx512_vnni.cpp ${TT_CPU_DIR}/qgemm_kernel_neon.cpp
               APPEND PROPERTY COMPILE_OPTIONS -ffp-contract=off -Wno-psabi -Wno-maybe-uninitialized)
endif()

# The training-step loops call sqrt: without errno (which no caller reads) the compiler
# vectorises them; the result is the same IEEE sqrt.
if(NOT MSVC)
  set_property(SOURCE ${TT_CPU_DIR}/train_ops.cpp ${TT_CPU_DIR}/train_ops_avx2.cpp
               ${TT_CPU_DIR}/train_ops_avx512.cpp ${TT_CPU_DIR}/train_ops_neon.cpp
               APPEND PROPERTY COMPILE_OPTIONS -fno-math-errno)
endif()
