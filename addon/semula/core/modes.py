"""The proxy's modes, as a str Enum so a typo fails with the list of valid values."""

from __future__ import annotations

from enum import Enum


class Mode(str, Enum):
    AUTO = "auto"  # serve hits; a miss goes upstream and is recorded
    REPLAY = "replay"  # serve hits; a miss never reaches the network
    RECORD = "record"  # every call goes upstream and (re-)records
    PASSTHROUGH = "passthrough"  # nothing served or stored; calls only logged

    @classmethod
    def parse(cls, value: str) -> Mode:
        try:
            return cls(value.strip().lower())
        except ValueError:
            valid = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown mode {value!r}: choose one of {valid}") from None

    def __str__(self) -> str:
        return self.value
