"""The one error of reading a run."""

class InspectError(ValueError):
    """A question about a run that cannot be answered (unknown reason, bad expression, ...)."""
