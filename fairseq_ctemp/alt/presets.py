"""The ALT models' settings: the one source of the sweep's defaults (``ctemp-alt-sweep run --preset``)
and of its model variants (``--variants``).

Each preset is a Preset: its model, training options and LSTM sizes, and the sweep's defaults.

VARIANTS: the models a sweep can train besides (or instead of) the preset's Transformer, each a
Variant, with the preset's data, training options, validation BLEU, early stopping, averaging and
decoding. A variant with a parameter is named with its value, NAME:VALUE (fixed_lstm:2).
"""

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

PAPER_T = [1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 3.0, 4.0, 5.0, 10.0]


PAPER_BEAMS = [2, 4, 6, 8, 10, 12]


PAPER_LENPENS = [0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]

OPTIMIZER = [
    "--optimizer",
    "adam",
    "--adam-betas",
    "(0.9,0.98)",
    "--clip-norm",
    "0.0",
    "--lr-scheduler",
    "inverse_sqrt",
]

# The SACT recipe's LSTM sizes (examples/sact): the paper's En-Vi model (sact_lstm_iwslt_en_vi: 2+2
# layers, 512-d, dropout 0.4) for the GPU presets, and the small CPU model of
# examples/sact/run_alt_small.sh (1+1 layers, 256-d embeddings, 128-d encoder per direction, 256-d
# decoder, dropout 0.3) for mini.
LSTM_PAPER = ["--arch", "sact_lstm_iwslt_en_vi"]
LSTM_SMALL = [
    "--arch",
    "sact_lstm",
    "--encoder-layers",
    "1",
    "--decoder-layers",
    "1",
    "--encoder-embed-dim",
    "256",
    "--encoder-hidden-size",
    "128",
    "--decoder-embed-dim",
    "256",
    "--decoder-hidden-size",
    "256",
    "--decoder-out-embed-dim",
    "256",
    "--dropout",
    "0.3",
]


@dataclass(frozen=True, kw_only=True)
class Preset:
    about: str  # one line for --help
    model: List[str]  # fairseq-train options of its Transformer: architecture, sizes, dropout
    training: List[str]  # optimizer, learning rate, batch
    lstm: List[str]  # the sizes of the LSTM variants
    # the sweep's defaults (its options of the same names replace them)
    interval: int  # validate and save every N updates
    patience: int
    average: int  # checkpoints of the last N validations averaged
    max_update: Optional[int]  # None: no cap
    log_interval: int
    temperatures: List[float]
    grid_beams: List[int]  # finalize's dev grid ...
    grid_lenpens: List[float]  # ... of beams x length penalties
    eval_beam: int
    speed_beams: List[int]
    decode_batch: int
    threads: Optional[int]  # per run on CPU; None: torch's default

    @property
    def train(self):
        """Every fairseq-train option but the criterion, the data and the schedule of validations."""
        return self.model + self.training


# The GPU presets' learning rate and batch (the paper's), and their sweep: the paper's
# temperatures and decoding grid, a validation every 1,000 updates, no cap.
PAPER_LR = ["--lr", "5e-4", "--warmup-updates", "4000", "--max-tokens", "4096"]
GPU_SWEEP = {
    "lstm": LSTM_PAPER,
    "interval": 1000,
    "patience": 10,
    "average": 10,
    "max_update": None,
    "log_interval": 100,
    "temperatures": PAPER_T,
    "grid_beams": PAPER_BEAMS,
    "grid_lenpens": PAPER_LENPENS,
    "eval_beam": 4,
    "speed_beams": [4, 10],
    "decode_batch": 128,
    "threads": None,
}

PRESETS = {
    "base": Preset(
        about="Transformer base (6+6 layers, 512/2048, 8 heads; the paper's model), GPU",
        model=[
            "--arch",
            "transformer",
            "--share-decoder-input-output-embed",
            "--dropout",
            "0.1",
            "--attention-dropout",
            "0.1",
            "--activation-dropout",
            "0.1",
        ],
        training=[
            *OPTIMIZER,
            *PAPER_LR,
        ],
        **GPU_SWEEP,
    ),
    "small": Preset(
        about="fairseq's transformer_iwslt_de_en (6+6 layers, 512/1024, 4 heads), dropout 0.3, GPU",
        model=[
            "--arch",
            "transformer_iwslt_de_en",
            "--share-decoder-input-output-embed",
            "--dropout",
            "0.3",
        ],
        training=[
            "--weight-decay",
            "0.0001",
            *OPTIMIZER,
            *PAPER_LR,
        ],
        **GPU_SWEEP,
    ),
    "mini": Preset(
        about="CPU: 2+2 layers, 128/512, 4 heads, one thread per run, capped updates "
        "(on a 2-core CPU use it with small data, e.g. --vocab 2000 --train-subset 4000)",
        model=[
            "--arch",
            "transformer",
            "--encoder-layers",
            "2",
            "--decoder-layers",
            "2",
            "--encoder-embed-dim",
            "128",
            "--decoder-embed-dim",
            "128",
            "--encoder-ffn-embed-dim",
            "512",
            "--decoder-ffn-embed-dim",
            "512",
            "--encoder-attention-heads",
            "4",
            "--decoder-attention-heads",
            "4",
            "--share-decoder-input-output-embed",
            "--dropout",
            "0.1",
        ],
        training=[
            *OPTIMIZER,
            # a short warm-up and about half the Noam peak for d=128 (d^-0.5 * 200^-0.5 = 6e-3):
            # at 1e-3 the small-data runs were still far from early stopping after 900 updates
            "--lr",
            "3e-3",
            "--warmup-updates",
            "200",
            "--max-tokens",
            "2048",
            # greedy validation BLEU in batches of ~200 sentences: with the training batch
            # (~45) validating took as long as 100 updates on one thread
            "--max-tokens-valid",
            "8192",
            "--num-workers",
            "0",
        ],
        lstm=LSTM_SMALL,
        interval=100,
        patience=10,
        average=5,
        max_update=8000,
        log_interval=20,
        temperatures=[1.0, 2.0, 3.0, 4.0, 5.0],
        grid_beams=[2, 4, 6],
        grid_lenpens=[0.6, 1.0, 1.4],
        eval_beam=4,
        speed_beams=[4, 10],
        decode_batch=200,
        threads=1,
    ),
}


MAX_LEN = ["--max-len-a", "2", "--max-len-b", "20"]  # bounds babbling of early/poor models (covers ALT)


DEFAULT_VARIANT = "transformer"


@dataclass(frozen=True, kw_only=True)
class Variant:
    """A model variant of a sweep."""

    about: str
    # how its model options derive from the preset's: ("preset", None), the preset's Transformer;
    # ("arch", name), its options under another architecture ("{preset}": the preset's name);
    # ("lstm", mode), the preset's LSTM sizes with that --attention-temperature
    model: Tuple[str, Optional[str]]
    # tempered_ce: trained at every --temperatures T (the transformer variant on the whole T x LS x
    # SEM grid, the others at the primary LS and SEM); ct_cross_entropy: no fixed T, no SEM term, T = 1
    criterion: str
    # the variant whose T = 1 run finalize tests it against (paired bootstrap): the transformer,
    # unless it is the same model without its temperature
    baseline: str = DEFAULT_VARIANT
    options: Tuple[str, ...] = ()  # more options of its model
    parameter: Optional[Tuple[str, str]] = None  # NAME:VALUE: (its option, the value's name), a number > 0


VARIANTS = {
    "transformer": Variant(
        about="the preset's Transformer, softmax tempering: tempered_ce at every --temperatures T",
        model=("preset", None),
        criterion="tempered_ce",
    ),
    "ct_transformer": Variant(
        about="contextual temperature: ct_transformer_alt_<preset>, ct_cross_entropy (tau learnt per token)",
        model=("arch", "ct_transformer_alt_{preset}"),
        criterion="ct_cross_entropy",
    ),
    "sact_transformer": Variant(
        about="SACT attention temperature in the Transformer: sact_transformer_alt_<preset>, tempered_ce "
        "(c_(t-1) from the attention at tau = 1: every position trained at once)",
        model=("arch", "sact_transformer_alt_{preset}"),
        criterion="tempered_ce",
    ),
    "sact_transformer_tempered": Variant(
        about="the same with the paper's recurrence, c_(t-1) from the attention at tau_(t-1) "
        "(--sact-previous-context tempered: a loop over target positions in training)",
        model=("arch", "sact_transformer_alt_{preset}"),
        options=("--sact-previous-context", "tempered"),
        criterion="tempered_ce",
    ),
    "lstm": Variant(
        about="the SACT recipe's attention LSTM without a temperature (sact_lstm "
        "--attention-temperature none, i.e. fairseq's lstm), tempered_ce",
        model=("lstm", "none"),
        criterion="tempered_ce",
    ),
    "sact_lstm": Variant(
        about="the same LSTM with SACT (--attention-temperature sact), tempered_ce",
        model=("lstm", "sact"),
        criterion="tempered_ce",
        baseline="lstm",
    ),
    "fixed_lstm": Variant(
        about="the same LSTM with a constant attention temperature TAU (fixed_lstm:TAU, "
        "--attention-temperature fixed; the SACT paper's ablation), tempered_ce",
        model=("lstm", "fixed"),
        criterion="tempered_ce",
        baseline="lstm",
        parameter=("--fixed-attention-temperature", "TAU"),
    ),
}


def split_variant(variant):
    """'fixed_lstm:2' -> ('fixed_lstm', 2.0), 'lstm' -> ('lstm', None); ValueError (what is wrong)
    for an unknown name, or a value missing, given to a variant without one, or not a number > 0."""
    name, colon, value = variant.partition(":")
    if name not in VARIANTS:
        raise ValueError(f"unknown {variant}")
    if VARIANTS[name].parameter is None:
        if colon:
            raise ValueError(f"{variant}: {name} takes no :VALUE")
        return name, None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        option, value_name = VARIANTS[name].parameter
        raise ValueError(f"{variant}: {name} needs its {option} as {name}:{value_name}, a number > 0")
    return name, number


def variant_names():
    """The names --variants takes, as its help and errors show them (fixed_lstm:TAU)."""
    return [name + (f":{spec.parameter[1]}" if spec.parameter else "") for name, spec in VARIANTS.items()]


def variant_dir_name(variant):
    """The variant's part of its run directories: fixed_lstm:2 -> fixed_lstm-tau2 (no ':' in a path:
    fairseq's --path reads it as an ensemble)."""
    name, value = split_variant(variant)
    return name if value is None else f"{name}-{VARIANTS[name].parameter[1].lower()}{value:g}"


def canonical_variant(variant):
    """The one spelling of a variant (fixed_lstm:2.0 -> fixed_lstm:2): the same run, the same name."""
    name, value = split_variant(variant)
    return name if value is None else f"{name}:{value:g}"


def variant_spec(variant):
    """The VARIANTS entry of a variant, with or without its :VALUE."""
    return VARIANTS[split_variant(variant)[0]]


def baseline_variant(variant):
    """The variant whose T = 1 run a variant is compared with."""
    return variant_spec(variant).baseline


def compared_variants(variants):
    """The variants finalize compares with their baseline's T=1 run: those whose baseline is in the
    sweep (e.g. lstm,sact_lstm: sact_lstm against lstm; lstm is the baseline, not compared)."""
    return [v for v in variants if v != DEFAULT_VARIANT and baseline_variant(v) in variants]


def variant_model(variant, preset_name):
    """(fairseq-train model options, the architecture) of a variant of a preset."""
    preset = PRESETS[preset_name]
    name, parameter = split_variant(variant)
    kind, value = VARIANTS[name].model
    if kind == "preset":
        return list(preset.model), preset.model[1]
    if kind == "arch":  # the same sizes and dropout, stated explicitly, under the variant's architecture
        arch = value.format(preset=preset_name)
        return ["--arch", arch, *preset.model[2:], *VARIANTS[name].options], arch
    options = [*preset.lstm, "--attention-temperature", value]
    if parameter is not None:
        options += [VARIANTS[name].parameter[0], f"{parameter:g}"]
    return options, preset.lstm[1]
