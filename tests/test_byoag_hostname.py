"""The platform's name: an exact host name, loopback only in development."""

from __future__ import annotations

import pytest

from byoa_skills.byoag import check_platform_host


@pytest.mark.parametrize(
    "name", ["platform.example", "a.b-c.example", "xn--bcher-kva.example", "x1.io"]
)
def test_a_host_name_is_reached_over_https_on_its_origin(name: str) -> None:
    platform = check_platform_host(name)
    assert (platform.host, platform.port, platform.secure) == (name, 443, True)
    assert platform.origin == f"https://{name}"


@pytest.mark.parametrize(
    "text",
    [
        "https://platform.example",
        "platform.example/pair",
        "platform.example?x=1",
        "platform.example#top",
        "user:pw@platform.example",
        "user@platform.example",
        "platform.example:443",
        "Platform.Example",
        "bücher.example",
        "platform.example.",
        "platform",
        "-bad.example",
        "a..example",
        "192.168.1.10",
        "[2001:db8::1]",
        "localhost",
        "app.localhost",
        "localhost:8080",
        " platform.example",
        "platform%2eexample",
        "",
        "a" * 64 + ".example",
    ],
)
def test_anything_but_an_exact_host_name_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        check_platform_host(text)


@pytest.mark.parametrize(
    ("text", "host"),
    [("localhost:8790", "localhost"), ("127.0.0.1:8790", "127.0.0.1"), ("[::1]:8790", "::1")],
)
def test_loopback_development_takes_plain_http_with_an_explicit_port(text: str, host: str) -> None:
    with pytest.raises(ValueError, match="BYOA_WALLET_DEV_LOCAL"):
        check_platform_host(text)
    platform = check_platform_host(text, dev_local=True)
    assert (platform.host, platform.port, platform.secure) == (host, 8790, False)
    assert platform.origin == f"http://{text}"


@pytest.mark.parametrize(
    "text",
    [
        "localhost",
        "localhost:0",
        "localhost:99999",
        "127.0.0.2:80",
        "platform.example:8443",
        "localhost:80/x",
    ],
)
def test_development_takes_nothing_else(text: str) -> None:
    with pytest.raises(ValueError):
        check_platform_host(text, dev_local=True)
