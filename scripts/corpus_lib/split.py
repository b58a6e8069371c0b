"""Deterministic held-out selection and ordering: everything is ordered by SHA-256 of a seed and an id."""
import hashlib


def order_key(seed, *parts):
    return hashlib.sha256("\x1f".join([str(seed), *map(str, parts)]).encode("utf-8", "surrogatepass")).hexdigest()


def hold_out(docs, min_tokens, seed):
    """Takes documents in seeded-hash order of their id until their tokens reach min_tokens.
    docs: dicts with "id" and "tokens". Returns (held out, rest), each in the input's order."""
    chosen, total = set(), 0
    for i in sorted(range(len(docs)), key=lambda i: order_key(seed, docs[i]["id"])):
        if total >= min_tokens:
            break
        chosen.add(i)
        total += docs[i]["tokens"]
    return ([d for i, d in enumerate(docs) if i in chosen], [d for i, d in enumerate(docs) if i not in chosen])


def hold_out_round_robin(docs, min_tokens, seed, group_key, groups):
    """Like hold_out, but takes one document from each of `groups` groups in turn (the groups with the most
    documents, ties by name), so that the held-out slice spans several of them."""
    by_group = {}
    for i, d in enumerate(docs):
        by_group.setdefault(d[group_key], []).append(i)
    names = sorted(by_group, key=lambda g: (-len(by_group[g]), g))[:groups]
    queues = {g: sorted(by_group[g], key=lambda i: order_key(seed, docs[i]["id"])) for g in names}
    chosen, total = set(), 0
    while total < min_tokens and any(queues.values()):
        for g in names:
            if queues[g] and total < min_tokens:
                i = queues[g].pop(0)
                chosen.add(i)
                total += docs[i]["tokens"]
    return ([d for i, d in enumerate(docs) if i in chosen], [d for i, d in enumerate(docs) if i not in chosen])


def cap_tokens(docs, max_tokens, seed):
    """Keeps documents in seeded-hash order while the total stays within max_tokens (0: keep all).
    Returns (kept, dropped) in the input's order."""
    if max_tokens <= 0:
        return docs, []
    kept, total = set(), 0
    for i in sorted(range(len(docs)), key=lambda i: order_key(seed, docs[i]["id"])):
        if total + docs[i]["tokens"] <= max_tokens:
            kept.add(i)
            total += docs[i]["tokens"]
    return ([d for i, d in enumerate(docs) if i in kept], [d for i, d in enumerate(docs) if i not in kept])


def shuffled(docs, seed):
    """The documents in seeded-hash order of (source, id): sources interleave in the training file."""
    return sorted(docs, key=lambda d: order_key(seed, d["source"], d["id"]))
