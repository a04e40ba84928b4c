"""Loading a checkpoint to analyse, with its dictionaries and training progress."""

import os
from dataclasses import dataclass
from typing import Optional

from .. import inputs
from ..checkpoint_files import first_line
from ..errors import OptionError
from . import AnalysisError


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

    inputs.check_checkpoint_option("--path", path, AnalysisError)
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
    except (
        Exception
    ) as e:  # a translation model with an LM's data (no language pair), other dictionaries, ...
        raise AnalysisError(f"--path {path} cannot be loaded with --data {data}: {first_line(e)}") from None
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
