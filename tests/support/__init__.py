"""Helpers the test modules share. A test module imports helpers from here (or from a support
module beside it), never from another test module or a conftest."""
