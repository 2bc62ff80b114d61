include(CMakePackageConfigHelpers)
get_property(_strata_targets GLOBAL PROPERTY STRATA_EXPORTED_TARGETS)
install(TARGETS ${_strata_targets} strata EXPORT strataTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT strataTargets NAMESPACE strata::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/strataConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/strataConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/strataConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/strataConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/strataConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)

# pkg-config: static archives in dependency order plus their private deps.
set(STRATA_PC_LIBS "-lstrata_engine -lstrata_collectives -lstrata_dag -lstrata_transport")
set(STRATA_PC_REQUIRES "libfabric hwloc spdlog fmt tbb")
if(STRATA_HAVE_PMIX)
  string(APPEND STRATA_PC_REQUIRES " pmix")
endif()
# Relocatable: prefix is found from the .pc file's own location.
file(RELATIVE_PATH STRATA_PC_UP /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/strata.pc.in ${CMAKE_CURRENT_BINARY_DIR}/strata.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/strata.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
