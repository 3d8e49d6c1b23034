"""``byoa-bench``: measures the engine on the machine it runs on, against the runtime called
directly and against a peer speech server, and writes ``results.json``, ``report.md`` and
plots. See docs/performance.md."""
