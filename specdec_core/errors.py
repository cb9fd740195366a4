"""User-facing errors: one line, shown as is by the CLI and the app (no traceback)."""


class UserError(Exception):
    """Bad input from a user: the message is the whole story."""


class ConfigError(UserError, ValueError):
    pass


class AudioError(UserError):
    pass


class BackendError(UserError):
    pass
