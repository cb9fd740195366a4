"""The flight recorder: record a user's own speculative decoder (two HF models) and diagnose
it blind (docs/recorder.md). Its public API, for the CLI, the page and scripts, is imported below;
`finish(result)` is the one fold, the only writer of a judged result's findings (the audit uses it
too). Nothing outside the recorder imports past this module (tests/test_imports.py) but the one
registry of checks, `specdec_core.recorder.checks.registry`."""
from specdec_core.recorder.analyze import analyze, judge  # noqa: F401
from specdec_core.recorder.driver.builtin import judged_run, judged_stream, record_builtin  # noqa: F401
from specdec_core.recorder.driver.reference import compare  # noqa: F401
from specdec_core.recorder.driver.clip import (DEFAULTS, KNOBS, call_kwargs, head_drafter,  # noqa: F401
                                               load_function, parse_sets, pooled_findings, record_clip,
                                               recorded)
from specdec_core.recorder.driver.user_code import EXPECTED, check_call  # noqa: F401
from specdec_core.recorder.evidence.timing import loop_round_times, recording_split  # noqa: F401
from specdec_core.recorder.normalize.validate import (check_recording, check_size, max_mb,  # noqa: F401
                                                      parse_json)
from specdec_core.recorder.observe.hooks import SCHEMA, Recorder  # noqa: F401
from specdec_core.recorder.report import finish  # noqa: F401
