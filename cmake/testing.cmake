# oomguard_add_gtest(NAME LABEL label SOURCES s1 [s2...])
# One gtest executable; its tests are discovered by ctest and carry the label. One label
# only: gtest_discover_tests of CMake 3.25 writes property values unquoted, so a list would
# spill into the property names.
# Each test keeps a seed counter in seed-counters/, so a repeated test takes a new seed
# (tests/support/fixtures.h, next_seed). The test preset also sets OMP_WAIT_POLICY=PASSIVE:
# with ctest running tests side by side, spinning OpenMP threads starve each other (the
# suite took 250 s instead of 65 s on two cores). gtest_discover_tests of CMake 3.25 passes
# one ENVIRONMENT entry only, so that one lives in the preset.
include(GoogleTest)
set(OOMGUARD_SEED_COUNTER_DIR ${CMAKE_BINARY_DIR}/seed-counters)
file(MAKE_DIRECTORY ${OOMGUARD_SEED_COUNTER_DIR})
function(oomguard_add_gtest name)
  cmake_parse_arguments(arg "" "LABEL" "SOURCES" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  if(OOMGUARD_SANITIZE)
    target_sources(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support/sanitizer_options.cpp)
    set_source_files_properties(${PROJECT_SOURCE_DIR}/tests/support/sanitizer_options.cpp
      PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
  target_link_libraries(${name} PRIVATE oomguard_test_support GTest::gtest GTest::gtest_main)
  oomguard_set_warnings(${name})
  target_precompile_headers(${name} REUSE_FROM oomguard_pch)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${arg_LABEL}
    ENVIRONMENT "OOMGUARD_SEED_COUNTER_DIR=${OOMGUARD_SEED_COUNTER_DIR}")
endfunction()
