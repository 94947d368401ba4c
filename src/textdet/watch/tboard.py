"""TensorBoard event files after a resume: the steps a killed run logged past its last checkpoint are redone,
so their old events are removed from the files (not just hidden by a purge marker) and every step appears
once."""

from __future__ import annotations

import glob
import os


def truncate_events(tb_dir: str, last_step: int) -> int:
    """Drop events with ``step > last_step`` from every ``events.out.tfevents.*`` file in ``tb_dir`` (each
    rewritten to a temp file and renamed); returns how many were dropped. Needs the ``tensorboard``
    package."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.summary.writer.record_writer import RecordWriter

    dropped = 0
    for path in sorted(glob.glob(os.path.join(tb_dir, "events.out.tfevents.*"))):
        records = list(RawEventFileLoader(path).Load())
        keep = [raw for raw in records if not _after(Event.FromString(raw), last_step)]
        if len(keep) == len(records):
            continue
        dropped += len(records) - len(keep)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            writer = RecordWriter(f)
            for raw in keep:
                writer.write(raw)
            writer.flush()
        os.replace(tmp, path)
    return dropped


def _after(event, last_step: int) -> bool:
    """A scalar (summary) event of a later step; file-version and graph records stay."""
    return event.HasField("summary") and event.step > last_step


def scalar_steps(tb_dir: str) -> dict[str, list[int]]:
    """Every scalar tag and the steps it was written at, across the folder's event files (for checks and tests)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    steps: dict[str, list[int]] = {}
    for path in _in_write_order(glob.glob(os.path.join(tb_dir, "events.out.tfevents.*"))):
        for event in EventFileLoader(path).Load():
            for value in event.summary.value:
                steps.setdefault(value.tag, []).append(event.step)
    return steps


def _in_write_order(paths: list[str]) -> list[str]:
    """Event files in the order they were started: by their first record's wall time. Their names do not sort
    so: two writers started in the same second differ only by a counter that sorts as text ("10" before
    "9")."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    def started(path: str) -> float:
        first = next(iter(EventFileLoader(path).Load()), None)
        return first.wall_time if first is not None else float("inf")

    return sorted(paths, key=lambda path: (started(path), path))
