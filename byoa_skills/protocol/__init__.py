"""The wire: every frame of the direct link and the local API's WebSocket (``frames``), and
the refusal codes every skill shares (``codes``)."""
