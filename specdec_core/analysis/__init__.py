"""What a trace means: metrics, diagnostics, text measures."""
