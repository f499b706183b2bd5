# ctest script: installs packoracle from BUILD_DIR into a fresh prefix, builds examples/consumer against it
# with find_package(packoracle) and runs it. Fails on the first step that fails.
# GENERATOR (and MAKE_PROGRAM, if not empty) are the parent build's CMAKE_GENERATOR and CMAKE_MAKE_PROGRAM:
# the downstream projects are configured with them, not with CMake's default generator (Unix Makefiles, which
# needs a `make` that scripts/setup.sh does not install).
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "ConsumerTest.cmake needs -D${var}=...")
  endif()
endforeach()
set(generator_args)
if(DEFINED GENERATOR AND NOT GENERATOR STREQUAL "")
  list(APPEND generator_args -G "${GENERATOR}")
endif()
if(DEFINED MAKE_PROGRAM AND NOT MAKE_PROGRAM STREQUAL "")
  list(APPEND generator_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${name}: ok\n${out}")
endfunction()
step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
step("configure consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${WORK_DIR}/consumer
     ${generator_args} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
step("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
step("run consumer" ${WORK_DIR}/consumer/lesson_denominator)
# The downstream conformance test of examples/conformance: packoracle_add_conformance_test + ctest.
step("configure conformance example" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/conformance -B ${WORK_DIR}/conformance
     ${generator_args} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
step("build conformance example" ${CMAKE_COMMAND} --build ${WORK_DIR}/conformance)
step("run conformance example" ${CMAKE_CTEST_COMMAND} --test-dir ${WORK_DIR}/conformance --output-on-failure)
