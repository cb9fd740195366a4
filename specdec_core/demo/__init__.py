"""The embedded demo pair: its chat prompt, the draft head and the shipped weights (models/).
The corpus, tokenizer builder and trainers that made the weights live in devtools/."""
