"""The systems of ALT sweeps over their seeds, each against a baseline with the seed as the unit.

    ctemp-alt-seeds --runs FILE[@SEED] [FILE ...] --output PREFIX [--variants V,...]
                    [--temperatures T,...] [--baseline transformer] [--split dev] [--force]
    ctemp-alt-seeds --systems FILE [FILE ...] --output PREFIX [--force]

Reads the runs.csv files that ctemp-alt-results wrote (one per working directory: seeds trained
apart, or on machines that are gone, are compared from their files) and writes
  PREFIX.csv   per metric (greedy BLEU, beam BLEU at the sweep's beam) and system (variant at T):
               its seeds, the BLEU of each, their mean, min and max, the difference of the means to
               the baseline's and its 95 % confidence interval, Welch's t-test on the per-seed BLEU
               against the baseline's (t, degrees of freedom, p) and the verdict: "higher" or
               "lower" only with at least 3 seeds on each side and p < 0.05, else "inconclusive" (or
               "no test" and why); and, as a check of the verdict, the paired t-test over the seeds
               that the system and the baseline both have (their number, t, p; a seed's runs share
               their batch order)
  PREFIX.md    the same as a markdown table, and the files it read
(--force replaces them, never a file it reads).
Every run compared must be of one setting (the experiment without its .seed<N>, direction, label
smoothing, SEM, beam size); a system's seed may come from one file only. A file written before
runs.csv had a seed column is given as FILE@SEED. Runs not finished (or, with --split test, not
scored on a test split) are left out, and named.

With --systems, the systems.csv files of ctemp-alt-results instead, the only place of the beam
tuned on dev and of the post-hoc system (T = 1 decoded at t*): per metric (greedy, beam at the
sweep's beam, tuned beam BLEU) each system that has it against T = 1, as above. Every row must be
of one setup, scored on one split, at one beam size.
"""

import argparse

from .. import inputs
from ..alt.common import AltError, run_main, say
from ..alt.presets import DEFAULT_VARIANT
from ..alt.seeds import Selection, parse_runs_spec, seeds_report
from ..alt.system_seeds import systems_report
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
    files = parser.add_mutually_exclusive_group(required=True)
    files.add_argument("--runs", nargs="+", metavar="FILE[@SEED]", help="runs.csv files")
    files.add_argument(
        "--systems", nargs="+", metavar="FILE", help="systems.csv files (tuned beam, post-hoc)"
    )
    parser.add_argument("--output", required=True, metavar="PREFIX", help="writes PREFIX.csv and PREFIX.md")
    parser.add_argument("--variants", type=arguments.names, help="only these variants (default: all)")
    parser.add_argument("--temperatures", type=arguments.distinct_numbers, help="only these T (default: all)")
    parser.add_argument(
        "--baseline", help=f"the variant whose T=1 runs are the baseline (default: {DEFAULT_VARIANT})"
    )
    parser.add_argument("--split", choices=("dev", "test"), help="the BLEU of this split (default: dev)")
    parser.add_argument("--force", action="store_true", help="replace an existing PREFIX.csv / PREFIX.md")
    args = parser.parse_args(argv)
    if args.systems:
        return compare_systems(args)
    args.baseline, args.split = args.baseline or DEFAULT_VARIANT, args.split or "dev"
    check_output(args.output, args.force, [("--runs", parse_runs_spec(r)[0]) for r in args.runs])
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


def compare_systems(args):
    """--systems: the options of runs.csv's selection do not apply (systems.csv's baseline is T = 1,
    its split the one it was scored on)."""
    for option in ("variants", "temperatures", "baseline", "split"):
        if getattr(args, option) is not None:
            raise AltError(
                f"--{option} applies to --runs only: --systems compares every system against T = 1"
            )
    check_output(args.output, args.force, [("--systems", path) for path in args.systems])
    print("\n".join(systems_report(args.systems, args.output)))
    say(f"wrote {args.output}.csv and {args.output}.md")


def check_output(prefix, force, read):
    """Refuse, before any work, outputs that exist (without --force), that are one of the files
    read, (option, path), (with it) or that cannot be written (inputs.output_problem)."""
    if problem := inputs.output_problem((prefix + ".csv", prefix + ".md"), read, force):
        raise AltError(f"--output: {problem}")


if __name__ == "__main__":
    main()
