# Project options, all prefixed OOMGUARD_. What a parent project (add_subdirectory,
# FetchContent) gets by default is the libraries only: oomguard's own tests, CLI, benchmarks
# and fuzz targets build when it is the top-level project, or when asked for.
option(OOMGUARD_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" OFF)
option(OOMGUARD_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
set(OOMGUARD_TORCH_PYTHON "" CACHE FILEPATH
  "Python whose torch package provides LibTorch (used when CMAKE_PREFIX_PATH does not)")
option(OOMGUARD_BUILD_CLI "Build the oomguard executable and its TinyGPT smoke run"
  ${PROJECT_IS_TOP_LEVEL})
option(OOMGUARD_BUILD_TESTS "Build oomguard's own tests, benchmarks and fuzz targets"
  ${PROJECT_IS_TOP_LEVEL})
option(OOMGUARD_BUILD_GTEST "Build oomguard::gtest and oomguard::gtest_main (needs GoogleTest)"
  ON)
option(OOMGUARD_INSTALL "Install oomguard's headers, libraries, CMake package and CLI"
  ${PROJECT_IS_TOP_LEVEL})
if(OOMGUARD_BUILD_TESTS AND NOT (OOMGUARD_BUILD_CLI AND OOMGUARD_BUILD_GTEST))
  message(FATAL_ERROR "OOMGUARD_BUILD_TESTS needs OOMGUARD_BUILD_CLI and OOMGUARD_BUILD_GTEST")
endif()
if(PROJECT_IS_TOP_LEVEL)
  include(CTest)
  if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
    set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
  endif()
  set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endif()
if(NOT BUILD_TESTING)
  set(OOMGUARD_BUILD_TESTS OFF)
endif()
