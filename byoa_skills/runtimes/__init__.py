"""The runtimes: speech backends (``speech``) and the visitor's text sources (``text``)."""
