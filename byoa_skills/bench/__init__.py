"""``byoa-bench``: measurements of the engine on the hardware it runs on."""
