"""The wallet page: what the visitor sees and decides in the browser, served by the engine on
loopback. Getting in (one-time tickets traded for a session cookie), the consents waiting for
the visitor, the routes the page calls and the live feed that keeps it current."""
