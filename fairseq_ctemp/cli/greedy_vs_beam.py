"""Greedy vs beam search of one checkpoint: BLEU, chrF and decoding speed (the paper: greedy search
of a tempered model matches beam search of an untempered one, 1.5-3.5x faster).

    ctemp-greedy-vs-beam DATA_BIN --checkpoint ckpt/checkpoint_best.pt [--beam 5 --subset test] \\
        [--ref raw/test.tgt] [--save-dir out --json out/result.json] \\
        -- --cpu --batch-size 64 --remove-bpe sentencepiece --max-len-a 1.2 --max-len-b 10
    ctemp-greedy-vs-beam DATA_BIN --checkpoint CKPT --grid-beams 2,4,6,8,10,12 \\
        --grid-lenpens 0.6,0.8,1.0,1.2,1.4 --dev-subset valid [--dev-ref raw/valid.tgt] -- --cpu
    ctemp-greedy-vs-beam compare --ref out/ref --baseline out/beam.hyp --system out/greedy.hyp \\
        [--test bs|ar] [--n-samples 1000] [--sacrebleu-tokenize none]

The checkpoint is loaded once and decoded through fairseq's Python API (fairseq_ctemp.translate:
task.build_generator, task.inference_step), exactly as fairseq-generate with --user-dir
fairseq_ctemp decodes it: a checkpoint trained with tempered_ce decodes at its training T
(--temperature replaces it), every sentence is translated, and the temperature used is read from
the model. Options after -- are fairseq-generate's that map onto that API: -s/-t, --cpu, --fp16,
--remove-bpe [X] (--post-process), --max-len-a, --max-len-b, --min-len, --batch-size, --max-tokens,
--num-workers; any other is refused. Decode time is the time inside task.inference_step (as
fairseq-generate's "Translated ..." line; loading and post-processing excluded). Hypotheses are
post-processed like fairseq-generate's D- lines. References are the target side post-processed the
same way (its T- lines, OOVs as <<unk>>) scored as they are, sacrebleu tokenize=none ("tokenised"
BLEU), or with --ref a raw reference file scored detokenised with sacrebleu's 13a (comparable with
published numbers). The grid decodes --dev-subset for every (beam, lenpen); the best dev BLEU is
the beam system on --subset. Outputs are never overwritten.
"""

import argparse
import json
import sys

from .. import inputs, outputs
from ..greedy_vs_beam import Request, UsageError, compare_systems, run_greedy_vs_beam
from . import arguments


def compare_main(argv):
    parser = argparse.ArgumentParser(
        prog="ctemp-greedy-vs-beam compare",
        description="Paired significance test (sacrebleu) of two systems.",
    )
    parser.add_argument("--ref", required=True, help="references, one a line (e.g. SAVE_DIR/ref)")
    parser.add_argument("--baseline", required=True, help="baseline hypotheses (e.g. SAVE_DIR/beam.hyp)")
    parser.add_argument("--system", required=True, help="system hypotheses (e.g. SAVE_DIR/greedy.hyp)")
    parser.add_argument(
        "--test",
        choices=("bs", "ar"),
        default="bs",
        help="bs: paired bootstrap resampling (default), ar: approximate randomisation",
    )
    parser.add_argument("--n-samples", type=int, help="resamples / trials (default: bs 1000, ar 10000)")
    parser.add_argument("--sacrebleu-tokenize", default="13a", help="BLEU tokenizer (13a; none for T- refs)")
    parser.add_argument("--json", help="also write the result here (must not exist)")
    args = parser.parse_args(argv)
    try:
        if args.json:
            try:
                inputs.check_new_file(args.json)
            except inputs.InputError as e:
                raise UsageError(f"--json {args.json} {e}") from None
        result = compare_systems(
            args.ref, args.baseline, args.system, args.test, args.n_samples, args.sacrebleu_tokenize
        )
    except UsageError as e:
        parser.error(str(e))
    print(
        f"paired {dict(bs='bootstrap resampling', ar='approximate randomisation')[args.test]}, "
        f"n={result['n_samples']}, sacrebleu tokenize={args.sacrebleu_tokenize}"
    )
    print(f"{'':<9} {'BLEU':>8} {'chrF':>8}")
    for row in ("baseline", "system", "p_value"):
        print(f"{row:<9} " + " ".join(f"{result[key][row]:>8.4f}" for key in ("bleu", "chrf")))
    print(f"BLEU signature: {result['signatures']['bleu']}\nchrF signature: {result['signatures']['chrf']}")
    if args.json:
        try:
            with outputs.all_or_none() as made, open(args.json, "x", encoding="utf-8") as f:
                made.append(args.json)  # a file cut short (a full disk) would refuse the rerun
                json.dump(result, f, indent=2)
        except OSError as e:
            parser.error(outputs.not_written(f"--json {args.json}", e, made))


def main(argv=None):
    """Returns None: console scripts exit with main()'s return value (Python callers: see
    run_greedy_vs_beam and compare_systems)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compare"]:
        return compare_main(argv[1:])
    own, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(
        prog="ctemp-greedy-vs-beam",
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s DATA --checkpoint CKPT [options] [-- fairseq-generate "
        "decoding options]\n       %(prog)s compare --help",
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("data", metavar="DATA", help="binarized data (fairseq-preprocess --destdir)")
    parser.add_argument("--checkpoint", "--path", required=True, help="checkpoint (a.pt:b.pt: an ensemble)")
    parser.add_argument("--beam", type=int, default=5, help="beam size of the beam system (default 5)")
    parser.add_argument("--lenpen", type=float, default=1.0, help="length penalty of the beam system")
    parser.add_argument("--subset", default="test", help="subset to decode and score (default test)")
    parser.add_argument("--ref", help="raw reference file of --subset (detokenised scoring)")
    parser.add_argument("--temperature", type=float, help="decoding temperature (default: the training T)")
    parser.add_argument("--sacrebleu-tokenize", help="BLEU tokenizer (default: none; 13a with --ref)")
    parser.add_argument(
        "--grid-beams",
        type=arguments.distinct_integers,
        help="e.g. 2,4,6,8,10,12: pick beam and lenpen on dev",
    )
    parser.add_argument("--grid-lenpens", type=arguments.distinct_numbers, help="e.g. 0.6,0.8,1.0,1.2,1.4")
    parser.add_argument("--dev-subset", help=f"subset the grid decodes (default {Request.dev_subset})")
    parser.add_argument("--dev-ref", help="raw reference file of --dev-subset")
    parser.add_argument("--save-dir", help="write greedy.hyp, beam.hyp, ref (and the grid's .hyp) here")
    parser.add_argument("--json", help="write all numbers and the signatures here (must not exist)")
    parser.add_argument(
        "--no-progress-bar", action="store_true", help="no progress bars (none off a terminal)"
    )
    args = parser.parse_args(own)
    if args.dev_subset is not None and not (args.grid_beams or args.grid_lenpens):
        parser.error("--dev-subset is only used with --grid-beams / --grid-lenpens")
    try:
        request = Request(
            args.data,
            args.checkpoint,
            beam=args.beam,
            subset=args.subset,
            extra_args=extra,
            lenpen=args.lenpen,
            ref=args.ref,
            temperature=args.temperature,
            tokenize=args.sacrebleu_tokenize,
            grid_beams=args.grid_beams,
            grid_lenpens=args.grid_lenpens,
            dev_subset=Request.dev_subset if args.dev_subset is None else args.dev_subset,
            dev_ref=args.dev_ref,
            save_dir=args.save_dir,
            json_path=args.json,
        )
        run_greedy_vs_beam(request, progress=not args.no_progress_bar)
    except UsageError as e:
        parser.error(str(e))


if __name__ == "__main__":
    main()
