"""Training progress: a bar per trainer when ``placegroup launch`` runs on a terminal, compact
lines anywhere else, and the main example's notices said once per job."""
import fcntl
import io
import json
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from placegroup.tools.progress import RECORD, Bars, Progress, parse_record, progress

from tests.conftest import TIME_FACTOR

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "fit_a_line.py")


def test_off_a_terminal_progress_is_a_compact_line_now_and_then(capsys, monkeypatch):
    monkeypatch.delenv("PLACEGROUP_PROGRESS", raising=False)
    bar = progress(200, desc="trainer 1", enabled=False, every=3600)
    assert bar.mode == "lines"
    for _ in range(200):
        bar.step(0.25)
    assert capsys.readouterr().out == ""  # nothing before `every` seconds
    bar.close()
    line = capsys.readouterr().out
    assert line.startswith("trainer 1: step 200/200 (100%), loss 0.2500, ") and line.endswith(" steps/s\n")


def test_under_a_drawing_launcher_progress_goes_out_as_records(capsys, monkeypatch):
    monkeypatch.setenv("PLACEGROUP_PROGRESS", "launch")
    with progress(3, desc="t") as bar:
        assert bar.mode == "records"
        for loss in (1.0, 1.0, 1.0):
            bar.step(loss)
    recs = [parse_record(line) for line in capsys.readouterr().out.splitlines()]
    assert recs[-1] == {"n": 3, "total": 3, "loss": 1.0, "desc": "t"} and None not in recs
    assert parse_record("step 3 loss 1") is None and parse_record(RECORD + "{bad json") is None
    assert parse_record(RECORD + json.dumps({"n": "3"})) is None


def test_the_launcher_draws_records_as_bars_and_prints_other_lines_above_them():
    out = io.StringIO()
    bars = Bars(out)
    bars.line("trainer:0", "data set: diabetes\n")
    assert out.getvalue() == "[trainer:0] data set: diabetes\n"
    bars.line("trainer:0", RECORD + json.dumps({"n": 5, "total": 10, "loss": 0.5, "desc": ""}) + "\n")
    bars.line("trainer:1", RECORD + json.dumps({"n": 7, "total": 10, "loss": None, "desc": ""}) + "\n")
    bars.line("trainer:0", "pass 1\n")
    bars.close()
    text = out.getvalue()
    assert "[trainer:0]:  50%" in text and "loss 0.5000" in text and "[trainer:1]:  70%" in text
    assert "[trainer:0] pass 1" in text and RECORD not in text


def _run_in_terminal(cmd, timeout):
    """Run ``cmd`` with a 120-column pseudo-terminal as its stdin, stdout and stderr."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the terminal closed: every process is gone
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=timeout) == 0
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.slow  # 8 s; the launch off a terminal, below, runs by default
def test_launch_on_a_terminal_shows_one_bar_per_trainer_with_its_loss():
    text = _run_in_terminal([sys.executable, "-m", "placegroup", "launch", EXAMPLE, "--passes", "6"],
                            60 * TIME_FACTOR)
    for t in (0, 1):
        assert f"[trainer:{t}]: " in text and "step/s, loss " in text, text[-2000:]
    assert RECORD.strip() not in text
    assert text.count("data set: diabetes") + text.count("data set: uci_housing") == 1


def test_launch_off_a_terminal_prints_notices_once_and_compact_progress(tmp_path):
    got = subprocess.run([sys.executable, "-m", "placegroup", "launch", EXAMPLE, "--passes", "20"],
                         capture_output=True, text=True, timeout=120 * TIME_FACTOR)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    lines = got.stdout.splitlines()
    assert sum("data set:" in ln for ln in lines) == 1
    passes = [ln for ln in lines if " train loss " in ln and "pass" in ln]
    assert len(passes) == 10 and all(ln.startswith("[trainer:0] pass") for ln in passes)  # every 2nd pass
    for t in (0, 1):
        assert any(ln.startswith(f"[trainer:{t}] trainer {t}: step 360/360 (100%), loss ") for ln in lines)
    assert not any(RECORD.strip() in ln for ln in lines)


def test_a_bar_only_in_one_process_on_a_terminal(monkeypatch):
    monkeypatch.delenv("PLACEGROUP_PROGRESS", raising=False)
    bar = progress(10, enabled=True)
    assert bar.mode == "bar" and isinstance(bar, Progress)
    bar.close()


@pytest.mark.slow
def test_fit_a_line_resumed_says_where_and_skips_the_steps_it_had_done(tmp_path):
    ckpt = tmp_path / "ckpt"
    base = [sys.executable, "-m", "placegroup", "launch", "--checkpoint-dir", str(ckpt), "--checkpoint-every", "5"]
    first = subprocess.run([*base, EXAMPLE, "--passes", "2"], capture_output=True, text=True, timeout=120 * TIME_FACTOR)
    assert first.returncode == 0, first.stdout[-2000:]
    again = subprocess.run([*base, "--resume", EXAMPLE, "--passes", "3"], capture_output=True, text=True,
                           timeout=120 * TIME_FACTOR)
    assert again.returncode == 0, again.stdout[-2000:]
    out = again.stdout
    assert "[trainer:0] trainer 0: resumed at step 35 (pass 1, batch 17) from the checkpoint" in out, out[-2000:]
    assert "(3 passes, 19 steps in" in out  # only the third pass's 18 steps and the second's last
