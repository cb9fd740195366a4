"""The transformers range SpecScope is tested on, and the versions a report carries.

The range is the one pyproject.toml declares (`transformers>=OLDEST,<NEXT_MAJOR`, docs/versions.md),
read from the installed package's metadata or the checkout's pyproject.toml; nothing is repeated here."""
from __future__ import annotations

import logging
import platform
import re
import warnings
from functools import lru_cache
from importlib import metadata
from pathlib import Path

log = logging.getLogger("specscope")
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
_REQ = re.compile(r"^\s*transformers\s*([<>=!~][^;\"']*)")
_warned: set = set()


class UntestedVersionWarning(UserWarning):
    """transformers outside the range SpecScope's CI tests."""


@lru_cache(maxsize=1)
def tested_range() -> str | None:
    """The declared specifier, e.g. '>=5.13.0,<6'; None when no declaration can be found."""
    lines: list[str] = []
    if PYPROJECT.is_file():       # a source checkout: its own pyproject wins over any install
        text = PYPROJECT.read_text(encoding="utf-8")
        block = re.search(r"(?ms)^dependencies\s*=\s*\[(.*?)^\]", text)
        lines = re.findall(r"\"([^\"]+)\"", block.group(1)) if block else []
    else:
        try:
            lines = metadata.requires("specscope") or []
        except metadata.PackageNotFoundError:
            lines = []
    for line in lines:
        m = _REQ.match(line)
        if m:
            return m.group(1).strip().replace(" ", "")
    return None


def transformers_version() -> str:
    import transformers

    return transformers.__version__


def is_tested(version: str, spec: str | None = None) -> bool | None:
    """True inside the declared range (pre-releases and dev builds are not: CI never ran them);
    None when no range is declared."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    spec = tested_range() if spec is None else spec
    if not spec:
        return None
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=False)
    except InvalidVersion:
        return False


def warn_if_untested() -> str | None:
    """Once per process: a log line and an UntestedVersionWarning when the installed
    transformers is outside the tested range. Returns the message (None when tested)."""
    version = transformers_version()
    if is_tested(version) is not False:
        return None
    msg = (f"transformers {version} is outside the range SpecScope is tested on "
           f"(transformers{tested_range()}); it may work, but nothing checked it")
    if version not in _warned:
        _warned.add(version)
        log.warning(msg)
        warnings.warn(msg, UntestedVersionWarning, stacklevel=3)
    return msg


def versions() -> dict:
    """python, torch, transformers, gradio (gradio read from metadata: never imported here)."""
    import torch

    try:
        gradio = metadata.version("gradio")
    except metadata.PackageNotFoundError:
        gradio = None
    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers_version(), "gradio": gradio}


def device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)})"
    return "cpu"
