#!/usr/bin/env python3
"""Results of the language-model recipes: tables and learning curves from train.sh / evaluate.sh outputs.

  lm_results.py plot  --logs RUN/train.log ... [--labels ...] [--x update|epoch] [--metric ppl] --output curves.png
      validation perplexity (or another valid_* metric) against updates or epochs, one line per run,
      from fairseq's --log-format json logs (train.sh tees them into SAVE_DIR/train.log); with
      --csv FILE.csv also the points, and per epoch the learning rate it trained at.
  lm_results.py table --runs RUNS_DIR --variants softmax ct ... [--eval-suffix _checkpoint_last] --output PREFIX
      PREFIX.md and PREFIX.csv: per variant (RUNS_DIR/<variant>): valid / test perplexity, the
      evaluation guards (evaluated tokens, largest |log sum p| of eval_{valid,test}SUFFIX.json from
      evaluate.sh), parameters, whether early stopping ended the run, its epochs and best epoch,
      updates, training time (and on which devices), the epochs at which a resumed run went on,
      the final training tau statistics, the % of updates clipped, the clip norm and the AR/TAR
      weights.
  lm_results.py tau --dumps RUN/tau_test.tsv ... [--labels ...] --output PREFIX
      PREFIX.md and PREFIX.csv: tau statistics of CT models over a text, from their
      ``ctemp-ct-analysis dump`` TSVs: mean over the vocabulary, tau of the target token (mean, std,
      5th / 95th percentiles), smallest and largest tau of any word at any position.
  lm_results.py protocols --runs RUNS_DIR --variants softmax --output FILE.md
      test perplexity of the same checkpoint under different eval-lm block / context settings
      (RUNS_DIR/<variant>/protocol_<block>_<context>/eval_test_checkpoint_last.json).

  lm_results.py compare --runs RUNS_DIR --variants softmax mos ... [--subset test] --output PREFIX
      PREFIX.md and PREFIX.csv: each variant's perplexity against the first's, with a paired
      bootstrap over the subset's sentences (evaluate.sh's eval_SUBSET.sentences.tsv): the ratio of
      the perplexities, its 95 % interval and the two-sided p-value of "no difference".
  lm_results.py seeds --table PREFIX.csv [MORE.csv ...] [--baseline softmax] --output PREFIX_seeds
      PREFIX_seeds.md and .csv: with the seed as the unit, each row's test perplexity over its
      seeds (the runs variant@N of a table; no @: seed 1), and each row against the baseline:
      the ratio of the geometric means, its 95 % confidence interval and Welch's t-test on the
      per-seed log perplexities (one seed on either side: no test; fewer than 3 seeds on either
      side, or p >= 0.05: inconclusive); and, as a check of that verdict, the paired t-test over
      the seeds both rows have (their number, t, p: one seed's runs share their batch order).

  lm_results.py status --runs RUNS_DIR --variants softmax ct ...
      where each run stands while a recipe trains: evaluated, trained (evaluation to do), training
      or evaluating now (by the holder of its SAVE_DIR lock), unfinished (the recipe's train step
      resumes it) or not started; its epochs, best and last validation
      perplexity, the learning rate of its last epoch and the validations without improvement
      that --patience counts. Printed; nothing is written.

Every command refuses to write over an existing output before any work (--force: replace them, as
the recipes' results steps do when they rebuild their tables from the runs; never a file it reads),
and an output it could not write (in a file, not a folder); the folders of an output are made.

For the temperatures themselves (tau per position, heat maps) see ctemp-ct-analysis. The commands' work
is in the package fairseq_ctemp.lm_results, one module per command; this file is their command line.
"""

import argparse
import logging
import sys

from fairseq_ctemp import inputs
from fairseq_ctemp.lm_results import ResultsError, compare, curves, seeds, status, table, tau

WARNINGS = logging.StreamHandler()  # the package's warnings (a missing run), in this command's words


def build_parser():
    """The subcommands: plot, table, tau, protocols, compare, seeds (each with --force), status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--force", action="store_true", help="replace existing outputs (a results step that rebuilds them)"
    )

    def command(name, help, runs=True, output=True):
        p = sub.add_parser(name, parents=[common], help=help)
        if runs:
            p.add_argument("--runs", required=True, help="the directory of the runs (EXP_DIR/runs)")
        if output:
            p.add_argument("--output", required=True, help="output prefix: writes PREFIX.md and PREFIX.csv")
        return p

    add_plot(command("plot", "validation curves from fairseq json logs -> PNG", runs=False, output=False))
    t = command("table", "results table (markdown + CSV) of several runs")
    add_variants(t)
    t.add_argument(
        "--eval-suffix",
        default="",
        help="'' for eval_test.json, _checkpoint_last for eval_test_checkpoint_last.json",
    )
    t.set_defaults(run=lambda a: table.table(a.runs, a.variants, a.eval_suffix, a.output))
    u = command("tau", "tau statistics of CT models (markdown + CSV) from ct-analysis dumps", runs=False)
    u.add_argument("--dumps", nargs="+", required=True, help="ctemp-ct-analysis dump TSVs, one per model")
    u.add_argument("--labels", nargs="+", help="one label per dump (default: its directory's name)")
    u.set_defaults(run=lambda a: tau.tau(a.dumps, a.labels, a.output))
    r = command("protocols", "test ppl of one checkpoint under several eval-lm settings")
    add_variants(r)
    r.set_defaults(run=lambda a: table.protocols(a.runs, a.variants, a.output))
    add_compare(
        command("compare", "perplexities against the first variant's, paired bootstrap over sentences")
    )
    d = command(
        "seeds", "each row over its seeds, and against a baseline with the seed as the unit", runs=False
    )
    d.add_argument(
        "--table",
        nargs="+",
        required=True,
        help="the CSV of `table` (runs named variant@SEED); several: their runs together, each seed of a row once",
    )
    d.add_argument(
        "--baseline", default="softmax", help="the row the others are compared with (default softmax)"
    )
    d.set_defaults(run=lambda a: seeds.seeds(a.table, a.baseline, a.output))
    s = command(
        "status", "where each run stands while a recipe trains (printed; nothing written)", output=False
    )
    add_variants(s)
    s.set_defaults(run=lambda a: status.status(a.runs, a.variants))
    return parser


def add_variants(p, help="the runs to read (directory names: variant or variant@SEED)"):
    p.add_argument("--variants", nargs="+", required=True, help=help)


def add_plot(p):
    p.add_argument("--logs", nargs="+", required=True, help="fairseq json training logs (train.log)")
    p.add_argument("--labels", nargs="+", help="one legend label per log (default: its directory's name)")
    p.add_argument("--x", choices=["update", "epoch"], default="epoch", help="the x axis (default epoch)")
    p.add_argument("--metric", default="ppl", help="valid_<metric> to plot (ppl, nll_loss, tau_mean, ...)")
    p.add_argument("--title", help="the plot's title (default: none)")
    p.add_argument("--output", required=True, help="the PNG to write")
    p.add_argument(
        "--csv",
        help="also write the points (per epoch also the lr and the %% of updates clipped) to this .csv file",
    )
    p.set_defaults(run=lambda a: curves.plot(a.logs, a.labels, a.x, a.metric, a.title, a.output, a.csv))


def add_compare(p):
    add_variants(p, help="the baseline first, then the variants")
    p.add_argument("--subset", default="test", help="the subset the runs were scored on (default test)")
    p.add_argument("--samples", type=int, default=10000, help="bootstrap resamples (default %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="bootstrap seed (default 1)")
    p.set_defaults(run=lambda a: compare.compare(a.runs, a.variants, a.subset, a.samples, a.seed, a.output))


def main(argv=None):
    args = build_parser().parse_args(argv)
    where = f"lm_results.py {args.command}"
    for option in ("variants", "logs", "dumps"):  # one run's row, line or statistics twice
        given = getattr(args, option, None) or []
        if twice := sorted({v for v in given if given.count(v) > 1}):
            sys.exit(f"{where}: error: --{option}: {', '.join(twice)} given twice; give each run once")
    read = [(f"--{name}", path) for name in ("table", "logs", "dumps") for path in getattr(args, name, ())]
    if problem := inputs.output_problem(outputs(args), read, args.force):
        sys.exit(f"{where}: error: {problem}")
    WARNINGS.setStream(sys.stderr)
    WARNINGS.setFormatter(logging.Formatter(f"{where}: warning: %(message)s"))
    logger = logging.getLogger("fairseq_ctemp.lm_results")
    logger.addHandler(WARNINGS)  # once, however often main runs in a process
    logger.propagate = False
    try:
        args.run(args)
    except ResultsError as e:
        sys.exit(f"{where}: error: {e}")


def outputs(args):
    """The files a command writes."""
    if args.command == "plot":
        return [args.output] + ([args.csv] if args.csv else [])
    if args.command == "protocols":
        return [args.output]
    if args.command == "status":
        return []
    return [args.output + ".md", args.output + ".csv"]


if __name__ == "__main__":
    main()
