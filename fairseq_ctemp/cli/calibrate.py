"""Post-hoc temperature scaling: NLL and calibration (ECE) of a checkpoint on a subset, teacher
forced, at the temperature it decodes at and at the fitted t* = argmin_t NLL (Guo et al., 2017).

    ctemp-calibrate DATA_BIN --user-dir fairseq_ctemp --path CKPT [--gen-subset valid] \\
        [--json OUT.json] [--plot OUT.png] [--write-checkpoint NEW.pt] [fairseq options]

The task and its options come from the checkpoint; fairseq's data options (--task, --source-lang,
--max-tokens, --batch-size, --cpu, ...) replace them; those it would ignore (--num-workers,
--valid-subset, --optimizer, --seed, ...) and --criterion (the checkpoint's) are refused. Every target token counts (EOS included, padding excluded). --write-checkpoint writes a copy of CKPT that every decoding path decodes at t*
by default (an explicit --temperature still replaces it). Outputs are never overwritten.
Definitions and the JSON keys: docs/calibration.md.
"""

import argparse
import dataclasses
import json
import os
import sys

from .. import calibration, outputs, plotting
from ..calibration import CalibrationError, loading
from ..calibration.checkpoint import check_output, check_writable

OWN_OPTIONS = ("path", "json", "plot", "write_checkpoint", "report_subset")
OUTPUTS = (("json", "--json"), ("plot", "--plot"), ("write_checkpoint", "--write-checkpoint"))
# fairseq's dataset options that calibration does not read, and the value it works as (None: any):
# refused when given otherwise, rather than ignored (every sentence of the subset is scored).
UNUSED_DATASET_OPTIONS = {
    "num_workers": 0,
    "required_batch_size_multiple": 1,
    **dict.fromkeys(
        ("valid_subset", "combine_valid_subsets", "ignore_unused_valid_subsets", "max_tokens_valid")
        + ("validate_interval", "validate_interval_updates", "validate_after_updates", "disable_validation")
        + ("fixed_validation_seed", "max_valid_steps", "curriculum", "num_shards", "shard_id")
        + ("grouped_shuffling", "update_epoch_batch_itr", "update_ordered_indices_seed")
    ),
}

# fairseq's options of its parser that calibration has no use for (it trains, decodes and logs
# nothing): the registries' choices, and every common option but these (--fp16 / --bf16: refused
# apart). --criterion and its options are the checkpoint's, refused too: check_not_taken.
UNUSED_CHOICES = ("optimizer", "lr_scheduler", "scoring", "tokenizer", "bpe")
USED_COMMON = ("cpu", "user_dir", "no_progress_bar")


def add_own_options(parser, required=True):
    group = parser.add_argument_group("ctemp-calibrate")
    group.add_argument("--path", metavar="CKPT", required=required, help="the checkpoint to calibrate")
    group.add_argument("--json", metavar="OUT.json", help="write every number here (must not exist)")
    group.add_argument(
        "--report-subset",
        metavar="SUBSET",
        help="also report NLL and ECE at t and at t* on this subset, which t* is not fitted on "
        "(--gen-subset is): what the scaling does for unseen text (e.g. test)",
    )
    group.add_argument(
        "--plot", metavar="OUT.png", help="draw the reliability diagrams, before and at t* (must not exist)"
    )
    group.add_argument(
        "--write-checkpoint",
        metavar="NEW.pt",
        help="write a copy of CKPT that decodes at t* by default (must not exist)",
    )


def fairseq_parser(task):
    """fairseq's parser for ``task`` (its data options and the dataset / batching ones) and ours."""
    from fairseq import options

    parser = options.get_parser("ctemp-calibrate", default_task=task)
    parser.prog, parser.description = "ctemp-calibrate", __doc__.split("\n\n")[0]
    parser.epilog, parser.formatter_class = __doc__.split("\n\n", 1)[1], argparse.RawDescriptionHelpFormatter
    options.add_dataset_args(parser, gen=True)
    parser.set_defaults(gen_subset="valid")
    add_own_options(parser)
    return parser


def check_outputs(known):
    """Every output can be created (before any work), and no two are one file."""
    paths = {}
    for key, option in OUTPUTS:
        path = getattr(known, key)
        if path is None:
            continue
        check_output(path, option)
        for other in (known.path, *paths):
            if other is not None and os.path.realpath(path) == os.path.realpath(other):
                raise CalibrationError(f"{option} {path} is also {paths.get(other, '--path')}")
        paths[path] = option
    if known.plot and (problem := plotting.missing("--plot's diagrams")):
        raise CalibrationError(problem)


def parse(argv):
    """(args, fairseq overrides, checkpoint state): checks made before the model is built."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    add_own_options(pre, required=False)
    pre.add_argument("--task")
    pre.add_argument("--batch-size", "--max-sentences", type=int)
    pre.add_argument("--max-tokens", type=int)
    known, _ = pre.parse_known_args(argv)
    for option, value in (("--batch-size", known.batch_size), ("--max-tokens", known.max_tokens)):
        if value is not None and value < 1:  # fairseq would batch nothing, after loading the model
            raise CalibrationError(f"{option} must be >= 1, got {value}")
    state = None
    if known.path is not None and not {"-h", "--help"} & set(argv):
        check_outputs(known)
        state = loading.load_state(known.path)
        if known.write_checkpoint:
            check_writable(state, known.path)
    task = known.task or (loading.task_of(state) if state else "translation")
    from fairseq import options

    args = options.parse_args_and_arch(fairseq_parser(task), argv)
    explicit = options.parse_args_and_arch(fairseq_parser(task), argv, suppress_defaults=True)
    if args.fp16 or args.bf16 or args.memory_efficient_fp16:
        raise CalibrationError("--fp16 / --bf16 are not supported: the model runs in float32 here")
    check_not_taken(explicit)
    check_unused(explicit)
    overrides = {
        k: v for k, v in vars(explicit).items() if k not in (*OWN_OPTIONS, "data", "task", "user_dir")
    }
    return args, overrides, state


def check_not_taken(explicit):
    """--criterion (with it, its options: --softmax-temperature, ...) would replace the checkpoint's,
    which the model was trained with and which gives the temperature it is scored at; the options
    of UNUSED_CHOICES and CommonConfig it would ignore. Each refused in one line."""
    from fairseq.dataclass.configs import CommonConfig

    if "criterion" in vars(explicit):
        raise CalibrationError(
            f"--criterion {explicit.criterion}: the criterion and its options are the checkpoint's, what "
            "it was trained with (its temperature comes from them); ctemp-calibrate reads them from --path"
        )
    common = [f.name for f in dataclasses.fields(CommonConfig) if f.name not in USED_COMMON]
    for name in (*UNUSED_CHOICES, *common):
        if name in vars(explicit):
            raise CalibrationError(
                f"--{name.replace('_', '-')} is a fairseq option ctemp-calibrate does not use: it "
                "trains, decodes and logs nothing"
            )


def check_unused(explicit):
    """A fairseq dataset option given that calibration would ignore (``explicit``: the options
    given) is refused in one line."""
    for name, works_as in UNUSED_DATASET_OPTIONS.items():
        if name in vars(explicit) and getattr(explicit, name) != works_as:
            option = "--" + name.replace("_", "-")
            note = f" (it works as {option} {works_as})" if works_as is not None else ""
            raise CalibrationError(
                f"{option} is a fairseq option ctemp-calibrate does not use{note}: it scores every "
                "sentence of --gen-subset, batched by --max-tokens / --batch-size alone"
            )


def percent(x):
    return "-" if x is None else f"{100 * x:.1f}"


def summary(result, files):
    """The one-screen report."""
    r = result
    if r.temperature_calibrated is not None:
        rule = "decoding rule (recorded t*)"
    elif r.temperature_trained is not None:
        rule = "decoding rule (tempered_ce T)"
    else:
        rule = "decoding rule"
    lines = [
        f"{r.checkpoint} on {r.subset} of {r.data}: {r.samples} samples, {r.tokens} target tokens "
        f"(EOS included), top-1 accuracy {percent(r.accuracy)}%"
        + (f", {r.samples_skipped} samples skipped (too long)" if r.samples_skipped else ""),
        f"{'':<28} {'t':>9} {'NLL nats/tok':>13} {'ECE %':>7}",
        f"{rule:<28} {r.decoding_temperature:>9.4f} {r.nll:>13.4f} {percent(r.ece):>7}",
        f"{'fitted t*':<28} {r.fitted_temperature:>9.4f} {r.nll_fitted:>13.4f} {percent(r.ece_fitted):>7}",
        f"reliability ({calibration.N_BINS} bins): tokens, accuracy %, mean confidence %",
        f"  {'confidence':<14} {f'at t={r.decoding_temperature:.4g}':>24}   {f'at t*={r.fitted_temperature:.4g}':>24}",
    ]
    for before, after in zip(r.bins, r.bins_fitted):
        if before["count"] or after["count"]:
            lo, hi = before["range"]
            cells = [
                f"{b['count']:>8} {percent(b['accuracy']):>7} {percent(b['confidence']):>7}"
                for b in (before, after)
            ]
            lines.append(f"  [{lo:.2f}, {hi:.2f}{']' if hi == 1 else ')'}   {cells[0]}   {cells[1]}")
    if r.held_out is not None:
        h = r.held_out
        lines += [
            f"held out: {h.subset} ({h.samples} samples, {h.tokens} target tokens), which t* was not fitted on:",
            f"{'  decoding rule':<28} {r.decoding_temperature:>9.4f} {h.nll:>13.4f} {percent(h.ece):>7}",
            f"{'  fitted t*':<28} {r.fitted_temperature:>9.4f} {h.nll_fitted:>13.4f} {percent(h.ece_fitted):>7}",
        ]
    lines.append(f"signature: {r.signature} ({r.passes} passes)")
    for option, path in files:
        lines.append(f"wrote {option} {path}")
    return "\n".join(lines)


def plot(result, path, made):
    """Reliability diagrams at the decoding temperature and at t*, side by side, into path (which
    goes into made once this creates it)."""
    plt = plotting.pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(9, 4.4), sharey=True)
    panels = (
        (result.bins, result.decoding_temperature, result.ece, result.nll, "decoding rule"),
        (result.bins_fitted, result.fitted_temperature, result.ece_fitted, result.nll_fitted, "fitted t*"),
    )
    for ax, (bins, t, ece, nll, name) in zip(axes, panels):
        calibration.draw_reliability(ax, bins)
        ax.set_title(f"{name}: t={t:.4g}, ECE {100 * ece:.1f}%, NLL {nll:.3f}", fontsize=9)
    axes[0].set_ylabel("accuracy")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(
        f"{os.path.basename(result.checkpoint)} on {result.subset} ({result.tokens} tokens)", fontsize=10
    )
    fig.tight_layout()
    with open(path, "xb") as f:  # "x": not even a file created meanwhile
        made.append(path)
        fig.savefig(f, format="png", dpi=120)
    plt.close(fig)


def write_outputs(args, result):
    """--json, --plot, --write-checkpoint: [(option, what was written)]. If one cannot be written
    (a full disk, no permission), those this run made are removed again and the error names it."""
    files, option, path = [], None, None
    try:
        with outputs.all_or_none() as made:
            if args.json:
                option, path = "--json", args.json
                with open(path, "x", encoding="utf-8") as f:
                    made.append(path)
                    json.dump(result.to_dict(), f, indent=2)
                    f.write("\n")
                files.append((option, path))
            if args.plot:
                option, path = "--plot", args.plot
                plot(result, path, made)
                files.append((option, path))
            if args.write_checkpoint:
                option, path = "--write-checkpoint", args.write_checkpoint
                t = result.fitted_temperature
                calibration.write_calibrated_checkpoint(args.path, path, t, result.signature)
                made.append(path)  # only now: written whole or not at all, never over another file
                files.append((option, f"{path} (decodes at t*={t:g})"))
    except (OSError, RuntimeError) as e:  # (torch.save reports a full disk as RuntimeError)
        raise CalibrationError(f"{option} {outputs.not_written(path, e, made)}") from None
    return files


def run(argv):
    args, overrides, state = parse(argv)
    result = calibration.calibrate(
        args.path,
        args.data,
        args.gen_subset,
        task=args.task,
        overrides=overrides,
        max_tokens=args.max_tokens,
        batch_size=args.batch_size,
        skip_invalid_size=args.skip_invalid_size_inputs_valid_test,
        cpu=args.cpu,
        progress=not args.no_progress_bar,
        state=state,
        report_subset=args.report_subset,
    )
    files = write_outputs(args, result)
    print(summary(result, files))
    return result


def main(argv=None):
    """Console script: errors end the program with one line and exit status 1."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        run(argv)
    except CalibrationError as e:
        sys.exit(f"ctemp-calibrate: error: {e}")


if __name__ == "__main__":
    main()
