"""Settings objects: frozen, and a bad value is a ConfigError naming the setting."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from sleuth.datagen.pipeline.llm import CacheMode, LLMConfig
from sleuth.datagen.pipeline.runner import DatagenConfig
from sleuth.demo import DemoConfig
from sleuth.errors import ConfigError
from sleuth.train.constants import CISPO_W_MAX, CISPO_W_MIN
from sleuth.train.text_stage import TextStageTrainConfig

CASES = [
    (DatagenConfig, {"workers": 0}, "workers"),
    (DatagenConfig, {"max_turns": 0}, "max_turns"),
    (DatagenConfig, {"min_distractors": 11}, "min_distractors"),
    (LLMConfig, {"model": "m", "mode": "sometimes"}, "cache mode"),
    (LLMConfig, {"model": "m", "mode": "record", "max_retries": -1}, "max_retries"),
    (LLMConfig, {"model": "m", "mode": "record", "backoff_s": 60.0}, "backoff_s"),
    (LLMConfig, {"model": "m", "mode": "record", "timeout_s": 0}, "timeout_s"),
    (DemoConfig, {"real_tasks": -1}, "real_tasks"),
    (DemoConfig, {"extra_documents": -5}, "extra_documents"),
    (TextStageTrainConfig, {"negatives": 0}, "negatives"),
    (TextStageTrainConfig, {"frozen_layers": 7}, "frozen_layers"),
]


@pytest.mark.parametrize(("cls", "fields", "name"), CASES)
def test_a_bad_setting_is_a_config_error_that_names_it(cls, fields, name):
    with pytest.raises(ConfigError, match=name):
        cls(**fields)


@pytest.mark.parametrize(
    "config",
    [
        DatagenConfig(),
        LLMConfig(model="m", mode="record"),
        DemoConfig(),
        DemoConfig.quick(),
        TextStageTrainConfig(),
    ],
)
def test_settings_are_frozen(config):
    field = dataclasses.fields(config)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(config, field, getattr(config, field))


def test_llm_config_takes_the_mode_by_name():
    assert LLMConfig(model="m", mode="record").mode is CacheMode.RECORD


def test_the_cli_shows_the_cispo_bounds_without_loading_torch():
    code = (
        "import sys; from sleuth.cli.train import train_rl; import inspect; "
        "p = inspect.signature(train_rl).parameters; "
        "print(p['w_min'].default, p['w_max'].default, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(CISPO_W_MIN), str(CISPO_W_MAX), "False"]
