"""Sentences a dev or test split shares with train: ALT repeats a few lines across articles, so a
split (the corpus's own, or carved from train) can hold some training sentences. Counted for the
reader (ctemp-alt-data prepare and check, the ALT report), not removed."""

import os


def in_train(splits, a, b):
    """{split: {a: n, b: n, "pair": n}} for each split but train: how many of its pairs have their a
    side, their b side, or both also in train (the same sentence, spaces collapsed)."""

    def same(text):
        return " ".join(text.split())

    train = [(same(x), same(y)) for x, y in splits["train"]]
    sides, whole = ({x for x, _ in train}, {y for _, y in train}), set(train)
    counts = {}
    for split, pairs in splits.items():
        if split != "train":
            rows = [(same(x), same(y)) for x, y in pairs]
            counts[split] = {
                a: sum(x in sides[0] for x, _ in rows),
                b: sum(y in sides[1] for _, y in rows),
                "pair": sum(row in whole for row in rows),
            }
    return counts


def in_train_line(counts, sizes):
    """'dev: 6 en, 5 vi, 4 pairs of 1,000; ...' of in_train's counts."""
    return "; ".join(
        f"{split}: "
        + ", ".join(f"{n:,} {side}" + ("s" if side == "pair" and n != 1 else "") for side, n in c.items())
        + f" of {sizes[split]:,}"
        for split, c in counts.items()
    )


def in_train_of_raw(raw, a, b, splits):
    """in_train of a data directory's raw text (raw/<split>.<lang>), None where a file is missing."""
    pairs = {}
    for split in splits:
        sides = []
        for lang in (a, b):
            path = os.path.join(raw, f"{split}.{lang}")
            if not os.path.isfile(path):
                return None
            with open(path, encoding="utf-8") as f:
                sides.append(f.read().split("\n")[:-1])
        pairs[split] = list(zip(*sides))
    return in_train(pairs, a, b) if "train" in pairs else None
