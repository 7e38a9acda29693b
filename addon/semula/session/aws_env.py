"""Placeholder AWS credentials for a replay run: boto3 and the AWS SDKs sign offline and never hang.

A replay answers from recordings, so the SigV4 signature is never checked, but an AWS SDK with
no credentials walks its provider chain down to the EC2 instance-metadata endpoint, which on a
laptop or a CI runner without it waits for its timeouts (boto3: a second per attempt, the JS SDK
longer) and then fails with NoCredentialsError. When the user has no AWS credentials of their own
(no key variables, no profile, no web identity or container credentials, no shared files),
replay sets placeholders and turns the metadata lookup off; a default region only when none is
set anywhere (a region variable overrides the one in ~/.aws/config).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["AWS_GROUPS", "AWS_PLACEHOLDER", "aws_placeholders"]

AWS_PLACEHOLDER = "semula-replay-placeholder"
DEFAULT_REGION = "us-east-1"
# Any of these means the user's SDK finds credentials of its own: they are left alone.
_CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_BEARER_TOKEN_BEDROCK",
)

# The variables a placeholder stands in for, in groups (session/clientenv.py `shadowed_placeholders`):
# a suite that sets one of a group later gets the group's placeholders withdrawn, never a mix such as
# its own key id beside the placeholder secret, or its AWS_REGION beside the placeholder AWS_DEFAULT_REGION.
AWS_GROUPS = (_CREDENTIAL_VARIABLES, ("AWS_REGION", "AWS_DEFAULT_REGION"))


def _shared_files(environ: Mapping[str, str]) -> bool:
    home = Path(environ.get("HOME") or os.path.expanduser("~"))
    files = (environ.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials",
             environ.get("AWS_CONFIG_FILE") or home / ".aws" / "config")
    return any(Path(f).expanduser().is_file() for f in files)


def aws_placeholders(environ: Mapping[str, str]) -> dict[str, str]:
    """The AWS variables a replay run sets: none when the user has credentials or a config of their own."""
    if _shared_files(environ):
        return {}
    out: dict[str, str] = {}
    if not any(environ.get(name) for name in _CREDENTIAL_VARIABLES):
        out.update(AWS_ACCESS_KEY_ID=AWS_PLACEHOLDER, AWS_SECRET_ACCESS_KEY=AWS_PLACEHOLDER,
                   AWS_SESSION_TOKEN=AWS_PLACEHOLDER, AWS_EC2_METADATA_DISABLED="true")
    if not environ.get("AWS_REGION") and not environ.get("AWS_DEFAULT_REGION"):
        out.update(AWS_REGION=DEFAULT_REGION, AWS_DEFAULT_REGION=DEFAULT_REGION)
    return out
