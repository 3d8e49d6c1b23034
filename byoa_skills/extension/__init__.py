"""The extension's way in: ``window.byoa`` in a page, the browser extension that adds it, the
native host the browser starts for it, and the engine's rules for its ``request``, ``call``
and ``release``."""
