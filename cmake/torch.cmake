# LibTorch for oomguard's build, wrapped in oomguard::torch (cmake/oomguardTorch.cmake).
# Found through CMAKE_PREFIX_PATH, or through the torch package of OOMGUARD_TORCH_PYTHON
# (ci/setup.sh passes the virtual environment's python). A parent project that found Torch
# already is used as it is.
if(NOT TARGET torch)
  if(OOMGUARD_TORCH_PYTHON)
    execute_process(
      COMMAND ${OOMGUARD_TORCH_PYTHON} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE _oomguard_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _oomguard_torch_rc ERROR_QUIET)
    if(NOT _oomguard_torch_rc EQUAL 0)
      message(FATAL_ERROR "${OOMGUARD_TORCH_PYTHON} cannot import torch; run ci/setup.sh")
    endif()
    list(APPEND CMAKE_PREFIX_PATH ${_oomguard_torch_prefix})
  endif()
  get_directory_property(_oomguard_imported_before IMPORTED_TARGETS)
  find_package(Torch REQUIRED)
  # Torch's imported targets are visible in this directory only; a parent project linking
  # oomguard's targets must see them too (add_subdirectory, FetchContent).
  get_directory_property(_oomguard_imported_after IMPORTED_TARGETS)
  list(REMOVE_ITEM _oomguard_imported_after ${_oomguard_imported_before})
  foreach(_oomguard_target IN LISTS _oomguard_imported_after)
    set_property(TARGET ${_oomguard_target} PROPERTY IMPORTED_GLOBAL TRUE)
  endforeach()
elseif(NOT Torch_DIR OR NOT DEFINED TORCH_LIBRARIES)
  message(FATAL_ERROR "oomguard: a target named torch exists but Torch_DIR/TORCH_LIBRARIES do "
    "not: call find_package(Torch) in the parent project, or leave Torch to oomguard")
endif()
message(STATUS "oomguard: LibTorch ${Torch_VERSION} from ${Torch_DIR}")
include(oomguardTorch)
