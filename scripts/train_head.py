"""Train the demo draft head on the demo corpus against the frozen demo cloud (CPU, seeded).

    python scripts/train_head.py [--threads 2] [--steps N]

Writes specdec_core/demo/models/head/{config.json,model.safetensors} and adds a "head" entry
to train_report.json.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.train_head import main  # noqa: E402

if __name__ == "__main__":
    main()
