"""The benchmarks' --json report: the option, its refusal of an existing file, the writing. Free
of torch, so that trace_report.py starts without it."""

import json
import os


def add_json_option(p):
    p.add_argument(
        "--json",
        metavar="PATH",
        help="also write the results as JSON to PATH (refused if it exists); make gpu-check reads it",
    )


def check_json_target(p, args):
    """Refuse an existing --json target before any work (a finished result is never overwritten)."""
    if args.json is not None and os.path.lexists(args.json):
        p.error(f"--json {args.json} exists; refusing to overwrite it")


def write_json(path, result):
    """The results of one benchmark run (plain dicts, numbers and strings) as JSON. A file cut short
    (a full disk, an interruption) is removed again: the rerun would refuse it."""
    if path is None:
        return
    made = False
    try:
        with open(path, "x", encoding="utf-8") as f:
            made = True
            json.dump(result, f, indent=2)
            f.write("\n")
    except BaseException:
        if made:
            os.remove(path)
        raise
