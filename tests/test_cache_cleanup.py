"""Gradio's scheduled clean-up of uploads survives uploads that arrive while it runs
(ui.common.sturdy_cache_cleanup): a real Blocks, real files, a real thread adding to its
temp-file set the way an upload does."""
from __future__ import annotations

import threading
import time

import gradio as gr
from gradio import route_utils

from ui.common import sturdy_cache_cleanup


def test_clean_up_survives_uploads_arriving_meanwhile_and_deletes_old_files(tmp_path):
    sturdy_cache_cleanup()
    sturdy_cache_cleanup()                       # once is enough: no wrapper around a wrapper
    assert getattr(route_utils.delete_files_created_by_app, "sturdy", False)
    with gr.Blocks() as blocks:
        gr.Markdown("x")
    live: set[str] = set()
    blocks.temp_file_sets.append(live)
    old = tmp_path / "old.wav"
    old.write_bytes(b"x")
    time.sleep(0.05)                          # Gradio ages files by their ctime: age 0 below
    live.add(str(old))
    stop = threading.Event()
    added: list[str] = []

    def uploads():
        while not stop.is_set():
            added.append(str(tmp_path / f"missing{len(added)}.wav"))   # never on disk: skipped
            live.add(added[-1])
            time.sleep(0.0005)

    t = threading.Thread(target=uploads, daemon=True)
    t.start()
    try:
        for _ in range(100):
            route_utils.delete_files_created_by_app(blocks, 0)   # raises nothing, whatever the race
    finally:
        stop.set()
        t.join()
    assert not old.exists() and str(old) not in live
    assert added and set(added) <= live       # every upload that arrived meanwhile is still listed
