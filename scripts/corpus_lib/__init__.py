"""Helpers of scripts/build_corpus.py: HTML/man/POD to text, cleaning and dedup, splits, tokens, outputs."""


class CorpusError(Exception):
    """A failure the user can act on: the message says what failed, where, and how to fix it."""
