"""SpecScope: `python app.py` serves the debugging page on 0.0.0.0:7860 (GRADIO_SERVER_PORT to
change it). Importing this module builds the page without launching it (tests, Spaces)."""
from ui.common import warm_up
from ui.page import build_demo, launch_kwargs, queued

demo = queued(build_demo())

if __name__ == "__main__":
    warm_up()
    demo.launch(**launch_kwargs())
