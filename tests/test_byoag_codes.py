"""The pairing code's protected input, the single-use code reference, and key files."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from byoag_kit import Clock

from byoa_skills.byoag import ByoagError
from byoa_skills.byoag.code_input import HeldCodes, clean_code, read_code
from byoa_skills.byoag.keys import load_key, new_key, save_key


def test_the_code_is_read_at_a_protected_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    prompts: list[str] = []
    monkeypatch.setattr("getpass.getpass", lambda prompt: prompts.append(prompt) or " AB-CD \n")
    assert read_code() == "AB-CD"
    assert prompts == ["Pairing code (not shown): "]


@pytest.mark.parametrize("text", ["", "   ", "a" * 65, "código", "AB\x00CD"])
def test_a_code_that_cannot_be_one_is_refused_before_any_contact(text: str) -> None:
    with pytest.raises(ValueError):
        clean_code(text)


def test_a_held_code_is_given_once_for_its_platform(tmp_path: Path) -> None:
    held = HeldCodes(tmp_path / "held.json")
    reference = held.hold("platform.example", "ABCDE-FGHJK")
    assert "ABCDE" not in reference
    assert stat.S_IMODE((tmp_path / "held.json").stat().st_mode) == 0o600
    assert reference not in (tmp_path / "held.json").read_text()
    assert held.take(reference, "platform.example") == "ABCDE-FGHJK"
    with pytest.raises(ByoagError) as caught:
        held.take(reference, "platform.example")
    assert caught.value.code == "pairing_code_invalid"


def test_a_held_code_is_not_given_for_another_platform_and_is_then_gone(tmp_path: Path) -> None:
    held = HeldCodes(tmp_path / "held.json")
    reference = held.hold("platform.example", "ABCDE-FGHJK")
    with pytest.raises(ByoagError):
        held.take(reference, "evil.example")
    with pytest.raises(ByoagError):
        held.take(reference, "platform.example")


def test_a_held_code_lasts_ten_minutes(tmp_path: Path) -> None:
    clock = Clock()
    held = HeldCodes(tmp_path / "held.json", clock=clock)
    reference = held.hold("platform.example", "ABCDE-FGHJK")
    clock.advance(601)
    with pytest.raises(ByoagError):
        held.take(reference, "platform.example")
    assert json.loads((tmp_path / "held.json").read_text()) == {}


def test_a_key_file_holds_the_private_key_for_the_user_only(tmp_path: Path) -> None:
    key = new_key()
    save_key(tmp_path / "k" / "installation.jwk", key)
    assert stat.S_IMODE((tmp_path / "k" / "installation.jwk").stat().st_mode) == 0o600
    assert load_key(tmp_path / "k" / "installation.jwk").thumbprint() == key.thumbprint()
    (tmp_path / "public.jwk").write_text(json.dumps(key.as_dict(private=False)))
    with pytest.raises(ValueError):
        load_key(tmp_path / "public.jwk")
