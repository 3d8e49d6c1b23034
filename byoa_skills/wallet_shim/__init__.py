"""The wallet shim: grants, limits, sites and the activity log, in front of the engine."""
