// One-line argument errors for every binding. pybind11 answers a call whose arguments match no overload with
// a multi-line TypeError ("incompatible function arguments. The following argument types are supported:
// ..."); each function and method of the module is wrapped once, at import, so that this TypeError comes out
// as one line naming the function, the signatures it takes and the types it was given. A value that a
// binding failed to convert (pybind11's RuntimeError "Unable to cast Python instance ...", a bug of the
// binding's own checks) comes out as a one-line TypeError naming the function. Operators are left
// alone (they return NotImplemented, and Python names the operand types), so are properties; any other
// exception passes through unchanged.
#include <pybind11/eval.h>

#include "python/bindings.h"

namespace pyag {

void one_line_argument_errors(py::module_& m) {
  py::dict scope;
  scope["__builtins__"] = py::module_::import("builtins");
  py::exec(R"py(
import functools
import re


def _type_list(args, kwargs):
    given = [type(a).__name__ for a in args]
    given += [f"{k}={type(v).__name__}" for k, v in kwargs.items()]
    return "(" + ", ".join(given) + ")"


def _one_line(text, args, kwargs, method):
    lines = text.split("\n")
    name = lines[0].split("(")[0]
    sigs = []
    for line in lines[1:]:
        found = re.match(r"\s+\d+\. (.*)$", line)
        if not found:
            continue
        sig = re.sub(r" -> .*$", "", found.group(1))
        sig = re.sub(r"^\(self: [^,)]*(, )?", "(", sig)  # a method's self is not the caller's to give
        sigs.append(sig)
    given = _type_list(args[1:] if method else args, kwargs)
    return f"{name}(): expected arguments {' or '.join(sigs)}, got {given}"


def _wrap(f, method):
    @functools.wraps(f)
    def call(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except TypeError as e:
            text = str(e)
            if "incompatible function arguments" not in text and "incompatible constructor arguments" not in text:
                raise
            raise TypeError(_one_line(text, args, kwargs, method)) from None
        except RuntimeError as e:
            if not str(e).startswith("Unable to cast Python instance"):
                raise
            given = _type_list(args[1:] if method else args, kwargs)
            raise TypeError(f"{f.__name__}(): an argument of the wrong type, got {given}") from None
    return call


def wrap_module(module):
    builtin = type(len)
    for key, value in list(vars(module).items()):
        if isinstance(value, builtin):
            setattr(module, key, _wrap(value, False))
        elif isinstance(value, type):
            for attr, member in list(vars(value).items()):
                if attr.startswith("__") and attr not in ("__init__", "__getitem__", "__enter__", "__exit__"):
                    continue
                target = getattr(member, "__func__", None)
                if target is not None and isinstance(target, builtin):
                    setattr(value, attr, _wrap(target, True))
)py",
           scope);
  scope["wrap_module"](m);
}

}  // namespace pyag
