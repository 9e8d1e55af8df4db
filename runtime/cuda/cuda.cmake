# libtinytorch_cuda: the CUDA SGEMM teaching ladder (include/tinytorch/tinytorch_cuda.h), a separate shared
# library so libtinytorch itself never needs CUDA. Included by the top CMakeLists.txt only
# after check_language(CUDA) found a compiler and enable_language(CUDA) ran. The CUDA
# runtime is linked statically: the library loads on a machine without a driver and its
# calls then return TT_ERR_UNSUPPORTED with the reason (Python falls back to the CPU).
add_library(tinytorch_cuda SHARED
  ${CMAKE_CURRENT_LIST_DIR}/sgemm_kernels.cu
  ${CMAKE_CURRENT_LIST_DIR}/sgemm_api.cu)
target_include_directories(tinytorch_cuda PRIVATE
  ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_LIST_DIR})
target_compile_definitions(tinytorch_cuda PRIVATE TT_VERSION_STRING="${PROJECT_VERSION}")
set_target_properties(tinytorch_cuda PROPERTIES
  CUDA_STANDARD 17
  CUDA_RUNTIME_LIBRARY Static
  CUDA_VISIBILITY_PRESET hidden
  CXX_VISIBILITY_PRESET hidden
  POSITION_INDEPENDENT_CODE ON
  # beside libtinytorch, where the Python loader looks (next to the loaded runtime)
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
if(SKBUILD)
  install(TARGETS tinytorch_cuda LIBRARY DESTINATION tinytorch RUNTIME DESTINATION tinytorch)
  set_target_properties(tinytorch_cuda PROPERTIES NO_SONAME ON)
  if(SKBUILD_STATE STREQUAL "editable")
    set_target_properties(tinytorch_cuda PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY ${PROJECT_SOURCE_DIR}/python/tinytorch/_lib_editable)
  endif()
else()
  include(GNUInstallDirs)
  install(TARGETS tinytorch_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/include/tinytorch/tinytorch_cuda.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tinytorch)
endif()
