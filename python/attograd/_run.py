"""The Run's helpers written in Python: HookPoint, the point a hook function gets (python/run.cpp passes
each hook function its point as one)."""


class HookPoint(str):
    """A hook point's name, passed to hook functions: a str, with .name as TransformerLens's HookPoint."""
    __slots__ = ()

    @property
    def name(self):
        """The point's name, the str itself (TransformerLens's HookPoint.name)."""
        return str(self)
