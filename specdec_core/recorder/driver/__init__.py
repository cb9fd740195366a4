"""Driver: loading a user's code and recording one clip (CLI, page and built-in decoder)."""
