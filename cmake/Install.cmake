# attograd as an installed library: `cmake --install build --prefix P` puts the headers, the static
# libraries, the attograd program, a CMake package and a pkg-config file under P; `cpack -G DEB` makes a
# Debian package of the same files. Consumers write
#   find_package(attograd CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE attograd::train)
# and get the include paths, C++17 and the dependencies (Eigen3, nlohmann_json, Threads, PCRE2, ICU) with the target.
#
# Headers. They install under P/include/attograd/<layer>/ (the source layout), and a consumer includes
# them as "attograd/autograd/ops.h". The headers themselves include each other from the layer down
# ("autograd/tensor.h"), as in the source tree, so the installed files are the source files unchanged and
# every imported target carries two include directories: P/include (for "attograd/...") and
# P/include/attograd (for the headers' own includes), as Eigen's /usr/include/eigen3 does.
#
# Flags. -march=native (ATTOGRAD_NATIVE) and the warning flags are directory compile options of this
# build, never usage requirements: no imported target has INTERFACE_COMPILE_OPTIONS, and the installed
# headers hold no CPU-dependent code or layout (tensor storage is 64-byte aligned by tensor.cpp whatever
# the CPU). A consumer compiled without -march=native links a native build fine on the machine that built
# it; a library meant for other machines (a .deb) must be built with -DATTOGRAD_NATIVE=OFF.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ATTOGRAD_LAYERS io autograd nn train findings analysis dictionary attribution imports runner study)
set(ATTOGRAD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/attograd)

foreach(layer ${ATTOGRAD_LAYERS})
  set_target_properties(attograd_${layer} PROPERTIES EXPORT_NAME ${layer})
  target_compile_features(attograd_${layer} PUBLIC cxx_std_17)
  target_include_directories(
    attograd_${layer} PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/attograd>)
  # The same names inside this build, so an example can also be added with add_subdirectory.
  add_library(attograd::${layer} ALIAS attograd_${layer})
endforeach()

install(DIRECTORY io autograd nn train findings analysis dictionary attribution imports runner study
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attograd
        FILES_MATCHING PATTERN "*.h")
list(TRANSFORM ATTOGRAD_LAYERS PREPEND attograd_ OUTPUT_VARIABLE ATTOGRAD_LIBRARY_TARGETS)
install(TARGETS ${ATTOGRAD_LIBRARY_TARGETS} EXPORT attogradTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS attograd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The CMake package. 0.x: a new minor version may break the API, so only the same minor one is compatible.
install(EXPORT attogradTargets NAMESPACE attograd:: DESTINATION ${ATTOGRAD_CMAKE_DIR})
configure_package_config_file(cmake/attogradConfig.cmake.in ${PROJECT_BINARY_DIR}/attogradConfig.cmake
                              INSTALL_DESTINATION ${ATTOGRAD_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attogradConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attogradConfig.cmake ${PROJECT_BINARY_DIR}/attogradConfigVersion.cmake
        DESTINATION ${ATTOGRAD_CMAKE_DIR})

# pkg-config: one module, attograd, with every layer (static libraries, in link order). Its prefix is found
# from the file's own place, so the same file works wherever the tree is installed (--prefix, DESTDIR).
file(RELATIVE_PATH ATTOGRAD_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(cmake/attograd.pc.in ${PROJECT_BINARY_DIR}/attograd.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/attograd.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The Debian package (cpack -G DEB in the build directory): Debian's paths under /usr, dependencies on
# Debian's Eigen and nlohmann/json development packages (the headers include them), and the C/C++ runtime
# of the attograd program from dpkg-shlibdeps. cmake/CPackChecks.cmake refuses a -march=native build.
set(CPACK_PACKAGE_NAME attograd)
set(CPACK_PACKAGE_VENDOR attograd)
set(CPACK_PACKAGE_CONTACT "attograd developers <attograd@localhost>" CACHE STRING "The .deb's Maintainer")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "reverse-mode autograd engine and toy-transformer trainer (C++17 library and program)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
# ATTOGRAD_PYTHON_DEB_DEPENDS: what the Python module needs (cmake/python.cmake), empty without it.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libeigen3-dev (>= 3.3), nlohmann-json3-dev (>= 3), libpcre2-dev, libicu-dev${ATTOGRAD_PYTHON_DEB_DEPENDS}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_ATTOGRAD_NATIVE ${ATTOGRAD_NATIVE})
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_SOURCE_DIR}/cmake/CPackChecks.cmake)
include(CPack)

# Tests of the installed package, run by ctest with the others: each installs this build into a
# temporary prefix and builds against it out of tree, as a user would. Not in sanitizer or fuzz builds: their
# libraries need the same -fsanitize flags in every consumer, and these tests check packaging, not memory.
if(NOT sanitize_flags)
  add_test(NAME install/examples
           COMMAND ${PROJECT_SOURCE_DIR}/tests/install/examples.sh ${PROJECT_BINARY_DIR} ${CMAKE_COMMAND})
  add_test(NAME install/headers
           COMMAND ${PROJECT_SOURCE_DIR}/tests/install/headers.sh ${PROJECT_BINARY_DIR} ${CMAKE_COMMAND})
  # Unloaded, each takes well under a minute on 2 cores; the timeout allows for a machine shared by several
  # builds.
  set_tests_properties(install/examples install/headers PROPERTIES TIMEOUT 1200)
endif()
