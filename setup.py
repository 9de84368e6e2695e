"""Builds the Python package attograd for pip (pyproject.toml; docs/python.md "Install").

The package's Python files are python/attograd/*.py; its compiled part, attograd._core, is the CMake target
attograd_python (cmake/python.cmake), which this build_ext builds and copies into the wheel:

  pip install --no-build-isolation --no-index .
      configures the project in a temporary folder (Release, ATTOGRAD_PYTHON=ON, this interpreter) and
      builds the target attograd_python there: minutes. ATTOGRAD_CMAKE_ARGS adds CMake arguments (e.g.
      "-DATTOGRAD_NATIVE=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"); CMAKE_BUILD_PARALLEL_LEVEL caps the jobs.
  ATTOGRAD_BUILD_DIR=build pip install --no-build-isolation --no-index .
      configures and compiles nothing: takes build/python/attograd/_core*.so, which `cmake --build build
      --target attograd_python` made for the same interpreter (a relative folder is taken from the checkout).

setuptools' own folders (build/, the egg-info) go to a temporary folder, removed at the end: the checkout is
left as it was.
"""
import atexit
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    """The version of CMakeLists.txt's project() call."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        found = re.search(r"project\(attograd VERSION ([0-9.]+)", f.read())
    if not found:
        sys.exit("setup.py: no `project(attograd VERSION ...)` in CMakeLists.txt")
    return found.group(1)


class CMakeBuild(build_ext):
    """Builds attograd._core with CMake (or takes it from ATTOGRAD_BUILD_DIR) instead of compiling sources."""

    def build_extension(self, ext):
        build_dir = os.environ.get("ATTOGRAD_BUILD_DIR")
        if build_dir:
            build_dir = os.path.join(ROOT, build_dir)
        else:
            build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
            self.cmake(build_dir)
        core = "_core" + sysconfig.get_config_var("EXT_SUFFIX")
        built = os.path.join(build_dir, "python", "attograd", core)
        if not os.path.isfile(built):
            sys.exit(f"setup.py: no {built}: ATTOGRAD_BUILD_DIR={build_dir} needs `cmake --build {build_dir} "
                     f"--target attograd_python`, configured with -DPython3_EXECUTABLE for {sys.executable}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)

    def cmake(self, build_dir):
        """Configures the project in build_dir and builds the target attograd_python."""
        configure = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                     "-DATTOGRAD_PYTHON=ON", f"-DPython3_EXECUTABLE={sys.executable}"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("ATTOGRAD_CMAKE_ARGS", ""))
        subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", build_dir, "--target", "attograd_python", "-j", jobs], check=True)


# setuptools writes build/ and NAME.egg-info next to the sources by default; here into a folder of its own.
scratch = tempfile.mkdtemp(prefix="attograd-setup-")
atexit.register(shutil.rmtree, scratch, ignore_errors=True)

setup(
    version=project_version(),
    packages=["attograd"],
    package_dir={"": "python"},
    ext_modules=[Extension("attograd._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": os.path.join(scratch, "build")}, "egg_info": {"egg_base": scratch}},
    zip_safe=False,
)
