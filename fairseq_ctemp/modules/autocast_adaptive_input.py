"""fairseq's adaptive input, usable under autocast (--amp).

fairseq's ``AdaptiveInput.forward`` writes each band's rows, made by an embedding and a linear
projection, into a float32 tensor by index assignment; under autocast the projection returns half
precision rows and the assignment fails ("Index put requires the source and destination dtypes
match"). ``AutocastAdaptiveInput`` runs fairseq's forward with autocast off (the input embedding
in float32, as without --amp); everything else, the parameters and their names included, is
fairseq's. Used by ``ct_transformer_lm`` only: fairseq's own models keep fairseq's module."""

import torch
from fairseq.modules import AdaptiveInput


class AutocastAdaptiveInput(AdaptiveInput):
    def forward(self, input):
        with torch.autocast(input.device.type, enabled=False):
            return super().forward(input)


def autocast_safe(embed_tokens):
    """embed_tokens, an AdaptiveInput made an AutocastAdaptiveInput in place (its class alone)."""
    if type(embed_tokens) is AdaptiveInput:
        embed_tokens.__class__ = AutocastAdaptiveInput
    return embed_tokens
