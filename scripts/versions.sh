# The fairseq distribution the set-up installs (scripts/setup_venv.sh) and the wheelhouse builds
# (scripts/wheelhouse.sh): the fairseq 0.12.3 fork that builds on Python 3.11 and 3.12.
FAIRSEQ_DEFAULT=fairseq-fixed==0.12.3.1
