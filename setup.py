"""fairseq-ctemp: learned and fixed temperature for fairseq sequence models (a --user-dir plugin).

fairseq and torch are deliberately NOT in install_requires: the only fairseq distribution that builds
on Python 3.11 (fairseq-fixed) declares torchaudio, and resolving that pulls a multi-GB CUDA torch.
Install torch and fairseq first (see README, "Installing"), then `pip install --no-deps .`.
"""
from setuptools import find_packages, setup

setup(
    name="fairseq-ctemp",
    version="0.1.0",
    description="Softmax tempering, contextual temperature and SACT for fairseq (--user-dir plugin)",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.8",
    packages=find_packages(include=["fairseq_ctemp", "fairseq_ctemp.*"]),
    install_requires=["sacrebleu>=2.0", "numpy"],
    extras_require={
        "plots": ["matplotlib"],
        "subwords": ["sentencepiece", "subword-nmt"],
        "test": ["pytest", "pytest-xdist"],
    },
    entry_points={
        "console_scripts": [
            "ctemp-average-checkpoints = fairseq_ctemp.cli.average_checkpoints:main",
            "ctemp-greedy-vs-beam = fairseq_ctemp.cli.greedy_vs_beam:main",
            "ctemp-toy-translation = fairseq_ctemp.cli.toy_translation:main",
            "ctemp-user-dir = fairseq_ctemp.cli.user_dir:main",
        ]
    },
    classifiers=["Programming Language :: Python :: 3", "Topic :: Scientific/Engineering :: Artificial Intelligence"],
)
