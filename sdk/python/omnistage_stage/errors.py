"""The errors a stage raises, and the SDK's own."""


class ParamError(Exception):
    """A sampling param the stage refuses: the client's 400, naming field.

    Raise it from check_params (the runtime's check, and each job before
    process runs) or from process; the job fails with code bad_params.
    """

    def __init__(self, field, reason):
        super().__init__("%s: %s" % (field, reason) if field else reason)
        self.field = field or ""
        self.reason = reason


class InputError(Exception):
    """Input the stage must refuse: the job fails with code bad_input."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class Cancelled(Exception):
    """Raised by Job.send once the job is cancelled (or the stage shuts
    down): stop the job and return; the SDK answers the cancel."""


class ProtocolError(Exception):
    """A message of the runtime that breaks the protocol: the stage program
    cannot go on, and exits."""
