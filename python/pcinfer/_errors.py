"""pcinfer.Error, the package's one exception class (the C extension raises it too)."""


class Error(Exception):
    """A failing call of the pcinfer library, or arguments it was not given because they could
    not be right (a float array where integers are needed, a shape that does not match).

    ``str(error)`` is the message, which names the file, field, argument or sample at fault;
    ``error.status`` is the library's ``pc_status`` code (negative, one of ``pcinfer.Status``),
    ``error.status_name`` its words ("invalid argument", "invalid data", ...).
    """

    def __init__(self, message, status):
        super().__init__(message)
        self.status = int(status)

    @property
    def status_name(self):
        from . import _core

        return _core.status_str(self.status)
