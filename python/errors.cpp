#include <exception>

#include "io/json_read.h"
#include "python/bindings.h"
#include "train/config.h"

namespace pyag {

void bind_errors(py::module_& m) {
  // Never freed: the translator below may run until the interpreter ends.
  static auto* config_error = new py::exception<train::ConfigError>(m, "ConfigError", PyExc_ValueError);
  config_error->attr("__doc__") =
      "A config that the command line would refuse, with the same one-line message.";
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const train::ConfigError& e) {
      PyErr_SetString(config_error->ptr(), e.what());
    } catch (const io::JsonError& e) {  // a value too deep or otherwise not JSON the readers take
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const FileNotFound& e) {
      PyErr_SetString(PyExc_FileNotFoundError, e.what());
    } catch (const std::logic_error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
}

}  // namespace pyag
