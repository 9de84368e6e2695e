# Boost.Test, PCRE2 and ICU for a cross build that has only their runtime packages for the target (the toolchain
# file sets ATTOGRAD_RUNTIME_LIBDIR, cmake/aarch64-toolchain.cmake): the targets find_package(Boost) and
# pkg_check_modules(PCRE2) make in a native build, over the shared libraries in that folder and the host's
# headers (libboost-test-dev, libpcre2-dev), which must be the same versions.
find_path(ATTOGRAD_BOOST_INCLUDE boost/version.hpp)
find_path(ATTOGRAD_PCRE2_INCLUDE pcre2.h)
if(NOT ATTOGRAD_BOOST_INCLUDE OR NOT ATTOGRAD_PCRE2_INCLUDE)
  message(FATAL_ERROR "cross build: the host's Boost and PCRE2 headers are missing (scripts/setup)")
endif()
file(STRINGS ${ATTOGRAD_BOOST_INCLUDE}/boost/version.hpp boost_version REGEX "^#define BOOST_LIB_VERSION ")
string(REGEX REPLACE ".*\"([0-9]+)_([0-9]+)\".*" "\\1.\\2" boost_version "${boost_version}")
file(STRINGS ${ATTOGRAD_PCRE2_INCLUDE}/pcre2.h pcre2_major REGEX "^#define PCRE2_MAJOR ")
string(REGEX REPLACE ".*PCRE2_MAJOR[ \t]+([0-9]+).*" "\\1" pcre2_major "${pcre2_major}")
file(GLOB boost_test_library ${ATTOGRAD_RUNTIME_LIBDIR}/libboost_unit_test_framework.so.${boost_version}.*)
set(pcre2_library ${ATTOGRAD_RUNTIME_LIBDIR}/libpcre2-8.so.0)
if(NOT boost_test_library OR NOT pcre2_major EQUAL 10 OR NOT EXISTS ${pcre2_library})
  message(FATAL_ERROR "cross build: ${ATTOGRAD_RUNTIME_LIBDIR} needs libboost_unit_test_framework.so."
                      "${boost_version}.* and libpcre2-8.so.0 (PCRE2 10) for the host's headers: "
                      "scripts/setup --arch ${CMAKE_SYSTEM_PROCESSOR} installs them")
endif()
add_library(Boost::unit_test_framework SHARED IMPORTED)
set_target_properties(Boost::unit_test_framework PROPERTIES IMPORTED_LOCATION ${boost_test_library}
                      INTERFACE_INCLUDE_DIRECTORIES ${ATTOGRAD_BOOST_INCLUDE})
# ICU's common library, whose symbols carry the major version of the host's headers (libicu-dev): the
# arm64 runtime package of that version (libicu72:arm64) has it and the data library it needs.
find_path(ATTOGRAD_ICU_INCLUDE unicode/uvernum.h)
if(NOT ATTOGRAD_ICU_INCLUDE)
  message(FATAL_ERROR "cross build: the host's ICU headers are missing (scripts/setup)")
endif()
file(STRINGS ${ATTOGRAD_ICU_INCLUDE}/unicode/uvernum.h icu_major REGEX "^#define U_ICU_VERSION_MAJOR_NUM ")
string(REGEX REPLACE ".*NUM[ \t]+([0-9]+).*" "\\1" icu_major "${icu_major}")
set(icu_library ${ATTOGRAD_RUNTIME_LIBDIR}/libicuuc.so.${icu_major})
if(NOT EXISTS ${icu_library})
  message(FATAL_ERROR "cross build: ${ATTOGRAD_RUNTIME_LIBDIR} needs libicuuc.so.${icu_major} (ICU ${icu_major}) "
                      "for the host's headers: scripts/setup --arch ${CMAKE_SYSTEM_PROCESSOR} installs it")
endif()
add_library(PkgConfig::ICU SHARED IMPORTED)
set_target_properties(PkgConfig::ICU PROPERTIES IMPORTED_LOCATION ${icu_library}
                      INTERFACE_INCLUDE_DIRECTORIES ${ATTOGRAD_ICU_INCLUDE}
                      INTERFACE_LINK_OPTIONS "LINKER:-rpath-link,${ATTOGRAD_RUNTIME_LIBDIR}")
add_library(PkgConfig::PCRE2 SHARED IMPORTED)
set_target_properties(PkgConfig::PCRE2 PROPERTIES IMPORTED_LOCATION ${pcre2_library}
                      INTERFACE_INCLUDE_DIRECTORIES ${ATTOGRAD_PCRE2_INCLUDE})
