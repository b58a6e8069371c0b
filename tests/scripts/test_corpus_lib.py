"""Unit tests of scripts/corpus_lib on tiny fixtures: HTML stripping, boilerplate lines, page filters,
MinHash dedup, held-out selection, page selection and reproducible outputs."""
import os
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from corpus_lib.clean import MinHashDedup, drop_repeated_lines, normalised_hash, page_problem  # noqa: E402
from corpus_lib.html_text import html_to_text  # noqa: E402
from corpus_lib.output import write_bundle, write_jsonl  # noqa: E402
from corpus_lib.pages import list_pages  # noqa: E402
from corpus_lib.split import cap_tokens, hold_out, hold_out_round_robin, shuffled  # noqa: E402

PROSE = ("The quick brown fox jumps over the lazy dog while the cat sleeps in the sun and the birds sing "
         "in the trees of the old garden that is next to the river by the mill on the hill. ") * 3


class HtmlText(unittest.TestCase):
    def test_strips_chrome_and_keeps_structure(self):
        html = ("<html><head><title>T</title><style>p{}</style></head><body>"
                "<nav>Home | Next</nav><div class='sphinxsidebar'><p>Search</p><div>x</div></div>"
                "<h1>Title &amp; more<a class='headerlink'>¶</a></h1><p>Some <b>bold</b>\n  text.</p>"
                "<pre>int x;\n    y = 1;</pre><script>var a;</script><footer>(c) 2020</footer>"
                "<ul><li>one</li><li>two</li></ul></body></html>")
        self.assertEqual(html_to_text(html), "Title & more\n\nSome bold text.\n\nint x;\n    y = 1;\n\none\n\ntwo")

    def test_unclosed_tags(self):
        self.assertEqual(html_to_text("<p>a<p>b<br>c"), "a\n\nb\n\nc")


class Cleaning(unittest.TestCase):
    def test_repeated_lines_removed(self):
        names = "ant bee cat dog eel fox gnu hen ibis jay kiwi lynx".split()
        pages = [f"Copyright 20{i:02d} Example\nThe {n} has its own words.\n}}" for i, n in enumerate(names)]
        out, lines, chars = drop_repeated_lines(pages, min_pages=10)
        self.assertEqual(lines, 12)  # the copyright line (digits normalised); '}' has no letter and stays
        self.assertEqual(out[3], "The dog has its own words.\n}")
        self.assertGreater(chars, 0)
        same, lines, _ = drop_repeated_lines(pages[:9], min_pages=10)
        self.assertEqual((same, lines), (pages[:9], 0))

    def test_page_problems(self):
        self.assertIsNone(page_problem(PROSE, 50, 0.04, 0.9))
        self.assertEqual(page_problem("the cat", 50, 0.04, 0.9), "too_short")
        self.assertEqual(page_problem("Der Hund läuft über die Straße. " * 20, 50, 0.04, 0.9), "not_english")
        self.assertEqual(page_problem("日本語の文章です the " * 60, 50, 0.04, 0.9), "not_english")

    def test_exact_and_near_duplicates(self):
        self.assertEqual(normalised_hash("The  Cat, sat."), normalised_hash("the cat sat"))
        dedup = MinHashDedup(seed=1)
        self.assertFalse(dedup.is_duplicate(PROSE))
        self.assertTrue(dedup.is_duplicate(PROSE.replace("mill", "mills", 1)))
        other = " ".join(f"word{i} alpha{i * 7} beta{i % 13}" for i in range(80))
        self.assertFalse(dedup.is_duplicate(other))
        self.assertTrue((MinHashDedup(seed=1).signature(other) == dedup.signature(other)).all())


class Splits(unittest.TestCase):
    docs = [{"id": f"d{i}", "tokens": 10 + i, "source": "s", "package": f"p{i % 3}"} for i in range(30)]

    def test_hold_out_reaches_the_target_deterministically(self):
        val, rest = hold_out(self.docs, 100, seed=7)
        self.assertGreaterEqual(sum(d["tokens"] for d in val), 100)
        self.assertLess(sum(d["tokens"] for d in val[:-1]), 100 + max(d["tokens"] for d in val))
        self.assertEqual(len(val) + len(rest), 30)
        self.assertEqual(hold_out(self.docs, 100, seed=7), (val, rest))
        self.assertNotEqual(hold_out(self.docs, 100, seed=8)[0], val)

    def test_round_robin_spans_groups(self):
        val, rest = hold_out_round_robin(self.docs, 60, seed=7, group_key="package", groups=3)
        self.assertEqual({d["package"] for d in val}, {"p0", "p1", "p2"})
        self.assertEqual(len(val) + len(rest), 30)

    def test_cap_and_shuffle(self):
        kept, dropped = cap_tokens(self.docs, 200, seed=7)
        self.assertLessEqual(sum(d["tokens"] for d in kept), 200)
        self.assertEqual(len(kept) + len(dropped), 30)
        self.assertEqual(cap_tokens(self.docs, 0, seed=7), (self.docs, []))
        self.assertEqual(sorted(d["id"] for d in shuffled(self.docs, 7)), sorted(d["id"] for d in self.docs))


class PagesAndOutputs(unittest.TestCase):
    def test_page_selection(self):
        with tempfile.TemporaryDirectory() as root:
            for rel in ["usr/share/doc/p/html/en-US/a.html", "usr/share/doc/p/html/de-DE/a.html",
                        "usr/share/doc/p/html/_sources/a.rst.txt", "usr/share/doc/p/html/genindex.html",
                        "usr/share/doc/p/html/b.txt", "usr/share/doc/p/changelog.gz"]:
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                open(os.path.join(root, rel), "w").close()
            self.assertEqual(list_pages(root), [("html", "usr/share/doc/p/html/en-US/a.html")])
            os.remove(os.path.join(root, "usr/share/doc/p/html/en-US/a.html"))
            self.assertEqual(list_pages(root), [("text", "usr/share/doc/p/html/b.txt")])

    def test_jsonl_and_bundle_are_reproducible(self):
        with tempfile.TemporaryDirectory() as d:
            docs = [{"text": "naïve \"quoted\"\nline", "source": "s", "id": "1", "tokens": 3}]
            size, sha = write_jsonl(os.path.join(d, "a.jsonl"), docs)
            with open(os.path.join(d, "a.jsonl"), encoding="utf-8") as f:
                self.assertEqual(f.read(), '{"text": "naïve \\"quoted\\"\\nline", "source": "s", "id": "1"}\n')
            first = write_bundle(os.path.join(d, "b1.tar.xz"), [("c/a.jsonl", os.path.join(d, "a.jsonl"))], 1)
            os.utime(os.path.join(d, "a.jsonl"), (1, 1))
            second = write_bundle(os.path.join(d, "b2.tar.xz"), [("c/a.jsonl", os.path.join(d, "a.jsonl"))], 1)
            self.assertEqual(first[1], second[1])
            with tarfile.open(os.path.join(d, "b1.tar.xz")) as tar:
                self.assertEqual(tar.getnames(), ["c/a.jsonl"])


if __name__ == "__main__":
    unittest.main()
