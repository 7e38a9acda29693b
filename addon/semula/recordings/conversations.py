"""A Realtime conversation as a recording: its store entry (kind `realtime`) and its file in the folder.

A conversation is kept as every recording is: one store entry (so a shared Postgres store shares it
between runners), and, with a recordings folder, one file the folder loads, writes and deletes with
the others (`folder.py`). Its entry is found by its connection's URL (`normalised_fp`:
`url_fingerprint`), never by an HTTP request's fingerprint; `request_fp` is its identity, so the same
conversation recorded twice is one entry and one file. The entry's body is the file's text, a NUL
(which JSON text never holds) and the audio sidecar's bytes; read back, it goes through the same loader
as a file from the folder (`conversation_file.loads`), whoever wrote it.

In the folder, conversations sit in `_realtime/<project>/` (the leading `_` keeps them out of the HTTP
request scan), each `<slug>-<hash>.json` beside its audio sidecar.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from semula.core.conversation import Conversation, model_of, url_fingerprint
from semula.recordings import conversation_file, sidecars
from semula.recordings.files import max_file_bytes
from semula.recordings.format import RecordingFileError
from semula.recordings.sidecars import SidecarError, SidecarRef
from semula.store.types import Entry, NewEntry, RecordingKind

FOLDER_DIR = "_realtime"  # inside the recordings folder
_SLUG = re.compile(r"[^a-z0-9]+")
_SEPARATOR = b"\0"  # between the file's text and its audio in the entry's body


def in_folder(rel: str) -> bool:
    """Whether a file of the folder (relative path) is a conversation's."""
    return rel.startswith(FOLDER_DIR + "/")


def relative_path(conversation: Conversation) -> str:
    """`_realtime/<project>/<slug>-<identity>.json`: built from a validated project name and a hash only."""
    slug = _SLUG.sub("-", f"realtime {model_of(conversation.url) or ''}".lower()).strip("-")[:48]
    return f"{FOLDER_DIR}/{conversation.project}/{slug}-{conversation.identity[:12]}.json"


def loadable(text: str, audio: bytes) -> None:
    """Raise `RecordingFileError` unless the loader would take this file and its sidecar."""
    cap = max_file_bytes()
    for what, length in (("file", len(text.encode())), ("audio sidecar", len(audio))):
        if length > cap:
            raise RecordingFileError(f"its {what} would be {length / (1024 * 1024):.1f} MB, over the "
                                     f"{cap // (1024 * 1024)} MB a recording may have (SEMULA_RECORDING_MAX_MB)")
    conversation_file.loads(text, lambda _ref: audio)


def new_entry(conversation: Conversation) -> NewEntry:
    """The store entry of a conversation; raises `RecordingFileError` when its file could not be loaded
    back (over the size cap, or refused by the loader): then it is not recorded at all."""
    text, audio = conversation_file.dumps(conversation, sidecars.ref_for)
    loadable(text, audio)
    return NewEntry(
        kind=RecordingKind.REALTIME, project=conversation.project, provider=conversation_file.provider_of(conversation),
        host=conversation.host, method="GET", endpoint=conversation.url.partition("?")[0],
        model=model_of(conversation.url), status=101, headers=[], body=text.encode() + _SEPARATOR + audio,
        streamed=True, prompt_tokens=None, completion_tokens=None, upstream_ms=None,
        provenance={"recorded_at": conversation.recorded_at} if conversation.recorded_at else None,
        request_fp=conversation.identity, normalised_fp=url_fingerprint(conversation.url),
        canonical={"url": conversation.url, "close_code": conversation.close_code}, last_text="",
    )


def _parts(entry: Entry) -> tuple[str, bytes]:
    text, separator, audio = entry.body.partition(_SEPARATOR)
    if not separator:
        raise RecordingFileError("its stored body is not a conversation")
    return text.decode(), audio


def conversation_of(entry: Entry) -> Conversation:
    """The conversation a store entry holds, through the file loader (a store another runner writes is
    checked as a file is); raises `RecordingFileError` naming the problem."""
    try:
        text, audio = _parts(entry)
        conversation = conversation_file.loads(text, _checked(audio))
    except UnicodeDecodeError as e:
        raise RecordingFileError(f"not UTF-8 ({e.reason})") from None
    if conversation.project != entry.project:
        raise RecordingFileError(f"its project is {conversation.project!r:.60}, not its entry's {entry.project!r:.60}")
    return conversation


def _checked(audio: bytes) -> Callable[[SidecarRef], bytes]:
    def read(ref: SidecarRef) -> bytes:
        if sidecars.ref_for(audio) != ref:
            raise SidecarError(f"the stored audio is not the {ref.size}-byte sidecar {ref.file} it refers to")
        return audio
    return read


def file_of(entry: Entry) -> tuple[str, str, list[tuple[SidecarRef, bytes]]]:
    """(relative path, text, sidecars) of a stored conversation's file in the folder."""
    text, audio = _parts(entry)
    conversation = conversation_of(entry)
    return relative_path(conversation), text, [(sidecars.ref_for(audio), audio)] if audio else []


def entry_from_file(raw: bytes, rel: str, sidecar: Callable[[SidecarRef], bytes] | None) -> NewEntry:
    """A conversation file of the folder (`_realtime/<project>/…`) as its store entry. Raises
    `RecordingFileError` (or UnicodeDecodeError) naming the problem."""
    conversation = conversation_file.loads(raw.decode("utf-8"), sidecar)
    project = rel.split("/")[1] if rel.count("/") == 2 else None
    if conversation.project != project:
        raise RecordingFileError(f"its project is {conversation.project!r:.60}, not its folder's {project!r:.60}"
                                 f" (a conversation's file is {FOLDER_DIR}/<project>/<name>.json)")
    return new_entry(conversation)
