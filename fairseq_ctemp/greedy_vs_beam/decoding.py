"""Decoding through fairseq's translation API (fairseq_ctemp.translate), scored with sacrebleu."""

from sacrebleu.metrics import BLEU, CHRF

from .. import inputs, translate
from ..checkpoint_files import first_line
from . import UsageError
from .checks import decoding_options
from .records import Decoded, System


def load_translator(data, checkpoint, extra_args=()):
    """The checkpoint(s) (a.pt:b.pt, an ensemble) loaded once for any number of decodings."""
    for path in checkpoint.split(":"):
        inputs.check_checkpoint_option("--checkpoint", path, UsageError)
    options = decoding_options(extra_args)
    try:
        return translate.Translator(data, checkpoint.split(":"), **options.load_options())
    except translate.TranslateError as e:  # it names the checkpoint
        raise UsageError(f"--checkpoint {e}") from None
    except Exception as e:  # e.g. a checkpoint of another vocabulary than DATA's: one line, no traceback
        raise UsageError(
            f"could not load --checkpoint {checkpoint} with the data {data}: {type(e).__name__}: {first_line(e)}"
        ) from None


def decode(translator, subset, beam, lenpen, extra_args=(), temperature=None, progress=True):
    """One decoding of `subset` by a loaded translator (a translate.Translation)."""
    try:
        return translator.translate(
            subset,
            beam=beam,
            lenpen=lenpen,
            temperature=temperature,
            progress=progress,
            **decoding_options(extra_args).translate_options(),
        )
    except translate.TranslateError as e:
        raise UsageError(f"cannot decode {subset}: {e}") from None


def scored(out, beam, lenpen, refs, tokenize):
    """A decoding (translate.Translation) scored against one reference per sentence."""
    (bleu, chrf), signatures = score(out.hypotheses, refs, tokenize)
    temperatures = list(out.temperatures)
    system = System(
        beam=beam,
        lenpen=lenpen,
        bleu=bleu,
        chrf=chrf,
        n_sentences=out.n_sentences,
        n_tokens=out.n_tokens,
        decode_seconds=out.decode_seconds,
        sentences_per_second=out.sentences_per_second,
        tokens_per_second=out.tokens_per_second,
        wall_seconds=out.wall_seconds,
        decoding_temperature=temperatures[0] if len(set(temperatures)) == 1 else None,
        decoding_temperatures=temperatures,
    )
    return Decoded(out.hypotheses, refs, system, signatures)


def temperature_text(system):
    """T=2, or T=2,1 for an ensemble whose models decode at different temperatures."""
    return "T=" + ",".join(f"{t:g}" for t in system.decoding_temperatures or [system.decoding_temperature])


def score(hyps, refs, tokenize):
    """(BLEU, chrF) of hyps against one reference each, and the sacrebleu signatures."""
    if any(ref is None for ref in refs):
        raise UsageError("the subset has no target side (no T- lines): pass --ref / --dev-ref")
    bleu, chrf = BLEU(tokenize=tokenize), CHRF()
    scores = (bleu.corpus_score(hyps, [refs]).score, chrf.corpus_score(hyps, [refs]).score)
    return scores, {"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature())}
