"""Atomic outputs: every file is written under a temporary name in its final directory and renamed into
place only after all of them are complete, so a failed run leaves the previous good outputs intact."""
import json
import os
import subprocess
import tarfile

from . import CorpusError
from .debs import sha256_file


class AtomicOutputs:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.pending = []  # (temporary path, final path)
        os.makedirs(out_dir, exist_ok=True)
        if not os.access(out_dir, os.W_OK):
            raise CorpusError(f"cannot write to {out_dir}; choose another --out")

    def temp_path(self, name):
        final = os.path.join(self.out_dir, name)
        tmp = os.path.join(self.out_dir, f".{name}.tmp-{os.getpid()}")
        self.pending.append((tmp, final))
        return tmp

    def commit(self):
        for tmp, final in self.pending:
            os.replace(tmp, final)
        self.pending = []

    def discard(self):
        for tmp, _ in self.pending:
            if os.path.exists(tmp):
                os.remove(tmp)
        self.pending = []


def write_jsonl(path, docs):
    """One {"text", "source", "id"} object per line, UTF-8, keys in that order. Returns (bytes, sha256)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for d in docs:
            f.write(json.dumps({"text": d["text"], "source": d["source"], "id": d["id"]}, ensure_ascii=False))
            f.write("\n")
    return os.path.getsize(path), sha256_file(path)


def write_bundle(path, members, xz_threads):
    """A reproducible tar (fixed order, times, owners and modes) of members [(archive name, file path)],
    compressed with `xz -9e`. The same inputs and thread count give the same bytes."""
    sink = open(path, "wb")
    try:
        xz = subprocess.Popen(["xz", "-9e", f"-T{xz_threads}", "-c"], stdin=subprocess.PIPE, stdout=sink)
    except FileNotFoundError:
        sink.close()
        raise CorpusError("'xz' is not installed; install Debian's xz-utils")
    sink.close()  # xz holds its own descriptor
    with tarfile.open(fileobj=xz.stdin, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for name, src in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = os.path.getsize(src), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(src, "rb") as f:
                tar.addfile(info, f)
    xz.stdin.close()
    if xz.wait() != 0:
        raise CorpusError(f"xz failed while writing {path}; is the disk full?")
    return os.path.getsize(path), sha256_file(path)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=False, ensure_ascii=False)
        f.write("\n")


