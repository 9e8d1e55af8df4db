# Installs the built library into a scratch prefix, then configures, builds and runs
# tests/c/consumer/ (a C program outside the source tree) against it twice: through
# find_package(tinytorch) and through pkg-config.
file(REMOVE_RECURSE ${WORK_DIR})
set(PREFIX ${WORK_DIR}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
file(COPY ${SOURCE_DIR}/tests/c/consumer/ DESTINATION ${WORK_DIR}/src)
foreach(mode find_package pkg_config)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK_DIR}/src -B ${WORK_DIR}/build-${mode} -G ${GENERATOR}
                    -DCMAKE_PREFIX_PATH=${PREFIX} -DCONSUMER_MODE=${mode}
                  RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "configuring the consumer (${mode}) failed")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build-${mode} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "building the consumer (${mode}) failed")
  endif()
  execute_process(COMMAND ${WORK_DIR}/build-${mode}/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${mode}: ${out}${err}")
  if(rc)
    message(FATAL_ERROR "the consumer (${mode}) failed: ${rc}")
  endif()
endforeach()
