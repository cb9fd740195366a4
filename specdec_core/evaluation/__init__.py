"""Many clips at once: batch runs, scoring, the checklist, the benchmark."""
