"""Format detection from the bytes: signatures, ZIP and OLE2 packages, CSV and e-mail
sniffing, text decoding."""

from docingest.pipeline.detect.formats import detect, extension_note

__all__ = ["detect", "extension_note"]
