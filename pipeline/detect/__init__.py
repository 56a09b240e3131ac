"""Format detection from the bytes: signatures, ZIP and OLE2 packages, CSV and e-mail
sniffing, text decoding."""

from pipeline.detect.formats import detect

__all__ = ["detect"]
