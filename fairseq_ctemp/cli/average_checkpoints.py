"""Average the parameters of several fairseq checkpoints (upstream's scripts/average_checkpoints.py,
which fairseq's packages do not install), loading them through torch's safe ``weights_only`` path
with the globals allowlisted by ``fairseq_ctemp.compat``.

    ctemp-average-checkpoints --inputs ckpt/ --num-epoch-checkpoints 10 --output ckpt/checkpoint_avg.pt
    ctemp-average-checkpoints --inputs ckpt/checkpoint8.pt ckpt/checkpoint9.pt --output avg.pt

Everything but the parameters (cfg, optimizer history, ...) is copied from the first input, as
upstream does; an existing --output is never overwritten.
"""
import argparse
import collections
import os
import re
import sys

import torch

import fairseq_ctemp  # noqa: F401  (registers the safe globals for torch.load)


def last_n_checkpoints(directory, n, update_based=False, upper_bound=None):
    """Paths of the n newest checkpointN.pt (or checkpoint_E_U.pt with update_based) in directory."""
    pattern = re.compile(r"checkpoint_\d+_(\d+)\.pt" if update_based else r"checkpoint(\d+)\.pt")
    found = []
    for name in os.listdir(directory):
        match = pattern.fullmatch(name)
        if match and (upper_bound is None or int(match.group(1)) <= upper_bound):
            found.append((int(match.group(1)), os.path.join(directory, name)))
    if len(found) < n:
        raise SystemExit(f"error: found {len(found)} checkpoints in {directory}, need {n}")
    return [path for _, path in sorted(found, reverse=True)[:n]]


def average_checkpoints(paths):
    """A fairseq checkpoint state whose "model" is the element-wise mean of the inputs' "model"."""
    sums, dtypes, first_state, keys = collections.OrderedDict(), {}, None, None
    for path in paths:
        state = torch.load(path, map_location="cpu")  # weights_only by default on torch >= 2.6
        params = state["model"]
        if keys is None:
            first_state, keys = state, list(params.keys())
        elif list(params.keys()) != keys:
            raise SystemExit(f"error: {path} has different parameters than {paths[0]}")
        for key in keys:
            tensor = params[key]
            dtypes.setdefault(key, tensor.dtype)
            if tensor.is_floating_point():
                tensor = tensor.double()  # accumulate exactly enough for any number of inputs
            sums[key] = tensor.clone() if key not in sums else sums[key] + tensor
    averaged = collections.OrderedDict()
    for key, total in sums.items():
        mean = total / len(paths) if total.is_floating_point() else total // len(paths)
        averaged[key] = mean.to(dtypes[key])
    first_state["model"] = averaged
    return first_state


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", nargs="+", required=True,
                        help="checkpoint files, or one directory with --num-*-checkpoints")
    parser.add_argument("--output", required=True, help="where to write the average (must not exist)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--num-epoch-checkpoints", type=int, help="average the last N checkpointE.pt")
    which.add_argument("--num-update-checkpoints", type=int, help="average the last N checkpoint_E_U.pt")
    parser.add_argument("--checkpoint-upper-bound", type=int,
                        help="ignore checkpoints after this epoch (or update) number")
    args = parser.parse_args(argv)

    count = args.num_epoch_checkpoints or args.num_update_checkpoints
    if count is not None:
        if len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
            parser.error("--num-*-checkpoints needs exactly one directory in --inputs")
        if count < 1:
            parser.error(f"--num-*-checkpoints must be >= 1, got {count}")
        paths = last_n_checkpoints(args.inputs[0], count, args.num_update_checkpoints is not None,
                                   args.checkpoint_upper_bound)
    else:
        paths = args.inputs
    if os.path.exists(args.output):
        parser.error(f"--output {args.output} already exists; refusing to overwrite it")
    print(f"averaging {len(paths)} checkpoints: {' '.join(paths)}", file=sys.stderr)
    state = average_checkpoints(paths)
    tmp = args.output + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, args.output)  # never leave a half-written average behind
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
