"""attograd: train, capture, patch and read small transformers on the attograd engine; tensors and
activations as numpy arrays (docs/python.md).

The compiled extension attograd._core (python/*.cpp, pybind11) binds the C++ libraries; this package
re-exports its public names (train, load_run, Run, Tensor, nn, optim, ...) and adds the parts written in
Python: ActivationCache (_cache.py), the Run's TransformerLens weights W_E, W_Q, ..., load_state_dict and
save (_weights.py), TransformerLens's names and keyword aliases on the Run (_tl.py), HookPoint (_run.py) and
utils.get_act_name (utils.py). _arguments.py holds the
helpers of the one-line argument errors, which _core reads as it initialises.
"""
from . import _core

# The bindings, as attograd.NAME: _core binds them under the name attograd (python/module.cpp), so classes
# and signatures read attograd.Run, attograd.nn.Linear.
globals().update({name: value for name, value in vars(_core).items() if not name.startswith("_")})

from . import _tl, _weights, utils  # noqa: E402
from ._cache import ActivationCache  # noqa: E402
from ._run import HookPoint  # noqa: E402

# As when they were defined in the extension: attograd.ActivationCache, attograd.HookPoint (repr, pickle).
ActivationCache.__module__ = HookPoint.__module__ = __name__
_weights.attach(_core.Run)
_tl.attach(_core.Run)

__all__ = sorted(name for name in vars(_core) if not name.startswith("_"))
__all__ += ["ActivationCache", "HookPoint", "utils"]
