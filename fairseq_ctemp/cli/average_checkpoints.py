"""Average the parameters of several fairseq checkpoints (upstream's scripts/average_checkpoints.py,
which fairseq's packages do not install), loading them through torch's safe ``weights_only`` path
with the globals allowlisted by ``fairseq_ctemp.compat``.

    ctemp-average-checkpoints --inputs ckpt/ --num-epoch-checkpoints 10 --output ckpt/checkpoint_avg.pt
    ctemp-average-checkpoints --inputs ckpt/checkpoint8.pt ckpt/checkpoint9.pt --output avg.pt

Everything but the parameters (cfg, optimizer history, ...) is copied from the first input, as
upstream does; an existing --output is never overwritten. Inputs must be distinct checkpoints of
one model (same parameter names and shapes, finite values) trained with one criterion at one
softmax temperature: a tempered_ce checkpoint decodes at the T in its cfg, so an average of
different temperatures would silently decode at the first input's. --allow-mixed-temperatures
averages them anyway, says so, and records the inputs' criteria and temperatures in the output
("ctemp_average"). A checkpoint calibrated by ctemp-calibrate is refused: its t* fits its own
parameters; calibrate the average instead.
"""

import argparse
import os

from ..averaging import AverageError, last_n_checkpoints, write_average


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="ctemp-average-checkpoints",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--inputs",
        nargs="+",
        required=True,
        help="checkpoint files, or one directory with --num-*-checkpoints",
    )
    parser.add_argument("--output", required=True, help="where to write the average (must not exist)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--num-epoch-checkpoints", type=int, help="average the last N checkpointE.pt")
    which.add_argument("--num-update-checkpoints", type=int, help="average the last N checkpoint_E_U.pt")
    parser.add_argument(
        "--checkpoint-upper-bound", type=int, help="ignore checkpoints after this epoch (or update) number"
    )
    parser.add_argument(
        "--allow-mixed-temperatures",
        action="store_true",
        help="average checkpoints of different criteria / softmax temperatures (the "
        "average decodes at the first input's T)",
    )
    args = parser.parse_args(argv)

    try:
        count = (
            args.num_epoch_checkpoints
            if args.num_epoch_checkpoints is not None
            else args.num_update_checkpoints
        )
        if count is not None:
            option = (
                "--num-epoch-checkpoints"
                if args.num_update_checkpoints is None
                else "--num-update-checkpoints"
            )
            if count < 1:
                raise AverageError(f"{option} must be >= 1, got {count}")
            if len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
                raise AverageError(f"{option} needs exactly one directory in --inputs")
            paths = last_n_checkpoints(
                args.inputs[0], count, args.num_update_checkpoints is not None, args.checkpoint_upper_bound
            )
        elif args.checkpoint_upper_bound is not None:
            raise AverageError("--checkpoint-upper-bound only goes with --num-*-checkpoints")
        else:
            paths = args.inputs
        write_average(paths, args.output, args.allow_mixed_temperatures)
    except AverageError as e:
        parser.error(str(e))


if __name__ == "__main__":
    main()
