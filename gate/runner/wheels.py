"""vLLM's precompiled wheels: which one a precompiled install asked for, and what to do when the
merge base has none for this runner's CUDA variant.

With `VLLM_USE_PRECOMPILED=1`, vLLM's setup.py reads the wheel list of a commit from
`https://wheels.vllm.ai/{commit}/{variant}/vllm/metadata.json` (the variant, e.g. cu129 or
cu130, from `VLLM_PRECOMPILED_WHEEL_VARIANT` or the runner's CUDA), falls back to the default
variant (`{commit}/vllm/metadata.json`), and fails with a urllib HTTP 404 deep in pip's output
when neither exists. `diagnose` reads that output back; `available_variants` looks in the same
index for the variants this commit does have, so the error can name a fallback that exists.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_INDEX = "https://wheels.vllm.ai"
# The CUDA variants vLLM has published wheels for, newest first (docs/action.md).
KNOWN_VARIANTS = ("cu130", "cu129", "cu128", "cu126")
PROBE_TIMEOUT_S = 10

_ASKED = re.compile(r"Using precompiled wheel commit ([0-9a-f]{7,40}|nightly) with variant (\S+)")
_TRIED = re.compile(r"Trying to fetch nightly build metadata from (\S+)")
_FAILED = re.compile(r"Failed to fetch precompiled wheel metadata for variant (\S+): (.+)")
_NO_ARCH = re.compile(r"No precompiled vllm wheel found for architecture (\S+)")
_HTTP = re.compile(r"HTTPError: HTTP Error (\d+)|HTTP Error (\d+): ")


@dataclass(frozen=True)
class MissingWheel:
    """A precompiled install that found no wheel: what it asked for and where it looked."""

    commit: str | None
    variant: str | None
    tried: list[str] = field(default_factory=list)
    reason: str = ""


def diagnose(output: str) -> MissingWheel | None:
    """The missing wheel a failed `pip install` of vLLM with VLLM_USE_PRECOMPILED=1 reports in
    its output; None when the output shows another failure."""
    asked = _ASKED.search(output)
    tried = list(dict.fromkeys(_TRIED.findall(output)))
    if arch := _NO_ARCH.search(output):
        reason = f"no wheel for the {arch.group(1)} architecture in its list"
    elif tried and _HTTP.search(output):
        failed = _FAILED.search(output)
        reason = failed.group(2).strip() if failed else "HTTP error"
    else:
        return None
    return MissingWheel(asked.group(1) if asked else None, asked.group(2) if asked else None,
                        tried, reason)


def metadata_location(index: str, commit: str, variant: str | None) -> str:
    part = f"{variant}/" if variant else ""
    return f"{index.rstrip('/')}/{commit}/{part}vllm/metadata.json"


def _exists(location: str) -> bool:
    if "://" not in location:
        return Path(location).is_file()
    try:
        with urllib.request.urlopen(location, timeout=PROBE_TIMEOUT_S) as resp:  # noqa: S310
            return 200 <= resp.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def available_variants(index: str, commit: str) -> list[str]:
    """The variants of KNOWN_VARIANTS (and "default") whose wheel list `index` has for
    `commit`: a URL (https://, file://) or a folder laid out like wheels.vllm.ai."""
    found = [v for v in KNOWN_VARIANTS if _exists(metadata_location(index, commit, v))]
    if _exists(metadata_location(index, commit, None)):
        found.append("default")
    return found


def advice(missing: MissingWheel, index: str, merge_base: str | None, max_jobs: str) -> str:
    """The error of a missing wheel: which one, and the fallbacks that exist."""
    commit = missing.commit if missing.commit not in (None, "nightly") else merge_base
    wanted = f"variant {missing.variant}" if missing.variant else "this runner's CUDA variant"
    lines = [f"no precompiled vLLM wheel for the merge base {commit or '(unknown commit)'} "
             f"({wanted}): {missing.reason}"]
    lines += [f"  looked at {url}" for url in missing.tried]
    variants = available_variants(index, commit) if commit else []
    others = [v for v in variants if v not in (missing.variant, "default")]
    if others:
        lines.append(f"fallback: another CUDA variant built for this commit: "
                     f"{', '.join(others)} (gate install-vllm --variant {others[0]}, which sets "
                     "VLLM_PRECOMPILED_WHEEL_VARIANT)")
    elif commit:
        lines.append(f"{index.rstrip('/')}/{commit}/ lists no other variant for this commit")
    lines.append(f"fallback: --mode source, a full build of the PR's vLLM (MAX_JOBS={max_jobs}; "
                 "tens of minutes and a CUDA toolkit on the runner)")
    return "\n".join(lines)
