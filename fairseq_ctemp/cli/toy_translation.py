"""Write a small synthetic translation corpus (no download), for the quickstart and the tests.

The "language pair" has what makes low-resource NMT hard in miniature: a Zipfian vocabulary (rare
words seen a few times), words with two translations chosen by context (the previous source word),
words that translate to two target words, and local reordering (adjacent pairs swap).

    ctemp-toy-translation OUT_DIR [--train 3000 --valid 300 --test 300 --vocab 300 --seed 1]

writes OUT_DIR/{train,valid,test}.{src,tgt}; refuses to overwrite existing files.
"""

import argparse
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


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ctemp-toy-translation", description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--train", type=int, default=3000)
    parser.add_argument("--valid", type=int, default=300)
    parser.add_argument("--test", type=int, default=300)
    parser.add_argument("--vocab", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    for option in ("train", "valid", "test", "vocab"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be >= 1, got {getattr(args, option)}")
    if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        parser.error(f"OUT_DIR {args.out_dir} is a file, not a directory")
    try:
        write_corpus(
            args.out_dir,
            (("train", args.train), ("valid", args.valid), ("test", args.test)),
            args.vocab,
            args.seed,
        )
    except FileExistsError as e:
        parser.error(str(e))


if __name__ == "__main__":
    main()
