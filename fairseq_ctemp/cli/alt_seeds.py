"""The systems of ALT sweeps over their seeds, each against a baseline with the seed as the unit.

    ctemp-alt-seeds --runs FILE[@SEED] [FILE ...] --output PREFIX [--variants V,...]
                    [--temperatures T,...] [--baseline transformer] [--split dev] [--force]

Reads the runs.csv files that ctemp-alt-results wrote (one per working directory: seeds trained
apart, or on machines that are gone, are compared from their files) and writes
  PREFIX.csv   per metric (greedy BLEU, beam BLEU at the sweep's beam) and system (variant at T):
               its seeds, the BLEU of each, their mean, min and max, the difference of the means
               to the baseline's, Welch's t-test on the per-seed BLEU against the baseline's (t,
               degrees of freedom, p) and the verdict: "higher" or "lower" only with at least 3
               seeds on each side and p < 0.05, else "inconclusive" (or "no test" and why); and,
               as a check of the verdict, the paired t-test over the seeds that the system and
               the baseline both have (their number, t, p; a seed's runs share their batch order)
  PREFIX.md    the same as a markdown table, and the files it read
(--force replaces them, never a --runs file).
Every run compared must be of one setting (the experiment without its .seed<N>, direction, label
smoothing, SEM, beam size); a system's seed may come from one file only. A file written before
runs.csv had a seed column is given as FILE@SEED. Runs not finished (or, with --split test, not
scored on a test split) are left out, and named.
"""

import argparse

from .. import inputs
from ..alt.common import AltError, run_main, say
from ..alt.presets import DEFAULT_VARIANT
from ..alt.seeds import Selection, parse_runs_spec, seeds_report
from . import arguments


def main(argv=None):
    """ctemp-alt-seeds (python -m fairseq_ctemp.cli.alt_seeds)."""
    return run_main(seeds_main, argv)


def seeds_main(argv=None):
    parser = argparse.ArgumentParser(
        prog="ctemp-alt-seeds",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", nargs="+", required=True, metavar="FILE[@SEED]", help="runs.csv files")
    parser.add_argument("--output", required=True, metavar="PREFIX", help="writes PREFIX.csv and PREFIX.md")
    parser.add_argument("--variants", type=arguments.names, help="only these variants (default: all)")
    parser.add_argument("--temperatures", type=arguments.numbers, help="only these T (default: all)")
    parser.add_argument(
        "--baseline", default=DEFAULT_VARIANT, help="the variant whose T=1 runs are the baseline"
    )
    parser.add_argument("--split", choices=("dev", "test"), default="dev", help="the BLEU of this split")
    parser.add_argument("--force", action="store_true", help="replace an existing PREFIX.csv / PREFIX.md")
    args = parser.parse_args(argv)
    check_output(args.output, args.force, args.runs)
    if args.variants and args.baseline not in args.variants:
        raise AltError(f"--variants {','.join(args.variants)} leaves out the --baseline {args.baseline}")
    if args.temperatures and 1.0 not in args.temperatures:
        raise AltError("--temperatures must include 1: the baseline is its T=1 runs")
    selection = Selection(args.variants, args.temperatures, args.baseline, args.split)
    lines, left_out = seeds_report(args.runs, selection, args.output)
    for why, run in left_out:
        say(f"left out, {why}: {run}")
    print("\n".join(lines))
    say(f"wrote {args.output}.csv and {args.output}.md")


def check_output(prefix, force, runs):
    """Refuse, before any work, outputs that exist (without --force), that are one of the --runs
    files (with it) or that cannot be written (inputs.output_problem)."""
    read = [("--runs", parse_runs_spec(r)[0]) for r in runs]
    if problem := inputs.output_problem((prefix + ".csv", prefix + ".md"), read, force):
        raise AltError(f"--output: {problem}")


if __name__ == "__main__":
    main()
