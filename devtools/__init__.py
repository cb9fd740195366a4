"""Build and test tooling, not product: the demo corpus, tokenizer builder and trainers that made
the shipped weights (scripts/train_demo.py, scripts/train_head.py), the own-vocabulary demo edge,
and the tiny random Omni thinkers of the tests (scripts/make_tiny_omni.py). The app, the CLI and
the recorder never import it (tests/test_imports.py checks); it is not installed with the
package: run it from the repository root (`python -m devtools.own_vocab DIR`)."""
