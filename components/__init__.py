"""UI building blocks: pure functions of a trace / config -> HTML, figures, tables (no model, no
Gradio state). Inject ALL_CSS once in the page."""

from .batch_view import BATCH_CSS
from .cards import CARDS_CSS
from .compare import DIFF_CSS
from .findings import FINDINGS_CSS
from .inspect_view import INSPECT_CSS
from .status import STATUS_CSS
from .token_view import TOKEN_CSS

ALL_CSS = "\n".join((TOKEN_CSS, CARDS_CSS, FINDINGS_CSS, DIFF_CSS, BATCH_CSS, STATUS_CSS, INSPECT_CSS))
