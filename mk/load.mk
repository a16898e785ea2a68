# The whole pytest suite under a CPU hog on every core (scripts/under-load.sh): tests that
# wait on time instead of events fail here first. Give it the CI environment
# (TEST_POSTGRES_URL, REQUIRE_*=1) as for `make pytest`; PYTEST_ARGS pass through.
.PHONY: test-under-load
test-under-load: setup bytecode frontend
	bash scripts/under-load.sh $(PYTEST_ARGS)
