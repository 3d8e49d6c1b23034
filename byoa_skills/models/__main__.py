"""``python -m byoa_skills.models ARGS``: the same as ``byoa-skills models ARGS``, through the
one entry point (``python -m byoa_skills``), which this package does not import: the command
line sits above the model cache, not below it."""

import runpy
import sys

sys.argv = [sys.argv[0], "models", *sys.argv[1:]]
runpy.run_module("byoa_skills", run_name="__main__", alter_sys=True)
