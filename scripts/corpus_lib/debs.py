"""Debian documentation packages: fetch the .deb with `apt-get download` into a cache, unpack it with
`dpkg-deb -x` (no root needed), and describe it (name, version, SHA-256) for the manifest."""
import glob
import hashlib
import os
import shutil
import subprocess

from . import CorpusError


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run(cmd, cwd=None):
    try:
        return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise CorpusError(f"'{cmd[0]}' is not installed; install Debian's apt and dpkg (a Debian or Ubuntu host)")
    except subprocess.CalledProcessError as e:
        raise CorpusError(f"'{' '.join(cmd)}' failed (exit {e.returncode}) in {cwd or os.getcwd()}: "
                          f"{(e.stderr or e.stdout).strip()[-400:]}")


def fetch_deb(package, deb_dir):
    """Returns the path of PACKAGE's .deb in deb_dir, downloading it when the cache has none. A cached .deb
    is used as is, so a rebuild from the same cache reads the same bytes."""
    os.makedirs(deb_dir, exist_ok=True)
    found = sorted(glob.glob(os.path.join(glob.escape(deb_dir), f"{glob.escape(package)}_*.deb")))
    if not found:
        try:
            _run(["apt-get", "download", package], cwd=deb_dir)
        except CorpusError as e:
            raise CorpusError(f"cannot download Debian package '{package}' into {deb_dir}: {e}. Check the name "
                              f"with 'apt-cache show {package}', run 'apt-get update', or drop it from --packages")
        found = sorted(glob.glob(os.path.join(glob.escape(deb_dir), f"{glob.escape(package)}_*.deb")))
    if len(found) != 1:
        raise CorpusError(f"expected one {package}_*.deb in {deb_dir}, found {len(found)}: {found}; "
                          f"delete the stale ones")
    return found[0]


def describe_deb(path):
    fields = _run(["dpkg-deb", "-f", path, "Package", "Version"]).splitlines()
    info = dict(line.split(": ", 1) for line in fields if ": " in line)
    return {"package": info.get("Package"), "version": info.get("Version"), "deb": os.path.basename(path),
            "deb_sha256": sha256_file(path), "deb_bytes": os.path.getsize(path)}


def unpack_deb(path, sha256, unpack_root):
    """Unpacks the .deb under unpack_root/<deb name>/ once; a marker with the .deb's SHA-256 says it is
    complete. Returns the directory."""
    dest = os.path.join(unpack_root, os.path.basename(path)[:-4])
    marker = os.path.join(dest, ".unpacked-sha256")
    if os.path.exists(marker) and open(marker).read().strip() == sha256:
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    tmp = dest + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    _run(["dpkg-deb", "-x", path, tmp])
    with open(os.path.join(tmp, ".unpacked-sha256"), "w") as f:
        f.write(sha256 + "\n")
    os.rename(tmp, dest)
    return dest
