# The browser tests: tests/browser/*.py drive a headless Chromium (Debian's chromium, chromium-driver and
# python3-selenium, installed by scripts/setup) over a freshly trained run's report.html and a sweep's
# index.html. Labelled `integration`: scripts/test's sanitizer builds leave them out (-LE integration).
# Their runs and screenshots go to build/browser/<test>/ (the paths are printed in the test's output).
# Debian's selenium is importable by Debian's interpreter only, so the tests run /usr/bin/python3 even when
# another python3 comes first on PATH.
find_program(ATTOGRAD_BROWSER_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(ATTOGRAD_BROWSER_PYTHON)
  file(GLOB BROWSER_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/browser/*.py)
  foreach(script ${BROWSER_TESTS})
    get_filename_component(name ${script} NAME_WE)
    add_test(NAME browser/${name}
             COMMAND ${ATTOGRAD_BROWSER_PYTHON} ${script} --attograd $<TARGET_FILE:attograd>
                     --out ${CMAKE_CURRENT_BINARY_DIR}/browser/${name}
             WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
    # Well above its usual run: a hung browser fails it instead of using up CI time.
    set_tests_properties(browser/${name} PROPERTIES LABELS integration TIMEOUT 180)
  endforeach()
endif()
