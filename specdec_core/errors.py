"""User-facing errors: one line, shown as is by the CLI and the app (no traceback)."""


class UserError(Exception):
    """Bad input from a user: the message is the whole story."""


class ConfigError(UserError, ValueError):
    pass


class AudioError(UserError):
    pass


class BackendError(UserError):
    pass


def first_line(e: Exception) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
