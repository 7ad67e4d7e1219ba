# Project options, all prefixed OOMGUARD_.
option(OOMGUARD_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" OFF)
option(OOMGUARD_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
set(OOMGUARD_TORCH_PYTHON "" CACHE FILEPATH
  "Python whose torch package provides LibTorch (used when CMAKE_PREFIX_PATH does not)")
include(CTest)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()
