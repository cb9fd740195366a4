"""The decode core: knobs, runners, the round, trace, gates, stops, cycles, faults."""
