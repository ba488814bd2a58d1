#!/usr/bin/env python3
"""Reads a TensorBoard event directory written by ljperf with TensorBoard's own reader and prints
every scalar tag with its steps and values. Exits non-zero when no scalar is found (or the
directory holds no event file), so it can gate a check of src/io/tensorboard.cc.

Run by hand (needs `pip install tensorboard`):
  python3 tools/ref/check_tensorboard.py RUN_DIR
"""
import glob
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    if len(sys.argv) != 2:
        print("usage: check_tensorboard.py EVENT_DIR", file=sys.stderr)
        return 2
    run_dir = sys.argv[1]
    files = sorted(glob.glob(os.path.join(run_dir, "*tfevents*")))
    if not files:
        print(f"no event file (*tfevents*) in {run_dir}", file=sys.stderr)
        return 1
    for f in files:
        print(f"event file: {os.path.basename(f)} ({os.path.getsize(f)} bytes)")
    # size_guidance 0 keeps every scalar instead of TensorBoard's default reservoir sample.
    acc = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    acc.Reload()
    print(f"file_version: {acc.file_version}")
    tags = acc.Tags().get("scalars", [])
    if not tags:
        print(f"no scalars in {run_dir}", file=sys.stderr)
        return 1
    for tag in sorted(tags):
        events = acc.Scalars(tag)
        print(f"{tag}: {len(events)} points")
        for e in events:
            print(f"  step {e.step:>6}  value {e.value!r:<24}  wall_time {e.wall_time:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
