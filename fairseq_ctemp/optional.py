"""The optional packages of the plugin's extras ([plots]: matplotlib; [subwords]: sentencepiece,
subword-nmt): a tool asks for the one it needs with its checks, before any work, so that without it
the tool ends in one line instead of a traceback after part of its work."""

import importlib

INSTALL = {"subword_nmt": "subword-nmt"}  # pip's name where it is not the module's


def missing(module, does):
    """Why ``module`` cannot do what a tool needs (``does``: "draws the plots"), in a line; None when
    it imports."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        install = INSTALL.get(module, module)
        return f"{module}, which {does}, cannot be imported ({e}): pip install {install}"
    return None
