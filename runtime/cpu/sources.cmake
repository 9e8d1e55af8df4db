# Kernel sources of libtinytorch, by family: GEMM (driver + micro-kernels), INT8 GEMM, the
# half-precision GEMM and its float16 conversions, fused bias-GELU, FlashAttention, the row
# kernels (layer norm, softmax, log-softmax, cross-entropy), the training-step kernels (Adam /
# AdamW, embedding gather / scatter-add, ReLU) and convolution's data movement (im2col /
# col2im, max pooling with argmax).
#
# One naming scheme (docs/native-layout.md):
#   <family>.cpp            the driver: argument checks, the kernel for the active ISA, threads
#   <family>_kernels.h      the contract between the driver and its per-ISA kernels
#   <family>_<isa>.cpp      one ISA's kernels (scalar, avx2, avx512 / avx512bw / avx512_vnni,
#                           neon, f16c); only these files get ISA flags
#   <family>_reference.cpp  the always-built reference the tests compare against
#   <family>_<part>.h       a private helper of one family (gemm_rowvec.h, qgemm_rows.h)
#   <name>.h                a helper shared by several families (simd_exp.h, row_checks.h)
#
# Included by the top-level CMakeLists.txt after add_library(tinytorch ...). Generic
# files are compiled for the baseline of the architecture (plain x86-64 / AArch64);
# only the *_<isa> files get ISA flags, and the library calls them only after run-time
# detection says the CPU has that ISA (runtime/core/isa.h).
set(TT_CPU_DIR ${CMAKE_CURRENT_LIST_DIR})

target_sources(tinytorch PRIVATE
  ${TT_CPU_DIR}/gemm.cpp
  ${TT_CPU_DIR}/gemm_reference.cpp
  ${TT_CPU_DIR}/gemm_scalar.cpp
  ${TT_CPU_DIR}/bias_gelu.cpp
  ${TT_CPU_DIR}/bias_gelu_reference.cpp
  ${TT_CPU_DIR}/attention.cpp
  ${TT_CPU_DIR}/attention_scalar.cpp
  ${TT_CPU_DIR}/rownorm.cpp
  ${TT_CPU_DIR}/train_ops.cpp
  ${TT_CPU_DIR}/conv.cpp
  ${TT_CPU_DIR}/qgemm.cpp
  ${TT_CPU_DIR}/qgemm_scalar.cpp
  ${TT_CPU_DIR}/hgemm.cpp
)

if(TT_ARCH_X86)
  target_sources(tinytorch PRIVATE
    ${TT_CPU_DIR}/gemm_avx2.cpp
    ${TT_CPU_DIR}/gemm_avx512.cpp
    ${TT_CPU_DIR}/bias_gelu_avx2.cpp
    ${TT_CPU_DIR}/bias_gelu_avx512.cpp
    ${TT_CPU_DIR}/attention_avx2.cpp
    ${TT_CPU_DIR}/attention_avx512.cpp
    ${TT_CPU_DIR}/rownorm_avx2.cpp
    ${TT_CPU_DIR}/rownorm_avx512.cpp
    ${TT_CPU_DIR}/train_ops_avx2.cpp
    ${TT_CPU_DIR}/train_ops_avx512.cpp
    ${TT_CPU_DIR}/qgemm_avx2.cpp
    ${TT_CPU_DIR}/qgemm_avx2_u7.cpp
    ${TT_CPU_DIR}/qgemm_avx512bw.cpp
    ${TT_CPU_DIR}/qgemm_avx512_vnni.cpp
    ${TT_CPU_DIR}/half_f16c.cpp
  )
  if(MSVC)
    set(TT_AVX2_FLAGS "/arch:AVX2")
    set(TT_AVX512_FLAGS "/arch:AVX512")
  else()
    set(TT_AVX2_FLAGS "-mavx2;-mfma;-mf16c")
    set(TT_AVX512_FLAGS "-mavx512f;-mavx512vl;-mavx512bw;-mavx512dq;-mavx2;-mfma;-mf16c")
  endif()
  set_source_files_properties(
    ${TT_CPU_DIR}/gemm_avx2.cpp
    ${TT_CPU_DIR}/bias_gelu_avx2.cpp
    ${TT_CPU_DIR}/attention_avx2.cpp
    ${TT_CPU_DIR}/rownorm_avx2.cpp
    ${TT_CPU_DIR}/train_ops_avx2.cpp
    ${TT_CPU_DIR}/qgemm_avx2.cpp
    ${TT_CPU_DIR}/qgemm_avx2_u7.cpp
    PROPERTIES COMPILE_OPTIONS "${TT_AVX2_FLAGS}")
  set_source_files_properties(
    ${TT_CPU_DIR}/gemm_avx512.cpp
    ${TT_CPU_DIR}/bias_gelu_avx512.cpp
    ${TT_CPU_DIR}/attention_avx512.cpp
    ${TT_CPU_DIR}/rownorm_avx512.cpp
    ${TT_CPU_DIR}/train_ops_avx512.cpp
    ${TT_CPU_DIR}/qgemm_avx512bw.cpp
    PROPERTIES COMPILE_OPTIONS "${TT_AVX512_FLAGS}")
  # The INT8 VNNI kernel alone gets vpdpbusd (run only where CPUID reports AVX512_VNNI);
  # the AVX-512BW kernel must not, or the compiler could fuse its exact 16-bit scheme.
  if(MSVC)
    set(TT_AVX512_VNNI_FLAGS "/arch:AVX512")
  else()
    set(TT_AVX512_VNNI_FLAGS "${TT_AVX512_FLAGS};-mavx512vnni")
  endif()
  set_source_files_properties(${TT_CPU_DIR}/qgemm_avx512_vnni.cpp
    PROPERTIES COMPILE_OPTIONS "${TT_AVX512_VNNI_FLAGS}")
  # The float16 conversions need only F16C (and the AVX it implies).
  set_source_files_properties(${TT_CPU_DIR}/half_f16c.cpp PROPERTIES COMPILE_OPTIONS "-mavx;-mf16c")
elseif(TT_ARCH_ARM64)
  # NEON (Advanced SIMD) is part of the AArch64 baseline: no extra flags needed.
  target_sources(tinytorch PRIVATE
    ${TT_CPU_DIR}/gemm_neon.cpp
    ${TT_CPU_DIR}/bias_gelu_neon.cpp
    ${TT_CPU_DIR}/attention_neon.cpp
    ${TT_CPU_DIR}/rownorm_neon.cpp
    ${TT_CPU_DIR}/train_ops_neon.cpp
    ${TT_CPU_DIR}/qgemm_neon.cpp
  )
endif()

# The INT8 row code (qgemm_rows.h) must round x * inv before adding the rounding constant, and
# its epilogue must match NumPy's float32 steps: no multiply-add contraction in those files.
# (-Wno-psabi: qgemm_rows.h passes 64-byte vectors between inline functions of one file;
# -Wno-maybe-uninitialized: GCC 12 flags its own AVX-512 conversion intrinsics.)
if(NOT MSVC)
  set_property(SOURCE ${TT_CPU_DIR}/qgemm.cpp ${TT_CPU_DIR}/qgemm_scalar.cpp
               ${TT_CPU_DIR}/qgemm_avx2.cpp ${TT_CPU_DIR}/qgemm_avx2_u7.cpp
               ${TT_CPU_DIR}/qgemm_avx512bw.cpp
               ${TT_CPU_DIR}/qgemm_avx512_vnni.cpp ${TT_CPU_DIR}/qgemm_neon.cpp
               APPEND PROPERTY COMPILE_OPTIONS -ffp-contract=off -Wno-psabi -Wno-maybe-uninitialized)
endif()

# The training-step loops call sqrt: without errno (which no caller reads) the compiler
# vectorises them; the result is the same IEEE sqrt.
if(NOT MSVC)
  set_property(SOURCE ${TT_CPU_DIR}/train_ops.cpp ${TT_CPU_DIR}/train_ops_avx2.cpp
               ${TT_CPU_DIR}/train_ops_avx512.cpp ${TT_CPU_DIR}/train_ops_neon.cpp
               APPEND PROPERTY COMPILE_OPTIONS -fno-math-errno)
endif()
