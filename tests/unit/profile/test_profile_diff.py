"""Normalisation, per-function diff and the noise decision of gate.profile.diff, on
hand-made profiles."""

from __future__ import annotations

import pytest
from support.paths import FIXTURES
from support.profiles import FAST, MAIN, SLOW, STEP, make_profile, steady

from gate.core.errors import MeasurementError
from gate.profile.data import load_build_profile, relative_file
from gate.profile.diff import count_functions, diff_profiles, per_1k, render_table
from gate.profile.diff_file import DiffSettings


def row(diff, spec):
    file, name = spec.split(":")
    return next(f for f in diff.functions if (f.file, f.name) == (file, name))


def test_normalises_samples_to_ms_per_1k_output_tokens():
    # 100 samples at 100 Hz = 1000 ms of thread time, over 500 tokens = 2000 ms per 1k tokens.
    p = make_profile("base", [{(MAIN, STEP, SLOW): 60, (MAIN, STEP): 40}], tokens=500.0)
    c = count_functions(p)
    assert per_1k(c.self_time[("lib/utils.py", "apply_grammar_bitmask")].ms,
                  c.tokens) == pytest.approx(1200.0)
    assert per_1k(c.self_time[("app.py", "step")].ms, c.tokens) == pytest.approx(800)
    assert per_1k(c.inclusive[("app.py", "step")].ms, c.tokens) == pytest.approx(2000)
    assert per_1k(c.inclusive[("app.py", "main")].ms, c.tokens) == pytest.approx(2000)
    assert ("app.py", "main") not in c.self_time


def test_pools_windows_by_their_tokens_and_rate():
    # 50 samples at 50 Hz (1 s) over 1000 tokens + 50 samples at 50 Hz over 3000 tokens:
    # 2000 ms over 4000 tokens = 500 ms per 1k tokens (not the mean of 1000 and 333).
    p = make_profile("b", [{(MAIN,): 50}, {(MAIN,): 50}], tokens=[1000.0, 3000.0], rate_hz=50)
    c = count_functions(p)
    assert per_1k(c.total.ms, c.tokens) == pytest.approx(500.0)


def test_recursion_counts_once_in_inclusive_time():
    p = make_profile("b", [{(MAIN, STEP, MAIN, STEP): 10}], tokens=100.0)
    c = count_functions(p)
    assert c.inclusive[("app.py", "main")].counts[0] == 10
    assert c.inclusive[("app.py", "step")].counts[0] == 10
    assert c.self_time[("app.py", "step")].counts[0] == 10


def test_a_slowed_function_is_named_with_its_added_time():
    diff = diff_profiles(make_profile("base", steady(slow=20)), make_profile("head", steady(slow=80)))
    slow = row(diff, SLOW)
    # 60 more samples of 10 ms per window over 1000 tokens = +600 ms per 1k tokens
    assert slow.self_time.diff == pytest.approx(600.0)
    assert slow.self_time.significant and slow.self_time.low > 0
    assert slow.self_time.low <= 600 <= slow.self_time.high
    assert diff.functions[0] is slow  # ranked first: added self time
    assert diff.named[0] is slow and slow.added
    fast = row(diff, FAST)
    assert not fast.self_time.significant and fast.self_time.diff == 0
    # Its callers grew inclusively and come after it.
    step = row(diff, STEP)
    assert step.inclusive.significant and not step.self_time.significant
    assert diff.functions.index(step) > 0


def test_the_trunk_is_not_a_finding_of_its_own():
    # main holds every sample of both builds: its inclusive change is the total's (+600), and
    # naming it would name the module, main and the event loop for one fact.
    diff = diff_profiles(make_profile("base", steady(slow=20)), make_profile("head", steady(slow=80)))
    trunk = row(diff, MAIN)
    assert trunk.inclusive.diff == pytest.approx(600.0) == diff.total.diff
    assert not trunk.inclusive.significant and trunk.inclusive.low is None
    assert trunk not in diff.named
    assert any("1 function(s) run under nearly all busy samples of both builds (main)" in n
               for n in diff.notes), diff.notes
    # its own time is still judged: main doing more of its own work is named
    more = [{**w, (MAIN,): 400} for w in steady(slow=20)]
    named = diff_profiles(make_profile("base", steady(slow=20)), make_profile("head", more)).named
    assert [(f.name, f.self_time.significant) for f in named][:1] == [("main", True)]


def test_identical_builds_name_nothing():
    diff = diff_profiles(make_profile("base", steady(slow=40)), make_profile("head", steady(40)))
    assert diff.named == [] and diff.added == []
    assert diff.total.diff == 0 and not diff.total.significant


def test_a_handful_of_samples_is_counting_noise():
    # Three samples where the base had none: a Poisson draw around 3 is zero 5% of the time.
    base = steady(slow=0)
    head = steady(slow=0)
    head[1][(MAIN, STEP, SLOW)] = 1
    head[3][(MAIN, STEP, SLOW)] = 2
    diff = diff_profiles(make_profile("base", base), make_profile("head", head),
                         DiffSettings(min_share=0, min_rel=0))
    slow = row(diff, SLOW)
    assert slow.self_time.diff == pytest.approx(6.0)  # 30 ms over 5000 tokens
    assert slow.self_time.low is not None and slow.self_time.low <= 0
    assert not slow.self_time.significant


def test_windows_that_disagree_are_noise_even_with_many_samples():
    base = steady(slow=200)
    head = steady(slow=200)
    for i, n in enumerate([20, 500, 20, 500, 20]):  # mean 212 vs 200, wildly unsteady
        head[i][(MAIN, STEP, SLOW)] = n
    diff = diff_profiles(make_profile("base", base), make_profile("head", head),
                         DiffSettings(min_share=0, min_rel=0))
    slow = row(diff, SLOW)
    assert slow.self_time.diff > 0 and not slow.self_time.significant


def test_steady_small_change_below_the_floors_is_not_named():
    # 2000 vs 2100 samples per window: far beyond counting noise, but 5% of the function
    # (min_rel 20%) - the kind of shift a busier machine gives every caller.
    base = steady(slow=2000, fast=50, idle=100)
    head = steady(slow=2100, fast=50, idle=100)
    diff = diff_profiles(make_profile("base", base), make_profile("head", head))
    slow = row(diff, SLOW)
    assert slow.self_time.low is None and not slow.self_time.significant
    strict = diff_profiles(make_profile("base", base), make_profile("head", head),
                           DiffSettings(min_rel=0.0, min_share=0.0))
    assert row(strict, SLOW).self_time.significant


def test_min_share_floor_is_relative_to_the_base_total():
    # +5 samples per window on a function with 1 base sample: +500% but 0.2% of the total.
    base = steady(slow=1, fast=50, idle=2000)
    head = steady(slow=6, fast=50, idle=2000)
    diff = diff_profiles(make_profile("base", base), make_profile("head", head))
    assert not row(diff, SLOW).self_time.significant
    loose = diff_profiles(make_profile("base", base), make_profile("head", head),
                          DiffSettings(min_share=0.0))
    assert row(loose, SLOW).self_time.significant


def test_a_faster_function_is_named_but_not_as_added_time():
    diff = diff_profiles(make_profile("base", steady(slow=80)), make_profile("head", steady(20)))
    slow = row(diff, SLOW)
    assert slow.self_time.significant and slow.self_time.diff < 0 and slow.self_time.high < 0
    assert not slow.added and diff.added == []


def test_throughput_difference_alone_is_normalised_away():
    # The head made twice the tokens in the same windows with twice the samples: per token
    # nothing changed.
    base = make_profile("base", steady(slow=40), tokens=1000.0)
    head = make_profile("head", [{k: 2 * v for k, v in w.items()} for w in steady(slow=40)],
                        tokens=2000.0)
    assert diff_profiles(base, head).named == []


def test_diff_is_reproducible():
    args = (make_profile("base", steady(slow=20)), make_profile("head", steady(slow=35)))
    assert diff_profiles(*args).model_dump_json() == diff_profiles(*args).model_dump_json()


def test_table_marks_differences_beyond_noise():
    diff = diff_profiles(make_profile("base", steady(slow=20)), make_profile("head", steady(80)))
    table = render_table(diff, limit=3)
    lines = table.splitlines()
    assert "function(s) differ beyond noise" in lines[0]
    first = next(ln for ln in lines if "apply_grammar_bitmask" in ln)
    assert "lib/utils.py:10" in first and "+600.0 *" in first


def test_spin_waits_are_left_out_of_the_functions():
    wait = ("vllm/distributed/device_communicators/shm_broadcast.py:MessageQueue.dequeue",
            "vllm/distributed/device_communicators/shm_broadcast.py:MessageQueue.acquire_read",
            "vllm/distributed/utils.py:sched_yield")
    base, head = steady(slow=20), steady(slow=80)
    for w in base:
        w[(MAIN, *wait)] = 100
    for w in head:  # the engine core waits longer for the slower worker
        w[(MAIN, *wait)] = 160
    diff = diff_profiles(make_profile("base", base), make_profile("head", head))
    assert diff.waiting.base == pytest.approx(1000.0) and diff.waiting.diff == pytest.approx(600)
    assert diff.total.diff == pytest.approx(1200.0)
    assert [f.name for f in diff.added if f.self_time.significant] == ["apply_grammar_bitmask"]
    assert not any("sched_yield" in f.name or "acquire_read" in f.name for f in diff.functions)
    assert row(diff, MAIN).inclusive.diff == pytest.approx(600.0)  # waits not in main either
    assert "spin-waits 1000 -> 1600" in render_table(diff).splitlines()[0]


def test_cpu_basis_scales_each_process_by_the_cpu_it_got():
    base = make_profile("base", steady(slow=20, fast=50, idle=30))  # 100 samples = 1 s
    starved = make_profile("head", steady(slow=20, fast=50, idle=30))
    for w in starved.windows:
        w.cpu_s = [0.5]  # active 1 s, on a core for half of it
    assert starved.windows[0].sample_ms(1, "cpu") == [pytest.approx(5.0)]
    assert starved.windows[0].sample_ms(1, "wall") == [10.0]
    base.windows[0].cpu_s = [3.0]  # more CPU than active time (threads py-spy cannot see)
    assert base.windows[0].sample_ms(1, "cpu") == [10.0]
    assert base.windows[1].sample_ms(1, "cpu") == [10.0]  # not measured: wall
    d = diff_profiles(base, starved, DiffSettings(basis="cpu"))
    assert d.total.diff == pytest.approx(-500.0) and d.settings.basis == "cpu"
    assert "(cpu time)" in d.method
    assert diff_profiles(base, starved).total.diff == 0  # wall time: the same


# Recorded pairs (tests/fixtures/profiles/README.md): the floors against real servers.

def recorded(name: str):
    folder = FIXTURES / "profiles" / name
    return load_build_profile(folder / "base"), load_build_profile(folder / "head")


@pytest.mark.parametrize(("name", "at_three_percent"), [
    ("aa-sampler-6x", ["Sampler.forward", "GPUModelRunner._sample"]),
    ("aa-bitmask-5x", ["apply_grammar_bitmask"]),
])
def test_two_servers_of_one_build_differ_by_less_than_the_floor(name, at_three_percent):
    base, head = recorded(name)
    diff = diff_profiles(base, head)
    assert diff.named == [], render_table(diff)
    # The difference is real between these two servers, not sampling noise: with the floor
    # at the 3% it once was, the bootstrap calls it significant.
    old = diff_profiles(base, head, DiffSettings(min_share=0.03))
    assert [f.name for f in old.named] == at_three_percent


def test_a_quarter_slower_guided_step_is_still_named_at_the_floor():
    base, head = recorded("plus25")
    diff = diff_profiles(base, head)
    assert [f.name for f in diff.named] == ["_slowed.<locals>.apply_grammar_bitmask"]
    slowed = diff.named[0]
    total = diff.total.base - diff.waiting.base
    # Named by its inclusive time (56% of the total); its own time (18%) is under the floor.
    assert slowed.added and slowed.inclusive.significant
    assert slowed.inclusive.diff > diff.settings.min_share * total > slowed.self_time.diff
    assert not slowed.self_time.significant


def test_profiles_whose_files_are_named_differently_are_refused_not_diffed():
    # The head's vllm sat in an overlay folder, outside site-packages, with no source root:
    # every one of its functions would read as new and the whole step as the change.
    moved = [{tuple(f"/tmp/overlay/head/{f}" for f in stack): n for stack, n in w.items()}
             for w in steady(slow=20)]
    with pytest.raises(MeasurementError, match=r"serving loop differently: main \(/tmp/overlay/head/app.py"):
        diff_profiles(make_profile("base", steady(slow=20)), make_profile("head", moved))


def test_a_new_hot_function_of_the_head_is_a_change_not_a_naming_defect():
    # The head's regression is a function the base never had, holding most of its samples:
    # the diff names it, it is not refused as two builds named apart.
    host = "lib/utils.py:stage_each_row"
    head = [{**w, (MAIN, STEP, SLOW, host): 2000} for w in steady(slow=20)]
    diff = diff_profiles(make_profile("base", steady(slow=20)), make_profile("head", head))
    added = row(diff, host)
    assert added.inclusive.significant and added.inclusive.diff > 0


def test_a_build_outside_site_packages_meets_the_installed_one_through_its_root():
    installed = "/venv/lib/python3.11/site-packages/vllm/v1/structured_output/utils.py"
    overlay = "/job/gate-out/overlays/head/vllm/v1/structured_output/utils.py"
    assert relative_file(overlay, ["/job/gate-out/overlays/head"]) == relative_file(installed)
    assert relative_file(overlay) == overlay  # without its root it meets nothing
