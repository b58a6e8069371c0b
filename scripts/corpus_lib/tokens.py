"""Exact GPT-2 token counts with tiktoken, built from the repository's own GPT-2 files (assets/gpt2), so
that nothing is downloaded. Counts are of the text alone; `deltatron prepare` adds one <|endoftext|> per
document on top."""
import os

from . import CorpusError

_ENCODER_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
_VOCAB_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
# GPT-2's pre-tokenisation pattern as tiktoken writes it.
_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def gpt2_encoding(gpt2_dir):
    try:
        import tiktoken
        from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    except ImportError:
        raise CorpusError("the Python package 'tiktoken' is missing; install it with "
                          "'python3 -m pip install tiktoken' (or run scripts/install_deps.sh)")
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")  # read the local files directly, no cache
    vocab, encoder = os.path.join(gpt2_dir, "vocab.bpe"), os.path.join(gpt2_dir, "encoder.json")
    for path in (vocab, encoder):
        if not os.path.exists(path):
            raise CorpusError(f"{path} does not exist; run from a complete Deltatron checkout (assets/gpt2)")
    ranks = data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=vocab, encoder_json_file=encoder,
                                            vocab_bpe_hash=_VOCAB_SHA256, encoder_json_hash=_ENCODER_SHA256)
    return tiktoken.Encoding(name="gpt2", pat_str=_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)


def count_tokens(encoding, texts, threads=2, batch=512):
    """GPT-2 token counts of the texts (special tokens are encoded as plain text)."""
    counts = []
    for start in range(0, len(texts), batch):
        counts.extend(len(ids) for ids in encoding.encode_ordinary_batch(texts[start:start + batch],
                                                                           num_threads=threads))
    return counts
