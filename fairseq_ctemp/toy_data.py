"""A small synthetic translation corpus (no download), for the quickstart, the tests and
`ctemp-toy-translation`.

The "language pair" has what makes low-resource NMT hard in miniature: a Zipfian vocabulary (rare
words seen a few times), words with two translations chosen by context (the previous source word),
words that translate to two target words, and local reordering (adjacent pairs swap).
"""

import os
import random


class ToyLanguagePair:
    def __init__(self, vocab=300, seed=1):
        rng = random.Random(seed)
        self.rng = rng
        self.source_words = [f"s{i}" for i in range(vocab)]
        self.weights = [1.0 / (i + 1) ** 0.9 for i in range(vocab)]
        self.lexicon = {}
        for i, word in enumerate(self.source_words):
            kind = rng.random()
            if kind < 0.2:  # ambiguous: translation depends on the previous source word
                self.lexicon[word] = ([f"t{i}a"], [f"t{i}b"])
            elif kind < 0.3:  # fertility 2
                self.lexicon[word] = ([f"t{i}", f"x{i % 17}"],)
            else:
                self.lexicon[word] = ([f"t{i}"],)

    def sentence_pair(self, min_len=4, max_len=14):
        source = self.rng.choices(self.source_words, self.weights, k=self.rng.randint(min_len, max_len))
        phrases = []
        for position, word in enumerate(source):
            options = self.lexicon[word]
            previous = int(source[position - 1][1:]) if position > 0 else 0
            phrases.append(options[previous % len(options)])
        for k in range(0, len(phrases) - 1, 2):  # local reordering
            phrases[k], phrases[k + 1] = phrases[k + 1], phrases[k]
        return " ".join(source), " ".join(token for phrase in phrases for token in phrase)


def write_corpus(out_dir, sizes=(("train", 3000), ("valid", 300), ("test", 300)), vocab=300, seed=1):
    pair = ToyLanguagePair(vocab, seed)
    os.makedirs(out_dir, exist_ok=True)
    for split, _ in sizes:
        for side in ("src", "tgt"):
            path = os.path.join(out_dir, f"{split}.{side}")
            if os.path.exists(path):
                raise FileExistsError(f"{path} exists; refusing to overwrite it")
    for split, count in sizes:
        pairs = [pair.sentence_pair() for _ in range(count)]
        for side, index in (("src", 0), ("tgt", 1)):
            with open(os.path.join(out_dir, f"{split}.{side}"), "w", encoding="utf-8") as f:
                f.writelines(p[index] + "\n" for p in pairs)
