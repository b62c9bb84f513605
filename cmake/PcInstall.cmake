# What `cmake --install` puts under the prefix (GNUInstallDirs layout):
#   include/pc/*.h                     the public headers
#   lib/libpcinfer.so.X.Y.Z            the shared library, SONAME libpcinfer.so.X.Y, and the links
#   lib/libpcinfer.a                   the static library
#   lib/pkgconfig/pcinfer.pc           pkg-config: --libs for the shared, --static for the static
#   lib/cmake/pcinfer/                 find_package(pcinfer): pcinfer::pcinfer (shared) and
#                                      pcinfer::pcinfer_static
#   bin/                               the tools (linked with the static library)
# The tools install themselves (tools/CMakeLists.txt); the testing library is never installed.
include(CMakePackageConfigHelpers)
include(${CMAKE_CURRENT_LIST_DIR}/PcLinkFlags.cmake)

set(PC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pcinfer)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

# Two export sets: the shared library needs nothing of its dependencies at build time of a
# consumer, the static one needs them all, so pcinferConfig.cmake looks those up only for it.
install(TARGETS pcinfer EXPORT pcinferTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS pcinfer_static EXPORT pcinferStaticTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT pcinferTargets NAMESPACE pcinfer:: DESTINATION ${PC_CMAKE_DIR})
install(EXPORT pcinferStaticTargets NAMESPACE pcinfer:: DESTINATION ${PC_CMAKE_DIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/pcinferConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pcinferConfig.cmake INSTALL_DESTINATION ${PC_CMAKE_DIR})
# While the major version is 0 the minor one is the ABI (it is the SOVERSION's second part).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pcinferConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pcinferConfig.cmake
  ${PROJECT_BINARY_DIR}/pcinferConfigVersion.cmake DESTINATION ${PC_CMAKE_DIR})

# pcinfer.pc finds the prefix from its own place (${pcfiledir}), so the installed tree can be
# moved. Libs.private is what the static library is linked with here; zlib has a .pc of its own.
get_target_property(PC_STATIC_LINKS pcinfer_static INTERFACE_LINK_LIBRARIES)
list(REMOVE_ITEM PC_STATIC_LINKS ZLIB::ZLIB)
pc_link_flags(PC_PC_LIBS_PRIVATE ${PC_STATIC_LINKS})
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE ${CMAKE_INSTALL_${dir}})
    message(FATAL_ERROR "pcinfer.pc: CMAKE_INSTALL_${dir} must be relative to the prefix")
  endif()
endforeach()
file(RELATIVE_PATH PC_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" PC_PC_TO_PREFIX ${PC_PC_TO_PREFIX})
configure_file(${CMAKE_CURRENT_LIST_DIR}/pcinfer.pc.in ${PROJECT_BINARY_DIR}/pcinfer.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pcinfer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
