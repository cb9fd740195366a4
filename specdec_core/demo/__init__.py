"""Embedded demo model pair: corpus grammar, char-level tokenizer, trainer, shipped weights."""
