"""Write a small synthetic translation corpus (no download), for the quickstart and the tests.

The language pair is fairseq_ctemp.toy_data's.

    ctemp-toy-translation OUT_DIR [--train 3000 --valid 300 --test 300 --vocab 300 --seed 1]

writes OUT_DIR/{train,valid,test}.{src,tgt}; refuses to overwrite existing files.
"""

import argparse
import os

from .. import inputs
from ..toy_data import write_corpus


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ctemp-toy-translation", description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="where {train,valid,test}.{src,tgt} go (made if absent)")
    for split, pairs in (("train", 3000), ("valid", 300), ("test", 300)):
        parser.add_argument(
            f"--{split}", type=int, default=pairs, help=f"{split} sentence pairs (default {pairs})"
        )
    parser.add_argument(
        "--vocab",
        type=int,
        default=300,
        help="source words (default 300; the target has more: some have two translations)",
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed of the corpus (default 1)")
    args = parser.parse_args(argv)
    for option in ("train", "valid", "test", "vocab"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be >= 1, got {getattr(args, option)}")
    if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        parser.error(f"OUT_DIR {args.out_dir} is a file, not a directory")
    if problem := inputs.folder_problem(args.out_dir, made_if_missing=True):
        parser.error(f"OUT_DIR {args.out_dir} {problem}")
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
