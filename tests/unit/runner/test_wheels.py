"""gate.runner.wheels: a missing precompiled wheel read back from pip's output (constructed
fixtures, tests/fixtures/install), and the wheel index looked up in a folder."""

from __future__ import annotations

from support.paths import FIXTURES

from gate.runner.wheels import available_variants, diagnose, metadata_location

OUTPUTS = FIXTURES / "install"
SHA = "5f30fc7031cae49bf51073fc953d419b08f8887c"


def output(name: str) -> str:
    return (OUTPUTS / name).read_text().replace("{commit}", SHA)


def test_a_missing_variant_and_default():
    missing = diagnose(output("precompiled_missing_variant.txt"))
    assert (missing.commit, missing.variant) == (SHA, "cu130")
    assert missing.tried == [f"https://wheels.vllm.ai/{SHA}/cu130/vllm/metadata.json",
                             f"https://wheels.vllm.ai/{SHA}/vllm/metadata.json"]
    assert missing.reason == "HTTP Error 404: Not Found"


def test_a_wheel_list_without_this_architecture():
    missing = diagnose(output("precompiled_no_arch.txt"))
    assert missing.variant == "cu129" and "aarch64" in missing.reason


def test_other_failures_are_not_a_missing_wheel():
    assert diagnose(output("compile_error.txt")) is None
    assert diagnose("") is None


def test_variants_in_an_index_folder(tmp_path):
    for variant in ("cu129", None):
        path = tmp_path / metadata_location("", SHA, variant).lstrip("/")
        path.parent.mkdir(parents=True)
        path.write_text("[]")
    index = str(tmp_path)
    assert metadata_location("https://wheels.vllm.ai/", SHA, "cu130") == \
        f"https://wheels.vllm.ai/{SHA}/cu130/vllm/metadata.json"
    assert available_variants(index, SHA) == ["cu129", "default"]
    assert available_variants(index, "0" * 40) == []
