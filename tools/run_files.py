"""What the table tools read from a training run's folder (tools/*-table.py)."""
import json
from pathlib import Path


def final_valid_loss(run: Path):
    """The last validation loss the run's log.jsonl recorded (None if it has none)."""
    loss = None
    for line in (run / "log.jsonl").read_text().splitlines():
        event = json.loads(line)
        if "valid_loss" in event:
            loss = event["valid_loss"]
    return loss
