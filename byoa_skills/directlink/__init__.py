"""The direct link, wallet side: the checks of a ``bringyourownagent://`` link, the intake that
takes a link to consent, the client that keeps the WebSocket to the site, and the resolver
that keeps it on public addresses."""
