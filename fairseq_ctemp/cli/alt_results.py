"""Tables and plots of ALT sweeps (ctemp-alt-sweep), shaped like the paper's.

    ctemp-alt-results [--work runs/alt] [--out WORK/results] [--experiments NAME,...] [--variants V,...]

--experiments and --variants report a part of a working directory that holds several sweeps (e.g.
one seed's runs of some variants: --experiments en-vi.mini.spm2000.n4000.seed2 --variants
transformer,ct_transformer); the comparisons of a variant against its baseline keep the baseline's
numbers even when the baseline's own runs are left out.

Writes OUT/ (regenerated as a whole, replaced only once complete; an existing OUT is replaced only
if this tool wrote it, as its .alt_results file records, and holds nothing else):
  alt_results.md   every table below, the plots, sacrebleu signatures, what is missing
  table1.csv       per direction: T_opt (by dev greedy BLEU), greedy and tuned-beam BLEU of T_opt
                   and of T=1, paired bootstrap p-values, greedy / beam 4 / beam 10 decoding seconds
  table34.csv      per direction: the best greedy BLEU (picked on dev) with softmax tempering,
                   label smoothing and SEM alone and combined (the paper's Tables 3 and 4)
  runs.csv         every run: variant, T, LS, SEM, seed, updates, stop reason, dev/test greedy and
                   beam BLEU, chrF
  variants.csv     (a sweep with --variants) each model variant against its baseline's T=1 run
                   (the transformer; sact_lstm: lstm): greedy and beam BLEU, chrF, paired
                   bootstrap p-values
  table1_posthoc.csv   Table 1 with the row T=1 + post-hoc t*: dev NLL and ECE of each system
  reliability.<experiment>.png   reliability diagrams of T=1, T_opt and T=1 + post-hoc t*
  systems.csv      per system (T=1, T_opt, T=1 + post-hoc t*, each variant) and seed: greedy, beam
                   and tuned-beam BLEU and chrF, dev ECE and NLL
  systems.<setup>.png            those side by side, a marker per seed (setup: the experiment
                                 without its .seed<N>)
  bleu_vs_T.<experiment>.png     greedy and beam BLEU against T (Figure 1), per LS/SEM group; the
                                 other variants as points at T=1
  bleu_vs_LS.<experiment>.png, bleu_vs_SEM.<experiment>.png   (when swept; Figures 2 and 3)
  curves.<experiment>.png        learning curves: validation BLEU, dev and train NLL against
                                 updates, per T and variant
  curves.<experiment>.csv        their points: run, label, finished, series, updates, value
  entropy.<experiment>.png       training entropy of softmax(D/T) and of softmax(D) (Figure 4)
  gnorm.<experiment>.png         training gradient norm (Figure 5)
Numbers are on the test set when the data has one, else on dev (marked "dev").
"""

import argparse
import glob
import os

from .. import plotting
from ..alt.common import AltError, run_main, say
from ..alt.results import NO_TABLE1, check_out, load, replace_dir, report, select
from ..alt.sections import markdown_table
from . import arguments


def main(argv=None):
    """ctemp-alt-results (python -m fairseq_ctemp.cli.alt_results)."""
    return run_main(results_main, argv)


def results_main(argv=None):
    parser = argparse.ArgumentParser(
        prog="ctemp-alt-results",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--work", default=os.environ.get("ALT_WORK", "runs/alt"), help="(env ALT_WORK)")
    parser.add_argument(
        "--out", help="default WORK/results; an existing one is replaced only if this tool wrote it"
    )
    parser.add_argument(
        "--experiments",
        type=arguments.names,
        help="only these experiments of WORK/sweep (comma-separated directory names; default: all)",
    )
    parser.add_argument(
        "--variants",
        type=arguments.names,
        help="only the runs of these model variants (comma-separated, as the sweep's --variants; "
        "fixed_lstm matches every fixed_lstm:TAU; default: all)",
    )
    args = parser.parse_args(argv)
    if problem := plotting.missing("the plots"):
        raise AltError(problem)
    out = os.path.abspath(args.out or os.path.join(args.work, "results"))
    check_out(out)
    experiments = load(args.work)
    if not experiments:
        raise AltError(f"no sweep in {args.work}/sweep: run ctemp-alt-sweep (examples/alt/sweep.sh) first")
    experiments = select(experiments, args.experiments, args.variants)
    if args.variants and not any(e.runs or e.pending for e in experiments):
        raise AltError(f"--variants: no run of {','.join(args.variants)} in the experiments selected")
    header, rows = replace_dir(out, lambda tmp: report(experiments, tmp))
    print(markdown_table(header, rows) if rows else f"Table 1: {NO_TABLE1} (see runs.csv)")
    written = ["table1.csv", "table34.csv", "runs.csv"] + (
        ["variants.csv"] if os.path.exists(os.path.join(out, "variants.csv")) else []
    )
    say(
        f"wrote {out}/alt_results.md, {', '.join(written)} and "
        f"{len(glob.glob(os.path.join(out, '*.png')))} plots"
    )


if __name__ == "__main__":
    main()
