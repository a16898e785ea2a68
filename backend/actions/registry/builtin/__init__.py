"""The builtin actions, one module each; every module here that defines ``ACTION`` is
registered when :mod:`backend.actions.registry` loads (adding an action is adding a module)."""
