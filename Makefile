# The two commands of the README: `make demo` and `make test`. Both set up .venv first if needed.
# `make gpu-check` (docs/gpu.md): the CUDA tests and benchmarks on a GPU, one report.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test fairseq-tests lint bench gpu-check
setup:
	@bash scripts/setup_venv.sh $(VENV)

demo: setup
	$(PY) scripts/quickstart.py

# Test files run in parallel (pytest-xdist); a file's tests stay in one worker, so its fixtures
# (trained toy models) are built once; the longest files go first (tests/conftest.py LONGEST_FIRST).
# `make test TEST_WORKERS=0` runs them one after another.
TEST_WORKERS ?= 2
test: setup
	$(PY) -m pytest tests -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# fairseq v0.12.3's own tests (third_party/fairseq_v0_12_3) with the plugin imported; CI runs them
# after `make test`. FAIRSEQ_TESTS_STOCK=1: without the plugin. One thread per process unless
# OMP_NUM_THREADS says otherwise, as in `make test`: tiny models, and two workers on two cores.
FAIRSEQ_TESTS := test_label_smoothing.py test_sequence_generator.py test_sequence_scorer.py \
	test_checkpoint_utils.py test_train.py test_iterators.py test_average_checkpoints.py \
	test_reproducibility.py test_inference_dropout.py test_lm_context_window.py test_metrics.py \
	test_token_block_dataset.py test_export.py test_lstm_jitable.py test_utils.py test_dictionary.py \
	test_data_utils.py test_ema.py test_noising.py test_positional_encoding.py test_constraints.py \
	test_concat_dataset.py test_binarizer.py test_file_chunker_utils.py test_backtranslation_dataset.py \
	test_character_token_embedder.py test_convtbc.py test_resampling_dataset.py \
	test_multi_corpus_dataset.py test_transformer.py test_roberta.py \
	$(addprefix test_multihead_attention.py::,TestMultiheadAttention test_add_bias_parity test_mask_padding_parity) \
	test_valid_subset_checks.py::TestValidSubsetsErrors \
	$(addprefix test_binaries.py::TestTranslation::test_,raw update_freq max_positions generation \
		lstm lstm_bidirectional transformer transformer_cross_self_attention alignment eval_bleu \
		transformer_pointer_generator mixture_of_experts multilingual_transformer \
		translation_multi_simple_epoch) \
	$(addprefix test_binaries.py::TestLanguageModeling::test_,transformer_lm \
		transformer_lm_with_adaptive_softmax lstm_lm lstm_lm_residuals fconv_lm normformer_lm lightconv_lm) \
	$(addprefix test_binaries.py::,TestOptimizers TestActivationCheckpointing TestStories) \
	$(addprefix test_binaries.py::TestMaskedLanguageModel::test_,roberta_sentence_prediction \
		roberta_regression_single roberta_regression_multiple)
fairseq-tests: setup
	cd third_party/fairseq_v0_12_3 && PYTHONPATH=.:$(CURDIR) FAIRSEQ_TESTS_STOCK=$(FAIRSEQ_TESTS_STOCK) \
		OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} \
		$(abspath $(PY)) -m pytest -c pytest.ini -n $(TEST_WORKERS) $(addprefix tests/,$(FAIRSEQ_TESTS))

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: setup
	$(PY) benchmarks/bench_tempered_ce.py

# The device check runs first whenever the venv already has torch (without CUDA it stops at once,
# before a set-up), then the set-up (which keeps the venv's CUDA torch), then the check itself.
# Options: make gpu-check GPU_CHECK_ARGS="--out DIR --overwrite" (benchmarks/gpu_check.py --help).
GPU_CHECK_ARGS ?=
gpu-check:
	@if [ -x $(PY) ]; then $(PY) benchmarks/gpu_check.py --preflight $(GPU_CHECK_ARGS); fi
	@bash scripts/setup_venv.sh $(VENV)
	$(PY) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)
