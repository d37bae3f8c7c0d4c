"""Each API function against the CLI's JSON on the same input, and errors against the CLI's messages."""

import json

import numpy as np
import pytest

import tpusim
from conftest import IDS, IDS_HOT, LIMITS, ROOT, SPEC, cli_error, same_json


def test_error_is_a_value_error():
    assert issubclass(tpusim.Error, ValueError)
    assert issubclass(tpusim.LimitExceededError, tpusim.Error)
    assert tpusim.Error.__module__ == "tpusim"


@pytest.mark.parametrize("shape,kw,flags", [
    ("bf16[8,1,1280,16384]", {"tpu": "v5p"}, ["--tpu", "v5p"]),
    ("f32[3,5]{1,0:T(2,2)}", {"index": [2, 3]}, ["--index", "2,3"]),
    ("f32[3,5]{1,0:T(2,2)}", {"offset": 17}, ["--offset", "17"]),
    ("f32[3,5]{1,0:T(2,2)}", {"offset": 5}, ["--offset", "5"]),
    ("(f32[2], s8[7])", {}, []),
])
def test_layout_matches_cli(cli_json, shape, kw, flags):
    assert same_json(tpusim.layout(shape, **kw), cli_json("layout", "--json", *flags, shape))


def test_layout_error_carries_the_cli_message(cli):
    code, out, _ = cli("layout", "--json", "f32[3,5]{1,0:T(2,2)}", "--index", "3,0")
    assert code == 2
    with pytest.raises(tpusim.Error) as e:
        tpusim.layout("f32[3,5]{1,0:T(2,2)}", index=[3, 0])
    assert str(e.value) == json.loads(out)["error"]
    code, _, err = cli("layout", "--tpu", "v9", "f32[8]")
    with pytest.raises(tpusim.Error) as e:
        tpusim.layout("f32[8]", tpu="v9")
    assert str(e.value) == cli_error(err)


def assert_preprocess_equal(py, cli):
    assert list(py["stacks"]) == list(cli["stacks"])
    for name, s in py["stacks"].items():
        c = cli["stacks"][name]
        assert list(s) == list(c), name
        for k, v in s.items():
            if isinstance(v, np.ndarray):
                assert v.ndim == 1
                assert v.dtype == (np.float32 if k == "gains" else np.int32), k
                # Gains compared by value, NaN padding as JSON null.
                expected = [np.nan if x is None else x for x in c[k]]
                np.testing.assert_array_equal(v, np.array(expected, dtype=v.dtype), err_msg=k)
            else:
                assert same_json(v, c[k]), (name, k)


def test_preprocess_paths_match_cli(cli_json):
    expected = cli_json("preprocess", "--json", "--spec", SPEC, "--ids", IDS)
    assert_preprocess_equal(tpusim.preprocess(str(SPEC), str(IDS)), expected)
    stats = cli_json("preprocess", "--json", "--stats", "--spec", SPEC, "--ids", IDS)
    got = tpusim.preprocess(SPEC, IDS, stats_only=True)
    assert same_json(got, stats)


def test_preprocess_dict_spec_and_numpy_ids_match_cli(cli_json):
    expected = cli_json("preprocess", "--json", "--spec", SPEC, "--ids", IDS)
    spec = json.loads(SPEC.read_text())
    with np.load(IDS) as z:
        ids = {k: z[k] for k in z.files}
    assert_preprocess_equal(tpusim.preprocess(spec, ids), expected)
    # The NpzFile itself is a mapping too.
    with np.load(IDS) as z:
        assert_preprocess_equal(tpusim.preprocess(spec, z), expected)
    # int64 ids, the ragged feature nested, non-contiguous dense ids: same result.
    nested = {
        "user_id": ids["user_id"].astype(np.int64),
        "history": np.asfortranarray(ids["history"]),
        "country": {"values": ids["country.values"].astype(np.int64),
                    "row_splits": ids["country.row_splits"].astype(np.int32)},
    }
    assert not nested["history"].flags["C_CONTIGUOUS"]
    assert_preprocess_equal(tpusim.preprocess(spec, nested), expected)


def test_preprocess_ragged_with_weights_matches_cli(cli_json, tmp_path):
    spec = json.loads(SPEC.read_text())
    spec["tables"][2]["max_ids_per_partition"] = 64
    spec["tables"][2]["max_unique_ids_per_partition"] = 64
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 9, size=64)
    splits = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = {
        "user_id": rng.integers(0, 1000, size=(64, 1), dtype=np.int32),
        "history.values": rng.integers(0, 5000, size=int(splits[-1]), dtype=np.int32),
        "history.row_splits": splits,
        "history.weights": rng.random(int(splits[-1]), dtype=np.float32),
        "country": rng.integers(0, 200, size=(64, 2), dtype=np.int32),
        "country.weights": rng.random((64, 2), dtype=np.float32),
    }
    npz = tmp_path / "ragged.npz"
    np.savez(npz, **ids)
    expected = cli_json("preprocess", "--json", "--spec", spec_path, "--ids", npz)
    assert_preprocess_equal(tpusim.preprocess(spec, ids), expected)


def test_preprocess_limit_exceeded_and_bad_input(cli):
    code, _, err = cli("preprocess", "--spec", SPEC, "--ids", IDS_HOT)
    assert code == 1
    with pytest.raises(tpusim.LimitExceededError) as e:
        tpusim.preprocess(SPEC, IDS_HOT)
    assert str(e.value) == cli_error(err)
    code, _, err = cli("preprocess", "--spec", SPEC, "--ids", SPEC)
    assert code == 2
    with pytest.raises(tpusim.Error) as e:
        tpusim.preprocess(SPEC, SPEC)
    assert str(e.value) == cli_error(err)
    bad_spec = json.loads(SPEC.read_text())
    bad_spec["features"][0]["table"] = "nope"
    with pytest.raises(tpusim.Error, match="nope"):
        tpusim.preprocess(bad_spec, IDS)


def test_preprocess_dtype_and_shape_errors():
    spec = json.loads(SPEC.read_text())
    with np.load(IDS) as z:
        ids = {k: z[k] for k in z.files}
    cases = [
        ({"user_id": ids["user_id"].astype(np.float64)}, "array 'user_id' has dtype float64"),
        ({"user_id": ids["user_id"].ravel()}, "array 'user_id' must be 2-D"),
        ({"user_id": np.full((64, 1), 2**31, dtype=np.int64)}, "does not fit in int32"),
        ({"country.row_splits": ids["country.row_splits"].astype(np.float32)}, "expected int64"),
        ({"country.row_splits": None}, "row_splits"),
        ({"history.weights": np.ones((64, 8), dtype=np.int32)}, "expected float32"),
        ({"user_id": -ids["user_id"] - 1}, "negative"),
    ]
    for change, message in cases:
        bad = dict(ids)
        for k, v in change.items():
            if v is None:
                del bad[k]
            else:
                bad[k] = v
        with pytest.raises(tpusim.Error, match=message):
            tpusim.preprocess(spec, bad)


CASES = [line for line in (LIMITS / "cases.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("chip", ["v5p", "v6e"])
def test_compile_check_matches_cli(cli, chip):
    code, out, _ = cli("limits", "compile-check", "--json", "--chip", chip, CASES[0])
    assert same_json(tpusim.limits.compile_check(json.loads(CASES[0]), chip), json.loads(out))
    for line in CASES:
        _, out, _ = cli("limits", "compile-check", "--json", "--chip", chip, line)
        assert same_json(tpusim.limits.compile_check(line, chip), json.loads(out))


def test_compile_check_errors(cli):
    _, out, _ = cli("limits", "compile-check", "--json", "--chip", "v5p", "not json")
    with pytest.raises(tpusim.Error) as e:
        tpusim.limits.compile_check("not json", "v5p")
    assert str(e.value) == json.loads(out)["error"]
    with pytest.raises(tpusim.Error, match="must be positive"):
        tpusim.limits.compile_check({"kind": "fwd", "vocab": 0, "dim": 8, "batch": 8, "max_ids": 8,
                                     "max_unique": 8}, "v5p")
    code, _, err = cli("limits", "compile-check", "--chip", "v5e", CASES[0])
    assert code == 2
    with pytest.raises(tpusim.Error) as e:
        tpusim.limits.compile_check(CASES[0], "v5e")
    assert str(e.value) == cli_error(err)


def test_validate_matches_cli(cli):
    tight = LIMITS / "tight.toml"
    code, out, _ = cli("limits", "validate", "--json", "--spec", SPEC, "--chip", "v5p", "--limits", tight,
                       "--ids", IDS, IDS_HOT)
    assert code == 1
    got = tpusim.limits.validate(SPEC, "v5p", limits=tight, ids=[IDS, IDS_HOT])
    assert same_json(got, json.loads(out))
    assert got["ok"] is False
    # Ids in memory: the verdicts name them ids[0], ids[1] instead of the paths.
    with np.load(IDS) as a, np.load(IDS_HOT) as b:
        mem = tpusim.limits.validate(json.loads(SPEC.read_text()), "v5p", limits=tight, ids=[dict(a), dict(b)])
    assert same_json(mem, json.loads(out.replace(str(IDS_HOT), "ids[1]").replace(str(IDS), "ids[0]")))
    assert "ids[1]: would abort" in json.dumps(mem)
    code, out, _ = cli("limits", "validate", "--json", "--spec", SPEC, "--chip", "v5p", "--fdo", LIMITS / "fdo")
    assert same_json(tpusim.limits.validate(SPEC, "v5p", fdo=LIMITS / "fdo"), json.loads(out))
    code, _, err = cli("limits", "validate", "--spec", SPEC, "--chip", "v6e")
    assert code == 2
    with pytest.raises(tpusim.Error) as e:
        tpusim.limits.validate(SPEC, "v6e")
    assert str(e.value) == cli_error(err)


@pytest.mark.parametrize("spec,chip", [
    ({"op": "matmul", "params": {"M": 4096, "K": 4096, "N": 4096, "dtype": "bfloat16"}}, "v5e"),
    ({"op": "sc_gather", "params": {"rows": 4194304, "row_bytes": 512}}, "tpu7x"),
    ({"op": "tc_gather", "params": {"rows": 4194304, "row_bytes": 512}}, "tpu7x"),
])
def test_op_matches_cli(cli_json, spec, chip):
    assert same_json(tpusim.op(spec, chip), cli_json("op", "--json", "--chip", chip, json.dumps(spec)))


def test_op_errors(cli):
    bad = '{"op": "matmul", "params": {"M": 0, "K": 1, "N": 1, "dtype": "bfloat16"}}'
    code, _, err = cli("op", "--json", "--chip", "v5e", bad)
    assert code == 2
    with pytest.raises(tpusim.Error) as e:
        tpusim.op(bad, "v5e")
    # The CLI adds where the spec came from.
    assert cli_error(err) == "argument: " + str(e.value)
    with pytest.raises(tpusim.Error, match="option --chip"):
        tpusim.op(bad, "v99")


def test_run_matches_cli(cli_json):
    expected = cli_json("run", "--json", "--preset", "dlrm-small", "--steps", "3", "--set", "shuffle_ids=true",
                        "--set", "host.threads=2")
    got = tpusim.run(preset="dlrm-small", steps=3, overrides={"shuffle_ids": True, "host.threads": 2})
    assert same_json(got, expected)
    expected = cli_json("run", "--json", "--preset", "balanced", "--steps", "3", "--functional", "--pipelining",
                        "sequential", "--chips", "8", "--batch", "4096")
    got = tpusim.run(preset="balanced", steps=3, functional=True, pipelining="sequential", chips=8, batch=4096)
    assert same_json(got, expected)
    assert len(got["loss"]) > 0


def test_run_workload_file_and_errors(cli, cli_json):
    wl = ROOT / "testdata" / "workloads" / "npz-example.toml"
    assert same_json(tpusim.run(wl, steps=2), cli_json("run", "--json", wl, "--steps", "2"))
    code, _, err = cli("run", "--preset", "dlrm-small", "--set", "no_such_knob=1")
    assert code == 2
    with pytest.raises(tpusim.Error) as e:
        tpusim.run(preset="dlrm-small", overrides=["no_such_knob=1"])
    assert str(e.value) == cli_error(err)
    with pytest.raises(tpusim.Error, match="give a workload file or --preset"):
        tpusim.run()
    with pytest.raises(tpusim.Error, match="pipelining"):
        tpusim.run(preset="dlrm-small", pipelining="sideways")


GRID = dict(preset="dlrm-small", chip=["v5p", "v6e"], chips=[4, 8], batch=[2048, 4096], steps=2)
GRID_FLAGS = ["--preset", "dlrm-small", "--chip", "v5p,v6e", "--chips", "4,8", "--batch", "2048,4096", "--steps", "2"]


def test_sweep_matches_cli_file_for_file(cli, tmp_path):
    code, _, err = cli("sweep", *GRID_FLAGS, "-o", tmp_path / "cli")
    assert code == 0, err
    rows = tpusim.sweep(**GRID, output=tmp_path / "py")
    assert same_json(rows, json.loads((tmp_path / "cli" / "sweep.json").read_text()))
    for name in ["sweep.csv", "sweep.json", "sweep.svg", "step_time.svg", "fit_map.svg"]:
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    # The per-configuration function, in any order, gives the same rows.
    plan = tpusim.sweep_plan(**GRID)
    assert tpusim.sweep_configs(plan, [3, 0], jobs=1) == [rows[3], rows[0]]
    priced = tpusim.sweep(**GRID, prices={"v5p": 1.0}, jobs=1)
    assert [r["cost_per_hour"] for r in priced[:4]] == [4.0, 4.0, 8.0, 8.0]
    assert priced[4:] == rows[4:]
    with pytest.raises(tpusim.Error, match="configuration 8 does not exist"):
        tpusim.sweep_configs(plan, [8])


def test_sweep_target_and_prices_give_the_cli_answers(cli, tmp_path):
    code, out, err = cli("sweep", *GRID_FLAGS, "--target", "1e7", "--price", "v6e=0.5", "--json", "-o", tmp_path)
    assert code == 0, err
    expected = json.loads(out)["answers"]
    plan = tpusim.sweep_plan(**GRID, target=1e7, prices={"v6e": 0.5})
    rows = tpusim.sweep_configs(plan, range(8), jobs=1)
    answers = tpusim.sweep_answers(plan, rows)
    assert same_json(answers, expected)
    # 4 chips x 0.50 USD: the cheapest configuration reaching the target is a 4 x v6e one.
    assert (answers["cheapest"]["chip"], answers["cheapest"]["chips"]) == ("v6e", 4)
    assert {p["chip"]: (p["per_chip_hour"], p["currency"], p["source"]) for p in answers["prices"]} == {
        "v5p": (4.2, "USD", "assumed"), "v6e": (0.5, "USD", "given")}
    df = tpusim.sweep_frame(**GRID, target=1e7, prices={"v6e": 0.5}, jobs=1) if _has_pandas() else None
    if df is not None:
        assert same_json(df.attrs["answers"], expected)
    with pytest.raises(tpusim.Error, match="valid keys: v4, v5e, v5p, v6e, tpu7x"):
        tpusim.sweep(**GRID, prices={"v5x": 1.0})
    with pytest.raises(tpusim.Error, match="--price v5p=-1"):
        tpusim.sweep(**GRID, prices={"v5p": -1.0})
    with pytest.raises(tpusim.Error, match="--target"):
        tpusim.sweep(**GRID, target=float("nan"))


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def test_sweep_frame_and_errors():
    pd = pytest.importorskip("pandas")
    df = tpusim.sweep_frame(preset="dlrm-small", chip="v5p", chips=4, batch="1024..4096x2", steps=2)
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == ["chip", "chips", "batch", "step_time_us", "samples_per_s", "fits", "bottleneck",
                                "needed_max_ids", "needed_max_unique_ids", "cost_per_hour", "error", "fit_reasons",
                                "minibatches_per_step", "limits", "price_per_chip_hour", "currency", "price_source"]
    assert list(df["batch"]) == [1024, 2048, 4096]
    with pytest.raises(tpusim.Error, match="v9"):
        tpusim.sweep(preset="dlrm-small", chip=["v9"], chips=[4], batch=[1024])
    with pytest.raises(tpusim.Error, match="executor"):
        tpusim.sweep(preset="dlrm-small", chip=["v5p"], chips=[4], batch=[1024], executor="slurm")
    with pytest.raises(tpusim.Error, match="FACTOR"):
        tpusim.sweep(preset="dlrm-small", chip=["v5p"], chips=[4], batch="4096..1024")


HLO = sorted((ROOT / "testdata" / "hlo").glob("*.hlo.txt"))


@pytest.mark.parametrize("path", HLO[:3], ids=lambda p: p.name)
def test_hlo_matches_cli(cli_json, path):
    expected = cli_json("hlo", "--json", "--chip", "v5e", path)
    assert same_json(tpusim.hlo(path, "v5e"), expected)
    assert same_json(tpusim.hlo(str(path), "v5e"), expected)
    # Text, and an object with as_text(dialect=...) as jax.stages.Lowered has: same numbers, origin "hlo".
    text = path.read_text()

    class Lowered:
        def as_text(self, dialect="stablehlo"):
            assert dialect == "hlo"
            return text

    assert same_json(tpusim.hlo(text, "v5e"), expected)
    assert same_json(tpusim.hlo(Lowered(), "v5e"), expected)
    what_if = cli_json("hlo", "--json", "--chip", "v6e", "--set", "chip.hbm_bytes_per_s=3.2e12", path)
    assert same_json(tpusim.hlo(path, "v6e", overrides={"hbm_bytes_per_s": 3.2e12}), what_if)
    assert same_json(tpusim.hlo(path, "v6e", overrides=["chip.hbm_bytes_per_s=3.2e12"]), what_if)


def test_hlo_errors(cli, tmp_path):
    bad = tmp_path / "bad.hlo.txt"
    bad.write_text("HloModule m\n\nENTRY e {\n  p = f32[4 parameter(0)\n}\n")
    code, _, err = cli("hlo", "--chip", "v5e", bad)
    assert code == 2
    with pytest.raises(tpusim.Error) as e:
        tpusim.hlo(bad, "v5e")
    assert str(e.value) == cli_error(err)
    code, _, err = cli("hlo", "--chip", "v5e", "--set", "hbm_bytes_per_s=1", HLO[0])
    with pytest.raises(tpusim.Error) as e:
        tpusim.hlo(HLO[0], "v5e", overrides=["hbm_bytes_per_s=1"])
    assert str(e.value) == cli_error(err)
    with pytest.raises(tpusim.Error, match="reading"):
        tpusim.hlo(tmp_path / "missing.hlo.txt", "v5e")
    with pytest.raises(tpusim.Error, match="option --chip"):
        tpusim.hlo(HLO[0], "v99")
