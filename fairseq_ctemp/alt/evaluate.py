"""Decoding and scoring of a run's averaged checkpoint (ctemp-greedy-vs-beam's Python API): greedy
and beam on a subset, or finalize's dev grid, written into a directory that appears only complete."""

import dataclasses
import os

from .. import greedy_vs_beam as gvb
from ..outputs import write_json
from .common import RunFailed, device_args, fresh_dir, read_json, say
from .records import complete, prepared


class Decoder:
    """An averaged checkpoint of an experiment, loaded once (when a decoding of it is still to do)
    for all of its decodings: dev and test of a run, finalize's grid and timings."""

    def __init__(self, exp, checkpoint, device):
        self.exp, self.checkpoint = exp, checkpoint
        self.data = prepared(exp.data)
        # fairseq-generate's options, mapped onto the decoding API (recorded in result.json)
        self.options = (
            [
                "--source-lang",
                exp.src,
                "--target-lang",
                exp.tgt,
                "--remove-bpe",
                self.data.remove_bpe,
            ]
            + ["--batch-size", str(exp.decode_batch)]
            + exp.decode_args
            + device_args(device, training=False)
        )
        self.translator = None

    def greedy_vs_beam(self, out_dir, subset, beam, grid=None):
        """ctemp-greedy-vs-beam (its Python API) into out_dir: greedy and `beam` (or the dev grid's
        best) on `subset`, written under a temporary name and renamed when complete; skipped when
        done."""
        if os.path.exists(os.path.join(out_dir, "result.json")):
            return moved_result(out_dir)
        raw = {
            "valid": os.path.join(self.data.raw, f"dev.{self.exp.tgt}"),
            "test": os.path.join(self.data.raw, f"test.{self.exp.tgt}"),
        }
        say(
            f"  decoding {subset} with {os.path.join(*self.checkpoint.split(os.sep)[-3:])}: greedy and "
            + (f"beams {grid[0]} x lenpens {grid[1]} on dev" if grid else f"beam {beam}")
        )
        tmp = fresh_dir(out_dir + ".tmp")
        try:
            if self.translator is None:
                self.translator = gvb.load_translator(self.data.bin, self.checkpoint, self.options)
            request = gvb.Request(
                self.data.bin,
                self.checkpoint,
                beam=beam,
                subset=subset,
                extra_args=self.options,
                ref=raw[subset],
                tokenize=self.exp.bleu_tokenize,
                grid_beams=grid[0] if grid else None,
                grid_lenpens=grid[1] if grid else None,
                dev_subset="valid",
                dev_ref=raw["valid"] if grid else None,
                save_dir=tmp,
                json_path=os.path.join(tmp, "result.json"),
            )
            gvb.run_greedy_vs_beam(request, translator=self.translator, verbose=False)
        except gvb.UsageError as e:
            raise RunFailed(f"ctemp-greedy-vs-beam: {e}") from None
        if os.path.isdir(out_dir):
            raise RunFailed(f"{out_dir} appeared while decoding; not replacing it")
        os.replace(tmp, out_dir)
        return moved_result(out_dir)


def moved_result(out_dir):
    """The GreedyVsBeam of out_dir, whose result.json names its files under the temporary
    directory they were written to."""
    path = os.path.join(out_dir, "result.json")
    d = read_json(path)
    if d is None:
        raise RunFailed(f"{path}: no such file (an incomplete decoding: move {out_dir} away to decode again)")
    complete(gvb.GreedyVsBeam, d, path, "a result.json of ctemp-greedy-vs-beam")
    result = gvb.GreedyVsBeam.from_dict(d)
    result.files = {k: os.path.join(out_dir, os.path.basename(p)) for k, p in result.files.items()}
    return result


def grid_rows(result):
    return [dataclasses.asdict(system) for system in result.grid]


def paired_test(path, ref, baseline, system, exp):
    """ctemp-greedy-vs-beam compare of two hypothesis files (sacrebleu's paired bootstrap, 1000
    samples) -> path, written once; its JSON."""
    if not os.path.exists(path):
        try:
            write_json(path, gvb.compare_systems(ref, baseline, system, "bs", None, exp.bleu_tokenize))
        except gvb.UsageError as e:
            raise RunFailed(f"significance test: {e}") from None
    return read_json(path)
