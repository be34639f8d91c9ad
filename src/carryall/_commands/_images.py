"""The images a person names on the command line (`-i`, chat's `/image`): one rule for both."""

from __future__ import annotations

from pathlib import Path

from carryall.attachments import AttachmentPolicy, load_image
from carryall.blocks import Image

__all__ = ["named_image"]


def named_image(target: str) -> Image:
    """An image a person named (`-i`, chat's `/image`), checked like any attachment.

    Naming a file is the permission to read it, so its own folder is the
    allowed root; naming a URL is the permission to fetch from its host.
    The size cap, extension and magic-byte checks still apply. Raises
    `AttachmentError`.
    """
    if target[:8].lower().startswith(("http://", "https://")):
        from urllib.parse import urlsplit

        host = urlsplit(target).hostname or ""
        return load_image(target, AttachmentPolicy(roots=[], allow_hosts=[host]))
    path = Path(target).expanduser()
    return load_image(str(path), AttachmentPolicy(roots=[path.parent]))
