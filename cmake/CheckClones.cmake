# ctest clones.as_configured: the libraries hold AVX2 clones exactly when the build makes them. Built with
# PACKORACLE_BASELINE_ONLY, no function may keep an AVX2 clone (one that did would be the code the tests skip
# on an AVX2 machine: a target_clones written around PACKORACLE_CLONES, fastcheck/clones.h); built without
# it, each library that has such functions must hold their clones (else the switch tests nothing).
# Usage: cmake -DNM=nm -DBASELINE_ONLY=ON|OFF -DLIBRARIES="a.a|b.a" -P CheckClones.cmake
string(REPLACE "|" ";" libraries "${LIBRARIES}")
foreach(library IN LISTS libraries)
  execute_process(COMMAND ${NM} ${library} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} ${library} failed")
  endif()
  string(REGEX MATCHALL "[^ \n]*\\.avx2[^ \n]*" clones "${symbols}")
  list(LENGTH clones n)
  if(BASELINE_ONLY AND n GREATER 0)
    message(FATAL_ERROR "${library}: built with PACKORACLE_BASELINE_ONLY, yet it holds ${n} AVX2 clones: ${clones}")
  elseif(NOT BASELINE_ONLY AND n EQUAL 0)
    message(FATAL_ERROR "${library}: no AVX2 clone, where its PACKORACLE_CLONES functions should have one")
  endif()
  message(STATUS "${library}: ${n} AVX2 clone symbols (baseline only: ${BASELINE_ONLY})")
endforeach()
