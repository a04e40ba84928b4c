#!/usr/bin/env python
"""Rewrite fairseq 0.12.3's setup.py to build without torch: only its Cython and C extensions
(data_utils_fast, token_block_utils_fast, libbleu), none of its torch C++ extensions (libbase, libnat,
alignment_train_*), which no code of this project uses. Used by scripts/wheelhouse.sh, so that a
fairseq wheel for another Python version builds where no torch of that version is installed.

    python scripts/strip_torch_extensions.py path/to/fairseq-sdist/setup.py
"""

import sys

IMPORT = "from torch.utils import cpp_extension\n"
BLOCK_START = "extensions.extend(\n    [\n        cpp_extension.CppExtension("
CMDCLASS = 'cmdclass = {"build_ext": cpp_extension.BuildExtension}'


def strip(source):
    """setup.py's text without the torch extensions; ValueError where it is not the expected file."""
    for part in (IMPORT, BLOCK_START, CMDCLASS):
        if source.count(part) != 1:
            raise ValueError(f"expected once, found {source.count(part)} times: {part.splitlines()[0]!r}")
    start, end = source.index(BLOCK_START), source.index(CMDCLASS)
    if start > end:
        raise ValueError("the torch extensions are not listed before cmdclass")
    # The block runs from the CPU extensions through the CUDA_HOME ones, up to cmdclass.
    stripped = source[:start] + "cmdclass = {}" + source[end + len(CMDCLASS) :]
    stripped = stripped.replace(IMPORT, "")
    if "cpp_extension" in stripped or "torch.utils" in stripped:
        raise ValueError("a use of torch's cpp_extension is left")
    return stripped


def main(argv):
    if len(argv) != 1:
        sys.exit("usage: strip_torch_extensions.py SETUP_PY")
    path = argv[0]
    try:
        with open(path) as f:
            source = f.read()
        stripped = strip(source)
    except (OSError, ValueError) as error:
        sys.exit(f"strip_torch_extensions.py: error: {path}: {error} (fairseq 0.12.3's setup.py expected)")
    with open(path, "w") as f:
        f.write(stripped)


if __name__ == "__main__":
    main(sys.argv[1:])
