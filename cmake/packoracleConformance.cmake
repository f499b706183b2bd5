# packoracle_add_conformance_test(<target> <source>...)
#
# Builds a GoogleTest executable from the sources, links packoracle::gtest and GTest::gtest_main, and registers
# one CTest test per test case (gtest_discover_tests), as fuzztest's link_fuzztest does:
#
#   find_package(packoracle CONFIG REQUIRED)
#   packoracle_add_conformance_test(my_packer_conformance my_packer_test.cc)
#   target_link_libraries(my_packer_conformance PRIVATE my_packer)
function(packoracle_add_conformance_test target)
  if(ARGC LESS 2)
    message(FATAL_ERROR "packoracle_add_conformance_test(${target}) needs at least one source file")
  endif()
  add_executable(${target} ${ARGN})
  target_link_libraries(${target} PRIVATE packoracle::gtest GTest::gtest_main)
  include(GoogleTest)
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60)
endfunction()
