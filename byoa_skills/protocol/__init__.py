"""The wire: every frame of the direct link and the local API's WebSocket, typed, with the close
codes (``frames``), the one loop that answers ``call`` frames for both (``serving``), a
connection's bounded pending calls (``pending``), and the refusal codes every skill shares
(``codes``)."""
