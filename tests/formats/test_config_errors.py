"""Library configs name their parameters; only the CLI speaks of flags."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dataio.formats.errors import ConfigError
from dataio.formats.text.text_convert import ConvertTextConfig
from dataio.formats.text.tokenizer_setup import TokenizerConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("options, parameter", [
    (dict(max_length=1), "max_length"), (dict(doc_sep="page"), "doc_sep"), (dict(format="csv"), "format"),
    (dict(shard_tokens=0), "shard_tokens"),
])
def test_text_config_names_the_parameter_not_a_flag(tmp_path, options, parameter):
    with pytest.raises(ValueError) as raised:
        ConvertTextConfig(sources=(tmp_path / "a.txt",), out=tmp_path / "out",
                          tokenizer=TokenizerConfig(train="bpe"), **options)
    assert isinstance(raised.value, ConfigError) and str(raised.value).startswith(parameter)
    assert "--" not in str(raised.value)


def test_tokenizer_config_names_parameters():
    with pytest.raises(ConfigError, match="^vocab_size must be >= 260") as raised:
        TokenizerConfig(train="bpe", vocab_size=10)
    assert "--" not in str(raised.value)
    with pytest.raises(ConfigError, match="exactly one of path, train or tokenizer"):
        TokenizerConfig()


def test_braces_in_a_path_do_not_break_the_message():
    error = ConfigError("output folder /data/{x} is not empty (pass {0} to replace it)", "overwrite=True")
    assert str(error) == "output folder /data/{x} is not empty (pass overwrite=True to replace it)"
    assert error.for_names({"overwrite=True": "--overwrite"}).endswith("(pass --overwrite to replace it)")


def test_the_cli_names_the_flags(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\n")
    done = subprocess.run([sys.executable, "-m", "dataio", "convert", "text", str(corpus), str(tmp_path / "o"),
                           "--train-tokenizer", "bpe", "--vocab-size", "100"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == "dataio convert: error: --vocab-size must be >= 260 (256 bytes + specials), got 100"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    (tmp_path / "src" / "a").mkdir(parents=True)  # beside OUT: an OUT inside the source is refused before this check
    done = subprocess.run([sys.executable, "-m", "dataio", "convert", "images", str(tmp_path / "src"),
                           str(tmp_path / "full")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "(pass --overwrite to replace it)" in done.stderr
