"""One-line argument errors: the Python half of python/arguments.cpp.

pybind11 answers a call whose arguments match no overload with a multi-line TypeError. When the extension
attograd._core is imported, python/arguments.cpp gives every function and method one more overload, tried
last, that raises a single line; it reads the signatures it names with `signatures`, and wraps each
constructor (whose overloads pybind11 builds apart) with `wrap_constructor`. Imported by the C++ side while
attograd._core initialises, so this module imports nothing of the package.
"""
import functools
import re


def signatures(f, method):
    """The signatures in a pybind11 function's docstring, as '(a: T) or (b: U)', without self and results."""
    name = f.__name__
    lines = (f.__doc__ or "").split("\n")
    found = [line for line in lines if re.match(r"^\d+\. " + re.escape(name) + r"\(", line)]
    if not found:
        found = lines[:1]
    sigs = []
    for line in found:
        sig = re.sub(r"^(\d+\. )?" + re.escape(name), "", line)
        sig = re.sub(r" -> .*$", "", sig)
        if method:
            sig = re.sub(r"^\(self: [^,)]*(, )?", "(", sig)
        sigs.append(sig)
    return " or ".join(sigs)


def wrap_constructor(cls):
    """Replaces cls.__init__ by a function that turns pybind11's multi-line "incompatible constructor
    arguments" TypeError into one line: "Name(): expected arguments (...) or (...), got (types)"."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        try:
            init(self, *args, **kwargs)
        except TypeError as e:
            if "incompatible constructor arguments" not in str(e):
                raise
            sigs = [re.sub(r"^[\w.]+\(", "(", s) for s in re.findall(r"^\s+\d+\. (.*)$", str(e), re.M)]
            given = [type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in kwargs.items()]
            raise TypeError(f"{cls.__name__}(): expected arguments {' or '.join(sigs)}, "
                            f"got ({', '.join(given)})") from None

    cls.__init__ = __init__
