# Install rules: headers, the exported targets (shrink::shrink; shrink::cuda when built, as the component "cuda"),
# and the package config/version files that find_package(shrink CONFIG) reads.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(SHRINK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/shrink
    CACHE STRING "Where shrinkConfig.cmake is installed, relative to the prefix")
mark_as_advanced(SHRINK_INSTALL_CMAKEDIR)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/shrink
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT shrink_development
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.cuh")

# Two export sets: shrinkTargets (shrink::shrink, header-only, no CUDA) and, when built, shrinkCudaTargets
# (shrink::cuda), which the package config loads only for find_package(shrink COMPONENTS cuda).
install(TARGETS shrink EXPORT shrinkTargets)
install(EXPORT shrinkTargets
        NAMESPACE shrink::
        FILE shrinkTargets.cmake
        DESTINATION ${SHRINK_INSTALL_CMAKEDIR}
        COMPONENT shrink_development)
if(SHRINK_CUDA_ENABLED)
  install(TARGETS shrink_cuda
          EXPORT shrinkCudaTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT shrink_cuda
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT shrink_cuda
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT shrink_cuda)
  install(EXPORT shrinkCudaTargets
          NAMESPACE shrink::
          FILE shrinkCudaTargets.cmake
          DESTINATION ${SHRINK_INSTALL_CMAKEDIR}
          COMPONENT shrink_cuda)
endif()

# Read by the config template: whether shrink::shrink links nlohmann_json (for shrink/io), and so whether it is a dependency.
set(SHRINK_PACKAGE_HAS_NLOHMANN_JSON ${SHRINK_HAS_NLOHMANN_JSON})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/shrinkConfig.cmake.in
  ${PROJECT_BINARY_DIR}/shrinkConfig.cmake
  INSTALL_DESTINATION ${SHRINK_INSTALL_CMAKEDIR})

# 0.x releases may break the API at every minor version; only the header-only package is architecture-free.
if(SHRINK_CUDA_ENABLED)
  set(shrink_version_arch_independent "")
else()
  set(shrink_version_arch_independent ARCH_INDEPENDENT)
endif()
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/shrinkConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion
  ${shrink_version_arch_independent})

install(FILES ${PROJECT_BINARY_DIR}/shrinkConfig.cmake ${PROJECT_BINARY_DIR}/shrinkConfigVersion.cmake
        DESTINATION ${SHRINK_INSTALL_CMAKEDIR}
        COMPONENT shrink_development)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DOCDIR}
        COMPONENT shrink_development)
