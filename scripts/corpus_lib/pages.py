"""Which files of an unpacked documentation package are pages, and their text.

A package with HTML pages contributes only those (its .txt/.rst copies are the same text). A package
without HTML contributes POD files (pod2text), English man pages (groff) and plain text files."""
import gzip
import os
import re
import subprocess

from .html_text import html_to_text, tidy_lines

_HTML = re.compile(r"\.(html?|xhtml)(\.gz)?$")
_TEXT = re.compile(r"\.(txt|rst|md)(\.gz)?$")
_POD = re.compile(r"\.pod$")
# English man pages only: usr/share/man/manN/...; translations live in usr/share/man/<lang>/manN/.
_MAN = re.compile(r"^usr/share/man/man[1-9][^/]*/[^/]+\.[1-9][^/]*\.gz$")
# Generated listings, indexes, source views and assets: no prose, or prose that repeats elsewhere.
_SKIP_PATH = re.compile(
    r"(^|/)(_sources|_static|_images|_downloads|translations|implementors|class-use|static\.files)/"
    r"|(^|/)(genindex[^/]*|search|searchindex|py-modindex|modindex|index-all|allclasses[^/]*|allpackages[^/]*"
    r"|all|overview-tree|package-tree|package-use|deprecated-list|serialized-form|constant-values"
    r"|help-doc|index-files/[^/]*|settings|help)\.html?$"
    r"|/src/.*\.rs\.html$"
    r"|(^|/)(changelog|copyright|NEWS\.Debian|README\.Debian)[^/]*$")
# A path segment that is a locale other than English (de, fr-FR, pt_BR, zh-CN ...).
_FOREIGN_LOCALE = re.compile(
    r"(^|/)(ar|bg|bn|ca|cs|da|de|el|eo|es|et|eu|fa|fi|fr|ga|gl|he|hi|hr|hu|hy|id|is|it|ja|ka|kk|km|ko|lt|lv|mk"
    r"|ml|mr|ms|nb|ne|nl|nn|pa|pl|pt|ro|ru|si|sk|sl|sq|sr|sv|ta|te|th|tr|uk|vi|zh)([-_][A-Za-z]{2,4})?/")


def list_pages(root):
    """Returns (kind, relative path) of the package's pages, sorted by path. kind: html, pod, man, text."""
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if os.path.islink(os.path.join(dirpath, name)) or _SKIP_PATH.search(rel) or _FOREIGN_LOCALE.search(rel):
                continue
            files.append(rel)
    html = [("html", f) for f in files if _HTML.search(f)]
    if html:
        return html
    pages = []
    for f in files:
        if _POD.search(f):
            pages.append(("pod", f))
        elif _MAN.search(f):
            pages.append(("man", f))
        elif _TEXT.search(f):
            pages.append(("text", f))
    return pages


def _read(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def _command_text(cmd, stdin_text=None):
    run = subprocess.run(cmd, input=stdin_text, capture_output=True, text=True, errors="replace")
    return run.stdout if run.returncode == 0 else ""


def _man_to_text(source):
    if source.lstrip().startswith(".so "):
        return ""  # a link to another page
    out = _command_text(["groff", "-mandoc", "-t", "-Tutf8", "-P-cbou", "-rLL=120n"], source)
    lines = out.split("\n")
    body = [i for i, line in enumerate(lines) if line.strip()]
    if len(body) < 3:
        return ""
    # The first and last non-empty lines are the running header and footer.
    return tidy_lines("\n".join(lines[body[0] + 1:body[-1]]))


def page_text(root, kind, rel):
    """The plain text of one page ("" when it cannot be converted)."""
    path = os.path.join(root, rel)
    if kind == "html":
        return html_to_text(_read(path))
    if kind == "pod":
        return tidy_lines(_command_text(["pod2text", "-w", "100", path]))
    if kind == "man":
        return _man_to_text(_read(path))
    return tidy_lines(_read(path))


def page_text_job(args):
    """page_text for a worker pool: (root, kind, rel) -> (rel, text)."""
    root, kind, rel = args
    try:
        return rel, page_text(root, kind, rel)
    except (OSError, ValueError, EOFError):
        return rel, ""
