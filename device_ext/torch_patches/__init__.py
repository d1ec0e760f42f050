"""Every change torch-mydev makes to torch's own state, one module per
subsystem, each with an ``apply()`` and a docstring saying what it changes,
why, for which torch, the test that fails without it and when it can go."""
