"""``require``: a missing peer skips a cross-check on a developer's machine and fails it in CI."""
import pytest

from peers import require


def test_present_module_is_returned():
    import json
    assert require("json") is json


def test_missing_peer_skips_without_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="'no_such_peer_xyz' is not installed"):
        require("no_such_peer_xyz")


def test_missing_peer_fails_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI: this cross-check needs 'no_such_peer_xyz'"):
        require("no_such_peer_xyz")
