import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("SPECSCOPE_STRICT_CODES", "1")   # a check emits only its declared codes

ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def page(artifacts, request):
    """One chromium page per test module on the shared app (tests/browser_util.app_page): 1500 x
    1000 unless the module sets PAGE_VIEWPORT; waits default to browser_util.WAIT_MS."""
    pytest.importorskip("playwright.sync_api")
    from browser_util import app_page

    with app_page(getattr(request.module, "PAGE_VIEWPORT", (1500, 1000))) as pg:
        yield pg


@pytest.fixture(scope="session")
def tok():
    from tiny import char_tokenizer

    return char_tokenizer()
