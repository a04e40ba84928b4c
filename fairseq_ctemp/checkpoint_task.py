"""A checkpoint of the plugin's models given to a task of the other kind is refused when it is
loaded: a language model under fairseq-generate's translation task would otherwise "translate"
every sentence into its own continuation of nothing (or fail deep in load_state_dict), and a
translation model under a language-modelling task scores nothing it was trained for.

Only checkpoints that the plugin owns (its architectures, or a temperature it decodes at) are
checked: what stock fairseq does with its own models stays as it is."""

from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY
from fairseq.tasks import TASK_REGISTRY
from fairseq.tasks.language_modeling import LanguageModelingTask

from .errors import OptionError

PACKAGE = __name__.split(".")[0]


def stored_config(state):
    """The config of a loaded checkpoint (older ones keep an argparse Namespace), else None."""
    if state.get("args") is not None:
        return convert_namespace_to_omegaconf(state["args"])
    return state.get("cfg")


def _get(obj, key):
    if obj is None:
        return None
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def owns_model(cfg):
    """Whether the checkpoint's model is one of the plugin's architectures."""
    model = _get(cfg, "model")
    name = _get(model, "arch") or _get(model, "_name")
    registered = ARCH_MODEL_REGISTRY.get(name) or MODEL_REGISTRY.get(name)
    return registered is not None and registered.__module__.split(".")[0] == PACKAGE


def is_language_modelling(task_class):
    return isinstance(task_class, type) and issubclass(task_class, LanguageModelingTask)


def trained_task(cfg):
    """The registered name of the task the checkpoint was trained for; None if fairseq has none such."""
    trained = _get(_get(cfg, "task"), "_name")
    return trained if trained in TASK_REGISTRY else None


def trains_a_language_model(cfg):
    """Whether the checkpoint's task is a language-modelling one (False where fairseq does not know it)."""
    trained = trained_task(cfg)
    return trained is not None and is_language_modelling(TASK_REGISTRY[trained])


def check_task(filename, cfg, task):
    """OptionError if the checkpoint was trained for a task of the other kind (language modelling
    or not) than ``task``, the one the caller decodes or scores with."""
    trained = trained_task(cfg)
    if task is None or trained is None:
        return
    language_model = trains_a_language_model(cfg)
    if language_model == is_language_modelling(type(task)):
        return
    given = next((name for name, kind in TASK_REGISTRY.items() if kind is type(task)), type(task).__name__)
    if language_model:
        advice = "a language model scores text: fairseq-eval-lm, or --task language_modeling"
    else:
        advice = f"it needs --task {trained} and its data"
    raise OptionError(f"--path {filename} was trained for --task {trained}, not --task {given}: {advice}")
