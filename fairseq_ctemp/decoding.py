"""Decoding at the training temperature (the "generator patch").

A model trained with ``--criterion tempered_ce --softmax-temperature T`` is the distribution
softmax(logits / T); decoding it at T = 1 makes it far too peaked and beam search collapses towards
greedy search. T travels inside the checkpoint (``cfg.criterion.softmax_temperature``), and with
``--user-dir fairseq_ctemp`` every fairseq decoding path uses it:

- checkpoints loaded through ``checkpoint_utils.load_model_ensemble_and_task`` (fairseq-generate,
  fairseq-interactive, fairseq-eval-lm, ``from_pretrained`` hub models): each model divides its own
  logits by its own T inside ``get_normalized_probs``, so an ensemble mixing temperatures is exact
  and scoring (eval-lm, --score-reference) uses the same distribution as search;
- ``--eval-bleu`` validation during training: the criterion sets the validation generator's T;
- an explicit ``--temperature`` (command line, hub ``generate(temperature=...)``, or
  ``--eval-bleu-args '{"temperature": ...}'``) replaces the training T; it is never applied on top.

Checkpoints trained with any other criterion are left exactly as they are.
"""
import json
import logging
import math
import sys

from fairseq import checkpoint_utils
from fairseq.tasks import FairseqTask

logger = logging.getLogger("fairseq_ctemp.decoding")

TEMPERED_CRITERIA = ("tempered_ce",)


def training_temperature(cfg):
    """T a checkpoint was trained with (from its cfg), or None for a stock criterion."""
    criterion = _get(cfg, "criterion")
    if criterion is None or _get(criterion, "_name") not in TEMPERED_CRITERIA:
        return None
    return float(_get(criterion, "softmax_temperature", 1.0))


def _get(obj, key, default=None):
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def temper_model(model, temperature, name="model"):
    """Make ``model.get_normalized_probs`` return softmax(logits / T) while
    ``model.ctemp_decoding_temperature`` is set (None switches it off again)."""
    if not hasattr(model, "ctemp_decoding_temperature"):
        untempered = model.get_normalized_probs

        def get_normalized_probs(net_output, log_probs, sample=None):
            t = model.ctemp_decoding_temperature
            if t is not None and t != 1.0:
                net_output = (net_output[0].float() / t, *net_output[1:])
            return untempered(net_output, log_probs, sample)

        model.get_normalized_probs = get_normalized_probs
    model.ctemp_decoding_temperature = temperature
    model.ctemp_training_temperature = temperature
    logger.info(f"{name}: trained with tempered_ce, decoding at its training temperature "
                f"T={temperature:g} (an explicit --temperature replaces it)")


_load_model_ensemble_and_task = checkpoint_utils.load_model_ensemble_and_task


def load_model_ensemble_and_task(filenames, arg_overrides=None, task=None, strict=True, suffix="",
                                 num_shards=1, state=None):
    """fairseq's loader, one checkpoint at a time so each model learns its own training T."""
    ensemble, cfg = [], None
    for i, filename in enumerate(filenames):
        models, cfg, task = _load_model_ensemble_and_task(
            [filename], arg_overrides=arg_overrides, task=task, strict=strict, suffix=suffix,
            num_shards=num_shards, state=state if i == 0 else None)
        temperature = training_temperature(cfg)
        if temperature is not None:
            for model in models:
                temper_model(model, temperature, name=filename)
        ensemble.extend(models)
    return ensemble, cfg, task


def explicit_temperature(gen_args):
    """The decoding temperature the user asked for, or None if they left the default."""
    value = _get(gen_args, "temperature", 1.0)
    on_command_line = any(a == "--temperature" or a.startswith("--temperature=") for a in sys.argv)
    if value == 1.0 and not on_command_line:
        return None
    check_decoding_temperature(value)
    return float(value)


def check_decoding_temperature(value):
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"--temperature must be a finite number > 0, got {value}")


_build_generator = FairseqTask.build_generator


def build_generator(self, models, args, *rest, **kwargs):
    explicit = explicit_temperature(args)
    for i, model in enumerate(models):
        trained_at = getattr(model, "ctemp_training_temperature", None)
        if trained_at is None:
            continue
        model.ctemp_decoding_temperature = None if explicit is not None else trained_at
        if explicit is not None:
            logger.info(f"model {i}: explicit --temperature {explicit:g} replaces its training "
                        f"temperature {trained_at:g}")
        else:
            logger.info(f"model {i}: decoding at training temperature T={trained_at:g}")
    generator = _build_generator(self, models, args, *rest, **kwargs)
    return _sampling_temperature_on_output_heads(models, generator, explicit)


def _sampling_temperature_on_output_heads(models, generator, temperature):
    """fairseq's generator divides net_output[0] by --temperature. For our temperature-head LMs
    net_output[0] are features, not logits (dividing them would change tau and the MoS mixture), so
    the head applies it to its final distribution instead: p^(1/T), renormalised."""
    decoders = [getattr(m, "decoder", None) for m in models]
    ours = [hasattr(d, "output_head") for d in decoders]
    if temperature is None or not any(ours):
        return generator
    if not all(ours) or not hasattr(generator, "temperature"):
        raise ValueError("--temperature with fairseq_ctemp temperature-head LMs needs every model of "
                         "the ensemble to be one (ct_transformer_lm / ct_lstm_lm) and fairseq's "
                         "SequenceGenerator")
    for decoder in decoders:
        decoder.sampling_temperature = temperature
    generator.temperature = 1.0
    logger.info(f"--temperature {temperature:g} applied to the output heads' final distributions")
    return generator


def use_training_temperature_for_validation(task, temperature):
    """Called by tempered_ce: make --eval-bleu's generator (built with the model, before the
    criterion) decode at the training temperature unless --eval-bleu-args sets one."""
    generator = getattr(task, "sequence_generator", None)
    if generator is None or not hasattr(generator, "temperature"):
        return
    eval_args = json.loads(_get(getattr(task, "cfg", None), "eval_bleu_args", None) or "{}")
    if "temperature" in eval_args:
        check_decoding_temperature(eval_args["temperature"])
        logger.info(f"validation generator: --eval-bleu-args temperature {eval_args['temperature']}"
                    f" replaces the training temperature {temperature:g}")
        return
    generator.temperature = temperature
    logger.info(f"validation generator: decoding at training temperature T={temperature:g}")


def apply():
    checkpoint_utils.load_model_ensemble_and_task = load_model_ensemble_and_task
    FairseqTask.build_generator = build_generator
