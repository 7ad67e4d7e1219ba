# `cmake --install <build> --prefix P`: the public headers, the libraries, the CMake package
# (oomguardConfig.cmake, its version file, the targets) and, where built, the oomguard CLI
# (bin/oomguard, a launcher of libexec/oomguard/oomguard).
# A project then uses find_package(oomguard) and links oomguard::memory, oomguard::sim,
# oomguard::gtest or oomguard::gtest_main.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(OOMGUARD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/oomguard)

set(_oomguard_installed oomguard_core oomguard_sim oomguard_report oomguard_memory)
# The GoogleTest layer is installed where GoogleTest is a package the consumer finds too; one
# built here from its sources (third_party/, or for a pre-C++11-ABI LibTorch) is not.
set(OOMGUARD_INSTALL_GTEST OFF)
if(OOMGUARD_BUILD_GTEST AND NOT OOMGUARD_GTEST_FROM_SOURCE)
  set(OOMGUARD_INSTALL_GTEST ON)
  list(APPEND _oomguard_installed oomguard_gtest oomguard_gtest_main)
elseif(OOMGUARD_BUILD_GTEST)
  message(STATUS "oomguard: GoogleTest built from its sources: the installed package has no "
    "oomguard::gtest or oomguard::gtest_main")
endif()
install(TARGETS ${_oomguard_installed} EXPORT oomguardTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${OOMGUARD_PUBLIC_INCLUDE}/oomguard DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(OOMGUARD_BUILD_CLI)
  # bin/oomguard is a launcher that names the LibTorch the executable (libexec/) needs when it
  # is gone, instead of the loader's "libtorch.so: cannot open shared object file".
  install(TARGETS oomguard RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/oomguard)
  configure_file(cmake/oomguard-launcher.sh.in ${PROJECT_BINARY_DIR}/oomguard-launcher.sh @ONLY)
  install(PROGRAMS ${PROJECT_BINARY_DIR}/oomguard-launcher.sh DESTINATION ${CMAKE_INSTALL_BINDIR}
    RENAME oomguard)
endif()
install(EXPORT oomguardTargets NAMESPACE oomguard:: DESTINATION ${OOMGUARD_INSTALL_CMAKEDIR})

# The LibTorch oomguard was built against: the package looks there first and refuses another
# version (a different LibTorch is a different C++ ABI).
set(OOMGUARD_TORCH_VERSION ${Torch_VERSION})
set(OOMGUARD_TORCH_HINT ${Torch_DIR})
set(OOMGUARD_HAS_GTEST ${OOMGUARD_INSTALL_GTEST})
configure_package_config_file(cmake/oomguardConfig.cmake.in
  ${PROJECT_BINARY_DIR}/oomguardConfig.cmake INSTALL_DESTINATION ${OOMGUARD_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/oomguardConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/oomguardConfig.cmake
  ${PROJECT_BINARY_DIR}/oomguardConfigVersion.cmake cmake/oomguardTorch.cmake
  cmake/oomguardTorchCpu.cmake cmake/oomguardMemoryTest.cmake
  DESTINATION ${OOMGUARD_INSTALL_CMAKEDIR})
