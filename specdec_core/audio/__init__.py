"""The audio front end: loading/validation, prosody features, condition tokens."""
