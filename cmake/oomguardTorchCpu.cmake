# The CPU half of a CUDA LibTorch, for machines without a CUDA toolkit.
#
# PyPI's torch wheel is built with CUDA, and its TorchConfig.cmake refuses to load without a
# CUDA toolkit ("Your installed Caffe2 version uses CUDA but I cannot find the CUDA
# libraries"), although a CPU program links only libtorch_cpu and libc10 of it. This file
# imports those two from the wheel's lib/ without TorchConfig.cmake, and sets what
# find_package(Torch) sets and oomguard reads: Torch_DIR, Torch_VERSION, TORCH_INCLUDE_DIRS,
# TORCH_LIBRARIES, TORCH_CXX_FLAGS and an empty TORCH_CUDA_LIBRARIES (so no CUDA meter).
#
# libtorch_cpu itself needs libcudart and libcupti at load time (its profiler); the wheel
# finds them through its RPATH in site-packages/nvidia/*/lib, which ci/setup.sh fills with
# those two packages only (see DESIGN.md, "LibTorch without a CUDA toolkit").
#
# Expects OOMGUARD_TORCH_CPU_DIR: the wheel's share/cmake/Torch folder (where
# TorchConfig.cmake is). Used by oomguard's build and by its installed package.
if(NOT EXISTS "${OOMGUARD_TORCH_CPU_DIR}/TorchConfigVersion.cmake")
  message(FATAL_ERROR "oomguard: no LibTorch in '${OOMGUARD_TORCH_CPU_DIR}' "
    "(expected share/cmake/Torch of a torch wheel or LibTorch)")
endif()
get_filename_component(_oomguard_torch_prefix "${OOMGUARD_TORCH_CPU_DIR}/../../.." ABSOLUTE)
set(Torch_DIR "${OOMGUARD_TORCH_CPU_DIR}")

# The version, as TorchConfigVersion.cmake states it.
file(STRINGS "${OOMGUARD_TORCH_CPU_DIR}/TorchConfigVersion.cmake" _oomguard_line
  REGEX "set\\(PACKAGE_VERSION \"[^\"]+\"\\)")
string(REGEX REPLACE ".*\"([^\"]+)\".*" "\\1" Torch_VERSION "${_oomguard_line}")

# The compile flags TorchConfig.cmake would give: the C++ ABI of its std::string
# (pre-cxx11-ABI builds say -D_GLIBCXX_USE_CXX11_ABI=0 here) and the language standard.
file(READ "${OOMGUARD_TORCH_CPU_DIR}/TorchConfig.cmake" _oomguard_config)
set(TORCH_CXX_FLAGS "")
if(_oomguard_config MATCHES "set\\(TORCH_CXX_FLAGS \"([^\"]*)\"\\)")
  set(TORCH_CXX_FLAGS "${CMAKE_MATCH_1}")
endif()
set(_oomguard_torch_std cxx_std_17)
if(_oomguard_config MATCHES "cxx_std_20")
  set(_oomguard_torch_std cxx_std_20)
endif()

set(TORCH_INCLUDE_DIRS "${_oomguard_torch_prefix}/include"
  "${_oomguard_torch_prefix}/include/torch/csrc/api/include")
foreach(_oomguard_lib c10 torch_cpu)
  if(NOT TARGET oomguard::${_oomguard_lib})
    find_library(_oomguard_${_oomguard_lib}_path ${_oomguard_lib}
      PATHS "${_oomguard_torch_prefix}/lib" NO_DEFAULT_PATH NO_CACHE)
    if(NOT _oomguard_${_oomguard_lib}_path)
      message(FATAL_ERROR "oomguard: lib${_oomguard_lib}.so not found in "
        "${_oomguard_torch_prefix}/lib")
    endif()
    add_library(oomguard::${_oomguard_lib} SHARED IMPORTED GLOBAL)
    set_target_properties(oomguard::${_oomguard_lib} PROPERTIES
      IMPORTED_LOCATION "${_oomguard_${_oomguard_lib}_path}"
      INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
      INTERFACE_COMPILE_FEATURES ${_oomguard_torch_std})
  endif()
endforeach()
# Operators register themselves from libtorch_cpu's static initialisers: it is linked even
# when no symbol of it is referenced (as Torch's own targets do).
set(TORCH_LIBRARIES "-Wl,--no-as-needed,$<TARGET_FILE:oomguard::torch_cpu>" "-Wl,--as-needed"
  oomguard::torch_cpu oomguard::c10)
set(TORCH_CUDA_LIBRARIES "")
set(OOMGUARD_TORCH_CPU_ONLY TRUE)

unset(_oomguard_torch_prefix)
unset(_oomguard_line)
unset(_oomguard_config)
unset(_oomguard_torch_std)
