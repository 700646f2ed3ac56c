"""`collective serve` / `collective mcp` refuse bad options with one error line, exit 2."""

from __future__ import annotations

import socket

import pytest

from tests.cli import one_error_line, run


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["serve", "--council", "nameonly"], "give NAME=FILE"),
        (["serve", "--council", "Bad-Name=x.toml"], "council name 'Bad-Name'"),
        (["serve", "--council", "collective=x.toml"], "not 'collective'"),
        (["serve", "--council", "a=x.toml", "--council", "a=y.toml"], "given twice"),
        (["serve", "--council", "other=missing.toml"], "missing.toml does not exist"),
        (["mcp", "--transport", "sse"], "use stdio or http"),
        (["serve", "--kb", "no-such.sqlite"], "no-such.sqlite"),
    ],
)
def test_bad_options_are_one_error_line(clean_cwd, args, said):
    code, out, err = run(args)
    assert code == 2, err
    assert said in one_error_line(err)


def test_a_port_in_use_is_a_clear_error(clean_cwd):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code, _, err = run(["serve", "--port", str(port)])
    assert code == 2
    line = one_error_line(err)
    assert f"cannot listen on 127.0.0.1:{port}" in line and "--port" in line


def test_a_key_comes_from_the_environment_not_only_the_command_line():
    from collective.commands.serve import ApiKeyOption
    from collective.serve.settings import API_KEY_ENV

    assert ApiKeyOption.__metadata__[0].envvar == API_KEY_ENV
