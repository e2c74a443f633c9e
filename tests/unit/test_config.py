from pathlib import Path

import pytest
import yaml

from worthit.config import ROOT, ConfigError, Study, load, validate
from worthit.experiments.loadtest.section import run_of
from worthit.experiments.loadtest.section import section as load_section
from worthit.experiments.specdec.section import load_variants
from worthit.server import engine_flags

MIN = {"models": {"m": {"source": "hf:Qwen/Qwen2.5-7B-Instruct"}}, "variants": {"a": {"model": "m"}}}


def test_defaults_are_filled_in_from_the_schema():
    cfg = validate(MIN)
    assert cfg["loadtest"]["levels"] == [1, 4, 16]
    assert cfg["loadtest"]["num_requests"] == {"min": 8, "per_concurrency": 2}
    assert cfg["variants"]["a"]["gpus"] == 1 and cfg["baseline_variant"] == "a"
    assert cfg["envs"]["serve_python"].endswith("serve/bin/python")


def test_unknown_key_names_file_key_and_allowed_keys():
    with pytest.raises(ConfigError) as e:
        validate({**MIN, "loadtest": {"level": [1]}}, "study.yaml")
    msg = str(e.value)
    assert "study.yaml" in msg and "'loadtest'" in msg and "levels" in msg


def test_bad_enum_lists_allowed_values():
    with pytest.raises(ConfigError, match="allowed: completions, chat"):
        validate({**MIN, "loadtest": {"endpoint": "grpc"}}, "s.yaml")


def test_bad_level_names_the_index():
    with pytest.raises(ConfigError, match=r"loadtest.levels\[1\]"):
        validate({**MIN, "loadtest": {"levels": [1, 0]}}, "s.yaml")


def test_variant_naming_an_unknown_model_lists_known_models():
    with pytest.raises(ConfigError, match="variants.a.model.*allowed: m"):
        validate({"models": MIN["models"], "variants": {"a": {"model": "x"}}})


def test_a_variant_s_own_baseline_must_name_another_variant():
    two = {**MIN, "variants": {"a": {"model": "m"}, "b": {"model": "m", "baseline": "zz"}}}
    with pytest.raises(ConfigError, match=r"key 'variants\.b\.baseline': unknown variant 'zz' \(allowed: a,"):
        validate(two)
    two["variants"]["b"]["baseline"] = "a"
    s = Study(validate(two))
    assert s.baseline_of("b") == "a" and s.baseline_of("a") == "a"
    assert s.baselines == ["a"]


def test_a_variant_naming_itself_is_a_baseline_of_its_own_that_others_name():
    cfg = {
        **MIN,
        "models": {"m": {"source": "hf:x/y"}, "big": {"source": "hf:x/z"}},
        "variants": {
            "a": {"model": "m"},
            "big": {"model": "big", "baseline": "big"},
            "big_opt": {"model": "big", "baseline": "big", "engine_args": {"max-num-seqs": 8}},
        },
    }
    s = Study(validate(cfg))
    assert s.baselines == ["a", "big"]
    assert s.baseline_of("big") == "big" and s.changes("big") == []  # judged against nothing
    assert s.baseline_of("big_opt") == "big" and s.changes("big_opt") == ["max-num-seqs 8 (vs None)"]


def test_a_variant_s_own_levels_replace_the_grid_for_it_alone():
    cfg = {
        **MIN,
        "variants": {"a": {"model": "m"}, "b": {"model": "m", "levels": [1, 32]}},
        "loadtest": {"levels": [1, 16]},
    }
    s = Study(validate(cfg))
    lt = load_section(s.cfg)
    assert lt.grid_levels("a") == [1, 16] and lt.grid_levels("b") == [1, 32]
    assert lt.all_grid_levels == [1, 16, 32]
    assert [lv.name for lv in lt.variant_levels("a")] == ["conc~1", "conc~16"]
    assert [lv.name for lv in lt.variant_levels("b")] == ["conc~1", "conc~32"]
    assert lt.level("conc~32").concurrency == 32  # the loadtest rule's wildcard knows it
    assert "load/conc~32" in s.result_files("b") and "load/conc~32" not in s.result_files("a")
    cfg["variants"]["b"]["levels"] = [0]
    with pytest.raises(ConfigError, match=r"variants\.b\.levels"):
        validate(cfg)


def test_unknown_baseline_variant_is_refused():
    with pytest.raises(ConfigError, match="baseline_variant"):
        validate({**MIN, "baseline_variant": "zz"})


def test_invalid_yaml_names_the_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("models: [\n")
    with pytest.raises(ConfigError, match="bad.yaml: not valid YAML"):
        load(p)


def test_a_config_that_cannot_be_read_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match="missing.yaml: the study config cannot be read"):
        load(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="cannot be read"):
        load(tmp_path)  # a folder
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00study")
    with pytest.raises(ConfigError, match="bin.yaml: the study config cannot be read"):
        load(tmp_path / "bin.yaml")


def test_the_shipped_default_study_is_valid():
    from tests.conftest import ROOT

    cfg = load(ROOT / "config" / "config.yaml")
    assert {"baseline", "no_prefix_cache"} <= set(cfg["variants"])


def test_variant_engine_args_override_serve_defaults_false_turns_a_flag_off_and_null_drops_it():
    cfg = validate(
        {
            **MIN,
            "serve": {"engine_args": {"dtype": "float32", "enforce-eager": True, "kv-cache-dtype": "fp8"}},
            "variants": {
                "a": {
                    "model": "m",
                    "engine_args": {"enforce-eager": False, "max-num-seqs": 16, "kv-cache-dtype": None},
                }
            },
        }
    )
    v = Study(cfg).variant("a")
    assert engine_flags(v.engine_args) == ["--dtype", "float32", "--no-enforce-eager", "--max-num-seqs", "16"]
    # vLLM's on-by-default booleans turn off only with their negative form; a negation's false is its default
    assert engine_flags({"enable_chunked_prefill": False, "no-enable-prefix-caching": False}) == [
        "--no-enable-chunked-prefill"
    ]
    assert engine_flags({"disable-log-stats": False}) == []


def test_engine_flags_pass_mappings_as_json_and_true_as_bare_flag():
    flags = engine_flags(
        {"speculative-config": {"method": "ngram", "num_speculative_tokens": 3}, "enable_prefix_caching": True}
    )
    assert flags == ["--speculative-config", '{"method":"ngram","num_speculative_tokens":3}', "--enable-prefix-caching"]


def test_requests_per_level_scale_with_concurrency():
    lt = load_section(validate({**MIN, "loadtest": {"num_requests": {"min": 8, "per_concurrency": 2}}}))
    assert [lt.num_requests(c) for c in (1, 4, 16)] == [8, 8, 32]


def test_consumers_run_kv_first_then_levels_in_order():
    s = Study(validate({**MIN, "loadtest": {"levels": [16, 1]}}))
    assert list(s.consumers("a")) == ["kv", "load/conc~16", "load/conc~1"]


def test_repeated_levels_go_round_after_round_and_keep_run_one_where_it_was():
    s = Study(validate({**MIN, "loadtest": {"levels": [1, 4], "repeats": 3}}))
    assert list(s.consumers("a")) == [
        "kv",
        "load/conc~1",
        "load/conc~4",
        "load/conc~1.rep~2",
        "load/conc~4.rep~2",
        "load/conc~1.rep~3",
        "load/conc~4.rep~3",
    ]
    assert load_section(validate(MIN)).repeats == 1
    assert [run_of(w) for w in ("", ".rep~2", ".rep~12")] == [1, 2, 12]


def test_repeats_below_one_are_refused_with_the_key():
    with pytest.raises(ConfigError, match=r"s.yaml.*loadtest.repeats"):
        validate({**MIN, "loadtest": {"repeats": 0}}, "s.yaml")


def test_specdec_table_reads_the_speculative_base_and_draft_variants_that_run_load_levels():
    cfg = validate(
        {
            "models": {"m": {"source": "hf:Qwen/Qwen2.5-7B-Instruct"}, "d": {"source": "hf:Qwen/Qwen2.5-0.5B"}},
            "variants": {
                "base": {"model": "m"},
                "spec": {"model": "m", "engine_args": {"speculative_config": {"model": "d"}}},
                "draft": {"model": "d"},
                "other": {"model": "m"},
                "no_load": {"model": "m", "experiments": ["kv"]},
            },
            "specdec": {"draft_variants": {"spec": "draft"}},
        }
    )
    assert load_variants(Study(cfg)) == ["spec", "base", "draft"]
    cfg["specdec"]["draft_variants"] = {"spec": "no_load"}
    assert load_variants(Study(cfg)) == ["spec", "base"]


@pytest.mark.parametrize(
    ("args", "on"),
    [
        ({}, True),
        ({"enable_prefix_caching": None}, True),
        ({"enable-prefix-caching": False}, False),
        ({"--no-enable-prefix-caching": True}, False),
        ({"no_enable_prefix_caching": False}, True),
    ],
)
def test_prefix_caching_is_vllms_default_unless_a_variant_turns_it_off(args, on):
    cfg = validate({**MIN, "variants": {"a": {"model": "m", "engine_args": args}}})
    assert Study(cfg).variant("a").prefix_caching is on


def test_an_engine_arg_is_found_in_any_spelling_and_the_variants_spelling_wins():
    cfg = validate(
        {
            **MIN,
            "serve": {"engine_args": {"max_model_len": 2048}},
            "variants": {"a": {"model": "m", "engine_args": {"--max-model-len": 1024}}},
        }
    )
    assert Study(cfg).variant("a").arg("max-model-len") == 1024
    # and the command line holds the flag once: the variant's replaces serve's whatever either spells
    from worthit.server import engine_flags

    assert engine_flags(Study(cfg).variant("a").engine_args) == ["--max-model-len", "1024"]


def test_each_experiment_s_section_comes_from_its_folder_and_a_malformed_one_is_named(tmp_path: Path) -> None:
    from worthit import measurements

    declared = {m.name: m.section for m in measurements.registered() if m.section}
    for name in ("loadtest", "prefix", "specdec", "accuracy", "sweet_spot"):
        folder = ROOT / "src" / "worthit" / "experiments" / name
        key, schema = measurements.section_file(folder / "section.yaml")
        assert declared[name] == (key, schema) and key == name and schema["type"] == "object"
        assert key not in yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())["properties"]
    # validation fills the section's defaults (a study that names none of its keys)
    cfg = validate(MIN)
    assert cfg["prefix"]["lengths"] == [0, 1500, 4000] and cfg["sweet_spot"]["max_probes"] == 6
    two = tmp_path / "section.yaml"
    two.write_text("a: {type: object}\nb: {type: object}\n")
    with pytest.raises(ValueError, match=r"section.yaml: holds one config section"):
        measurements.section_file(two)
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [unclosed\n")
    with pytest.raises(ValueError, match=r"bad.yaml: not valid YAML"):
        measurements.section_file(bad)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"tensor-parallel-size": "two"}, r"engine_args.tensor-parallel-size': 'two' is not a whole number of GPUs"),
        ({"tensor_parallel_size": 0}, r"engine_args.tensor_parallel_size': 0 is not a whole number of GPUs"),
        ({"max-num-seqs": 2.5}, r"engine_args.max-num-seqs': 2.5 is not a whole number of sequences"),
        ({"gpu-memory-utilization": 90}, r"90 is not a fraction of the GPU's memory, above 0 and at most 1"),
        ({"speculative-config": "ngram"}, r"'ngram' is not a speculative config: write a mapping"),
        ({"speculative-config": [4]}, r"\[4\] is not a speculative config"),
        ({1: 4}, r"engine_args': 1 is not of type 'string'"),
    ],
)
def test_engine_args_worthit_reads_itself_are_checked_naming_the_key(args, message):
    with pytest.raises(ConfigError, match=message):
        validate({**MIN, "variants": {"a": {"model": "m", "engine_args": args}}}, "s.yaml")


def test_engine_args_worthit_reads_take_what_vllm_takes():
    ok = {"tensor-parallel-size": "2", "max-num-seqs": 16, "gpu-memory-utilization": 0.9, "data-parallel-size": None}
    ok["speculative-config"] = '{"method": "ngram", "num_speculative_tokens": 3}'  # its JSON, as vllm serve takes it
    v = Study(validate({**MIN, "variants": {"a": {"model": "m", "engine_args": ok}}})).variant("a")
    assert v.speculative_config == {"method": "ngram", "num_speculative_tokens": 3}


def test_a_quantised_models_base_must_be_a_fetched_model():
    q = {"quantize": {"base": "nope", "scheme": "W4A16"}}
    with pytest.raises(ConfigError, match=r"s.yaml: key 'models.q.quantize.base': 'nope' is not a model with a source"):
        validate({**MIN, "models": {**MIN["models"], "q": q}}, "s.yaml")
    q = {"quantize": {"base": "q", "scheme": "W4A16"}}
    with pytest.raises(ConfigError, match=r"'models.q.quantize.base': a model cannot be its own base \(allowed: m\)"):
        validate({**MIN, "models": {**MIN["models"], "q": q}}, "s.yaml")


def test_a_key_twice_in_one_mapping_is_refused_naming_the_file_and_lines(tmp_path: Path):
    f = tmp_path / "study.yaml"
    f.write_text(
        "models:\n  m: {source: 'hf:Qwen/Qwen2.5-7B-Instruct'}\n"
        "variants:\n  a: {model: m}\n  b: {model: m, engine_args: {kv-cache-dtype: fp8}}\n"
        "  a: {model: m, engine_args: {max-num-seqs: 8}}\n"
    )
    with pytest.raises(
        ConfigError, match=r"study.yaml: line 6: key 'a' appears twice in one mapping \(first on line 4\)"
    ):
        load(f)
    f.write_text("base: &b {model: m}\nother:\n  <<: *b\n  engine_args: {}\n")  # a YAML merge key is not a duplicate
    from worthit.config import read_yaml

    assert read_yaml(f)["other"]["model"] == "m"


def test_an_accuracy_task_listed_twice_is_refused():
    tasks = [{"name": "worthit_arc", "limit": 50}, {"name": "worthit_gsm"}, {"name": "worthit_arc"}]
    with pytest.raises(ConfigError, match=r"key 'accuracy.tasks\[2\].name': task 'worthit_arc' is listed twice"):
        validate({**MIN, "accuracy": {"tasks": tasks}}, "s.yaml")


def test_each_comparison_of_the_default_study_changes_one_thing_and_a_second_change_is_named():
    study = Study(load(ROOT / "config" / "config.yaml"))
    changes = {v: study.changes(v) for v in study.variants if v != study.baseline_of(v)}
    assert all(len(c) == 1 for c in changes.values()), changes
    assert changes["awq_int4"] == ["model smollm2-135m-awq (vs smollm2-135m)"]  # against the bf16 baseline
    assert changes["baseline_bf16"] == ["dtype bfloat16 (vs float32)"]
    assert changes["no_prefix_cache"] == ["prefix caching off (vs on)"]
    assert study.changes(study.cfg["baseline_variant"]) == []
    # the same AWQ variant judged against the fp32 baseline changes two things, and says which
    cfg = load(ROOT / "config" / "config.yaml")
    cfg["variants"]["awq_int4"]["baseline"] = None
    assert Study(cfg).changes("awq_int4") == ["model smollm2-135m-awq (vs smollm2-135m)", "dtype bfloat16 (vs float32)"]
    # prefix caching turned off in either spelling is one change; a control changes nothing
    cfg["variants"]["no_prefix_cache"]["engine_args"] = {"enable_prefix_caching": False}
    cfg["variants"]["again"] = {**cfg["variants"]["baseline"], "experiments": ["loadtest"]}
    assert Study(cfg).changes("no_prefix_cache") == ["prefix caching off (vs on)"]
    assert Study(cfg).changes("again") == []
