"""Where `devmon login` really puts a key: an OS keyring, or (only when the user says so) a
file-backed keyring such as keyrings.alt's plaintext one, named with its file.  And the test-only
keyrings.alt never reaches what a user installs or what PyInstaller bundles.

The CLI runs for real (subprocess) with keyring's own configuration pointed into tmp_path, so
the user's keyring and key files are never touched."""

from __future__ import annotations

import ast
import base64
import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import chainer

from devmon_sync import credentials
from devmon_sync.server import WorldSize

from support import KEY as SERVER_KEY, start_server

ROOT = Path(__file__).resolve().parents[1]
KEY = "k3y-that-must-stay-secret"
PLAINTEXT = "keyrings.alt.file.PlaintextKeyring"
URL = "https://monitoring.example.com/v1"


def _env(tmp_path, backend: str, env_key: str | None) -> dict[str, str]:
    """The CLI's environment: keyring's configuration and devmon's folders in tmp_path."""
    env = dict(os.environ, PYTHON_KEYRING_BACKEND=backend,
               XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "xdg"),
               DEVMON_CONFIG_DIR=str(tmp_path / "config"),
               DEVMON_DATA_DIR=str(tmp_path / "devmon-data"),
               DEVMON_LOG_DIR=str(tmp_path / "log"))
    env.pop(credentials.ENV_API_KEY, None)
    if env_key is not None:
        env[credentials.ENV_API_KEY] = env_key
    return env


def login(tmp_path, *flags: str, backend: str = PLAINTEXT, env_key: str | None = None,
          url: str = URL) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "devmon_sync", "login", "--profile", "site-a",
                           "--base-url", url, "--api-key-stdin", *flags], input=KEY + "\n", check=False,
                          capture_output=True, text=True, env=_env(tmp_path, backend, env_key),
                          timeout=120)


def profile_sync(tmp_path, env_key: str | None,
                 backend: str = "keyring.backends.fail.Keyring") -> subprocess.CompletedProcess:
    """`devmon sync --profile site-a` into tmp_path, the key from the environment or none."""
    return subprocess.run([sys.executable, "-m", "devmon_sync", "sync", "--profile", "site-a",
                           "--db", str(tmp_path / "mirror.duckdb"), "--retries", "0"],
                          check=False, capture_output=True, text=True, env=_env(tmp_path, backend, env_key),
                          timeout=300)


def key_file(tmp_path) -> Path:
    """Where keyrings.alt's PlaintextKeyring keeps keys under XDG_DATA_HOME."""
    return tmp_path / "data" / "python_keyring" / "keyring_pass.cfg"


def no_key_in_any_file(tmp_path) -> bool:
    """Whether the key is written nowhere under tmp_path, as it is or base64-encoded."""
    forms = (KEY, base64.b64encode(KEY.encode()).decode())
    return not [f for f in tmp_path.rglob("*") if f.is_file()
                and any(form in f.read_text(errors="replace") for form in forms)]


def saved_profile(tmp_path) -> dict:
    return json.loads((tmp_path / "config" / credentials.PROFILES_FILE).read_text())["profiles"]


def test_a_plaintext_keyring_keeps_no_key_but_the_profile_is_saved(tmp_path):
    """Issue 30.8: without an OS keyring `devmon login` refused to save anything, so the
    README's --profile flow needed --allow-plaintext-keyring.  Now the profile (its address)
    is saved and the key is not: it comes from DEVMON_API_KEY at each run."""
    r = login(tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    said = r.stdout.strip()
    assert len(said.splitlines()) == 1, said
    assert PLAINTEXT in said and "not an OS keyring" in said, said
    assert credentials.ENV_API_KEY in said and "--allow-plaintext-keyring" in said, said
    assert "without its key" in said, said
    assert KEY not in r.stdout + r.stderr
    assert not key_file(tmp_path).exists(), "the key went to a plaintext file all the same"
    assert no_key_in_any_file(tmp_path)
    assert saved_profile(tmp_path)["site-a"]["base_url"] == URL


def test_allowed_the_plaintext_keyring_is_named_with_its_file(tmp_path):
    r = login(tmp_path, "--allow-plaintext-keyring")
    assert r.returncode == 0, r.stderr
    where = key_file(tmp_path)
    assert where.is_file()
    assert base64.b64encode(KEY.encode()).decode() in where.read_text(), \
        "keyrings.alt keeps it base64-encoded: readable by whoever reads the file"
    out = r.stdout
    assert PLAINTEXT in out and str(where) in out and "not encrypted" in out, out
    assert "OS keyring" not in out.replace("not an OS keyring", ""), out
    assert KEY not in out + r.stderr


def test_without_any_keyring_the_profile_is_saved_and_the_key_comes_from_the_environment(
        tmp_path):
    """Issue 30.8: no keyring at all, DEVMON_API_KEY set: login saved nothing and the sync's
    error sent the user back to `devmon login`.  Now login saves the address and says in one
    line where the key comes from; a sync by the profile uses the environment's key, and
    without it says both ways to give one instead of sending the user back to login."""
    r = login(tmp_path, backend="keyring.backends.fail.Keyring", env_key=KEY)
    assert r.returncode == 0, (r.stdout, r.stderr)
    said = r.stdout.strip()
    assert len(said.splitlines()) == 1 and "no os keyring" in said.lower(), said
    assert f"{credentials.ENV_API_KEY} (set now)" in said, said
    assert saved_profile(tmp_path)["site-a"]["base_url"] == URL
    assert no_key_in_any_file(tmp_path)

    r = profile_sync(tmp_path, env_key=None)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    error = r.stderr.strip().splitlines()[-1]
    assert "site-a" in error and credentials.ENV_API_KEY in error, error
    assert "--allow-plaintext-keyring" in error and "keyring" in error, error
    assert "save it again with `devmon login" not in error, error


def test_a_profile_saved_without_its_key_syncs_with_the_environments_key(tmp_path):
    """The README's --profile flow on a machine without a keyring: login, then sync by the
    profile with DEVMON_API_KEY set (a tiny world of the reference server)."""
    with start_server(size=WorldSize(sites=1, devices=2, days=1)) as srv:
        r = login(tmp_path, backend="keyring.backends.fail.Keyring", url=srv.base_url)
        assert r.returncode == 0, r.stderr
        assert f"set {credentials.ENV_API_KEY}" in r.stdout, r.stdout
        r = profile_sync(tmp_path, env_key=SERVER_KEY)
    assert r.returncode == 0, r.stderr
    assert "Synced" in r.stdout, r.stdout


# ------------------------------------------------------------------ classifying backends
# An OS keyring (Secret Service, Keychain, Credential Manager) cannot run here: a backend class
# living in keyring's own SecretService module stands in for one.


class _StandInSecretService(KeyringBackend):
    priority = 5

    def __init__(self):
        super().__init__()
        self.kept: dict = {}

    def get_password(self, service, username):
        return self.kept.get((service, username))

    def set_password(self, service, username, password):
        self.kept[(service, username)] = password

    def delete_password(self, service, username):
        self.kept.pop((service, username), None)


_StandInSecretService.__module__ = "keyring.backends.SecretService"


@pytest.fixture
def stand_in_keyring(tmp_path, monkeypatch):
    monkeypatch.setenv(credentials.ENV_CONFIG_DIR, str(tmp_path / "config"))
    previous = keyring.get_keyring()
    ring = _StandInSecretService()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(previous)


def test_an_os_keyring_is_accepted_and_called_one(stand_in_keyring):
    store = credentials.key_store(allow_plaintext=False)
    assert store.secure and store.file is None
    assert store.describe() == \
        "the OS keyring (keyring.backends.SecretService._StandInSecretService)"


def test_a_chain_is_judged_by_the_backend_that_stores(file_keyring, monkeypatch):
    """keyring chains its viable backends; set_password goes to the first, by priority."""
    monkeypatch.setattr(chainer.ChainerBackend, "backends", [file_keyring])
    keyring.set_keyring(chainer.ChainerBackend())
    with pytest.raises(credentials.CredentialsError, match="not an OS keyring"):
        credentials.key_store(allow_plaintext=False)
    store = credentials.key_store(allow_plaintext=True)
    assert not store.secure and store.file == file_keyring.file_path


# ------------------------------------------------------------------ what a user installs


def test_keyrings_alt_is_only_a_test_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if "keyrings" in d.lower()]
    for extra, deps in project["optional-dependencies"].items():
        found = [d for d in deps if "keyrings" in d.lower()]
        assert extra == "test" or not found, (extra, found)
    assert [d for d in project["optional-dependencies"]["test"] if d.startswith("keyrings.alt")]


def _spec_list(name: str) -> list[str]:
    """The literal list assigned to ``name`` in packaging/devmon.spec."""
    tree = ast.parse((ROOT / "packaging" / "devmon.spec").read_text())
    for node in tree.body:
        targets = [getattr(t, "id", None) for t in getattr(node, "targets", [])]
        if isinstance(node, ast.Assign) and targets == [name]:
            return ast.literal_eval(node.value)
    raise AssertionError(f"no {name} = [...] in packaging/devmon.spec")


def test_the_pyinstaller_spec_leaves_keyrings_alt_out_of_a_dev_venv_build():
    """A build made in a venv with the test extra must not bundle keyrings.alt: its modules are
    excluded (all of the distribution's top-level packages) and its metadata, whose entry points
    would let keyring find it, is not copied."""
    excludes = set(_spec_list("excludes"))
    top_level = importlib.metadata.distribution("keyrings.alt").read_text("top_level.txt")
    for package in (top_level or "keyrings").split():
        assert package in excludes, package
    assert "keyrings.alt" in excludes
    spec = (ROOT / "packaging" / "devmon.spec").read_text()
    assert 'copy_metadata("keyrings' not in spec and "copy_metadata('keyrings" not in spec
    assert 'collect_submodules("keyrings' not in spec
