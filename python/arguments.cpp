// One-line argument errors for every binding. pybind11 answers a call whose arguments match no overload with
// a multi-line TypeError ("incompatible function arguments. The following argument types are supported:
// ..."). At import, every function and method of the module gets one more overload, tried last, that takes
// any arguments and raises one TypeError line naming the function, the signatures it takes and the types it
// was given; a call that matches pays nothing for it. Constructors, whose overloads pybind11 builds apart,
// are wrapped by a Python function that turns the multi-line text into the same line. Operators are left
// alone (they return NotImplemented, and Python names the operand types), so are properties.
#include <string>
#include <vector>

#include "python/bindings.h"
#include "python/convert.h"

namespace pyag {

namespace {

std::string given_types(const py::args& args, const py::kwargs& kwargs, bool method) {
  std::string text = "(";
  bool first = true;
  for (size_t i = method ? 1 : 0; i < args.size(); ++i) {
    text += (first ? "" : ", ") + type_name(args[i]);
    first = false;
  }
  for (const auto& [key, value] : kwargs) {
    text += (first ? "" : ", ") + py::str(key).cast<std::string>() + "=" + type_name(value);
    first = false;
  }
  return text + ")";
}

}  // namespace

void one_line_argument_errors(py::module_& m) {
  // The Python half (python/attograd/_arguments.py): the signatures a message names, the constructors'
  // wrapper.
  const py::module_ helpers = py::module_::import("attograd._arguments");
  const py::object signatures = helpers.attr("signatures");
  const py::handle builtin =
      py::module_::import("builtins").attr("type")(py::module_::import("builtins").attr("len"));
  auto fallback = [&](py::handle owner, const std::string& name, py::object f, bool method) {
    const std::string message = name + "(): expected arguments " + signatures(f, method).cast<std::string>();
    auto raise = [message, method](py::args args, py::kwargs kwargs) -> py::object {
      throw py::type_error(message + ", got " + given_types(args, kwargs, method));
    };
    if (method)
      py::setattr(owner, name.c_str(),
                  py::cpp_function(raise, py::name(name.c_str()), py::is_method(owner), py::sibling(f)));
    else
      py::setattr(owner, name.c_str(),
                  py::cpp_function(raise, py::name(name.c_str()), py::scope(owner), py::sibling(f)));
  };
  // The module and its submodules (attograd.nn, attograd.optim).
  std::vector<py::module_> modules = {m};
  for (const auto& [key, value] : py::dict(m.attr("__dict__")))
    if (py::isinstance<py::module_>(value) &&
        py::str(value.attr("__name__")).cast<std::string>().rfind("attograd.", 0) == 0)
      modules.push_back(py::reinterpret_borrow<py::module_>(value));
  for (const py::module_& mod : modules) {
    const std::string module_name = py::str(mod.attr("__name__"));
    for (const auto& [key, value] : py::dict(mod.attr("__dict__"))) {
      const std::string name = py::str(key);
      if (py::isinstance(value, builtin)) {
        fallback(mod, name, py::reinterpret_borrow<py::object>(value), false);
      } else if (py::isinstance<py::type>(value) && py::hasattr(value, "__init__") &&
                 py::str(value.attr("__module__")).cast<std::string>() == module_name) {
        const py::dict attrs = py::dict(value.attr("__dict__"));
        for (const auto& [attr, member] : attrs) {
          const std::string a = py::str(attr);
          if (a == "__init__" && py::hasattr(member, "__func__") &&
              py::isinstance(member.attr("__func__"), builtin))
            helpers.attr("wrap_constructor")(value);
          if (a.rfind("__", 0) == 0 && a != "__getitem__" && a != "__call__" && a != "__enter__" &&
              a != "__exit__")
            continue;
          if (!py::hasattr(member, "__func__") || !py::isinstance(member.attr("__func__"), builtin)) continue;
          fallback(value, a, member.attr("__func__"), true);
        }
      }
    }
  }
}

}  // namespace pyag
