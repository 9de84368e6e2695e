# Read by cpack before it packs (CPACK_PROJECT_CONFIG_FILE): a package is for other machines, so a build
# compiled for this machine's CPU (-march=native) must not become one.
if(CPACK_GENERATOR STREQUAL "DEB" AND CPACK_ATTOGRAD_NATIVE)
  message(FATAL_ERROR "cpack: this build is -march=native; configure the package's build with "
                      "-DATTOGRAD_NATIVE=OFF (a portable build)")
endif()
