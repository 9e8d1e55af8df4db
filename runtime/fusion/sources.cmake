# Sources of the fusion executor (runtime/fusion: IR validation, planning, the tile
# interpreter, the C code generator, and the per-ISA float32 op tables).
#
# Included by the top-level CMakeLists.txt after add_library(tinytorch ...). As in
# runtime/cpu/sources.cmake, only the *_avx2 / *_avx512 / *_neon files get ISA flags, and
# the interpreter calls them only after run-time detection says the CPU has that ISA.
set(TT_FUSION_DIR ${CMAKE_CURRENT_LIST_DIR})

target_sources(tinytorch PRIVATE
  ${TT_FUSION_DIR}/fusion.cpp
  ${TT_FUSION_DIR}/validate.cpp
  ${TT_FUSION_DIR}/plan.cpp
  ${TT_FUSION_DIR}/interp.cpp
  ${TT_FUSION_DIR}/codegen.cpp
  ${TT_FUSION_DIR}/fusion_ops_scalar.cpp
)

if(TT_ARCH_X86)
  target_sources(tinytorch PRIVATE
    ${TT_FUSION_DIR}/fusion_ops_avx2.cpp
    ${TT_FUSION_DIR}/fusion_ops_avx512.cpp
  )
  if(MSVC)
    set(TT_FUSION_AVX2_FLAGS "/arch:AVX2")
    set(TT_FUSION_AVX512_FLAGS "/arch:AVX512")
  else()
    set(TT_FUSION_AVX2_FLAGS "-mavx2;-mfma")
    set(TT_FUSION_AVX512_FLAGS "-mavx512f;-mavx512vl;-mavx512bw;-mavx512dq;-mavx2;-mfma")
  endif()
  set_source_files_properties(${TT_FUSION_DIR}/fusion_ops_avx2.cpp
    PROPERTIES COMPILE_OPTIONS "${TT_FUSION_AVX2_FLAGS}")
  set_source_files_properties(${TT_FUSION_DIR}/fusion_ops_avx512.cpp
    PROPERTIES COMPILE_OPTIONS "${TT_FUSION_AVX512_FLAGS}")
elseif(TT_ARCH_ARM64)
  # NEON (Advanced SIMD) is part of the AArch64 baseline: no extra flags needed.
  target_sources(tinytorch PRIVATE ${TT_FUSION_DIR}/fusion_ops_neon.cpp)
endif()
