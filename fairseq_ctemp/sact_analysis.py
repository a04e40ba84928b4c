"""SACT's attention temperatures read back from a sact_lstm or sact_transformer checkpoint (Lin et
al., EMNLP 2018, Figure 2): tau_t and the attention weights of given sentences, their summary, and
the paper's heatmaps. ctemp-sact-heatmaps (cli/sact_heatmaps.py) is their command line."""

import os
import statistics

import torch

from . import inputs, plotting
from .errors import OptionError


class SactAnalysisError(Exception):
    """A user error (a missing file, a checkpoint of another model): one line, before any output."""


def encoded(lines, spm_model):
    """The lines in the model's input format: sentencepiece pieces where a model is given."""
    if spm_model:
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_file=spm_model)
        lines = [" ".join(sp.encode(line, out_type=str)) for line in lines]
    return lines


def load(data, path, source_lang=None, target_lang=None):
    """(model in eval mode, task) of a sact_lstm or sact_transformer checkpoint over DATA_BIN data."""
    from fairseq import checkpoint_utils  # the plugin's loader: the package is imported

    from .models.sact_lstm import SactLSTMModel
    from .models.sact_transformer import SactTransformerModel

    if not os.path.exists(data):
        raise SactAnalysisError(f"DATA_BIN {data}: no such file or directory")
    inputs.check_checkpoint_option("--path", path, SactAnalysisError)
    overrides = {"data": data}
    if source_lang:
        overrides["source_lang"] = source_lang
    if target_lang:
        overrides["target_lang"] = target_lang
    try:
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)
    except OptionError as e:  # a file fairseq cannot load, or one of the plugin's checks at loading
        raise SactAnalysisError(str(e)) from None
    model = models[0].eval()
    if not isinstance(model, (SactLSTMModel, SactTransformerModel)):
        raise SactAnalysisError(
            f"--path {path} is not a sact_lstm or sact_transformer checkpoint (arch {cfg.model._name})"
        )
    return model, task


def temperature_settings(model):
    """(mode, lambda or None, the constant tau of modes without a learned one)."""
    attention = getattr(model.decoder, "attention", None)  # sact_lstm
    if attention is None:  # sact_transformer: fairseq's own attention in mode "none"
        attention = model.decoder.layers[0].encoder_attn
    mode = getattr(attention, "mode", "none")
    return mode, getattr(attention, "lam", None), getattr(attention, "fixed_temperature", None) or 1.0


def tau_rows(tau):
    """Row labels of sact_transformer's tau (1 x target x layers x K), or None for sact_lstm."""
    if tau is None or tau.dim() == 2:
        return None
    layers, k = tau.shape[2:]
    if k == 1:
        return [f"layer {i + 1}" for i in range(layers)]
    return [f"layer {i + 1} head {j + 1}" for i in range(layers) for j in range(k)]


def tau_summary(sentences, rows):
    """Mean, min and max of tau over every target token of the sentences: one entry for sact_lstm,
    one per row (layer, or layer and head) for sact_transformer."""
    values = [tau for sentence in sentences for tau in sentence["tau"]]
    columns = [values] if rows is None else [list(column) for column in zip(*values)]
    labels = [None] if rows is None else rows
    return [
        {"row": label, "tokens": len(c), "mean": statistics.fmean(c), "min": min(c), "max": max(c)}
        for label, c in zip(labels, columns)
    ]


@torch.no_grad()
def analyse(model, task, source, reference, beam, max_len_a, max_len_b):
    """({source, source_tokens, target_tokens, tau, attention} of one sentence, tau's row labels):
    the reference force-decoded, or without one the beam search's best translation, scored in one
    teacher-forced pass."""
    from fairseq.sequence_generator import SequenceGenerator

    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    src = src_dict.encode_line(source, add_if_not_exist=False, append_eos=True).long()[None]
    lengths = torch.tensor([src.size(1)])
    if reference is not None:
        target = tgt_dict.encode_line(reference, add_if_not_exist=False, append_eos=True).long()
    else:
        generator = SequenceGenerator(
            [model], tgt_dict, beam_size=beam, max_len_a=max_len_a, max_len_b=max_len_b
        )
        target = generator.forward({"net_input": {"src_tokens": src, "src_lengths": lengths}})[0][0]["tokens"]
    prev = torch.cat([torch.tensor([tgt_dict.eos()]), target[:-1]])[None]
    model.decoder.need_attn = True
    _, extra = model(src, lengths, prev)
    tau = extra["attention_temperature"]
    if tau is not None:  # sact_lstm: 1 x target; sact_transformer: 1 x target x layers x K
        tau = tau[0].flatten(1).tolist() if tau.dim() == 4 else tau[0].tolist()
    else:  # fixed or plain attention: the constant the scores were divided by
        tau = [temperature_settings(model)[2]] * target.numel()
    attention = extra["attn"]
    if isinstance(attention, list):  # sact_transformer: [the last layer's, averaged over heads]
        attention = attention[0]
    return {
        "source": source,
        "source_tokens": [src_dict[i] for i in src[0]],
        "target_tokens": [tgt_dict[i] for i in target],
        "tau": tau,
        "attention": attention[0].tolist(),
    }, tau_rows(extra["attention_temperature"])


def draw(sentence, lam, rows, path, title):
    """The PNG of one analysed sentence: tau per target token over its attention matrix."""
    plt = plotting.pyplot()

    src, tgt = sentence["source_tokens"], sentence["target_tokens"]
    taus = [list(row) for row in zip(*sentence["tau"])] if rows else [sentence["tau"]]  # rows x target
    width = max(6.0, 0.45 * max(len(src), len(tgt)) + 2)
    matrix_height = max(2.0, 0.3 * len(tgt))
    tau_height = 0.7 + 0.25 * (len(taus) - 1)
    fig, (top, bottom) = plt.subplots(
        2,
        1,
        figsize=(width, matrix_height + tau_height + 2.5),
        gridspec_kw={"height_ratios": [tau_height, matrix_height]},
    )
    values = [value for row in taus for value in row]
    low, high = (1 / lam, lam) if lam else (min(values), max(values) + 1e-6)
    image = top.imshow(taus, aspect="auto", cmap="coolwarm", vmin=low, vmax=high)
    top.set_xticks(range(len(tgt)), tgt, rotation=60, ha="right", fontsize=8)
    if rows:
        top.set_yticks(range(len(rows)), rows, fontsize=7)
    else:
        top.set_yticks([])
    for r, row in enumerate(taus):
        for t, value in enumerate(row):
            top.text(t, r, f"{value:.2f}", ha="center", va="center", fontsize=7)
    top.set_title(
        f"{title}\nattention temperature tau_t per target token"
        + (f" (range 1/lambda..lambda = {low:.2f}..{high:.2f})" if lam else ""),
        fontsize=9,
    )
    fig.colorbar(image, ax=top, fraction=0.03, pad=0.01)
    image = bottom.imshow(sentence["attention"], aspect="auto", cmap="Greys", vmin=0)
    bottom.set_xticks(range(len(src)), src, rotation=60, ha="right", fontsize=8)
    bottom.set_yticks(range(len(tgt)), tgt, fontsize=8)
    bottom.set_xlabel("source")
    bottom.set_ylabel("target")
    bottom.set_title("attention weights alpha_t,i", fontsize=9)
    fig.colorbar(image, ax=bottom, fraction=0.03, pad=0.01)
    fig.tight_layout()
    fig.savefig(path + ".tmp", dpi=110, format="png")
    plt.close(fig)
    os.replace(path + ".tmp", path)
