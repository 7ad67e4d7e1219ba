# oomguard_add_gtest(NAME LABEL label [ONE_PROCESS] SOURCES s1 [s2...] [LINK l1 [l2...]])
# One gtest executable; its tests are discovered by ctest and carry the label. It links LINK,
# by default the test support library and GoogleTest's main. One label
# only: gtest_discover_tests of CMake 3.25 writes property values unquoted, so a list would
# spill into the property names.
# ONE_PROCESS: the executable is one ctest test of its own name running all its tests in one
# process, for binaries of many quick unit tests: each process spends about 0.5 s starting
# LibTorch (its operator registrations), which ran longer than the tests themselves (61 unit
# tests: 30 s one process each, 0.7 s together). `NAME --gtest_filter=...` runs one of them.
# Give it only to binaries that every build of the tests builds: preset asan builds some
# (CMakePresets.json), and a test of a binary not built fails where a discovered one would
# not exist (tests/CMakeLists.txt).
# Each test keeps a seed counter in seed-counters/, so a repeated test takes a new seed
# (<oomguard/gtest.h>, seed_test).
include(GoogleTest)
set(OOMGUARD_SEED_COUNTER_DIR ${CMAKE_BINARY_DIR}/seed-counters)
file(MAKE_DIRECTORY ${OOMGUARD_SEED_COUNTER_DIR})
function(oomguard_add_gtest name)
  cmake_parse_arguments(arg "ONE_PROCESS" "LABEL" "SOURCES;LINK" ${ARGN})
  if(NOT arg_LINK)
    set(arg_LINK oomguard_test_support GTest::gtest GTest::gtest_main)
  endif()
  add_executable(${name} ${arg_SOURCES})
  if(OOMGUARD_SANITIZE)
    target_sources(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support/sanitizer_options.cpp)
    set_source_files_properties(${PROJECT_SOURCE_DIR}/tests/support/sanitizer_options.cpp
      PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
  target_link_libraries(${name} PRIVATE ${arg_LINK})
  oomguard_set_warnings(${name})
  target_precompile_headers(${name} REUSE_FROM oomguard_pch)
  if(arg_ONE_PROCESS)
    add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
    set_tests_properties(${name} PROPERTIES LABELS ${arg_LABEL})
    return()
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${arg_LABEL})
  set_property(GLOBAL APPEND PROPERTY OOMGUARD_GTEST_TARGETS ${name})
  set_property(GLOBAL PROPERTY OOMGUARD_GTEST_LABEL_${name} ${arg_LABEL})
endfunction()

# oomguard_add_slow_test(NAME name LABEL label COMMAND command [args...])
# A test that is slow by nature (a consumer project built, a bound proved over many seeds or
# sizes): it runs where the environment says OOMGUARD_SLOW=1 (the README's test command,
# ci/run-tests.sh, and the CI workflows) and is skipped elsewhere, so plain `ctest` and
# `ctest --preset cpu` stay fast without losing it. Labelled slow beside its own label.
function(oomguard_add_slow_test)
  cmake_parse_arguments(arg "" "NAME;LABEL" "COMMAND" ${ARGN})
  add_test(NAME ${arg_NAME} COMMAND ${PROJECT_SOURCE_DIR}/tests/support/slow.sh ${arg_COMMAND})
  set_tests_properties(${arg_NAME} PROPERTIES LABELS "${arg_LABEL};slow" SKIP_RETURN_CODE 77)
endfunction()

# The checkers of ci/install-tools.sh (check-jsonschema, junitparser, lizard): the CLI tests
# validate every report, summary and JUnit file they make with them
# (tests/cli/check_outputs.py); lizard measures the functions' lengths.
find_program(OOMGUARD_TOOLS_PYTHON python NO_DEFAULT_PATH
  HINTS $ENV{OOMGUARD_CACHE}/venv-tools/bin $ENV{HOME}/.cache/oomguard/venv-tools/bin
  DOC "Python of the checkers' venv (ci/install-tools.sh)")
if(OOMGUARD_TOOLS_PYTHON)
  cmake_path(GET OOMGUARD_TOOLS_PYTHON PARENT_PATH OOMGUARD_TOOLS_BIN)
else()
  message(STATUS "oomguard: no checkers' venv (ci/install-tools.sh makes it): report schema "
    "and JUnit checks are skipped")
  set(OOMGUARD_TOOLS_BIN "")
endif()

# Every test's environment, set on the tests themselves, so that `ctest`, `ctest -j2`,
# `ctest --preset cpu` and an IDE's test runner all run the suite the same way:
# - OMP_WAIT_POLICY=PASSIVE: with tests side by side, spinning OpenMP threads starve each
#   other (plain `ctest -j2` took 254 s instead of 111 s on two cores). The thread count is
#   the tests' own (the fixtures and the CLI pin it);
# - OOMGUARD_SEED_COUNTER_DIR: the per-test seed counters;
# - OOMGUARD_TOOLS_BIN: the checkers, empty where there are none;
# - OOMGUARD_DEVICE=cpu: the GoogleTest layer and `oomguard run` measure the CPU even on a GPU
#   machine, as the CPU tests expect; the tests labelled cuda get OOMGUARD_TEST_DEVICE
#   instead: cpu by default, cuda where the environment said OOMGUARD_DEVICE=cuda when the
#   build was configured (the GPU jobs), and the *Cuda tests then fail, instead of
#   skipping, where no device is usable.
if(DEFINED ENV{OOMGUARD_DEVICE} AND NOT "$ENV{OOMGUARD_DEVICE}" STREQUAL "")
  set(_oomguard_test_device "$ENV{OOMGUARD_DEVICE}")
else()
  set(_oomguard_test_device cpu)
endif()
set(OOMGUARD_TEST_DEVICE ${_oomguard_test_device} CACHE STRING
  "OOMGUARD_DEVICE of every test: cpu, cuda or auto (default: the environment's at the first configure, else cpu)")
if(NOT OOMGUARD_TEST_DEVICE MATCHES "^(cpu|cuda|auto)$")
  message(FATAL_ERROR "OOMGUARD_TEST_DEVICE is '${OOMGUARD_TEST_DEVICE}': give cpu, cuda or "
    "auto (for another GPU than the first, CUDA_VISIBLE_DEVICES names it to the suite)")
endif()
set(OOMGUARD_TEST_ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE" "OOMGUARD_DEVICE=cpu"
  "OOMGUARD_SEED_COUNTER_DIR=${OOMGUARD_SEED_COUNTER_DIR}" "OOMGUARD_TOOLS_BIN=${OOMGUARD_TOOLS_BIN}")
set(OOMGUARD_CUDA_TEST_ENVIRONMENT ${OOMGUARD_TEST_ENVIRONMENT})
list(TRANSFORM OOMGUARD_CUDA_TEST_ENVIRONMENT REPLACE "^OOMGUARD_DEVICE=cpu$"
  "OOMGUARD_DEVICE=${OOMGUARD_TEST_DEVICE}")

# Call once, after the directory's last test: sets OOMGUARD_TEST_ENVIRONMENT on its add_test
# tests, and on the gtest tests discovered at build time through an include file that ctest
# reads after the discovery files (gtest_discover_tests of CMake 3.25 cannot pass a list).
function(oomguard_set_test_environment)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    get_test_property(${test} LABELS labels)
    if("cuda" IN_LIST labels)
      set_tests_properties(${test} PROPERTIES ENVIRONMENT "${OOMGUARD_CUDA_TEST_ENVIRONMENT}")
    else()
      set_tests_properties(${test} PROPERTIES ENVIRONMENT "${OOMGUARD_TEST_ENVIRONMENT}")
    endif()
  endforeach()
  get_property(targets GLOBAL PROPERTY OOMGUARD_GTEST_TARGETS)
  set(script "# Generated by cmake/testing.cmake: the environment of the discovered gtest tests.\n")
  foreach(target IN LISTS targets)
    get_property(label GLOBAL PROPERTY OOMGUARD_GTEST_LABEL_${target})
    set(environment "${OOMGUARD_TEST_ENVIRONMENT}")
    if(label STREQUAL "cuda")
      set(environment "${OOMGUARD_CUDA_TEST_ENVIRONMENT}")
    endif()
    string(APPEND script "if(${target}_TESTS)\n  set_tests_properties(\${${target}_TESTS} "
      "PROPERTIES ENVIRONMENT [==[${environment}]==])\nendif()\n")
  endforeach()
  set(file ${CMAKE_CURRENT_BINARY_DIR}/oomguard_test_environment.cmake)
  file(WRITE ${file} "${script}")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${file})
endfunction()
