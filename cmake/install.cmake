# install.cmake - install rules for libtinyc, included from the top-level
# CMakeLists.txt. Installs:
#   include/tinyc.h
#   lib/libtinyc.so.0.1.0 (+ .so.0, .so links) and lib/libtinyc.a
#   lib/cmake/tinyc/{tinycConfig,tinycConfigVersion,tinycTargets*}.cmake
#     -> find_package(tinyc) gives tinyc::tinyc (shared) and tinyc::tinyc_static
#   lib/pkgconfig/tinyc.pc (relocatable: paths are relative to the .pc file)
include(CMakePackageConfigHelpers)

set(TC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tinyc)

install(FILES ${CMAKE_SOURCE_DIR}/include/tinyc.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(TARGETS tinyc tinyc_static EXPORT tinycTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT tinycTargets NAMESPACE tinyc:: DESTINATION ${TC_CMAKE_DIR})

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/tinycConfig.cmake.in
  ${CMAKE_BINARY_DIR}/tinycConfig.cmake INSTALL_DESTINATION ${TC_CMAKE_DIR})
# 0.x: a minor release may change the API, so only the same MAJOR.MINOR matches
write_basic_package_version_file(${CMAKE_BINARY_DIR}/tinycConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/tinycConfig.cmake ${CMAKE_BINARY_DIR}/tinycConfigVersion.cmake
  DESTINATION ${TC_CMAKE_DIR})

# tinyc.pc: prefix is found from the .pc file's own place (${pcfiledir}), so
# the file stays right for `cmake --install --prefix X` and DESTDIR staging
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(TC_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(TC_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(TC_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH TC_PC_UP "/base/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/base")
  string(REGEX REPLACE "/$" "" TC_PC_UP "${TC_PC_UP}")
  set(TC_PC_PREFIX "\${pcfiledir}/${TC_PC_UP}")
  set(TC_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(TC_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${CMAKE_SOURCE_DIR}/tinyc.pc.in ${CMAKE_BINARY_DIR}/tinyc.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/tinyc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
