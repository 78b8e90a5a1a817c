"""RunSpec: validation with one-sentence errors, canonical JSON, stable keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.run.spec import (
    CHOICES,
    OVERRIDE_KEYS,
    RunSpec,
    SpecError,
    TraceSource,
    paper_rules,
    variant_label,
)


def spec(**changes: object) -> RunSpec:
    base: dict[str, object] = {"policy": "CUA&SPAA", "workload": "W3", "seed": 4,
                               "trace": TraceSource(jobs=100, seed=2)}
    base.update(changes)
    return RunSpec(**base)  # type: ignore[arg-type]


def test_policy_names_are_canonicalised() -> None:
    assert spec(policy="cua&spaa").policy == "CUA&SPAA"
    assert spec(policy="EASY").policy == "easy"


@pytest.mark.parametrize(("changes", "words"), [
    ({"policy": "fifo"}, "unknown policy"),
    ({"workload": "W9"}, "unknown workload"),
    ({"seed": -1}, "seed"),
    ({"overrides": (("bogus", 1.0),)}, "unknown parameter 'bogus'"),
    ({"overrides": (("checkpoint_scale", "x"),)}, "needs a number"),
    ({"overrides": (("failure_mtbf", 0.0),)}, "must be positive"),
    ({"overrides": (("mtbf", 1.0), ("mtbf", 2.0))}, "twice"),
])
def test_bad_specs_say_what_is_wrong(changes: dict[str, object], words: str) -> None:
    with pytest.raises(SpecError, match=words):
        spec(**changes)


def test_json_round_trip_and_canonical_text() -> None:
    s = spec(overrides=(("malleable_min_fraction", 0.4), ("checkpoint_scale", 2)))
    again = RunSpec.from_json(s.to_json())
    assert again == s
    assert again.to_json() == s.to_json()
    # overrides are sorted and 2 == 2.0, so the order and spelling do not change the key
    other = spec(overrides=(("checkpoint_scale", 2.0), ("malleable_min_fraction", 0.4)))
    assert other.key == s.key


def test_keys_differ_with_any_field() -> None:
    keys = {spec().key, spec(seed=5).key, spec(workload="W1").key, spec(policy="easy").key,
            spec(overrides=(("checkpoint_scale", 0.5),)).key,
            spec(trace=TraceSource(jobs=101, seed=2)).key}
    assert len(keys) == 6
    assert spec().key.startswith("CUA-SPAA_W3_s4_")


def test_model_carries_workload_seed_and_model_overrides_only() -> None:
    s = spec(overrides=(("checkpoint_scale", 0.5), ("failure_mtbf", 18000.0)))
    model = s.model()
    assert model.name == "W3" and model.seed == 4 and model.checkpoint_scale == 0.5
    assert model.notice_shares == (0.1, 0.1, 0.7, 0.1)


def test_variant_labels() -> None:
    assert spec().variant == "default"
    assert variant_label({"failure_mtbf": 18000.0, "failure_repair": 21600.0}) == \
        "failure_mtbf=18000,failure_repair=21600"
    assert "checkpoint_scale" in OVERRIDE_KEYS and "seed" not in OVERRIDE_KEYS


def test_malformed_json_is_one_sentence() -> None:
    with pytest.raises(SpecError, match="not valid JSON"):
        RunSpec.from_json("{")
    with pytest.raises(SpecError, match="needs 'policy'"):
        RunSpec.from_json('{"workload": "W1", "seed": 0}')


def test_trace_source_checks_and_describes() -> None:
    with pytest.raises(SpecError):
        TraceSource(jobs=0)
    assert "first 500 jobs" in TraceSource(path="/x/theta.swf.gz", jobs=500).describe()
    assert TraceSource().synthetic and not TraceSource(path="a").synthetic


def test_word_choices_build_the_scheduler_and_the_engine_and_keep_their_words() -> None:
    s = spec(overrides=(("victim_order", "seconds"), ("requeue", "at-preemption")))
    assert s.scheduler().victim_order.value == "seconds"
    assert s.choice("requeue") == "at-preemption"
    assert s.model() == spec().model(), "neither is a workload-model field"
    # victim_order=seconds is R9, a rule every study run follows: labels leave it out, so
    # runs under the rules are labelled alike; its other word, a departure, is shown
    assert s.variant == "requeue=at-preemption"
    assert spec(overrides=(("victim_order", "node-seconds"),)).variant == \
        "victim_order=node-seconds"
    assert spec(policy="easy", overrides=(("victim_order", "seconds"),)).variant == \
        "victim_order=seconds", "no rule of the baseline's: it preempts nothing"
    again = RunSpec.from_json(s.to_json())
    assert again == s and again.key == s.key
    assert '"victim_order":"seconds"' in s.to_json()
    default = spec()
    assert default.scheduler().victim_order.value == "node-seconds"
    assert default.choice("requeue") == "original"
    assert len({s.key, default.key, spec(overrides=(("requeue", "original"),)).key}) == 3


@pytest.mark.parametrize(("key", "value", "words"), [
    ("victim_order", "jobs", "parameter victim_order is node-seconds or seconds, got 'jobs'"),
    ("requeue", 1.0, "parameter requeue is original or at-preemption, got 1.0"),
    ("oracle", "seconds", "parameter oracle needs a number, got 'seconds'"),
])
def test_a_word_choice_takes_its_words_only(key: str, value: object, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        spec(overrides=((key, value),))


ANY_WORD = st.one_of(st.sampled_from(sorted({w for ws in CHOICES.values() for w in ws})),
                     st.text(max_size=20))


@given(key=st.sampled_from(sorted(CHOICES)), word=ANY_WORD)
def test_a_word_choice_is_one_of_its_words_or_refused(key: str, word: str) -> None:
    if word in CHOICES[key]:
        s = spec(overrides=((key, word),))
        assert RunSpec.from_json(s.to_json()) == s
        # a word that only follows a rule of the paper is left out of the label
        rule = (key, word) in paper_rules(s.policy)
        assert s.variant == ("default" if rule else f"{key}={word}")
    else:
        with pytest.raises(SpecError, match=f"parameter {key} is "):
            spec(overrides=((key, word),))


def test_borrowers_and_cup_preempt_build_the_scheduler() -> None:
    s = spec(overrides=(("borrowers", "all"), ("cup_preempt", "at-arrival")))
    built = s.scheduler()
    assert (built.borrowers.value, built.cup_preempt.value) == ("all", "at-arrival")
    assert s.model() == spec().model(), "neither is a workload-model field"
    default = spec().scheduler()
    assert (default.borrowers.value, default.cup_preempt.value) == ("as-needed", "planned")
    assert spec().to_dict()["overrides"] == {}, "a spec without them keeps its stored key"
    assert RunSpec.from_json(s.to_json()).key == s.key != spec().key


def test_malleable_start_goes_to_the_engine_and_keeps_default_keys() -> None:
    s = spec(overrides=(("malleable_start", "full"),))
    assert s.choice("malleable_start") == "full" and spec().choice("malleable_start") == "largest"
    assert s.model() == spec().model() and s.scheduler() == spec().scheduler()
    assert RunSpec.from_json(s.to_json()).key == s.key != spec().key


def test_decisions_go_to_the_engine_and_keep_default_keys() -> None:
    s = spec(overrides=(("decisions", "per-item"),))
    assert s.choice("decisions") == "per-item" and spec().choice("decisions") == "per-instant"
    assert s.model() == spec().model() and s.scheduler() == spec().scheduler()
    assert RunSpec.from_json(s.to_json()).key == s.key != spec().key


def test_instant_order_goes_to_the_engine_and_keeps_default_keys() -> None:
    s = spec(overrides=(("instant_order", "submits-first"),))
    assert s.choice("instant_order") == "submits-first"
    assert spec().choice("instant_order") == "finishes-first"
    assert s.model() == spec().model() and s.scheduler() == spec().scheduler()
    assert RunSpec.from_json(s.to_json()).key == s.key != spec().key
    with pytest.raises(SpecError, match=r"^parameter instant_order is finishes-first or "
                                        r"submits-first, got 'last'$"):
        spec(overrides=(("instant_order", "last"),))


def test_other_reservations_builds_the_scheduler_and_keeps_default_keys() -> None:
    s = spec(overrides=(("other_reservations", "spared"),))
    assert s.scheduler().other_reservations.value == "spared"
    assert spec().scheduler().other_reservations.value == "taken"
    assert RunSpec.from_json(s.to_json()).key == s.key != spec().key


def test_preempt_when_builds_the_scheduler_and_keeps_default_keys() -> None:
    s = spec(overrides=(("preempt_when", "always"),))
    assert s.scheduler().preempt_when.value == "always"
    assert spec().scheduler().preempt_when.value == "it-starts"
    assert spec().to_dict()["overrides"] == {}, "a spec without it keeps its stored key"
    assert RunSpec.from_json(s.to_json()).key == s.key != spec().key
    with pytest.raises(SpecError, match=r"^parameter preempt_when is it-starts or always, "
                                        r"got 'never'$"):
        spec(overrides=(("preempt_when", "never"),))


def test_node_order_builds_the_scheduler_and_keeps_default_keys() -> None:
    s = spec(overrides=(("node_order", "highest-first"),))
    assert s.scheduler().node_order.value == "highest-first"
    assert spec(policy="easy").scheduler().node_order.value == "lowest-first"
    assert RunSpec.from_json(s.to_json()).key == s.key != spec().key


def test_failure_loss_goes_to_the_failure_source_and_keeps_default_keys() -> None:
    from sim.engine.failures import FailureLoss
    from sim.study.execution import _failure_source
    from sim.trace.synthetic import synthetic_trace

    trace = synthetic_trace(jobs=20, seed=1, nodes=64)
    mtbf = (("failure_mtbf", 3600.0),)
    s = spec(overrides=(*mtbf, ("failure_loss", "since-checkpoint")))
    assert s.choice("failure_loss") == "since-checkpoint" and spec().choice("failure_loss") == "all"
    assert s.model() == spec(overrides=mtbf).model()
    source, default = _failure_source(s, trace), _failure_source(spec(overrides=mtbf), trace)
    assert source is not None and source.model.loss is FailureLoss.SINCE_CHECKPOINT
    assert default is not None and default.model.loss is FailureLoss.ALL
    assert "failure_loss" not in spec(overrides=mtbf).to_dict()["overrides"]
    assert RunSpec.from_json(s.to_json()).key == s.key != spec(overrides=mtbf).key


def test_malleable_speedup_goes_to_the_workload_model_and_keeps_default_keys() -> None:
    s = spec(overrides=(("malleable_speedup", "amdahl-0.05"),))
    assert s.model().serial == 0.05 and spec().model().serial == 0.0
    assert s.scheduler() == spec().scheduler()
    assert spec().to_dict()["overrides"] == {}, "a spec without it keeps its stored key"
    assert RunSpec.from_json(s.to_json()).key == s.key != spec().key


def test_failure_node_and_times_go_to_the_failure_source_and_keep_default_keys() -> None:
    from sim.engine.failures import FailureNode, FailureTimes
    from sim.study.execution import _failure_source
    from sim.trace.synthetic import synthetic_trace

    trace = synthetic_trace(jobs=20, seed=1, nodes=64)
    mtbf = (("failure_mtbf", 3600.0),)
    s = spec(overrides=(*mtbf, ("failure_node", "busy"), ("failure_times", "weibull-0.7")))
    assert (s.choice("failure_node"), s.choice("failure_times")) == ("busy", "weibull-0.7")
    assert (spec().choice("failure_node"), spec().choice("failure_times")) == ("uniform", "poisson")
    assert s.model() == spec(overrides=mtbf).model()
    source, default = _failure_source(s, trace), _failure_source(spec(overrides=mtbf), trace)
    assert source is not None and default is not None
    assert (source.model.node, source.model.times) == (FailureNode.BUSY, FailureTimes.WEIBULL)
    assert (default.model.node, default.model.times) == (FailureNode.UNIFORM,
                                                         FailureTimes.POISSON)
    assert set(spec(overrides=mtbf).to_dict()["overrides"]) == {"failure_mtbf"}
    assert RunSpec.from_json(s.to_json()).key == s.key != spec(overrides=mtbf).key
    # without failure_mtbf there is no failure source, whatever the words
    assert _failure_source(spec(overrides=(("failure_node", "busy"),)), trace) is None
    with pytest.raises(SpecError, match=r"^parameter failure_node is uniform or busy, "
                                        r"got 'hot'$"):
        spec(overrides=(("failure_node", "hot"),))
    with pytest.raises(SpecError, match=r"^parameter failure_times is poisson or "
                                        r"weibull-0.7, got 'weibull'$"):
        spec(overrides=(("failure_times", "weibull"),))


def test_resize_cost_goes_to_the_workload_model_and_keeps_default_keys() -> None:
    s = spec(overrides=(("resize_cost", "setup"),))
    assert s.model().resize_cost == "setup" and spec().model().resize_cost == "none"
    assert s.scheduler() == spec().scheduler()
    assert spec().to_dict()["overrides"] == {}, "a spec without it keeps its stored key"
    assert RunSpec.from_json(s.to_json()).key == s.key != spec().key
    with pytest.raises(SpecError, match=r"^parameter resize_cost is none or setup or "
                                        r"setup-fixed, got 'free'$"):
        spec(overrides=(("resize_cost", "free"),))
    fixed = spec(overrides=(("resize_cost", "setup-fixed"),)).model()
    assert fixed.resize_fixed and not s.model().resize_fixed
