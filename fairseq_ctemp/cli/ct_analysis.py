"""Analyses of contextual temperatures (tau) of fairseq-ctemp language models, as in the papers, and of
the ct_transformer translation models (with --source).

    dump          tau and p(target) at every position of a text          -> TSV / JSON lines (+ .npy)
    positions     mean tau against normalised sentence position, 95% CI  -> PNG + CSV  (AAAI Fig. 1b,
                                                                               ICLR Fig. 5)
    trajectories  tau of chosen tokens across saved checkpoints          -> PNG + CSV  (AAAI Fig. 1a)
    heatmap       vocabulary-token x position tau for one sentence       -> PNG + CSV  (ICLR Fig. 1)
    case-study    top-k predictions (p, tau) of a CT model vs a baseline -> markdown   (ICLR Table 5)

Every subcommand takes ``--path CHECKPOINT --data DATA_BIN --text FILE`` (one sentence per line,
tokenised like the training data; blank lines are skipped, line numbers count them) and runs on
the GPU when there is one, on the CPU with ``--cpu``. A translation model (ct_transformer) also needs
``--source FILE``: line N is the source sentence of line N of --text (its translation or reference,
tokenised like the training data); --text is then scored as the decoder's target, teacher-forced,
with --data the model's fairseq-preprocess directory (dict.<src>.txt, dict.<tgt>.txt).
Outputs are never overwritten without
``--force``. See docs/ct_analysis.md.

Positions. Each line w_1 .. w_n is scored on its own, as fairseq-eval-lm --sample-break-mode eos
does (fairseq's language_modeling input is the target shifted right, starting with </s>):

    input   </s> w_1 ... w_n            (prev_output_tokens)
    target  w_1  w_2 ... </s>           (what each position predicts)

Position ``pos`` (1-based, 1 .. n+1) is the prediction of target token ``pos`` (w_pos; </s> at
n+1) from the prefix </s> w_1 .. w_{pos-1}: its tau and probabilities come from the decoder state
after reading input token ``pos`` (w_{pos-1}, or </s> at pos 1). ``--no-final-eos`` drops the
last prediction (of </s>).
"""

import argparse
import csv
import json
import logging
import math
import os
import sys
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from .. import inputs
from ..errors import OptionError
from ..progress import progress_bar

PROG = "ctemp-ct-analysis"


class AnalysisError(Exception):
    """A user error: printed as ``ctemp-ct-analysis <command>: error: ...``, exit status 2."""


# --------------------------------------------------------------------------------------------
# Text, outputs
# --------------------------------------------------------------------------------------------


@dataclass
class Sentence:
    line: int  # 1-based line number in the text file
    words: List[str]
    source: Optional[List[str]] = None  # a translation model's source sentence (--source)


def read_text(path, lines=None, source=None):
    """Non-blank lines of ``path`` as Sentences; ``lines`` (1-based numbers) selects some;
    ``source``: the file of a translation model's source sentences, line by line beside ``path``."""
    try:
        all_lines = inputs.read_utf8_lines(path)
    except inputs.InputError as e:
        raise AnalysisError(f"--text {path}: {e}") from None
    sources = read_source(source, path, len(all_lines)) if source else [None] * len(all_lines)
    sentences = [
        Sentence(i + 1, text.split(), sources[i]) for i, text in enumerate(all_lines) if text.strip()
    ]
    if not sentences:
        raise AnalysisError(f"--text {path} is empty (no non-blank line)")
    if lines is None:
        return sentences
    by_line = {s.line: s for s in sentences}
    chosen = []
    for n in lines:
        if not 1 <= n <= len(all_lines):
            raise AnalysisError(
                f"--line {n} is out of range: {path} has {len(all_lines)} lines (numbered from 1)"
            )
        if n not in by_line:
            raise AnalysisError(f"--line {n} of {path} is blank")
        chosen.append(by_line[n])
    return chosen


def read_source(path, text_path, n_lines):
    """The words of each line of --source, which has as many lines as --text."""
    try:
        lines = inputs.read_utf8_lines(path)
    except inputs.InputError as e:
        raise AnalysisError(f"--source {path}: {e}") from None
    if len(lines) != n_lines:
        raise AnalysisError(
            f"--source {path} has {len(lines)} lines, --text {text_path} {n_lines}: line N of one must "
            "be the translation of line N of the other"
        )
    return [line.split() for line in lines]


def check_outputs(paths, force):
    """Refuse (before any work) to overwrite an existing output unless --force."""
    for path in paths:
        if path and path != "-" and os.path.isdir(path):
            raise AnalysisError(f"{path} is a directory; give a file name")
        if path and path != "-" and os.path.exists(path) and not force:
            raise AnalysisError(f"{path} exists; refusing to overwrite it (use --force)")


def companion(path, suffix):
    """The CSV written next to a PNG: out.png -> out.csv."""
    return os.path.splitext(path)[0] + suffix


def make_parent(path):
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)


def write_csv(path, header, rows):
    make_parent(path)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def fmt(x):
    """Floats exactly enough for fp32 (9 significant digits); '' for a missing value."""
    if x is None:
        return ""
    return format(float(x), ".9g")


# --------------------------------------------------------------------------------------------
# Loading a checkpoint
# --------------------------------------------------------------------------------------------


@dataclass
class LoadedModel:
    path: str
    model: object
    dictionary: object
    device: object
    epoch: Optional[int]  # the epoch the checkpoint was saved in (checkpointE.pt -> E)
    num_updates: Optional[int]
    source_dictionary: object = None  # a translation model's (None: a language model)

    @property
    def is_translation(self):
        return self.source_dictionary is not None

    @property
    def head(self):
        return getattr(self.model.decoder, "output_head", None)

    @property
    def has_temperature(self):
        return self.head is not None and getattr(self.head, "temperature", None) is not None

    def require_temperature(self, command):
        if not self.has_temperature:
            raise AnalysisError(
                f"{self.path}: this model has no temperature (--ct-normalization "
                f"none, or not a fairseq-ctemp temperature-head LM or ct_transformer); "
                f"`{command}` needs tau"
            )


def load_model(path, data, cpu=False):
    """A fairseq-ctemp (or any fairseq) language model, or translation model, in eval mode, with its
    dictionaries (from ``data``) and the training progress saved in the checkpoint."""
    import glob

    import torch
    from fairseq import checkpoint_utils
    from fairseq.models import FairseqEncoderDecoderModel, FairseqLanguageModel

    if not os.path.isfile(path):
        raise AnalysisError(f"--path {path}: no such checkpoint")
    try:
        inputs.check_checkpoint(path)
    except inputs.InputError as e:
        raise AnalysisError(f"--path {path} {e}") from None
    first = data.split(os.pathsep)[0]
    if not os.path.isfile(os.path.join(first, "dict.txt")) and not glob.glob(
        os.path.join(first, "dict.*.txt")
    ):
        raise AnalysisError(
            f"--data {data}: no dict.txt (nor dict.<lang>.txt; give the fairseq-preprocess output "
            f"directory the model was trained on)"
        )
    try:
        state = checkpoint_utils.load_checkpoint_to_cpu(path, {"data": data})
        models, _, task = checkpoint_utils.load_model_ensemble_and_task(
            [path], arg_overrides={"data": data}, state=state
        )
    except OptionError as e:  # a file fairseq cannot load, or one of the plugin's checks at loading
        raise AnalysisError(str(e)) from None
    device = torch.device("cuda" if torch.cuda.is_available() and not cpu else "cpu")
    model = models[0].to(device).eval()
    if isinstance(model, FairseqEncoderDecoderModel):
        source_dictionary = task.source_dictionary
    elif isinstance(model, FairseqLanguageModel):
        source_dictionary = None
    else:
        raise AnalysisError(f"{path} is neither a language nor a translation model ({type(model).__name__})")
    epoch, updates = training_progress(state)
    return LoadedModel(path, model, task.target_dictionary, device, epoch, updates, source_dictionary)


def training_progress(state):
    """(epoch, num_updates) from a checkpoint's saved state. fairseq stores the iterator of the
    *next* epoch after an end-of-epoch save (epoch E+1, 0 iterations): that is reported as E."""
    iterator = (state.get("extra_state") or {}).get("train_iterator") or {}
    epoch = iterator.get("epoch")
    if epoch is not None and iterator.get("iterations_in_epoch", 0) == 0:
        epoch -= 1
    history = state.get("optimizer_history") or [{}]
    return epoch, history[-1].get("num_updates")


def token_ids(dictionary, tokens):
    """Dictionary indices of ``tokens``, or an error naming every unknown one."""
    missing = [t for t in tokens if t not in dictionary.indices]
    if missing:
        raise AnalysisError(
            f"not in the dictionary: {', '.join(missing)} (tokens must be spelled as "
            f"in dict.txt; specials: {dictionary.unk_word}, {dictionary.eos_word})"
        )
    return [dictionary.index(t) for t in tokens]


def frequent_words(dictionary, k):
    """The k most frequent words (fairseq dictionaries are sorted by count after the specials;
    fairseq's madeupword padding entries are left out)."""
    words = [
        dictionary[i]
        for i in range(dictionary.nspecial, len(dictionary))
        if not dictionary[i].startswith("madeupword")
    ]
    return words[:k]


def choose_tokens(dictionary, tokens, vocab_k):
    names = tokens if tokens else frequent_words(dictionary, vocab_k)
    return names, token_ids(dictionary, names)


# --------------------------------------------------------------------------------------------
# The shared scorer
# --------------------------------------------------------------------------------------------


@dataclass
class Scores:
    """What one model computes for one sentence; arrays over its L positions (see the module
    docstring: position i predicts ``targets[i]`` after reading ``inputs[i]``)."""

    line: int
    inputs: List[str]
    targets: List[str]
    target_ids: np.ndarray  # (L,)
    logp_target: np.ndarray  # (L,) natural log
    tau_target: Optional[np.ndarray] = None  # (L,)  tau of the target token
    tau_mean: Optional[np.ndarray] = None  # (L,)  mean/min/max/std of tau over the vocabulary
    tau_min: Optional[np.ndarray] = None
    tau_max: Optional[np.ndarray] = None
    tau_std: Optional[np.ndarray] = None
    tau_argmax: Optional[List[str]] = None  # (L,) the word with the largest tau
    tau_columns: Optional[np.ndarray] = None  # (L, K) tau of the requested vocabulary entries
    tau_full: Optional[np.ndarray] = None  # (L, V)
    topk_ids: Optional[np.ndarray] = None  # (L, k) most probable next tokens
    topk_logp: Optional[np.ndarray] = None  # (L, k)
    topk_tau: Optional[np.ndarray] = None  # (L, k)


def max_positions(lm):
    """The most target positions the model takes (a translation model: its decoder's)."""
    limit = lm.model.max_positions()
    return limit[1 if lm.is_translation else 0] if isinstance(limit, tuple) else limit


def encode(lm, sentence, final_eos=True):
    """(input ids, target ids) of one sentence: [</s> w_1..w_n] and [w_1..w_n </s>]."""
    d = lm.dictionary
    ids = [d.index(w) for w in sentence.words]  # unknown words -> <unk>, as fairseq-preprocess
    inputs, targets = [d.eos()] + ids, ids + [d.eos()]
    if not final_eos:
        inputs, targets = inputs[:-1], targets[:-1]
    return inputs, targets


def fitting(lm, sentences, skip_long=False, final_eos=True):
    """Check, before anything is written, that the model takes every sentence in one piece
    (a transformer's positions are limited); with ``skip_long`` leave the longer ones out. A
    translation model needs each sentence's source (--source), a language model none."""
    if lm.is_translation and sentences[0].source is None:
        raise AnalysisError(
            f"{lm.path} is a translation model ({type(lm.model).__name__}): give the source sentences "
            "of --text with --source"
        )
    if not lm.is_translation and sentences[0].source is not None:
        raise AnalysisError(f"--source is for translation models; {lm.path} is a language model")
    limit = max_positions(lm)
    n_positions = [len(s.words) + (1 if final_eos else 0) for s in sentences]
    if limit is None or max(n_positions) <= limit:
        return sentences
    if not skip_long:
        line, n = next((s.line, n) for s, n in zip(sentences, n_positions) if n > limit)
        raise AnalysisError(
            f"line {line} has {n} positions; the model takes at most {limit} (its "
            f"--tokens-per-sample / --max-target-positions); dump, positions and "
            f"trajectories can leave such lines out with --skip-long"
        )
    kept = [s for s, n in zip(sentences, n_positions) if n <= limit]
    print(
        f"--skip-long: left out {len(sentences) - len(kept)} lines longer than the model's {limit} positions",
        file=sys.stderr,
    )
    if not kept:
        raise AnalysisError(f"every line is longer than the model's {limit} positions")
    return kept


def score(lm, sentences, columns=None, full=False, topk=0, final_eos=True, batch_size=32, need_tau=True):
    """Yield one ``Scores`` per sentence, batch by batch (right-padded; the models are causal, so
    padding after a sentence changes none of its positions). Summaries of tau over the vocabulary
    are reduced inside the batch, so the full (B, T, V) tau only lives one batch at a time.
    ``columns``: vocabulary indices whose tau to keep; ``full``: keep all of tau; ``topk``: keep the
    k most probable next tokens. ``need_tau=False`` computes probabilities only (a baseline)."""
    import torch

    if need_tau:
        lm.require_temperature("this analysis")
    sentences = fitting(lm, sentences, final_eos=final_eos)
    with torch.no_grad():
        starts = range(0, len(sentences), batch_size)
        for start in progress_bar(starts, f"scoring {os.path.basename(lm.path)}"):
            batch = sentences[start : start + batch_size]
            encoded = [encode(lm, s, final_eos) for s in batch]
            yield from _score_batch(lm, batch, encoded, columns, full, topk, need_tau)


def _score_batch(lm, batch, encoded, columns, full, topk, need_tau):
    import torch

    d = lm.dictionary
    width = max(len(inp) for inp, _ in encoded)
    tokens = torch.full((len(batch), width), d.pad(), dtype=torch.long)
    target = torch.full((len(batch), width), d.pad(), dtype=torch.long)
    for i, (inp, tgt) in enumerate(encoded):
        tokens[i, : len(inp)] = torch.tensor(inp)
        target[i, : len(tgt)] = torch.tensor(tgt)
    tokens, target = tokens.to(lm.device), target.to(lm.device)
    if lm.is_translation:  # the source, each followed by </s> (as fairseq's translation task)
        src = lm.source_dictionary
        ids = [[src.index(w) for w in s.source] + [src.eos()] for s in batch]
        src_tokens = torch.full((len(batch), max(map(len, ids))), src.pad(), dtype=torch.long)
        for i, row in enumerate(ids):
            src_tokens[i, : len(row)] = torch.tensor(row)
        src_lengths = torch.tensor([len(row) for row in ids])
        net_output = lm.model(src_tokens.to(lm.device), src_lengths.to(lm.device), tokens)
    else:
        net_output = lm.model(tokens)  # a language model's forward is its decoder's
    lprobs = lm.model.get_normalized_probs(net_output, log_probs=True).float()
    out = {"logp_target": lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)}
    if topk:
        out["topk_logp"], out["topk_ids"] = lprobs.topk(min(topk, lprobs.size(-1)), dim=-1)
    if need_tau:
        tau = lm.head.temperatures(net_output[0]).float()  # (B, T, V)
        out.update(
            tau_target=tau.gather(-1, target.unsqueeze(-1)).squeeze(-1),
            tau_mean=tau.mean(-1),
            tau_min=tau.amin(-1),
            tau_max=tau.amax(-1),
            tau_std=tau.std(-1, unbiased=False),
            tau_argmax=tau.argmax(-1),
        )
        if columns is not None:
            out["tau_columns"] = tau[..., torch.as_tensor(columns, device=tau.device)]
        if full:
            out["tau_full"] = tau
        if topk:
            out["topk_tau"] = tau.gather(-1, out["topk_ids"])
    out = {k: v.cpu().numpy() for k, v in out.items()}
    argmax = out.pop("tau_argmax", None)
    for i, (sentence, (inp, tgt)) in enumerate(zip(batch, encoded)):
        length = len(inp)
        yield Scores(
            line=sentence.line,
            inputs=[d[t] for t in inp],
            targets=[d[t] for t in tgt],
            target_ids=np.asarray(tgt),
            tau_argmax=None if argmax is None else [d[t] for t in argmax[i, :length]],
            **{k: v[i, :length] for k, v in out.items()},
        )


# --------------------------------------------------------------------------------------------
# dump
# --------------------------------------------------------------------------------------------

DUMP_FIELDS = (
    "line",
    "pos",
    "input",
    "target",
    "p_target",
    "logp_target",
    "tau_target",
    "tau_mean",
    "tau_min",
    "tau_max",
    "tau_argmax",
)


def dump_rows(scores):
    for s in scores:
        for i in range(len(s.targets)):
            yield (
                s,
                i,
                {
                    "line": s.line,
                    "pos": i + 1,
                    "input": s.inputs[i],
                    "target": s.targets[i],
                    "p_target": float(np.exp(s.logp_target[i])),
                    "logp_target": float(s.logp_target[i]),
                    "tau_target": float(s.tau_target[i]),
                    "tau_mean": float(s.tau_mean[i]),
                    "tau_min": float(s.tau_min[i]),
                    "tau_max": float(s.tau_max[i]),
                    "tau_argmax": s.tau_argmax[i],
                },
            )


def cmd_dump(args):
    """tau of a text, position by position (the raw material of every figure). The outputs are
    written as PATH.partial and renamed when complete, so a failure leaves no half-written file."""
    check_outputs([args.output, args.full], args.force)
    sentences = read_text(args.text, source=args.source)
    lm = load_model(args.path, args.data, args.cpu)
    lm.require_temperature("dump")
    sentences = fitting(lm, sentences, args.skip_long, args.final_eos)
    finals = [p for p in (args.output, args.full) if p and p != "-"]
    for path in finals:
        make_parent(path)
    try:
        n_rows = write_dump(args, lm, sentences)
    except BaseException:
        for path in finals:
            if os.path.exists(path + ".partial"):
                os.remove(path + ".partial")
        raise
    for path in finals:
        os.replace(path + ".partial", path)
    print(
        f"{n_rows} positions of {len(sentences)} sentences -> {args.output}"
        + (f", full tau ({n_rows} x {len(lm.dictionary)}) -> {args.full}" if args.full else ""),
        file=sys.stderr,
    )


def write_dump(args, lm, sentences):
    """One row per position to --output (.partial), tau vectors to --full (.partial)."""
    fmt_name = args.format or ("jsonl" if args.output.endswith((".jsonl", ".json")) else "tsv")
    full = None
    if args.full:
        n_positions = sum(len(s.words) + (1 if args.final_eos else 0) for s in sentences)
        full = np.lib.format.open_memmap(
            args.full + ".partial", mode="w+", dtype=np.float32, shape=(n_positions, len(lm.dictionary))
        )
    out = sys.stdout if args.output == "-" else open(args.output + ".partial", "w", encoding="utf-8")
    n_rows = 0
    try:
        if fmt_name == "tsv":
            out.write("\t".join(DUMP_FIELDS) + "\n")
        scores = score(
            lm, sentences, full=full is not None, final_eos=args.final_eos, batch_size=args.batch_size
        )
        for s, i, row in dump_rows(scores):
            if fmt_name == "tsv":
                out.write("\t".join(fmt(v) if isinstance(v, float) else str(v) for v in row.values()) + "\n")
            else:
                out.write(json.dumps(row) + "\n")
            if full is not None:
                full[n_rows] = s.tau_full[i]
            n_rows += 1
    finally:
        if out is not sys.stdout:
            out.close()
        if full is not None:
            full.flush()
    return n_rows


# --------------------------------------------------------------------------------------------
# positions
# --------------------------------------------------------------------------------------------

STATS = {
    "mean": "mean over the vocabulary",
    "target": "tau of the target token",
    "std": "std over the vocabulary",
    "min": "min over the vocabulary",
    "max": "max over the vocabulary",
}


def position_bins(length, bins=None, segment=None):
    """The bin of each of ``length`` positions, -1 for positions left out.
    bins: relative position (pos - 1) / (length - 1) in [0, 1] cut into ``bins`` equal bins.
    segment: the papers' "normalised sentence": first, middle and last ``segment`` positions as
    bins 0 .. 3*segment-1; shorter sentences (< 3*segment positions) are left out entirely."""
    if segment:
        out = np.full(length, -1)
        if length < 3 * segment:
            return out
        middle = (length - segment) // 2
        out[:segment] = np.arange(segment)
        out[middle : middle + segment] = segment + np.arange(segment)
        out[length - segment :] = 2 * segment + np.arange(segment)
        return out
    relative = np.arange(length) / max(length - 1, 1)
    return np.minimum((relative * bins).astype(int), bins - 1)


def confidence_interval(values, method, rng, samples=1000):
    """Mean and 95% CI across sentences. "t": mean +- t_{0.975, n-1} * sd / sqrt(n) (Student t);
    "bootstrap": 2.5 / 97.5 percentiles of the means of ``samples`` resamples of the sentences."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    mean = float(values.mean()) if n else math.nan
    if n < 2:
        return mean, math.nan, math.nan
    if method == "bootstrap":
        means = values[rng.integers(0, n, size=(samples, n))].mean(axis=1)
        return mean, float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))
    from scipy import stats

    half = stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / math.sqrt(n)
    return mean, mean - half, mean + half


def per_sentence_bin_means(scores, stats_names, n_bins, bins, segment):
    """{stat: [list of per-sentence means, one list per bin]}: each sentence counts once per bin
    (its positions in the bin averaged), so the CI is across sentences."""
    table = {name: [[] for _ in range(n_bins)] for name in stats_names}
    n_sentences = 0
    for s in scores:
        which = position_bins(len(s.targets), bins, segment)
        if (which < 0).all():
            continue
        n_sentences += 1
        for name in stats_names:
            values = getattr(s, f"tau_{name}")
            for b in np.unique(which[which >= 0]):
                table[name][b].append(float(values[which == b].mean()))
    return table, n_sentences


def cmd_positions(args):
    """Mean tau against normalised sentence position, 95% CI across sentences: AAAI Fig. 1b (CT-MoS,
    PTB: sentences of 15-25 words, first/middle/last 5 positions) and ICLR Fig. 5.
    With the softmax normalisation the mean over the vocabulary is (alpha + 1/V)/beta at every
    position (a flat curve by construction); --stats target/std/min/max show position effects."""
    if args.labels and len(args.labels) != len(args.path):
        raise AnalysisError(f"--labels needs one label per --path ({len(args.path)}), got {len(args.labels)}")
    csv_path = companion(args.output, ".csv")
    check_outputs([args.output, csv_path], args.force)
    sentences = [
        s
        for s in read_text(args.text, source=args.source)
        if args.min_len <= len(s.words) <= (args.max_len or math.inf)
    ]
    if not sentences:
        raise AnalysisError(
            f"no sentence of {args.text} has between {args.min_len} and "
            f"{args.max_len or 'any number of'} words"
        )
    n_bins = 3 * args.segment if args.segment else args.bins
    rng = np.random.default_rng(args.seed)
    labels = args.labels or [os.path.basename(p) for p in args.path]
    rows, curves = [], []
    for path, label in zip(args.path, labels):
        lm = load_model(path, args.data, args.cpu)
        lm.require_temperature("positions")
        fit = fitting(lm, sentences, args.skip_long, args.final_eos)
        scores = score(lm, fit, final_eos=args.final_eos, batch_size=args.batch_size)
        table, n_sentences = per_sentence_bin_means(scores, args.stats, n_bins, args.bins, args.segment)
        if n_sentences == 0:
            raise AnalysisError(
                f"no sentence has the {3 * args.segment} positions --segment {args.segment} needs"
            )
        for name in args.stats:
            curve = []
            for b in range(n_bins):
                mean, low, high = confidence_interval(table[name][b], args.ci, rng, args.bootstrap_samples)
                start, end = (b, b + 1) if args.segment else (b / n_bins, (b + 1) / n_bins)
                rows.append(
                    [
                        label,
                        name,
                        b,
                        fmt(start),
                        fmt(end),
                        fmt(mean),
                        fmt(low),
                        fmt(high),
                        len(table[name][b]),
                    ]
                )
                curve.append((mean, low, high))
            curves.append((f"{label}: {STATS[name]}", np.array(curve, dtype=float)))
        del lm
    write_csv(
        csv_path,
        ["label", "stat", "bin", "bin_start", "bin_end", "mean", "ci_low", "ci_high", "n_sentences"],
        rows,
    )
    plot_positions(args.output, curves, n_bins, args)
    print(f"{len(sentences)} sentences, {len(curves)} curves -> {args.output}, {csv_path}", file=sys.stderr)


def plot_positions(path, curves, n_bins, args):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    if args.segment:
        x = np.arange(n_bins) + 1
        for edge in (args.segment + 0.5, 2 * args.segment + 0.5):
            ax.axvline(edge, color="grey", lw=0.5, ls=":")
        ax.set_xlabel(f"normalised position (first / middle / last {args.segment} positions)")
    else:
        x = (np.arange(n_bins) + 0.5) / n_bins
        ax.set_xlabel("relative position in the sentence")
    for label, curve in curves:
        (line,) = ax.plot(x, curve[:, 0], marker="o", ms=3, label=label)
        ax.fill_between(x, curve[:, 1], curve[:, 2], color=line.get_color(), alpha=0.2, lw=0)
    ax.set_ylabel("temperature τ")
    ci = "Student t" if args.ci == "t" else "bootstrap"
    ax.set_title(args.title or f"τ over sentence positions (95% CI, {ci})", fontsize=10)
    ax.legend(fontsize=7)
    save_figure(fig, path)


# --------------------------------------------------------------------------------------------
# trajectories
# --------------------------------------------------------------------------------------------


def token_means(scores, token_ids_, over):
    """Mean tau of each token: over its occurrences as a target ("targets"), or over every
    position ("all"). Returns (sums, counts) arrays of len(token_ids_)."""
    sums, counts = np.zeros(len(token_ids_)), np.zeros(len(token_ids_), dtype=int)
    for s in scores:
        for j, token in enumerate(token_ids_):
            mask = s.target_ids == token if over == "targets" else np.ones(len(s.targets), bool)
            sums[j] += s.tau_columns[mask, j].sum()
            counts[j] += int(mask.sum())
    return sums, counts


def cmd_trajectories(args):
    """tau of chosen tokens across training (one checkpoint per point): AAAI Fig. 1a."""
    csv_path = companion(args.output, ".csv")
    check_outputs([args.output, csv_path], args.force)
    sentences = read_text(args.text, source=args.source)
    rows, points = [], []
    names = ids = None
    for path in args.path:
        lm = load_model(path, args.data, args.cpu)
        lm.require_temperature("trajectories")
        if names is None:
            names, ids = choose_tokens(lm.dictionary, args.tokens, args.vocab_k)
        x = lm.epoch if args.x == "epoch" else lm.num_updates
        if x is None:
            raise AnalysisError(
                f"{path} has no saved {args.x} (use --x {'update' if args.x == 'epoch' else 'epoch'})"
            )
        fit = fitting(lm, sentences, args.skip_long, args.final_eos)
        scores = score(lm, fit, columns=ids, final_eos=args.final_eos, batch_size=args.batch_size)
        sums, counts = token_means(scores, ids, args.over)
        absent = [n for n, c in zip(names, counts) if c == 0]
        if absent:
            raise AnalysisError(
                f"never a target in {args.text}: {', '.join(absent)} (choose other "
                f"--tokens, or average over every position with --over all)"
            )
        means = sums / counts
        for name, mean, count in zip(names, means, counts):
            rows.append([path, lm.epoch, lm.num_updates, name, fmt(mean), count])
        points.append((x, means))
        del lm
    write_csv(csv_path, ["checkpoint", "epoch", "num_updates", "token", "tau", "occurrences"], rows)
    plot_trajectories(args.output, names, sorted(points, key=lambda p: p[0]), args)
    print(f"{len(names)} tokens x {len(points)} checkpoints -> {args.output}, {csv_path}", file=sys.stderr)


def plot_trajectories(path, names, points, args):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    x = [p[0] for p in points]
    values = np.array([p[1] for p in points])
    for j, name in enumerate(names):
        ax.plot(x, values[:, j], marker="o", ms=3, label=name)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch" if args.x == "epoch" else "updates")
    what = "as a target" if args.over == "targets" else "at every position"
    ax.set_ylabel(f"mean τ of the token ({what})", fontsize=8)
    ax.set_title(args.title or "τ of chosen tokens over training", fontsize=10)
    ax.legend(fontsize=7, ncol=2 if len(names) > 6 else 1)
    save_figure(fig, path)


# --------------------------------------------------------------------------------------------
# heatmap
# --------------------------------------------------------------------------------------------


def cmd_heatmap(args):
    """tau of vocabulary tokens (y) at each position of one sentence (x, labelled with the input
    word read there): ICLR Fig. 1 (transposed there: input words on y)."""
    csv_path = companion(args.output, ".csv")
    check_outputs([args.output, csv_path], args.force)
    sentence = read_text(args.text, [args.line], args.source)[0]
    lm = load_model(args.path, args.data, args.cpu)
    lm.require_temperature("heatmap")
    names, ids = choose_tokens(lm.dictionary, args.tokens, args.vocab_k)
    s = next(score(lm, [sentence], columns=ids, final_eos=args.final_eos))
    matrix = s.tau_columns.T  # (tokens, positions)
    header = ["token"] + [f"{i + 1}:{w}" for i, w in enumerate(s.inputs)]
    write_csv(csv_path, header, [[n] + [fmt(v) for v in row] for n, row in zip(names, matrix)])
    plot_heatmap(args.output, matrix, names, s.inputs, args)
    print(
        f"{len(names)} tokens x {len(s.inputs)} positions of line {args.line} -> {args.output}, {csv_path}",
        file=sys.stderr,
    )


def plot_heatmap(path, matrix, names, inputs, args):
    plt = pyplot()
    width = min(max(4.0, 0.35 * len(inputs) + 2), 20)
    height = min(max(3.0, 0.25 * len(names) + 1.5), 20)
    fig, ax = plt.subplots(figsize=(width, height))
    label, limits = "τ", {}
    if args.center:  # each token's heating up / cooling down along the sentence, 0 in the middle
        matrix = matrix - matrix.mean(axis=1, keepdims=True)
        label = "τ − the token's mean over the sentence"
        bound = float(np.abs(matrix).max()) or 1.0
        limits = {"vmin": -bound, "vmax": bound}
    image = ax.imshow(
        matrix,
        aspect="auto",
        interpolation="nearest",
        cmap=args.cmap or ("coolwarm" if args.center else "viridis"),
        **limits,
    )
    ax.set_xticks(range(len(inputs)), inputs, rotation=90, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set_xlabel("input token read (its column's τ predicts the next token)", fontsize=8)
    ax.set_ylabel("vocabulary token", fontsize=8)
    ax.set_title(args.title or f"τ, line {args.line}", fontsize=10)
    fig.colorbar(image, ax=ax, label=label)
    save_figure(fig, path)


# --------------------------------------------------------------------------------------------
# case-study
# --------------------------------------------------------------------------------------------


def md(token):
    """A token inside a markdown table cell: | and <, > (</s>, <unk> would vanish as HTML) escaped."""
    return token.replace("|", "\\|").replace("<", "\\<").replace(">", "\\>")


def predictions_cell(lm, s, i, target, with_tau):
    items = []
    for token, logp, tau in zip(
        s.topk_ids[i], s.topk_logp[i], s.topk_tau[i] if with_tau else [None] * len(s.topk_ids[i])
    ):
        word = md(lm.dictionary[int(token)])
        word = f"**{word}**" if int(token) == target else word
        items.append(f"{word} {math.exp(logp):.3f}" + (f" (τ={tau:.4g})" if tau is not None else ""))
    return "; ".join(items)


def case_study_table(ct, base, ct_scores, base_scores, positions, labels, k, context, only_differ):
    """A markdown section per sentence, one row per chosen position."""
    out = []
    for s, b in zip(ct_scores, base_scores):
        out.append(f"### line {s.line}: {' '.join(md(t) for t in s.targets[:-1])}\n")
        out.append(
            f"| pos | context | target | {labels[0]} top-{k} (p, τ) | {labels[1]} top-{k} (p) | "
            f"{labels[0]} p(target) | τ(target) | {labels[1]} p(target) |"
        )
        out.append("|---:|---|---|---|---|---:|---:|---:|")
        chosen = positions or range(1, len(s.targets) + 1)
        for pos in chosen:
            if not 1 <= pos <= len(s.targets):
                raise AnalysisError(
                    f"--positions {pos} is out of range for line {s.line} (1 .. {len(s.targets)})"
                )
            i = pos - 1
            if only_differ and s.topk_ids[i][0] == b.topk_ids[i][0]:
                continue
            prefix = s.inputs[max(0, i + 1 - context) : i + 1]
            ellipsis = "… " if i + 1 > context else ""
            target = int(s.target_ids[i])
            out.append(
                f"| {pos} | {ellipsis}{' '.join(md(t) for t in prefix)} | {md(s.targets[i])} | "
                f"{predictions_cell(ct, s, i, target, True)} | "
                f"{predictions_cell(base, b, i, target, False)} | "
                f"{math.exp(s.logp_target[i]):.3f} | {s.tau_target[i]:.4g} | "
                f"{math.exp(b.logp_target[i]):.3f} |"
            )
        out.append("")
    return "\n".join(out)


def cmd_case_study(args):
    """Top-k next-token predictions of a CT model (with each one's tau) against a baseline, at
    chosen positions of chosen sentences: ICLR Table 5 / appendix A.4-A.5."""
    check_outputs([args.output], args.force)
    if args.k < 1:
        raise AnalysisError(f"-k must be >= 1, got {args.k}")
    sentences = read_text(args.text, args.line, args.source)
    ct = load_model(args.path, args.data, args.cpu)
    ct.require_temperature("case-study")
    base = load_model(args.baseline_path, args.data, args.cpu)  # same --data: same dictionary
    ct_scores = list(score(ct, sentences, topk=args.k))
    base_scores = list(score(base, sentences, topk=args.k, need_tau=False))
    table = case_study_table(
        ct, base, ct_scores, base_scores, args.positions, args.labels, args.k, args.context, args.only_differ
    )
    print(table)
    if args.output:
        make_parent(args.output)
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(table + "\n")


# --------------------------------------------------------------------------------------------
# Figures, command line
# --------------------------------------------------------------------------------------------


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path):
    make_parent(path)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)


def common_options(parser, many_paths=False, final_eos=True, skip_long=False):
    if many_paths:
        parser.add_argument(
            "--path", nargs="+", required=True, metavar="CHECKPOINT", help="one or more checkpoints"
        )
    else:
        parser.add_argument("--path", required=True, metavar="CHECKPOINT", help="checkpoint")
    parser.add_argument(
        "--data",
        required=True,
        metavar="DATA_BIN",
        help="the fairseq-preprocess directory of the model (its dict.txt)",
    )
    parser.add_argument(
        "--text",
        required=True,
        metavar="FILE",
        help="one sentence per line, tokenised like the training data",
    )
    parser.add_argument(
        "--source",
        metavar="FILE",
        help="a translation model's (ct_transformer's) source sentences, line N the source of line N "
        "of --text, tokenised like the training data",
    )
    parser.add_argument("--cpu", action="store_true", help="run on the CPU even if CUDA is available")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass")
    if final_eos:
        parser.add_argument(
            "--no-final-eos",
            dest="final_eos",
            action="store_false",
            help="leave out the last position of each line (the prediction of </s>)",
        )
    if skip_long:
        parser.add_argument(
            "--skip-long",
            action="store_true",
            help="leave out lines longer than the model's maximum positions "
            "(default: such a line is an error)",
        )
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")


def token_options(parser, default_k):
    parser.add_argument(
        "--tokens",
        nargs="+",
        metavar="TOKEN",
        help="vocabulary tokens, as spelled in dict.txt (e.g. the of , <unk>)",
    )
    parser.add_argument(
        "--vocab-k",
        type=int,
        default=default_k,
        help=f"without --tokens: the K most frequent words (default {default_k})",
    )


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("dump", help="tau and p(target) at every position -> TSV / JSON lines")
    common_options(p, skip_long=True)
    p.add_argument("--output", required=True, help="a .tsv, or .jsonl / .json for JSON lines; - for stdout")
    p.add_argument("--format", choices=("tsv", "jsonl"), help="override the format the extension implies")
    p.add_argument(
        "--full",
        metavar="NPY",
        help="also write every position's full tau vector, (positions x V) float32, rows in --output's order",
    )
    p.set_defaults(func=cmd_dump)

    p = sub.add_parser("positions", help="mean tau vs normalised sentence position -> PNG + CSV")
    common_options(p, many_paths=True, skip_long=True)
    p.add_argument("--labels", nargs="+", help="one legend label per --path (default: file names)")
    p.add_argument("--output", required=True, help="PNG; the CSV goes next to it (.csv)")
    p.add_argument(
        "--stats",
        nargs="+",
        choices=tuple(STATS),
        default=["mean"],
        help="curves per checkpoint: mean (over the vocabulary, default), target (tau of "
        "the target token), std, min, max",
    )
    p.add_argument("--bins", type=int, default=10, help="bins of relative position 0..1 (default 10)")
    p.add_argument(
        "--segment",
        type=int,
        default=0,
        metavar="S",
        help="instead of --bins, the papers' normalised sentence: first / middle / last S "
        "positions (AAAI: 5, with --min-len 16 --max-len 24)",
    )
    p.add_argument("--min-len", type=int, default=1, help="only sentences of at least this many words")
    p.add_argument(
        "--max-len", type=int, default=0, help="only sentences of at most this many words (0: any)"
    )
    p.add_argument(
        "--ci",
        choices=("t", "bootstrap"),
        default="t",
        help="95%% CI across sentences: Student t (default) or percentile bootstrap",
    )
    p.add_argument("--bootstrap-samples", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1, help="bootstrap seed")
    p.add_argument("--title")
    p.set_defaults(func=cmd_positions)

    p = sub.add_parser("trajectories", help="tau of chosen tokens across checkpoints -> PNG + CSV")
    common_options(p, many_paths=True, skip_long=True)
    token_options(p, 8)
    p.add_argument("--output", required=True, help="PNG; the CSV goes next to it (.csv)")
    p.add_argument(
        "--x",
        choices=("epoch", "update"),
        default="epoch",
        help="x axis from each checkpoint's saved state (default epoch)",
    )
    p.add_argument(
        "--over",
        choices=("targets", "all"),
        default="targets",
        help="average a token's tau over its occurrences as a target (default) or over every position",
    )
    p.add_argument("--title")
    p.set_defaults(func=cmd_trajectories)

    p = sub.add_parser("heatmap", help="token x position tau for one sentence -> PNG + CSV")
    common_options(p)
    token_options(p, 20)
    p.add_argument("--line", type=int, required=True, help="line number in --text (from 1)")
    p.add_argument("--output", required=True, help="PNG; the CSV goes next to it (.csv)")
    p.add_argument(
        "--center",
        action="store_true",
        help="plot each token's tau minus its mean over the sentence (the CSV keeps tau)",
    )
    p.add_argument("--cmap", help="matplotlib colormap (default viridis; coolwarm with --center)")
    p.add_argument("--title")
    p.set_defaults(func=cmd_heatmap)

    p = sub.add_parser("case-study", help="top-k predictions, CT vs baseline -> markdown")
    common_options(p, final_eos=False)
    p.add_argument(
        "--baseline-path",
        required=True,
        metavar="CHECKPOINT",
        help="the baseline checkpoint (same dictionary; tau not needed)",
    )
    p.add_argument("--line", type=int, nargs="+", required=True, help="line numbers in --text (from 1)")
    p.add_argument(
        "--positions",
        type=int,
        nargs="+",
        help="positions to show (1-based; pos i predicts token i; default: all)",
    )
    p.add_argument(
        "--only-differ",
        action="store_true",
        help="only positions where the two models' top-1 predictions differ",
    )
    p.add_argument("-k", type=int, default=3, help="predictions per model (default 3)")
    p.add_argument("--context", type=int, default=6, help="prefix words shown per row (default 6)")
    p.add_argument("--labels", nargs=2, default=["CT", "baseline"], metavar=("CT", "BASELINE"))
    p.add_argument("--output", help="also write the table to this file (.md)")
    p.set_defaults(func=cmd_case_study)
    return parser


def check_options(args):
    for name in ("batch_size", "bins", "vocab_k", "bootstrap_samples"):
        if getattr(args, name, 1) < 1:
            raise AnalysisError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if getattr(args, "segment", 0) < 0:
        raise AnalysisError(f"--segment must be >= 0, got {args.segment}")
    if getattr(args, "cmap", None):  # before the CSV is written, which would block the corrected rerun
        import matplotlib

        if args.cmap not in matplotlib.colormaps:
            raise AnalysisError(
                f"--cmap {args.cmap!r} is not a matplotlib colormap (e.g. viridis, coolwarm, magma)"
            )


def main(argv=None):
    """ctemp-ct-analysis (python -m fairseq_ctemp.cli.ct_analysis)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)  # importing fairseq set it to DEBUG: its chatter is not wanted here
    try:
        check_options(args)
        args.func(args)
    except AnalysisError as e:
        print(f"{PROG} {args.command}: error: {e}", file=sys.stderr)
        sys.exit(2)
    finally:
        root.setLevel(level)


if __name__ == "__main__":
    main()
