"""Translate a binarized subset through fairseq's Python API, as fairseq-generate does.

    translator = Translator("data-bin/alt.en-vi", ["ckpt/checkpoint_avg.pt"])
    out = translator.translate("test", beam=5, lenpen=1.0, post_process="sentencepiece")
    out.hypotheses, out.references, out.temperatures, out.decode_seconds, out.sentences_per_second

The checkpoints are loaded once (the plugin's loader: each model knows its training temperature),
so one Translator serves a whole grid of beams and length penalties. Each ``translate`` builds the
generator with ``task.build_generator`` from a ``GenerationConfig`` and runs ``task.inference_step``
over every sentence of the subset (``required_batch_size_multiple=1``: fairseq's default of 8 would
drop the last batch of another size), then post-processes hypotheses and references like
fairseq_cli/generate.py (its D- and T- lines). ``temperature=None`` decodes every model at its own
temperature (docs/decoding_temperature.md), an explicit value decodes all at that value; the
temperatures used are read from the models themselves.

``decoding_options`` maps the fairseq-generate options that users pass through (after ``--`` in
ctemp-greedy-vs-beam, ``--decode-args`` of the ALT sweep) onto this API.
"""

import argparse
import dataclasses
import logging
import math
import time
import warnings
from typing import List, Optional

import torch
from fairseq import checkpoint_utils, utils
from fairseq.dataclass.configs import GenerationConfig
from fairseq_cli.generate import get_symbols_to_strip_from_output

from . import checkpoint_task, decoding, example_sizes
from .progress import progress_bar

logger = logging.getLogger("fairseq_ctemp.translate")


class TranslateError(Exception):
    """What cannot be translated, and why (the caller adds which option or file)."""


@dataclasses.dataclass
class DecodingOptions:
    """The fairseq-generate options a user may pass through, with fairseq-generate's defaults."""

    source_lang: Optional[str] = None
    target_lang: Optional[str] = None
    cpu: bool = False
    fp16: bool = False
    post_process: Optional[str] = None  # --remove-bpe / --post-process
    max_len_a: float = 0.0
    max_len_b: int = 200
    min_len: int = 1
    batch_size: Optional[int] = None
    max_tokens: Optional[int] = None  # 12000 when neither is given, as fairseq-generate
    num_workers: int = 0  # data-loader processes (fairseq-generate: 1); no effect on the output

    def load_options(self):
        """The keyword arguments of Translator."""
        return {k: getattr(self, k) for k in ("source_lang", "target_lang", "cpu", "fp16")}

    def translate_options(self):
        """The keyword arguments of Translator.translate."""
        names = (
            "post_process",
            "max_len_a",
            "max_len_b",
            "min_len",
            "batch_size",
            "max_tokens",
            "num_workers",
        )
        return {k: getattr(self, k) for k in names}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise TranslateError(message)


def _option_parser():
    p = _Parser(prog="fairseq-generate options", add_help=False, allow_abbrev=False)
    p.add_argument("-s", "--source-lang", dest="source_lang")
    p.add_argument("-t", "--target-lang", dest="target_lang")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--fp16", action="store_true")
    # fairseq-generate: --post-process, alias --remove-bpe, alone meaning subword_nmt ("@@ ")
    p.add_argument("--post-process", "--remove-bpe", dest="post_process", nargs="?", const="subword_nmt")
    p.add_argument("--max-len-a", type=float, default=0.0)
    p.add_argument("--max-len-b", type=int, default=200)
    p.add_argument("--min-len", type=int, default=1)
    p.add_argument("--batch-size", "--max-sentences", dest="batch_size", type=int)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--num-workers", type=int, default=0)
    return p


def allowed_options():
    """The pass-through options, for error messages."""
    return ", ".join(
        "/".join(a.option_strings) + ("" if a.nargs == 0 else " [X]" if a.nargs == "?" else " X")
        for a in _option_parser()._actions
    )


def decoding_options(argv):
    """DecodingOptions from fairseq-generate options (a list of strings); TranslateError names an
    option this API does not take, or a bad value."""
    argv = list(argv)
    options, unknown = _option_parser().parse_known_args(argv)
    if unknown:
        raise TranslateError(
            f"{unknown[0]} is not a decoding option this tool passes on to fairseq's API; "
            f"the options are: {allowed_options()}"
        )
    for name, least in (
        ("batch_size", 1),
        ("max_tokens", 1),
        ("min_len", 1),
        ("max_len_b", 0),
        ("num_workers", 0),
    ):
        value = getattr(options, name)
        if value is not None and value < least:
            raise TranslateError(f"--{name.replace('_', '-')} must be >= {least}, got {value}")
    if not (math.isfinite(options.max_len_a) and options.max_len_a >= 0):
        raise TranslateError(f"--max-len-a must be a finite number >= 0, got {options.max_len_a:g}")
    if options.max_len_a == 0 and options.min_len > options.max_len_b:  # fairseq fails at the first batch
        raise TranslateError(
            f"--min-len {options.min_len} is above the longest output, --max-len-b {options.max_len_b} "
            "(with --max-len-a 0)"
        )
    if problem := post_process_problem("--remove-bpe", options.post_process):
        raise TranslateError(problem)
    return DecodingOptions(**vars(options))


def post_process_problem(option, value):
    """Why fairseq's post-processing (--remove-bpe, --eval-bleu-remove-bpe) cannot take `value`,
    or None: fairseq raises NotImplementedError at the first sentence it post-processes."""
    from fairseq.data.data_utils import post_process

    try:
        post_process("x", value)
    except NotImplementedError:
        return (
            f"{option} {value}: not one of fairseq's post-processing options "
            "(sentencepiece, subword_nmt, @@ , wordpiece, letter, silence, _EOW, none)"
        )
    return None


def length_budget_problem(max_len_a, max_len_b, min_len, shortest, where):
    """Why fairseq's generator would stop at its assertion (min_len <= max_len) on the shortest
    source sentence of `where` (`shortest` tokens, its </s> counted, as fairseq counts it), or None.
    fairseq bounds an output by a * the batch's source length + b: a sentence batched with longer
    ones may pass, so each is held to its own bound, which no batching can then break."""
    most = int(max_len_a * shortest + max_len_b)
    if most >= min_len:
        return None
    return (
        f"--max-len-a {max_len_a:g} --max-len-b {max_len_b} allow at most {most} target tokens for the "
        f"shortest source sentence of {where} ({shortest} tokens with its </s>), fewer than the "
        f"shortest output fairseq allows (--min-len {min_len}): raise --max-len-a or --max-len-b"
    )


@dataclasses.dataclass
class Translation:
    """One decoding of a subset: best hypotheses and references in sentence-id order."""

    subset: str
    beam: int
    lenpen: float
    temperatures: List[float]  # per model: its own (decoding.own_temperature) or the explicit value
    hypotheses: List[str]  # post-processed (fairseq-generate's D- lines)
    scores: List[float]  # the generator's score of each hypothesis (natural log; H- lines: base 2)
    references: List[Optional[str]]  # the target side post-processed, OOVs as <<unk>> (T- lines)
    n_tokens: int  # tokens generated, </s> included (fairseq-generate's count)
    decode_seconds: float  # inside task.inference_step only, as fairseq-generate times it
    wall_seconds: float  # the whole call: batching, decoding, post-processing

    @property
    def n_sentences(self):
        return len(self.hypotheses)

    @property
    def sentences_per_second(self):
        return self.n_sentences / self.decode_seconds

    @property
    def tokens_per_second(self):
        return self.n_tokens / self.decode_seconds


class Translator:
    """An ensemble (one or more checkpoints) loaded once with its task, for any number of decodings."""

    def __init__(self, data, checkpoints, source_lang=None, target_lang=None, cpu=False, fp16=False):
        overrides = {"data": data}
        overrides.update({k: v for k, v in (("source_lang", source_lang), ("target_lang", target_lang)) if v})
        # no validation generator: the tokenizer --eval-bleu builds at model construction is not needed
        overrides["eval_bleu"] = False
        # the task is known from the checkpoint alone: a language model is refused before its task
        # reads DATA (it would look for DATA/dict.txt) and before any model is built
        states = [checkpoint_utils.load_checkpoint_to_cpu(str(path), overrides) for path in checkpoints]
        for path, state in zip(checkpoints, states):
            cfg = checkpoint_task.stored_config(state)
            if checkpoint_task.trains_a_language_model(cfg):
                raise TranslateError(
                    f"{path} is a language model (task {checkpoint_task.trained_task(cfg)}): "
                    "only a translation model's checkpoint translates"
                )
        # the plugin's loader (installed by fairseq_ctemp): each model records its training T; one
        # checkpoint a call, with the state read above (fairseq takes a state for one file only)
        self.models, self.task = [], None
        for path, state in zip(checkpoints, states):
            models, self.cfg, self.task = checkpoint_utils.load_model_ensemble_and_task(
                [str(path)], arg_overrides=overrides, task=self.task, state=state
            )
            self.models.extend(models)
        self.use_cuda = torch.cuda.is_available() and not cpu
        for model in self.models:
            if fp16:
                model.half()
            if self.use_cuda:
                model.cuda()
            model.prepare_for_inference_(argparse.Namespace(generation=GenerationConfig()))
        self._warm = False

    def temperatures(self, temperature=None):
        """The temperature each model decodes at: the explicit one, else its own."""
        return [temperature if temperature is not None else decoding.own_temperature(m) for m in self.models]

    def dataset(self, subset):
        if subset not in self.task.datasets:
            try:
                self.task.load_dataset(subset)
            except FileNotFoundError as e:
                raise TranslateError(f"no subset {subset!r} in {self.cfg.task.data} ({e})") from None
        return self.task.dataset(subset)

    def check_length_budget(self, subset, max_len_a, max_len_b, min_len):
        """Refuses output lengths the shortest source sentence of the subset cannot have."""
        sizes = self.dataset(subset).src_sizes
        where = f"{subset} of {self.cfg.task.data}"
        if len(sizes) and (
            problem := length_budget_problem(max_len_a, max_len_b, min_len, int(sizes.min()), where)
        ):
            raise TranslateError(problem)

    def batches(self, subset, batch_size=None, max_tokens=None, num_workers=0):
        """Batches of every sentence of the subset; refuses if any is too long for the models."""
        dataset = self.dataset(subset)
        if len(dataset) == 0:
            raise TranslateError(f"subset {subset} of {self.cfg.task.data} has no sentences")
        max_positions = utils.resolve_max_positions(
            self.task.max_positions(), *[m.max_positions() for m in self.models]
        )
        _, too_long = dataset.filter_indices_by_size(dataset.ordered_indices(), max_positions)
        if len(too_long):
            raise TranslateError(
                f"{len(too_long)} of the {len(dataset)} sentences of {subset} are longer than the "
                f"models' maximum positions {max_positions} (e.g. sentence {too_long[0]}); they "
                "cannot be translated, and scores without them would not be comparable"
            )
        if batch_size is None and max_tokens is None:
            max_tokens = 12000  # fairseq-generate's default
        longest = example_sizes.longest(dataset)
        if max_tokens is not None and longest > max_tokens:  # (fairseq: an AssertionError's traceback)
            raise TranslateError(
                f"--max-tokens {max_tokens} is below the longest sentence of {subset} ({longest} tokens, "
                f"the longer of source and reference): give at least {longest}"
            )
        iterator = self.task.get_batch_iterator(
            dataset=dataset,
            max_tokens=max_tokens,
            max_sentences=batch_size,
            max_positions=max_positions,
            required_batch_size_multiple=1,
            seed=1,
            num_workers=num_workers,
            disable_iterator_cache=True,  # batch sizes may differ from one call to the next
        )
        with warnings.catch_warnings():  # fairseq asks for pinned memory, which torch warns of on CPU
            warnings.filterwarnings("ignore", message=".*'pin_memory' argument is set as true")
            return iterator.next_epoch_itr(shuffle=False)

    def translate(
        self,
        subset,
        beam=1,
        lenpen=1.0,
        temperature=None,
        max_len_a=0.0,
        max_len_b=200,
        min_len=1,
        post_process=None,
        batch_size=None,
        max_tokens=None,
        num_workers=0,
        progress=True,
    ):
        """Decode every sentence of `subset`; returns a Translation. `progress`: a tqdm bar over the
        batches on stderr (shown only when stderr is a terminal)."""
        try:
            temperature = decoding.check_decoding_temperature(temperature)
        except ValueError as e:
            raise TranslateError(str(e)) from None
        self.check_length_budget(subset, max_len_a, max_len_b, min_len)
        generation = GenerationConfig(
            beam=beam,
            lenpen=lenpen,
            max_len_a=max_len_a,
            max_len_b=max_len_b,
            min_len=min_len,
            temperature=temperature,
        )
        generator = self.task.build_generator(self.models, generation)
        symbols = get_symbols_to_strip_from_output(generator)
        if not self._warm:
            # The first full batch a process decodes takes ~3x as long (one-off costs in torch);
            # decoded once untimed, so that the first system timed is not the slower for it.
            self._decode(generator, next(iter(self.batches(subset, batch_size, max_tokens, num_workers))))
            self._warm = True
        start = time.perf_counter()
        batches = self.batches(subset, batch_size, max_tokens, num_workers)
        hyps, scores, refs, seconds, tokens = {}, {}, {}, 0.0, 0
        bar = progress_bar(batches, f"{subset}: beam {beam}, lenpen {lenpen:g}", enabled=progress)
        for sample in bar:
            if "net_input" not in sample:  # an empty batch, as fairseq-generate skips it
                continue
            tick = time.perf_counter()
            hypos = self._decode(generator, sample)
            seconds += time.perf_counter() - tick
            tokens += sum(len(h[0]["tokens"]) for h in hypos)
            for sample_id, hyp, score, ref in self._strings(sample, hypos, post_process, symbols):
                hyps[sample_id], scores[sample_id] = hyp, score
                if ref is not None:
                    refs[sample_id] = ref
        ids = sorted(hyps)
        if ids != list(range(len(self.dataset(subset)))):  # cannot happen: nothing is filtered
            raise TranslateError(
                f"{len(ids)} of the {len(self.dataset(subset))} sentences of {subset} decoded"
            )
        return Translation(
            subset=subset,
            beam=beam,
            lenpen=lenpen,
            temperatures=self.temperatures(temperature),
            hypotheses=[hyps[i] for i in ids],
            scores=[scores[i] for i in ids],
            references=[refs.get(i) for i in ids],
            n_tokens=tokens,
            decode_seconds=seconds,
            wall_seconds=time.perf_counter() - start,
        )

    def _strings(self, sample, hypos, post_process, symbols):
        """(id, hypothesis, score, reference or None) of each sentence of a decoded batch, post-processed
        as fairseq_cli/generate.py does (its decode_fn: no --bpe/--tokenizer; `symbols`: those it strips)."""
        tgt_dict = self.task.target_dictionary
        for i, sample_id in enumerate(sample["id"].tolist()):
            best = hypos[i][0]
            hyp = tgt_dict.string(best["tokens"].int().cpu(), post_process, extra_symbols_to_ignore=symbols)
            ref = None
            if sample["target"] is not None:
                target = utils.strip_pad(sample["target"][i, :], tgt_dict.pad()).int().cpu()
                ref = tgt_dict.string(target, post_process, escape_unk=True, extra_symbols_to_ignore=symbols)
            yield sample_id, hyp, float(best["score"]), ref

    def _decode(self, generator, sample):
        sample = utils.move_to_cuda(sample) if self.use_cuda else sample
        return self.task.inference_step(generator, self.models, sample)
