"""The report's one error type, apart so every report module can raise it."""


class ReportError(ValueError):
    """What was asked cannot make a report; the message says what was wrong and what to do."""
