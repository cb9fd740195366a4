"""Backend registry behaviour that the app relies on."""
import threading

import pytest

from specdec_core.backends import _load, load_backend
from specdec_core.errors import BackendError


def test_concurrent_loads_give_one_correct_backend():
    """The app warms the backend up in a thread while the first request loads it too; both must
    get the same, correctly loaded models (concurrent from_pretrained left lm_head untied)."""
    _load.cache_clear()
    got = []
    threads = [threading.Thread(target=lambda: got.append(load_backend("demo"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 3 and all(b is got[0] for b in got)
    cloud = got[0].cloud
    assert cloud.lm_head.weight.data_ptr() == cloud.model.embed_tokens.weight.data_ptr()


def test_unknown_backend_is_a_user_error():
    with pytest.raises(BackendError, match="unknown backend 'nope'"):
        load_backend("nope")
