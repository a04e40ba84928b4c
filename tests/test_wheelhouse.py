"""scripts/strip_torch_extensions.py, which lets scripts/wheelhouse.sh build fairseq's wheel for
another Python without torch: on the parts of fairseq 0.12.3's setup.py it rewrites (quoted below),
the torch C++ extensions go, the Cython and C ones stay, and the result is valid Python."""

import ast
import importlib.util
import os

import pytest
from conftest import REPO

# fairseq 0.12.3's setup.py, the lines around what is rewritten (the CUDA block shortened)
SETUP = """import os
import sys

from setuptools import Extension, find_packages, setup
from torch.utils import cpp_extension

extensions = [
    Extension("fairseq.libbleu", sources=["fairseq/clib/libbleu/libbleu.cpp"]),
    NumpyExtension("fairseq.data.data_utils_fast", sources=["fairseq/data/data_utils_fast.pyx"]),
    NumpyExtension("fairseq.data.token_block_utils_fast", sources=["fairseq/data/token_block_utils_fast.pyx"]),
]


extensions.extend(
    [
        cpp_extension.CppExtension(
            "fairseq.libbase",
            sources=[
                "fairseq/clib/libbase/balanced_assignment.cpp",
            ],
        ),
    ]
)
if "CUDA_HOME" in os.environ:
    extensions.extend(
        [
            cpp_extension.CppExtension("fairseq.libnat_cuda", sources=["fairseq/clib/libnat_cuda/binding.cpp"]),
        ]
    )

cmdclass = {"build_ext": cpp_extension.BuildExtension}

if "READTHEDOCS" in os.environ:
    extensions = []
"""


@pytest.fixture
def strip():
    path = os.path.join(REPO, "scripts", "strip_torch_extensions.py")
    spec = importlib.util.spec_from_file_location("strip_torch_extensions", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.strip


def test_the_torch_extensions_go_and_the_cython_and_c_ones_stay(strip):
    stripped = strip(SETUP)
    ast.parse(stripped)
    assert "torch" not in stripped and "libbase" not in stripped and "libnat" not in stripped
    for kept in ("fairseq.libbleu", "data_utils_fast", "token_block_utils_fast", 'if "READTHEDOCS"'):
        assert kept in stripped
    assert "\ncmdclass = {}\n" in stripped


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda s: s.replace("from torch.utils import cpp_extension\n", ""), "expected once, found 0"),
        (lambda s: s + 'cmdclass = {"build_ext": cpp_extension.BuildExtension}\n', "expected once, found 2"),
        (
            lambda s: s.replace(
                "extensions.extend(\n    [\n        cpp_extension", "extensions.extend([cpp_extension"
            ),
            "found 0",
        ),
    ],
)
def test_a_setup_py_of_another_shape_is_refused(strip, damage, message):
    with pytest.raises(ValueError, match=message):
        strip(damage(SETUP))
