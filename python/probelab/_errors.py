"""Exceptions of the probelab package."""


class BadInputError(ValueError):
    """Bad input, as the CLI reports it with exit code 2: a scenario, probe, chip or injector
    configuration, a model, a missing file.

    Attributes (None when the error does not say): ``file``, ``line`` and ``column`` (1-based),
    ``key`` (the dotted key path, e.g. ``injections.0.step``) and ``expected`` (what was
    expected there).
    """

    def __init__(self, message, file=None, line=None, column=None, key=None, expected=None, runs=None):
        super().__init__(message)
        self.file = file
        self.line = line
        self.column = column
        self.key = key
        self.expected = expected
        self.runs = runs or []


class ScenarioError(BadInputError):
    """An error in a scenario: names the file, the line and column, the key and what was
    expected (the same message ``probelab run`` prints)."""


class ExpectationFailed(AssertionError):
    """Raised by :meth:`Run.check` when an expectation of the scenario did not hold (the CLI's
    exit code 1). ``run`` is the :class:`Run`, ``failures`` its failing expectations."""

    def __init__(self, run):
        self.run = run
        self.failures = run.failures()
        lines = ["%s: %d expectation(s) failed" % (run.name, len(self.failures))]
        if run.status != "ok":
            lines.append("  simulation error: %s" % run.error)
        for f in self.failures:
            lines.append("  %s (line %s)\n    expected: %s\n    actual:   %s"
                         % (f.get("kind"), f.get("line"), f.get("expected"), f.get("actual")))
        super().__init__("\n".join(lines))
