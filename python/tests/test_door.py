"""chips, select, sensitivity and explain: each against the CLI's JSON on the same input, and errors
against the CLI's messages (both go through tpusim-api)."""

import json

import numpy as np
import pytest

import tpusim
from conftest import IDS, ROOT, SPEC, cli_error, same_json

GRAPH = ROOT / "testdata" / "select" / "nchw_f32.json"


def test_chips_lists_every_preset_with_the_clis_values_and_sources(cli_json):
    got = tpusim.chips()
    want = cli_json("chips", "--json")
    assert list(got) == ["v4", "v5e", "v5p", "v6e", "tpu7x"] == list(want)
    for chip, fields in want.items():
        assert list(got[chip]) == list(fields)
        for name, f in fields.items():
            assert same_json(got[chip][name]["value"], f["value"]), (chip, name)
            assert got[chip][name]["source"] == f["source"], (chip, name)


@pytest.mark.parametrize("field,unit", [
    ("hbm_bytes", "bytes"),
    ("vmem_bytes_per_tc", "bytes"),
    ("sc_tilespmem_bytes_available", "bytes"),
    ("hbm_bytes_per_s", "bytes/s"),
    ("ici_bytes_per_s_per_link", "bytes/s"),
    ("peak_bf16_flops", "FLOP/s"),
    ("megacore", None),
    ("tc_clock_mhz", None),
])
def test_chip_fields_carry_the_unit_their_name_gives(field, unit):
    assert tpusim.chips("v5p")["v5p"][field]["unit"] == unit


def test_one_chip_with_a_chip_file_matches_the_cli(cli_json, tmp_path):
    f = tmp_path / "chip.json"
    f.write_text(json.dumps({"chip": "v4", "hbm_bytes_per_s": {"value": 600_000_000_000, "source": "what-if: a quarter"}}))
    got = tpusim.chips(chip_file=f)
    want = cli_json("chips", "--chip-file", f, "--json")
    assert list(got) == ["v4"]
    assert got["v4"]["hbm_bytes_per_s"] == {"value": 600_000_000_000, "unit": "bytes/s", "source": "given: what-if: a quarter"}
    assert same_json({k: v["value"] for k, v in got["v4"].items()}, {k: v["value"] for k, v in want["v4"].items()})


def test_chips_errors_carry_the_cli_message(cli, tmp_path):
    code, _, err = cli("chips", "--chip", "v9", "--json")
    assert code == 2
    with pytest.raises(tpusim.Error) as e:
        tpusim.chips("v9")
    assert str(e.value) == cli_error(err)
    missing = tmp_path / "none.json"
    code, _, err = cli("chips", "--chip-file", missing)
    with pytest.raises(tpusim.Error) as e:
        tpusim.chips(chip_file=missing)
    assert code == 2 and str(e.value) == cli_error(err)


def test_select_matches_the_cli_for_a_file_and_a_dict(cli_json):
    want = cli_json("select", GRAPH, "--chip", "v4", "--json")
    assert same_json(tpusim.select(GRAPH, chip="v4"), want)
    assert same_json(tpusim.select(json.loads(GRAPH.read_text()), chip="v4"), want)
    # The default chip is the CLI's.
    assert same_json(tpusim.select(GRAPH), cli_json("select", GRAPH, "--json"))


def test_select_errors_carry_the_cli_message(cli, tmp_path):
    bad = tmp_path / "graph.json"
    bad.write_text(json.dumps({"input": [1, 3, 8, 8], "ops": [{"op": "softmax", "dtype": "float32", "format": "NCHW"}]}))
    code, _, err = cli("select", bad)
    assert code == 2
    with pytest.raises(tpusim.Error) as e:
        tpusim.select(bad)
    assert str(e.value) == cli_error(err)
    assert "softmax" in str(e.value)
    with pytest.raises(tpusim.Error) as e:
        tpusim.select(GRAPH, chip="v9")
    assert str(e.value) == cli_error(cli("select", GRAPH, "--chip", "v9")[2])


def test_sensitivity_matches_the_cli(cli_json):
    want = cli_json("run", "--preset", "dlrm-small", "--steps", "3", "--sensitivity", "--json")
    got = tpusim.sensitivity(preset="dlrm-small", steps=3)
    assert same_json(got, want)
    # Halving and doubling an assumption brackets the step time on each side of the answer or equals it.
    lo, hi = got["range_us"]
    assert lo <= got["step_time_us"] <= hi


def test_sensitivity_with_overrides_matches_the_cli(cli_json):
    want = cli_json("run", "--preset", "dlrm-small", "--steps", "3", "--set", "chip.ici_collective_launch_ns=7100",
                    "--sensitivity", "--json")
    got = tpusim.sensitivity(preset="dlrm-small", steps=3, overrides={"chip.ici_collective_launch_ns": 7100})
    assert same_json(got, want)
    # A doubled collective launch cost (twice the calibrated 3,550 ns) lengthens the step; a value the user set
    # is no longer an assumption.
    assert got["step_time_us"] > tpusim.sensitivity(preset="dlrm-small", steps=3)["step_time_us"]
    assert "ici_collective_launch_ns" not in [a["name"] for a in got["assumptions"]]


def test_sensitivity_errors_carry_the_cli_message(cli):
    code, _, err = cli("run", "--preset", "nope", "--sensitivity")
    assert code == 2
    with pytest.raises(tpusim.Error) as e:
        tpusim.sensitivity(preset="nope")
    assert str(e.value) == cli_error(err)


def test_explain_pipelining_matches_the_cli(cli_json, tmp_path):
    want = cli_json("explain", "pipelining", "--preset", "balanced", "--steps", "4", "-o", tmp_path / "p.svg", "--json")
    got = tpusim.explain("pipelining", preset="balanced", steps=4)
    assert same_json(got, {k: v for k, v in want.items() if k not in ("svg", "png")})
    assert got["speedup"] == pytest.approx(got["sequential_step_time_us"] / got["pipelined_step_time_us"])


def test_explain_limits_matches_the_cli_for_a_file_and_arrays(cli_json):
    want = cli_json("explain", "limits", "--spec", SPEC, "--ids", IDS, "--json")
    assert same_json(tpusim.explain("limits", spec=SPEC, ids=IDS), want)
    with np.load(IDS) as z:
        arrays = {k: z[k] for k in z.files}
    assert same_json(tpusim.explain("limits", spec=SPEC, ids=arrays), want)


def test_explain_errors(cli, tmp_path):
    missing = tmp_path / "none.npz"
    code, _, err = cli("explain", "limits", "--spec", SPEC, "--ids", missing, "--json")
    assert code == 2
    with pytest.raises(tpusim.Error) as e:
        tpusim.explain("limits", spec=SPEC, ids=missing)
    assert str(e.value) == cli_error(err)
    with pytest.raises(tpusim.Error, match="expected 'pipelining' or 'limits'"):
        tpusim.explain("nope")
