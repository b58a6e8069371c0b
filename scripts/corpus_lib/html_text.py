"""HTML to plain text with the standard library's html.parser.

Navigation, sidebars, headers, footers, scripts and styles are skipped; block elements become paragraph
breaks; <pre> keeps its line structure. One output line is one paragraph (or one line of a <pre>)."""
import re
from html.parser import HTMLParser

# Elements whose whole content is never prose.
_SKIP_TAGS = {"script", "style", "noscript", "head", "nav", "header", "footer", "svg", "math", "template",
              "button", "form", "select", "iframe", "object", "canvas", "textarea"}
# class / id tokens that mark navigation and page chrome in Sphinx, DocBook, Javadoc, rustdoc and similar.
_SKIP_CLASSES = {"sphinxsidebar", "sphinxsidebarwrapper", "related", "footer", "header", "navheader",
                 "navfooter", "breadcrumb", "breadcrumbs", "wy-nav-side", "rst-versions", "sidebar",
                 "sidebar-elems", "navbar", "topbar", "top-nav", "bottom-nav", "sub-nav", "skip-nav",
                 "headerlink", "search-container", "toc", "localtoc", "navigation", "nav", "menu",
                 "copyright", "legalnotice", "version-switcher", "rustdoc-breadcrumbs", "out-of-band"}
_SKIP_ROLES = {"navigation", "banner", "contentinfo", "search"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_BLOCK = {"p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "tr",
          "table", "thead", "tbody", "section", "article", "main", "aside", "blockquote", "hr", "pre",
          "figure", "figcaption", "caption", "details", "summary", "address", "center"}
_CELL = {"td", "th"}
_SPACES = re.compile(r"[ \t\r\n\f\v\u00a0]+")


def _skips(tag, attrs):
    if tag in _SKIP_TAGS:
        return True
    for name, value in attrs:
        if not value:
            continue
        if name == "role" and value.lower() in _SKIP_ROLES:
            return True
        if name in ("class", "id") and any(tok.lower() in _SKIP_CLASSES for tok in value.split()):
            return True
    return False


class _Extractor(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts = []
        self.skip_tag = None
        self.skip_depth = 0
        self.pre_depth = 0

    def handle_starttag(self, tag, attrs):
        if self.skip_depth:
            if tag == self.skip_tag:
                self.skip_depth += 1
            return
        if tag not in _VOID and _skips(tag, attrs):
            self.skip_tag, self.skip_depth = tag, 1
            return
        if tag == "pre":
            self.pre_depth += 1
        if tag in _BLOCK:
            self.parts.append("\n\n")
        elif tag in _CELL:
            self.parts.append(" ")

    def handle_startendtag(self, tag, attrs):
        if not self.skip_depth and tag in ("br", "hr"):
            self.parts.append("\n\n" if not self.pre_depth else "\n")

    def handle_endtag(self, tag):
        if self.skip_depth:
            if tag == self.skip_tag:
                self.skip_depth -= 1
            return
        if tag == "pre" and self.pre_depth:
            self.pre_depth -= 1
        if tag in _BLOCK:
            self.parts.append("\n\n")
        elif tag in _CELL:
            self.parts.append(" ")

    def handle_data(self, data):
        if self.skip_depth:
            return
        if self.pre_depth:
            # Inside <pre>: keep line breaks; mark them so that the final whitespace pass keeps them.
            self.parts.append(data.replace("\r\n", "\n").replace("\n", "\x00"))
        else:
            self.parts.append(_SPACES.sub(" ", data))


def html_to_text(html):
    """Returns the prose of an HTML page: paragraphs separated by blank lines, <pre> lines kept."""
    parser = _Extractor()
    parser.feed(html)
    parser.close()
    # Outside <pre> every line is a paragraph of collapsed inline text: strip it on both sides. A <pre>
    # block is still one "line" here (its breaks are NUL), so its inner indentation survives.
    paragraphs = [line.strip(" ") for line in "".join(parser.parts).split("\n")]
    return tidy_lines("\n".join(paragraphs).replace("\x00", "\n"))


_BLANKS = re.compile(r"\n{3,}")


def tidy_lines(text):
    """Strips trailing spaces, drops leading blank lines and keeps at most one blank line in a row."""
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANKS.sub("\n\n", text).strip("\n")
