# The Python package `attograd` (python/, docs/python.md): a pybind11 extension over the project's
# libraries, attograd._core, in the package folder python/attograd/ with the package's Python files; its
# pytest suite, the example notebooks and a pip install into a fresh venv as ctest tests; and its install
# rule (the interpreter's module folder under the install prefix, so the .deb puts it in
# /usr/lib/python3/dist-packages/attograd/).
# ATTOGRAD_PYTHON is on by default when a Python 3 interpreter with numpy and Debian's pybind11 are found.
# A shell may put another interpreter first on PATH (pyenv): -DPython3_EXECUTABLE=/usr/bin/python3 picks one.
# A cross build (cmake/aarch64-toolchain.cmake) has none: the host's interpreter could not load the module.
if(CMAKE_CROSSCOMPILING)
  set(ATTOGRAD_PYTHON OFF CACHE BOOL "Build the Python module attograd (pybind11)" FORCE)
  set(ATTOGRAD_PYTHON_DEB_DEPENDS "")
  return()
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module)
find_package(pybind11 CONFIG QUIET)
set(attograd_python_default OFF)
set(ATTOGRAD_PYTHON_DEB_DEPENDS "")
if(Python3_FOUND AND pybind11_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import numpy" RESULT_VARIABLE attograd_numpy_missing
                  OUTPUT_QUIET ERROR_QUIET)
  if(attograd_numpy_missing EQUAL 0)
    set(attograd_python_default ON)
  else()
    message(STATUS "attograd Python module: off (${Python3_EXECUTABLE} cannot import numpy)")
  endif()
else()
  message(STATUS "attograd Python module: off (needs python3-dev and pybind11-dev)")
endif()
option(ATTOGRAD_PYTHON "Build the Python module attograd (pybind11)" ${attograd_python_default})
if(NOT ATTOGRAD_PYTHON)
  return()
endif()
if(NOT Python3_FOUND OR NOT pybind11_FOUND)
  message(FATAL_ERROR "ATTOGRAD_PYTHON needs Python 3 (python3-dev) and pybind11 (pybind11-dev)")
endif()

# A shared module links the static layer libraries, so their code must be position independent; without
# semantic interposition GCC still inlines and calls a library's own functions directly, as without -fPIC.
foreach(layer io autograd nn train findings analysis dictionary attribution imports runner study)
  set_target_properties(attograd_${layer} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(attograd_${layer} PRIVATE -fno-semantic-interposition)
  endif()
endforeach()

file(GLOB PYTHON_SOURCES CONFIGURE_DEPENDS python/*.cpp)
add_library(attograd_python MODULE ${PYTHON_SOURCES})
target_link_libraries(attograd_python PRIVATE attograd_study attograd_attribution attograd_dictionary attograd_imports
                                              attograd_runner attograd_analysis pybind11::module)
attograd_fast_build(attograd_python UNITY 4 <Eigen/Core> <nlohmann/json.hpp> <pybind11/pybind11.h>)
pybind11_extension(attograd_python)  # the interpreter's suffix: _core.cpython-311-x86_64-linux-gnu.so
# The build folder's python/ holds the package as it is installed: python/attograd/ with _core next to a
# copy of each .py file, copied again when one changes (PYTHONPATH=build/python, as the tests run it).
set_target_properties(attograd_python PROPERTIES OUTPUT_NAME _core CXX_VISIBILITY_PRESET hidden
                                                 LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/python/attograd)
file(GLOB attograd_python_files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/attograd/*.py)
set(attograd_python_copies "")
foreach(file ${attograd_python_files})
  get_filename_component(name ${file} NAME)
  add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/python/attograd/${name}
                     COMMAND ${CMAKE_COMMAND} -E copy_if_different ${file} ${PROJECT_BINARY_DIR}/python/attograd/${name}
                     DEPENDS ${file} COMMENT "Copying python/attograd/${name}")
  list(APPEND attograd_python_copies ${PROJECT_BINARY_DIR}/python/attograd/${name})
endforeach()
add_custom_target(attograd_python_package DEPENDS ${attograd_python_copies})
add_dependencies(attograd_python attograd_python_package)
# A build folder from before the package held the module as python/attograd.*.so: a package folder of the
# same name comes first on import, but the stale file would mislead.
file(GLOB attograd_stale_module ${PROJECT_BINARY_DIR}/python/attograd.*.so)
if(attograd_stale_module)
  file(REMOVE ${attograd_stale_module})
endif()
# `--target attograd` (scripts/run, the .deb's build) builds the module too; not in sanitizer builds, where
# scripts/test builds the module only for the Python tests it runs.
if(NOT sanitize_flags)
  add_dependencies(attograd attograd_python)
endif()

# Installed into the interpreter's module folder, taken relative to its prefix (Debian:
# lib/python3/dist-packages), under CMAKE_INSTALL_PREFIX: /usr for the .deb, or any --prefix (then put
# PREFIX/lib/python3/dist-packages on PYTHONPATH).
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c
          "import os,sysconfig,sys; print(os.path.relpath(sysconfig.get_path('platlib', 'deb_system' if 'deb_system' in sysconfig.get_scheme_names() else 'posix_prefix'), sys.base_prefix))"
  OUTPUT_VARIABLE attograd_python_dir OUTPUT_STRIP_TRAILING_WHITESPACE)
set(ATTOGRAD_PYTHON_INSTALL_DIR ${attograd_python_dir}
    CACHE STRING "Where cmake --install puts the Python module, relative to the install prefix")
install(TARGETS attograd_python LIBRARY DESTINATION ${ATTOGRAD_PYTHON_INSTALL_DIR}/attograd)
install(FILES ${attograd_python_files} DESTINATION ${ATTOGRAD_PYTHON_INSTALL_DIR}/attograd)
set(ATTOGRAD_PYTHON_DEB_DEPENDS ", python3, python3-numpy")

# The tests: pytest over tests/python/ and the example notebook run top to bottom (a cell error fails it),
# each with the module of this build first on PYTHONPATH. In the ASan build the interpreter is not
# instrumented, so the sanitizer runtimes are preloaded into it (leak detection off: CPython keeps its
# objects to the end by design).
set(attograd_python_env PYTHONPATH=${PROJECT_BINARY_DIR}/python PYTHONDONTWRITEBYTECODE=1
                        ATTOGRAD_SOURCE_DIR=${PROJECT_SOURCE_DIR} ATTOGRAD_BINARY=$<TARGET_FILE:attograd>
                        MPLBACKEND=Agg)
if(ATTOGRAD_SANITIZE STREQUAL "address")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # clang's shared ASan runtime carries UBSan's too; the module leaves both unresolved for it.
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-runtime-dir OUTPUT_VARIABLE runtime_dir
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    set(sanitizer_runtimes "${runtime_dir}/libclang_rt.asan-${CMAKE_SYSTEM_PROCESSOR}.so")
  else()
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libasan.so OUTPUT_VARIABLE asan_lib
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libubsan.so OUTPUT_VARIABLE ubsan_lib
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    set(sanitizer_runtimes "${asan_lib} ${ubsan_lib}")
  endif()
  list(APPEND attograd_python_env "LD_PRELOAD=${sanitizer_runtimes}" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
endif()
# Under the sanitizers: the files that need only the module (hostile input, the engine, hooks and tokens),
# not the program's side of the comparisons.
set(attograd_pytest_files ${PROJECT_SOURCE_DIR}/tests/python)
if(sanitize_flags)
  set(attograd_pytest_files ${PROJECT_SOURCE_DIR}/tests/python/test_hostile.py
                            ${PROJECT_SOURCE_DIR}/tests/python/test_engine.py
                            ${PROJECT_SOURCE_DIR}/tests/python/test_hooks.py)
endif()
add_test(NAME python/pytest COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${attograd_pytest_files}
         WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
set_tests_properties(python/pytest PROPERTIES ENVIRONMENT "${attograd_python_env}" TIMEOUT 600)
# Each notebook of examples/notebooks/ is a test of its own: python/notebook (induction) and
# python/notebook/NAME for the others.
if(NOT sanitize_flags)
  foreach(notebook induction residual_attribution grokking_fourier sae_mlp)
    set(test_name python/notebook/${notebook})
    if(notebook STREQUAL "induction")
      set(test_name python/notebook)
    endif()
    add_test(NAME ${test_name}
             COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/python/run_notebook.py
                     ${PROJECT_SOURCE_DIR}/examples/notebooks/${notebook}.ipynb
             WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
    set_tests_properties(${test_name} PROPERTIES ENVIRONMENT "${attograd_python_env}" TIMEOUT 600)
  endforeach()
  # `pip install .` into a fresh venv (tests/python/pip_install.py), taking this build's _core
  # (ATTOGRAD_BUILD_DIR) instead of compiling it again; then the first cells of a notebook there, without
  # PYTHONPATH.
  add_test(NAME python/pip_install
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/python/pip_install.py
                   ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}
           WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  set_tests_properties(python/pip_install PROPERTIES ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1" TIMEOUT 600)
endif()
