"""ALT data for the softmax-tempering recipes: the official train/dev/test split of any language
pair, normalised, checked, subword-segmented and binarised for fairseq.

    ctemp-alt-data prepare en-vi [ja-en ...] --work W (--release PATH | --local DIR | --download)
                   [--subwords spm|bpe] [--vocab 8192] [--train-subset N] [--drop-incomplete]
    ctemp-alt-data check en-vi (--release PATH | --local DIR)       # the checks only, writes nothing
    ctemp-alt-data download DIR                                    # the NICT release + split lists
    ctemp-alt-data languages
    ctemp-alt-data toy-release DIR                                  # a tiny fake release (tests, demo)

Corpus sources (a flag, else the environment variable ALT_RELEASE / ALT_LOCAL):
  --release PATH  the official release: ALT-Parallel-Corpus-20191206.zip, or the directory it unzips
                  to, with URL-train.txt, URL-dev.txt, URL-test.txt next to it (data_<lang>.txt
                  lines are "SNT.<urlid>.<sentid>\\t<text>", URL lists "URL.<urlid>\\t<url>"). The
                  split is by URL: 18,088 / 1,000 / 1,018 sentences.
  --local DIR     an already split copy: DIR/{train,dev[,test]}.<lang>, one sentence a line, aligned
                  by line (e.g. a local ALT copy with en and vi, train and dev only). Without test
                  files the recipes score the dev set and say so.
  --download      fetch the release into W/download first (needs the network) and use it: not
                  with --release or --local, and ALT_RELEASE / ALT_LOCAL are not read.

Each pair gets W/data/<pair>.<spm8192|bpe8192>[.nN]/ (one for both directions: en-vi = vi-en):
  raw/{train,dev[,test]}.<lang>  normalised text (NFC, CR/LF stripped, whitespace runs -> one
                                 space), the references the recipes score against
  sub/                           subword models: spm.<lang>.model (sentencepiece, one per language,
                                 --vocab pieces each) or bpe.<lang>.codes (subword-nmt, --vocab merges)
  tok/                           segmented text;  bin/  fairseq-preprocess output (dev = "valid")
  options.json, prepare.json     the options (written first); options, sources, sentence counts,
                                 whether there is a test split (written last; paths relative to it)
Each step writes to a temporary name and renames it when complete; a finished step is skipped and
never overwritten (delete its directory to redo it). Before any step is skipped the options and the
corpus are checked against the directory's: other options or another corpus are refused. A lock
keeps two prepares off one directory. Misaligned sentences, empty sentences, bytes that are not
UTF-8, CR-only line ends, a split with no pair, a language the corpus lacks and malformed lines are
errors that name the file and line; --drop-incomplete instead drops pairs with an empty or missing
side (reported).
"""

import argparse
import os

from .. import inputs
from ..alt.common import LANGUAGES, AltError, run_main
from ..alt.data import check, prepare, toy_release
from ..alt.sources import download


def main(argv=None):
    """ctemp-alt-data (python -m fairseq_ctemp.cli.alt_data)."""
    return run_main(data_main, argv)


def build_parser():
    """ctemp-alt-data's options: one subcommand each for prepare, check, download, languages, toy-release."""
    parser = argparse.ArgumentParser(
        prog="ctemp-alt-data",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def corpus_options(p):
        p.add_argument("directions", nargs="+", metavar="DIRECTION", help="e.g. en-vi vi-en ja-en")
        p.add_argument("--release", help="the official release zip or directory (env ALT_RELEASE)")
        p.add_argument("--local", help="an already split copy (env ALT_LOCAL)")
        p.add_argument(
            "--drop-incomplete",
            action="store_true",
            help="drop sentence pairs with an empty or missing side instead of failing",
        )

    p = commands.add_parser("prepare", help="split, normalise, subwords, binarise")
    corpus_options(p)
    p.add_argument("--work", default=os.environ.get("ALT_WORK", "runs/alt"), help="(env ALT_WORK)")
    p.add_argument("--download", action="store_true", help="download the release into WORK/download")
    p.add_argument(
        "--subwords",
        choices=("spm", "bpe"),
        default="spm",
        help="sentencepiece (default) or subword-nmt BPE, learned per language",
    )
    p.add_argument(
        "--vocab",
        type=int,
        default=8192,
        help="sentencepiece pieces (or BPE merges) per language (default 8192, the paper's)",
    )
    p.add_argument(
        "--spm-model-type",
        choices=("unigram", "bpe"),
        help="sentencepiece's model type, with --subwords spm only (default unigram)",
    )
    p.add_argument("--train-subset", type=int, help="keep only the first N training pairs")
    p.add_argument(
        "--carve-test",
        type=int,
        metavar="N",
        help="a test split made of the last N training pairs, removed from train (for a copy without "
        "a test split; the tables call it the carved test)",
    )
    p.add_argument("--workers", type=int, default=1, help="threads for sentencepiece / fairseq-preprocess")
    p = commands.add_parser("check", help="run the corpus checks only")
    corpus_options(p)
    p.set_defaults(work=None)
    p = commands.add_parser("download", help="download the release and split lists")
    p.add_argument("dest", help="the directory they go to")
    commands.add_parser("languages", help="list the language codes")
    p = commands.add_parser("toy-release", help="write a tiny fake release (en, vi, ja)")
    p.add_argument("dest", help="the directory it goes to (must not exist)")
    return parser


def data_main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    for option, folder in (("--work", getattr(args, "work", None)), ("dest", getattr(args, "dest", None))):
        if folder and (problem := inputs.folder_problem(folder, made_if_missing=True)):
            raise AltError(f"{option} {folder} {problem}")  # now, not when the first file is written
    if args.command == "prepare":
        for option in ("vocab", "train_subset", "carve_test", "workers"):
            if getattr(args, option) is not None and getattr(args, option) < 1:
                parser.error(f"--{option.replace('_', '-')} must be >= 1, got {getattr(args, option)}")
        if args.spm_model_type is not None and args.subwords != "spm":
            parser.error("--spm-model-type is only used with --subwords spm, not bpe")
        if args.download and (args.release or args.local):  # else one of them would be ignored
            given = "--release" if args.release else "--local"
            parser.error(f"--download fetches the release: give it without {given}")
        prepare(args)
    elif args.command == "check":
        check(args)
    elif args.command == "download":
        print(download(args.dest))
    elif args.command == "languages":
        for code, (file_code, name) in LANGUAGES.items():
            print(f"{code:<4} {name:<11} data_{file_code}.txt")
    else:
        if os.path.exists(args.dest):
            raise AltError(f"{args.dest} exists; refusing to overwrite it")
        print(toy_release(args.dest))


if __name__ == "__main__":
    main()
