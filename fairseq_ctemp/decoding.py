"""The decoding-temperature rule, enforced here and only here.

    Every distribution that fairseq decodes or scores is softmax(D / t), where
    D are the model's logits (for a temperature-head LM: the log of its final distribution),
    t = X when the user gives a temperature X explicitly, and otherwise
    t = the model's own temperature: the t* that ``ctemp-calibrate --write-checkpoint`` recorded in
        the checkpoint, else T of a checkpoint trained with ``tempered_ce``, else 1.

Never T * X, never a silent T = 1. "Explicitly" means the call or the configuration carries a value:
fairseq's ``--temperature`` defaults to ``None``, "the model's own", instead of 1.0, so
``--temperature 1`` / ``generate(temperature=1.0)`` decode untempered while leaving it out decodes
at T. ``GenerationConfig.temperature`` may hold None but keeps its default 1.0, so the config a
training run saves is stock fairseq's; in a checkpoint of ours that saved 1.0 is read as "the
model's own" (the hub decodes with it). Nothing here reads ``sys.argv``.

How every path reaches the rule:
- a model's ``get_normalized_probs`` applies t (``follow_the_rule``); T and t* are set on models
  loaded by ``checkpoint_utils.load_model_ensemble_and_task`` (fairseq-generate / -interactive /
  -eval-lm, the hub) from the checkpoint's saved criterion and its ``ctemp_calibration`` cfg group,
  and T on the ``--eval-bleu`` model by ``tempered_ce``;
- an explicit X is an argument of the generator or scorer (``SequenceGenerator(temperature=X)``,
  ``SequenceScorer(temperature=X)``, which ``task.build_generator`` fills from ``--temperature``,
  ``--eval-bleu-args`` or a hub keyword); it holds only while that generator runs
  (``explicit_temperature``), so no call changes what the next one computes;
- a generator with a model that carries a temperature (a temperature head, a T or a t*) leaves
  fairseq's own division of the decoder output by its temperature at 1 (it would divide an LM
  head's features, and multiply with T) and applies X through the rule instead;
- X is the translation models' alone, as in fairseq: a language model fused by ``--lm-path``
  decodes at its own temperature (``ctemp_fused_lm``), with stock or tempered translators alike.

Models that carry no temperature are left as fairseq made them: a generator of stock models only
is stock fairseq's (X divides the logits in ``EnsembleModel.forward_decoder``, None is 1), with no
attribute or method added, so ``torch.jit.script`` compiles it as it does without the plugin; a
task's build_generator is given stock fairseq's 1.0 for them in place of None (``stock_temperature``:
tasks with generators of their own, e.g. speech_dlm_task's, take no None), also a task registered
after the plugin (``register_task``)."""

import argparse
import contextlib
import contextvars
import copy
import inspect
import json
import logging
import math
import os
import types
from typing import Optional

import torch.nn.functional as F
from fairseq import checkpoint_utils, options, tasks
from fairseq.sequence_generator import EnsembleModel, SequenceGenerator
from fairseq.sequence_scorer import SequenceScorer
from fairseq.tasks import FairseqTask

from . import checkpoint_task, patches
from .errors import OptionError

logger = logging.getLogger("fairseq_ctemp.decoding")

TEMPERED_CRITERIA = ("tempered_ce",)
# The cfg group where ctemp-calibrate records t* ({"temperature": t*, "signature": ...}): fairseq's
# loader keeps every group of the saved cfg, and no fairseq component reads this one.
CALIBRATION_GROUP = "ctemp_calibration"
ALLOWED = (
    'a finite number > 0 (--temperature, a hub temperature= keyword or the "temperature" '
    "of --eval-bleu-args); leave it out to decode at the model's own temperature"
)

_explicit = contextvars.ContextVar("fairseq_ctemp_explicit_temperature", default=None)


# ---------------------------------------------------------------------------------------- the rule
def check_decoding_temperature(value):
    """None (the model's own temperature) or a finite X > 0, as a float; else a clear ValueError."""
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise OptionError(f"--temperature must be {ALLOWED}; got {value!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise OptionError(f"--temperature must be {ALLOWED}; got {value:g}")
    return value


@contextlib.contextmanager
def explicit_temperature(value):
    """Within this block every model follows the rule with t = value (None: its own temperature)."""
    token = _explicit.set(check_decoding_temperature(value))
    try:
        yield
    finally:
        _explicit.reset(token)


def own_temperature(model):
    """The temperature a model decodes at when none is given: its calibrated t*, else its
    tempered_ce training T, else 1."""
    return (
        getattr(model, "ctemp_calibrated_temperature", None)
        or getattr(model, "ctemp_training_temperature", None)
        or 1.0
    )


def own_temperature_source(model):
    """How the log names a model's own temperature."""
    if getattr(model, "ctemp_calibrated_temperature", None):
        return f"calibrated temperature t*={own_temperature(model):g} (ctemp-calibrate)"
    if getattr(model, "ctemp_overridden_temperature", False):
        return f"temperature T={own_temperature(model):g} (the model overrides' softmax_temperature)"
    return f"training temperature T={own_temperature(model):g}"


def has_temperature_head(model):
    return getattr(getattr(model, "decoder", None), "output_head", None) is not None


def carries_temperature(model):
    """Whether the rule decides the model's distribution: a temperature head, or a T / t* recorded
    on it (set_own_temperature), or already routed through the rule."""
    return has_temperature_head(model) or getattr(model, "_ctemp_follows_the_rule", False)


def _get_normalized_probs(self, net_output, log_probs, sample=None):
    """softmax(D / t) of the rule, in place of the model's own ``get_normalized_probs``."""
    stock = type(self).get_normalized_probs
    explicit = None if getattr(self, "ctemp_fused_lm", False) else _explicit.get()
    t = explicit if explicit is not None else own_temperature(self)
    if has_temperature_head(self):  # net_output[0] are features: temper the final distribution
        if t == 1.0:
            return stock(self, net_output, log_probs, sample)
        lprobs = F.log_softmax(stock(self, net_output, True, sample).float() / t, dim=-1)
        return lprobs if log_probs else lprobs.exp()
    if t != 1.0:  # logits (or fairseq's adaptive softmax features, linear in its logits)
        net_output = (net_output[0] / t, *net_output[1:])
    return stock(self, net_output, log_probs, sample)


def follow_the_rule(model):
    """Route the model's ``get_normalized_probs`` through the rule (idempotent). A bound method,
    not a closure, so that a deep copy of the model (EMA) follows the rule as the copy."""
    if not getattr(model, "_ctemp_follows_the_rule", False):
        model.get_normalized_probs = types.MethodType(_get_normalized_probs, model)
        model._ctemp_follows_the_rule = True
    return model


def set_own_temperature(model, training=None, calibrated=None, name="model", trained_at=None):
    """Record that ``model`` was trained with tempered_ce at T and / or calibrated by ctemp-calibrate
    at t*: it then decodes at t*, else at T, unless a temperature is given explicitly. trained_at:
    the T it was trained at where fairseq's model overrides set another (``training``)."""
    follow_the_rule(model)
    said = []
    if training is not None:
        model.ctemp_training_temperature = float(training)
        model.ctemp_overridden_temperature = trained_at is not None
        said.append(
            f"trained with tempered_ce at T={training:g}"
            if trained_at is None
            else f"trained with tempered_ce at T={trained_at:g}, softmax_temperature {training:g} by the model overrides"
        )
    if calibrated is not None:
        model.ctemp_calibrated_temperature = float(calibrated)
        said.append(f"calibrated by ctemp-calibrate at t*={calibrated:g}")
    own = f"t*={calibrated:g}" if calibrated is not None else f"T={training:g}"
    logger.info(f"{name}: {'; '.join(said)}; decodes at {own} unless a temperature is given explicitly")


def calibrated_temperature(cfg):
    """t* recorded in a checkpoint's cfg by ctemp-calibrate, or None."""
    temperature = _get(_get(cfg, CALIBRATION_GROUP), "temperature")
    return None if temperature is None else float(temperature)


def training_temperature(cfg):
    """T a checkpoint was trained with (from its cfg), or None for a stock criterion."""
    criterion = _get(cfg, "criterion")
    if criterion is None or _get(criterion, "_name") not in TEMPERED_CRITERIA:
        return None
    return float(_get(criterion, "softmax_temperature", 1.0))


def check_stored_temperatures(filename, training, calibrated):
    """A checkpoint decodes at its stored T or t*: one that is not a finite number > 0 (a damaged or
    edited file) would decode an inverted or undefined distribution, so it is refused."""
    for value, what in ((training, "tempered_ce training temperature"), (calibrated, "calibrated t*")):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise OptionError(
                f"--path {filename}: its stored {what} is {value:g}, not a finite number > 0 (a "
                "damaged or edited checkpoint); it cannot decide the decoding temperature"
            )


def _get(obj, key, default=None):
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


# ------------------------------------------------------------------- where fairseq meets the rule
_load_model_ensemble_and_task = checkpoint_utils.load_model_ensemble_and_task


def load_model_ensemble_and_task(
    filenames, arg_overrides=None, task=None, strict=True, suffix="", num_shards=1, state=None
):
    """fairseq's loader, one checkpoint at a time so each model learns its own training T."""
    ensemble, cfg = [], None
    for i, filename in enumerate(filenames):
        own_state, trained_at = (state if i == 0 else None), None
        one_file = num_shards == 1 and not suffix and os.path.isfile(filename)  # (what is read here)
        if own_state is None and one_file:
            own_state, trained_at = state_overridden(filename, arg_overrides)
        if task is not None and one_file:
            own_state = own_state or checkpoint_utils.load_checkpoint_to_cpu(filename, arg_overrides)
            stored = checkpoint_task.stored_config(own_state)
            if checkpoint_task.owns_model(stored) or training_temperature(stored) is not None:
                checkpoint_task.check_task(filename, stored, task)
        models, cfg, task = _load_model_ensemble_and_task(
            [filename],
            arg_overrides=arg_overrides,
            task=task,
            strict=strict,
            suffix=suffix,
            num_shards=num_shards,
            state=own_state,
        )
        temperature, calibrated = training_temperature(cfg), calibrated_temperature(cfg)
        check_stored_temperatures(filename, temperature, calibrated)
        for model in models:  # a model with neither and no temperature head stays stock
            if temperature is not None or calibrated is not None:
                set_own_temperature(model, temperature, calibrated, name=filename, trained_at=trained_at)
            elif has_temperature_head(model):
                follow_the_rule(model)
        ensemble.extend(models)
    # The saved generation config of a checkpoint of ours holds training-time defaults, never a
    # decoding choice; the hub decodes with it, so its temperature must mean "the model's own".
    # Stock models keep theirs, as stock fairseq keeps it.
    generation = _get(cfg, "generation")
    explicit = "temperature" in (arg_overrides or {})  # from_pretrained(..., temperature=X)
    ours = any(carries_temperature(model) for model in ensemble)
    if ours and generation is not None and not explicit and _get(generation, "temperature") is not None:
        generation.temperature = None
    return ensemble, cfg, task


def state_overridden(filename, arg_overrides):
    """(the checkpoint's state with fairseq's arg_overrides applied as its loader applies them, the
    T it was trained at where they set another). fairseq sets every option of a name: a decoding
    temperature (the hub's temperature=X, --model-overrides) would rewrite the t* of
    ctemp-calibrate, then logged and kept as the model's own, so t* is kept as recorded; a
    softmax_temperature applies (to the criterion of fairseq-validate, and as the model's own), said
    as such, not as the T it was trained at. (None, None) where no override names one, or the
    checkpoint records neither (fairseq's loader reads it)."""
    from fairseq.dataclass.utils import overwrite_args_by_name

    if not {"temperature", "softmax_temperature"} & set(arg_overrides or {}):
        return None, None
    state = checkpoint_utils.load_checkpoint_to_cpu(filename)
    cfg = state.get("cfg")
    trained, calibrated = training_temperature(cfg), _get(cfg, CALIBRATION_GROUP)
    if trained is None and calibrated is None:  # another's checkpoint: fairseq's loader, untouched
        return None, None
    recorded = None if calibrated is None else dict(calibrated)
    overwrite_args_by_name(cfg, arg_overrides)
    if recorded is not None:
        cfg[CALIBRATION_GROUP] = recorded
    overridden = trained is not None and training_temperature(cfg) != trained
    return state, (trained if overridden else None)


_build_generator = FairseqTask.build_generator


def build_generator(self, models, args, *rest, **kwargs):
    """fairseq's build_generator; the temperature (None or X) goes to the generator or scorer."""
    given = None if args is _stock_default.get() else _get(args, "temperature")
    explicit = check_decoding_temperature(given)
    stock = stock_temperature(args, models)  # (X reaches generator_init)
    generator = _build_generator(self, models, stock, *rest, **kwargs)
    if isinstance(generator, SequenceScorer):  # --score-reference: fairseq builds it without X
        generator.temperature = explicit
    for i, model in enumerate(models):
        if explicit is not None and has_temperature_head(model):
            logger.info(
                f"model {i}: explicit temperature {explicit:g} applied to its output head's "
                f"final distribution"
            )
        elif explicit is not None and own_temperature(model) != 1.0:
            logger.info(
                f"model {i}: explicit temperature {explicit:g} replaces its {own_temperature_source(model)}"
            )
        elif explicit is None and own_temperature(model) != 1.0:
            logger.info(f"model {i}: decoding at {own_temperature_source(model)}")
    return generator


# the copy stock_temperature made for a task's own build_generator: not an explicit 1.0
_stock_default = contextvars.ContextVar("fairseq_ctemp_stock_default_temperature", default=None)


def stock_temperature(args, models):
    """args as they are, or, where their temperature is None (the plugin's --temperature default)
    and no model carries a temperature, a copy at stock fairseq's default, 1.0: what a task's
    generator of stock models is given without the plugin (speech_dlm_task's takes no None)."""
    if _get(args, "temperature", 1.0) is not None or any(carries_temperature(m) for m in models):
        return args
    if isinstance(args, dict):
        return {**args, "temperature": 1.0}
    if isinstance(args, argparse.Namespace):  # (its values shared, as they may not copy)
        return argparse.Namespace(**{**vars(args), "temperature": 1.0})
    args = copy.deepcopy(args)  # fairseq's GenerationConfig: a copy shares no node with the caller's
    args.temperature = 1.0
    return args


def task_build_generator(build):
    """A task's own build_generator (one that replaces FairseqTask's), given stock_temperature's
    args; if it calls FairseqTask's, that one takes their 1.0 for what it was, no temperature."""

    def build_generator(self, models, args, *rest, **kwargs):
        stock = stock_temperature(args, models)
        if stock is args:
            return build(self, models, args, *rest, **kwargs)
        token = _stock_default.set(stock)
        try:
            return build(self, models, stock, *rest, **kwargs)
        finally:
            _stock_default.reset(token)

    return build_generator


def own_generator_classes(task):
    """The classes of a task's MRO, FairseqTask's excepted, that define a build_generator."""
    return [cls for cls in task.__mro__ if cls is not FairseqTask and "build_generator" in vars(cls)]


def give_stock_default(task):
    """Each own build_generator of a task class is given stock_temperature's args (once)."""
    for cls in own_generator_classes(task):
        if not patches.installed(cls, "build_generator"):
            patches.replace(cls, "build_generator", task_build_generator(vars(cls)["build_generator"]), OWN)


_register_task = tasks.register_task


def register_task(name, dataclass=None):
    """fairseq's register_task: a task registered after the plugin (another --user-dir, a module of
    the user's) with a build_generator of its own is given stock fairseq's 1.0 as fairseq's are."""
    register = _register_task(name, dataclass)

    def register_task_cls(cls):
        registered = register(cls)
        give_stock_default(registered)
        return registered

    return register_task_cls


_generator_init = SequenceGenerator.__init__
_generator_parameters = inspect.signature(_generator_init)


def generator_init(self, *args, **kwargs):
    """SequenceGenerator(..., temperature=None): None decodes each model at its own temperature. For
    stock models only, fairseq's generator with X (None: 1); else the rule (adopt_the_rule)."""
    call = _generator_parameters.bind(self, *args, **kwargs)
    explicit = check_decoding_temperature(call.arguments.get("temperature"))
    models = call.arguments["models"]
    ruled = any(carries_temperature(m) for m in getattr(models, "models", models))
    call.arguments["temperature"] = 1.0 if explicit is None else explicit
    _generator_init(*call.args, **call.kwargs)
    if ruled:
        adopt_the_rule(self, explicit)


def adopt_the_rule(generator, explicit):
    """The generator's models decode by the rule, X = explicit (None: each its own temperature):
    fairseq's division by the generator's temperature becomes 1, and its entry points (generate,
    forward) hold X while they run. Also for a generator whose model gained a T after it was built."""
    for model in generator.model.models:
        follow_the_rule(model)
    # fairseq divides only the translation models' output by --temperature, never that of the LM
    # fused by --lm-path: that LM decodes at its own temperature here too (a stock LM is left as is)
    lm = getattr(generator, "lm_model", None)
    if lm is not None and carries_temperature(lm):
        lm.ctemp_fused_lm = True
    generator.temperature = 1.0
    generator.ctemp_temperature = explicit
    if not getattr(generator, "_ctemp_entry_points", False):
        for name in ("generate", "forward"):  # the class's, e.g. SequenceGeneratorWithAlignment's
            setattr(
                generator,
                name,
                types.MethodType(_holding_explicit(getattr(type(generator), name)), generator),
            )
        generator._ctemp_entry_points = True


def _holding_explicit(method):
    def entry_point(self, *args, **kwargs):
        with explicit_temperature(self.ctemp_temperature):
            return method(self, *args, **kwargs)

    return entry_point


_scorer_init = SequenceScorer.__init__


def scorer_init(self, tgt_dict, *args, temperature=None, **kwargs):
    """SequenceScorer(..., temperature=None): scores at each model's own temperature or at X."""
    _scorer_init(self, tgt_dict, *args, **kwargs)
    self.temperature = check_decoding_temperature(temperature)


_scorer_generate = SequenceScorer.generate


def scorer_generate(self, models, sample, **kwargs):
    """fairseq's scoring under the rule, for models that carry a temperature and those scored with
    them at an explicit X; stock models only are fairseq's scorer's, which takes no temperature."""
    if not any(carries_temperature(m) for m in models):
        return _scorer_generate(self, models, sample, **kwargs)
    explicit = getattr(self, "temperature", None)
    for model in models:  # a stock model scored without X stays stock
        if explicit is not None or carries_temperature(model):
            follow_the_rule(model)
    with explicit_temperature(explicit):
        return _scorer_generate(self, models, sample, **kwargs)


def use_training_temperature_for_validation(task, temperature):
    """Called by tempered_ce: --eval-bleu's generator (built with the model, before the criterion)
    decodes the model being trained at T, unless --eval-bleu-args sets a temperature."""
    generator = getattr(task, "sequence_generator", None)
    if generator is None or not isinstance(getattr(generator, "model", None), EnsembleModel):
        return
    eval_args = json.loads(_get(getattr(task, "cfg", None), "eval_bleu_args", None) or "{}")
    for model in generator.model.models:
        model.ctemp_training_temperature = float(temperature)
    adopt_the_rule(generator, check_decoding_temperature(eval_args.get("temperature")))
    if eval_args.get("temperature") is not None:
        logger.info(
            f"validation generator: --eval-bleu-args temperature {eval_args['temperature']:g}"
            f" replaces the training temperature {temperature:g}"
        )
    else:
        logger.info(f"validation generator: decoding at training temperature T={temperature:g}")


def generation_temperature_may_be_none():
    """fairseq's GenerationConfig.temperature: Optional, so that a decoding config can hold None
    ("the model's own"). Its default stays 1.0: what a training run saves is stock fairseq's."""
    from fairseq.dataclass.configs import GenerationConfig
    from fairseq.dataclass.initialize import hydra_init

    field = GenerationConfig.__dataclass_fields__["temperature"]
    field.type = GenerationConfig.__annotations__["temperature"] = Optional[float]
    field.metadata = types.MappingProxyType(
        {
            "help": "decoding temperature t > 0: the distribution is softmax(logits / t) and replaces "
            "the model's own temperature (default: the training T of a tempered_ce checkpoint, "
            "1 for any other)"
        }
    )
    hydra_init()  # fairseq built its config schema at import, with the old field


_add_generation_args = options.add_generation_args


def add_generation_args(parser):
    """fairseq's decoding options (fairseq-generate, -interactive), --temperature defaulting to None."""
    group = _add_generation_args(parser)
    group.set_defaults(temperature=None)
    return group


def apply():
    if patches.installed(SequenceGenerator, "__init__"):  # the plugin imported twice
        return
    if patches.record(
        "fairseq.dataclass.configs.GenerationConfig.temperature",
        "the decoding rule: it may be None, the model's own temperature (its default stays 1.0)",
    ):
        generation_temperature_may_be_none()
    for owner, name, new, why in (
        (
            options,
            "add_generation_args",
            add_generation_args,
            RULE + "--temperature defaults to None, the model's own temperature (1 for stock models)",
        ),
        (
            checkpoint_utils,
            "load_model_ensemble_and_task",
            load_model_ensemble_and_task,
            RULE + "each model learns its T, t*; a checkpoint of the other task kind is refused",
        ),
        (
            FairseqTask,
            "build_generator",
            build_generator,
            RULE + "the decoding temperature reaches the generator or scorer",
        ),
        (
            SequenceGenerator,
            "__init__",
            generator_init,
            RULE
            + "a generator of models that carry a temperature decodes at it (stock models: fairseq's generator)",
        ),
        (
            SequenceScorer,
            "__init__",
            scorer_init,
            RULE + "--score-reference scores at the decoding temperature",
        ),
        (
            SequenceScorer,
            "generate",
            scorer_generate,
            RULE + "the scorer's models under the rule while it scores",
        ),
    ):
        patches.replace(owner, name, new, why)
    for task in list(tasks.TASK_REGISTRY.values()):  # fairseq's (and any registered before)
        give_stock_default(task)
    patches.replace(
        tasks,
        "register_task",
        register_task,
        RULE + "a task registered later with a build_generator of its own is given the same 1.0",
    )


RULE = "the decoding rule (docs/decoding_temperature.md): "
OWN = RULE + "--temperature left at None reaches this task's generator of stock models as 1.0"
