"""The flight recorder: record a user's own speculative decoder (two HF models) and diagnose
it blind (docs/recorder.md). Its public API, for the CLI, the page and scripts:

- `Recorder` (observe/hooks.py) -> a recording dict -> `analyze(rec, tokenizer)` -> (trace, findings);
  `judge(rec, tokenizer)` -> the judged result (specdec_core/result.ClipResult)
- `load_function("FILE.py[:FUNCTION]")`, `record_clip(fn, path, backend, audio, knobs)`: record
  and judge one clip; `pooled_findings(results)`: the pooled checks over several clips
- `record_builtin` / `judged_run` / `judged_stream`: the built-in decoder recorded and judged the
  same way (both through `recorded`: seed, observers, kept configs, dtype, analysis)
- `parse_sets`, `DEFAULTS`, `KNOBS`: the declared knobs."""
from specdec_core.recorder.analyze import analyze, judge  # noqa: F401
from specdec_core.recorder.driver.builtin import judged_run, judged_stream, record_builtin  # noqa: F401
from specdec_core.recorder.driver.clip import (DEFAULTS, KNOBS, head_drafter, load_function,  # noqa: F401
                                               parse_sets, pooled_findings, record_clip, recorded)
from specdec_core.recorder.observe.hooks import SCHEMA, Recorder  # noqa: F401
