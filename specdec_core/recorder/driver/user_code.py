"""The user's decoder as `record` calls it (issue 43): the call checked against the function's
signature before any forward, and an exception inside the user's code told in one line that
names their file:line, never a traceback (nor a TypeError from inside torch's no_grad wrapper)."""
from __future__ import annotations

import inspect
import traceback
from pathlib import Path

from specdec_core.errors import UserError

EXPECTED = ("FUNCTION(edge, cloud, tokenizer, input_ids, k=..., max_new_tokens=..., stop_ids=...)"
            " -> the generated ids")
_CORE = str(Path(__file__).resolve().parents[1])


def def_site(fn) -> str:
    """'my_decoder.py:12 decode': where the function is defined (through decorators)."""
    f = inspect.unwrap(fn)
    code = getattr(f, "__code__", None)
    name = getattr(f, "__name__", "decoder")
    return f"{Path(code.co_filename).name}:{code.co_firstlineno} {name}" if code else name


def expected(fn) -> str:
    return EXPECTED.replace("FUNCTION", getattr(inspect.unwrap(fn), "__name__", "FUNCTION"))


def check_call(fn, n_args: int, kwargs: dict) -> None:
    """UserError (one line) unless fn accepts n_args positional arguments and `kwargs`."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return                              # a builtin or C callable: nothing to read
    try:
        sig.bind(*range(n_args), **kwargs)
    except TypeError as e:
        raise UserError(f"{def_site(fn)}{sig} cannot be called as record calls it ({e}); "
                        f"expected {expected(fn)}") from None


def where(e: BaseException) -> str:
    """One line: the exception and the deepest frame in user code (file:line, function)."""
    tb = traceback.extract_tb(e.__traceback__)
    user = [f for f in tb if not f.filename.startswith(_CORE) and "site-packages" not in f.filename
            and "/torch/" not in f.filename and "/transformers/" not in f.filename]
    fr = (user or tb or [None])[-1]
    msg = str(e).splitlines()[0] if str(e) else ""
    loc = f" at {Path(fr.filename).name}:{fr.lineno} in {fr.name}" if fr else ""
    return f"{type(e).__name__}: {msg}{loc}"


def failed(fn, e: BaseException) -> str:
    """The one-line error of a decoder that raised; a TypeError also gets the expected call."""
    hint = f" (record calls {expected(fn)})" if isinstance(e, TypeError) else ""
    return f"decoder failed: {where(e)}{hint}"
