#!/usr/bin/env python3
"""metrics.jsonl -> TensorBoard event files.

Every numeric field of a record (loss, lr, grad_norm, val_loss, tokens_per_s, ...) becomes a scalar
series under its own name, at the record's `step`. A last line without its newline (the run is
writing it) is left for later. With --follow the script keeps reading the file as the run appends
to it, until interrupted (or --max-idle seconds pass without a new record).

  scripts/metrics_to_tensorboard.py runs/hybrid_124m/metrics.jsonl --logdir tb/hybrid_124m
  scripts/metrics_to_tensorboard.py runs/hybrid_124m/metrics.jsonl --logdir tb/hybrid_124m --follow
  tensorboard --logdir tb
"""
import argparse
import json
import os
import sys
import time


def load_writer():
    try:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as e:
        sys.exit(f"metrics_to_tensorboard: needs the `tensorboard` package (scripts/install_deps.sh installs it): {e}")
    return Event, Summary, EventFileWriter


class Converter:
    def __init__(self, path, logdir):
        self.path = path
        self.offset = 0
        self.line = 0
        Event, Summary, EventFileWriter = load_writer()
        self.Event, self.Summary = Event, Summary
        os.makedirs(logdir, exist_ok=True)
        self.writer = EventFileWriter(logdir)

    def scalar(self, tag, value, step, wall):
        summary = self.Summary(value=[self.Summary.Value(tag=tag, simple_value=float(value))])
        self.writer.add_event(self.Event(summary=summary, step=step, wall_time=wall))

    def read_new(self):
        """Converts the complete lines appended since the last call; returns how many."""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n")
        if end < 0:
            return 0
        n = 0
        for raw in data[: end + 1].splitlines():
            self.line += 1
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError as e:
                sys.exit(f"metrics_to_tensorboard: {self.path}:{self.line}: not JSON ({e.msg}); is it a metrics.jsonl?")
            if not isinstance(rec, dict) or not isinstance(rec.get("step"), int):
                sys.exit(f"metrics_to_tensorboard: {self.path}:{self.line}: a record needs an integer \"step\"")
            wall = time.time()
            for key, value in rec.items():
                if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.scalar(key, value, rec["step"], wall)
            n += 1
        self.offset += end + 1
        self.writer.flush()
        return n


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("metrics", help="a run's metrics.jsonl")
    p.add_argument("--logdir", required=True, help="folder for the event files")
    p.add_argument("--follow", action="store_true", help="keep reading as the run appends")
    p.add_argument("--poll", type=float, default=2.0, help="--follow: seconds between reads (default 2)")
    p.add_argument("--max-idle", type=float, default=0, help="--follow: stop after this many seconds without a "
                   "new record (default 0: never)")
    a = p.parse_args()
    if not os.path.isfile(a.metrics):
        sys.exit(f"metrics_to_tensorboard: {a.metrics}: no such file; pass a run's metrics.jsonl")
    if a.poll <= 0 or a.max_idle < 0:
        sys.exit("metrics_to_tensorboard: --poll must be > 0 and --max-idle >= 0")
    conv = Converter(a.metrics, a.logdir)
    total = conv.read_new()
    idle_since = time.monotonic()
    try:
        while a.follow:
            time.sleep(a.poll)
            n = conv.read_new()
            total += n
            if n:
                idle_since = time.monotonic()
            elif a.max_idle and time.monotonic() - idle_since >= a.max_idle:
                break
    except KeyboardInterrupt:
        pass
    conv.writer.close()
    print(f"metrics_to_tensorboard: {total} records -> {a.logdir}", file=sys.stderr)


if __name__ == "__main__":
    main()
