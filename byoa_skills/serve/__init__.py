"""The local API the wallet app talks to: HTTP and WebSocket on loopback, behind a token."""
